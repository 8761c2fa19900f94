"""A KiwiSDR-compatible WebSocket server for loopback tests, demos and load tests.

:class:`KiwiEmulator` speaks the KiwiSDR audio (``SND``) protocol as written down in
``shared/kiwisdr-protocol.md`` (firmware v1.711, kiwirecorder v1.11): the message sequence of
§1.3, the five command bits of §1.4, the commands of §1.5, the ``MSG`` replies of §1.6, the SND
frame layouts of §2 (IMA ADPCM with the state carried across frames, big-endian PCM, IQ with the
GNSS block), the encoder-state rules of §3.2 and the limits of §4. It is built on the server-side
sans-I/O helpers of :mod:`streamkit.protocols.kiwi` (:func:`~streamkit.protocols.kiwi.build_msg`,
:func:`~streamkit.protocols.kiwi.build_snd_frame`, :func:`~streamkit.protocols.kiwi.parse_client_command`,
:func:`~streamkit.protocols.kiwi.smeter_raw`) and :class:`~streamkit.protocols.adpcm.AdpcmEncoder`.

What a client sees
------------------
* Paths ``/<ts>/SND``, ``/ws/kiwi/<ts>/SND`` and ``/ws/no_wf/<ts>/SND`` are upgraded; anything else
  gets HTTP 404. Everything the server sends is a **binary** WebSocket message (§1.1); no
  permessage-deflate and no WebSocket pings (the firmware sends none).
* Nothing happens until the first client message (§1.2). Then the channel is allocated (or the
  client is refused with ``MSG down``/``redirect``/``too_busy``, repeated for every later message),
  ``MSG sample_rate`` is sent, and the first message is processed as a command (normally
  ``SET auth``). The auth reply is ``client_public_ip``, ``rx_chans``, ``chan_no_pwd``,
  ``chan_no_pwd_true``, ``is_local`` (auth OK only), ``max_camp``, ``badp``; after ``badp=0`` come
  the version message, ``load_cfg``/``load_dxcfg``/``load_dxcomm_cfg``, ``cfg_loaded``,
  ``center_freq``/``bandwidth``/``adc_clk_nom`` and ``audio_init``/``audio_rate`` (once).
* No audio until the five bits of §1.4 are set. More than 4 ``SET keepalive`` before that, any
  ``SET`` other than ``auth``/``keepalive``/``options`` before a successful auth, no keepalive for
  ``keepalive_timeout`` (60 s) after auth, no successful auth ``pre_auth_timeout`` (20 s) after the
  first message (``MSG password_timeout`` first) and an incomplete setup ``setup_timeout`` (20 s)
  after auth all **drop** the connection.
* "Dropped" is the firmware's behaviour by default (§4.2 [INFER]): the server stops sending and
  ignores the client, but sends no close frame and keeps the TCP connection open. The client must
  notice and close. ``drop_action="close"`` or ``"abort"`` makes it close (1000) or reset instead;
  a dropped or refused connection that the client leaves open, or one that never sends anything,
  is closed (1001) after ``drop_linger`` seconds (60) so that nothing leaks. A signal callable that
  raises ends only its own connection (close code 1011).

Frames, pacing and signals
--------------------------
Frame ``k`` of a connection carries samples ``[S_k, S_k + n)`` of that connection's own sample
counter (which starts at 0 with the first frame and keeps running across retunes, mode changes and
dropped frames). The samples come from the *signal* of the tuned station: ``signals`` maps a
frequency in kHz to a callable ``signal(n_samples, start_index, rate, iq) -> ndarray`` (float in
[-1, 1], complex for IQ). The station heard is the nearest one whose distance from the dial
frequency is at most ``max(|low_cut|, |high_cut|)`` of the current passband; otherwise
``noise_floor`` is heard. The signal is what the demodulator outputs: a station is heard the same
wherever it sits inside the passband. Floats are quantised as ``clip(rint(x * 32767))`` to int16
(I and Q separately).

Frames are paced at the true rate ``sample_rate * speed`` on a monotonic schedule: frame ``k`` is
due when its last sample "has arrived", ``t0 + (S_k + n) / (rate * speed)``, so there is no drift.
If the loop falls more than one frame behind (a slow client, a stalled loop) the schedule is
re-anchored (counted in ``ConnectionLog.slips``) instead of bursting frames. ``speed=0`` sends as
fast as the client reads (WebSocket write flow control) for benchmarks.

S-meter calibration (documented choice): ``dBm = 10*log10(P) + SMETER_OFFSET_DB`` where ``P`` is
the mean power of the frame's int16 samples scaled by 1/32768 (``I^2 + Q^2`` for IQ) and
``SMETER_OFFSET_DB = -10 - 10*log10(0.5) = -6.99``, so a full-scale real sine reads -10.0 dBm, a
full-scale complex exponential -7.0 dBm, digital silence -127 dBm (the clamp of §2.3).

IQ frames (modes of :data:`~streamkit.protocols.kiwi.STEREO_MODES`) carry a GNSS block:
``last_gps_solution`` (``gps_solution``; ``None`` cycles 0..3 with the stream time like a Kiwi with
a fix, 255 = no fix) and ``gpssec``/``gpsnsec``, the GPS time of week of the frame's first sample,
``gps_epoch + S_k / sample_rate`` computed exactly in integer nanoseconds. The first IQ frame of a
connection has the all-zero stamp, as in the real recordings (§2.4).

Default stations (:func:`default_stations`)
    * 7074 kHz: a 1500 Hz tone at -12 dBFS plus white noise at -40 dBFS RMS (an FT8-like carrier);
    * 7100 kHz: :func:`speech_like` (seed 7100);
    * 10000 kHz: a 1000 Hz tone at -20 dBFS (a time-signal-like carrier);
    * 14200 kHz: :func:`speech_like` (seed 14200);
    * everywhere else: white noise at -60 dBFS RMS (seed 0).

Faults (:class:`FaultConfig`, per server and per connection)
------------------------------------------------------------
Set them on :attr:`EmulatorConfig.faults`, at run time with :meth:`KiwiEmulator.set_faults`, on the
command line with ``--fault``, or per connection in the URL query: ``/<ts>/SND?drop_every=5`` or
``?fault=drop_every=5;kick=2``. The spec syntax is ``key[=value]`` items separated by ``;``
(see :func:`parse_fault_spec`): ``drop_every=N``, ``drop=S1,S2,...``, ``too_busy``, ``badp=N``,
``down=N``, ``down_reason=TEXT``, ``redirect=URL``, ``kick=T``, ``kick_message=TEXT``,
``inactivity_timeout=T``, ``stall=T``, ``slow=F``, ``malformed=SEQ:KIND,...`` (KIND one of
``truncated``, ``bad_tag``, ``odd_payload``, ``text``), ``close_mid_frame=SEQ``,
``sample_rate=TEXT`` and ``max_frames=K`` (send frames up to seq K, then close cleanly: the
deterministic capture of §5.2).

Choices where the spec is silent
--------------------------------
* ``NEW_FREQ`` (0x04) and ``LPF`` (0x01) are set on the first frame after a frequency/mode or
  passband change made while streaming, not on the very first frame.
* After ``SET little-endian`` every frame carries flag 0x80 (it changes only PCM and IQ payloads).
* A repeated ``SET auth`` after a successful one gets the auth reply again, nothing more.
* A second connection with the ``<ts>`` and client IP of a live session is ignored without a
  message (§1.2). ``?camp`` and ``?foff=`` are accepted and ignored (camp needs firmware 1.813+).
* A dropped frame (``drop_every``/``drop``) still advances the ADPCM encoder, as when a real server
  discards a queued frame; the client's next decode is then off until the state re-converges.

Recording
---------
Every connection has a :class:`ConnectionLog`: the commands received (with loop timestamps and
outcome), the ``MSG`` messages sent, and for up to ``record_frames`` frames the exact int16 samples
sent and what a correct client decodes (:attr:`SentFrame.decoded`, the ADPCM reconstruction for
compressed frames), with seq, flags, S-meter and GPS stamp. Tests and the kiwirecorder interop
check compare against :meth:`ConnectionLog.expected_pcm` / :meth:`ConnectionLog.expected_iq`.

API
---
:class:`KiwiEmulator` (``async start() -> port``, ``async stop()``, ``async with``),
:class:`EmulatorThread` (the same in a background thread for synchronous callers),
:func:`add_emulator_arguments` / :func:`run_from_args` for ``streamkit emulate kiwi`` and
:func:`main` for ``python -m streamkit.io.kiwi_emulator``.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import dataclasses
import enum
import http
import json
import logging
import math
import re
import signal as _signal
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final, Literal, TypeAlias
from urllib.parse import parse_qsl, urlsplit

import numpy as np
from numpy.typing import NDArray
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from streamkit.core.errors import ConfigError
from streamkit.io.kiwi_secrets import add_password_arguments, install_log_redaction, password_from_args
from streamkit.protocols.adpcm import AdpcmDecoder, AdpcmEncoder
from streamkit.protocols.adpcm import warmup as _adpcm_warmup
from streamkit.protocols.kiwi import (
    GPS_UTC_LEAP_SECONDS,
    MODES,
    STEREO_MODES,
    GpsStamp,
    SndFlag,
    build_msg,
    build_snd_frame,
    parse_client_command,
    smeter_raw,
)
from streamkit.protocols.kiwi_url import format_hostport

__all__ = [
    "DEFAULT_PORT",
    "MALFORMED_KINDS",
    "SMETER_OFFSET_DB",
    "ConnectionLog",
    "EmulatorConfig",
    "EmulatorThread",
    "FaultConfig",
    "KiwiEmulator",
    "Mix",
    "Noise",
    "Phase",
    "ReceivedCommand",
    "SentFrame",
    "SentMessage",
    "SignalFn",
    "SpeechLike",
    "Tone",
    "add_emulator_arguments",
    "config_from_args",
    "default_stations",
    "frame_smeter_dbm",
    "main",
    "mix",
    "noise",
    "parse_fault_spec",
    "parse_station_spec",
    "quantize",
    "run_emulator",
    "run_from_args",
    "speech_like",
    "tone",
]

logger = logging.getLogger("streamkit.io.kiwi_emulator")  # same name under `python -m`
install_log_redaction()  # websockets' debug log prints every command received, `SET auth t=kiwi p=...` included

DEFAULT_PORT: Final = 8073
"""The KiwiSDR's port (§1.1)."""
SMETER_OFFSET_DB: Final = -10.0 - 10.0 * math.log10(0.5)
"""dBm = 10*log10(mean power re full scale) + this; a full-scale sine reads -10 dBm."""
MALFORMED_KINDS: Final[frozenset[str]] = frozenset({"truncated", "bad_tag", "odd_payload", "text"})
"""Kinds of malformed frame the ``malformed`` fault can send."""

_GPS_EPOCH_UNIX_S: Final = 315_964_800
_GPS_WEEK_NS: Final = 604_800 * 1_000_000_000
_NS: Final = 1_000_000_000
_U32: Final = 1 << 32
_PATH_RE: Final = re.compile(r"^/(?:ws/kiwi/|ws/no_wf/)?([0-9]{1,20})/SND$")
_SAMPLES_ADPCM: Final = 2048
_SAMPLES_PCM: Final = 512
_SAMPLES_IQ: Final = 512
_MAX_CAMP: Final = 4
# Commands the firmware accepts and the emulator acknowledges without acting on them (§1.5).
_ACCEPTED_NOOP: Final[frozenset[str]] = frozenset(
    {
        "ident_user", "squelch", "genattn", "gen", "de_emp", "nb", "nr", "mute", "ovld_mute",
        "rf_attn", "window_func", "spc_", "sam_pll", "test", "underrun", "STATS_UPD", "MON_CAMP",
        "geo", "geoloc", "geojson", "ext_no_keepalive", "wf_comp", "lms_autonotch",
    }
)  # fmt: skip
_PRE_AUTH_ALLOWED: Final[frozenset[str]] = frozenset({"auth", "keepalive", "options"})
_AGC_FIELDS: Final[tuple[str, ...]] = ("agc", "hang", "thresh", "slope", "decay", "manGain")

# The five command bits of §1.4.
_CMD_FREQ: Final = 0x01
_CMD_MODE: Final = 0x02
_CMD_PASSBAND: Final = 0x04
_CMD_AGC: Final = 0x08
_CMD_AR_OK: Final = 0x10
_CMD_ALL: Final = 0x1F

_INT_RE: Final = re.compile(r"[+-]?[0-9]+\Z")


# --------------------------------------------------------------------------------------------
# rate-limited logging
# --------------------------------------------------------------------------------------------


class _RateLimitedLog:
    """At most ``burst`` records per key per ``interval`` seconds; the rest are counted and
    summarised when the next window opens."""

    __slots__ = ("_burst", "_interval", "_logger", "_state")

    def __init__(self, log: logging.Logger, interval: float = 10.0, burst: int = 5) -> None:
        self._logger = log
        self._interval = interval
        self._burst = burst
        self._state: dict[str, list[float]] = {}  # key -> [window start, count, suppressed]

    def log(self, level: int, key: str, msg: str, *args: object) -> None:
        if not self._logger.isEnabledFor(level):
            return
        now = time.monotonic()
        st = self._state.get(key)
        if st is None or now - st[0] >= self._interval:
            if st is not None and st[2]:
                self._logger.log(level, "%s: %d similar messages suppressed", key, int(st[2]))
            if st is None and len(self._state) > 256:
                self._state.clear()
            st = self._state[key] = [now, 0.0, 0.0]
        if st[1] < self._burst:
            st[1] += 1
            self._logger.log(level, msg, *args)
        else:
            st[2] += 1


_rlog = _RateLimitedLog(logger)


# --------------------------------------------------------------------------------------------
# signals
# --------------------------------------------------------------------------------------------

SignalFn: TypeAlias = Callable[[int, int, float, bool], NDArray[Any]]
"""``signal(n_samples, start_index, rate, iq) -> ndarray``: ``n_samples`` float samples in
[-1, 1] (complex for ``iq``) starting at absolute sample ``start_index`` of the connection at
``rate`` Hz. Must be a deterministic function of its arguments (results may be cached and
shared between connections)."""


def _db_to_amplitude(level_db: float) -> float:
    if not math.isfinite(level_db):
        raise ValueError(f"level_db must be finite, got {level_db}")
    return float(10.0 ** (level_db / 20.0))


def _exact_fraction(x: float) -> Fraction:
    """The decimal value ``repr(x)`` as a Fraction (12001.188 -> 12001188/1000)."""
    return Fraction(repr(float(x)))


def _cycles(freq_hz: float, rate: float, start: int, n: int) -> NDArray[np.float64]:
    """``frac(freq * i / rate)`` for ``i`` in ``[start, start + n)``, exact per index when the
    integers fit in int64 (so the phase neither drifts nor depends on the chunking)."""
    f = _exact_fraction(freq_hz) / _exact_fraction(rate)
    num, den = f.numerator, f.denominator
    if n and abs(num) * (start + n) < (1 << 62) and den < (1 << 62):
        idx = np.arange(start, start + n, dtype=np.int64)
        return ((idx * num) % den).astype(np.float64) / float(den)
    base = float((f * start) % 1)
    return (base + float(f) * np.arange(n, dtype=np.float64)) % 1.0


class Tone:
    """A sine (real) or complex exponential (IQ) at ``freq_hz`` with peak ``level_db`` dBFS.

    Phase-continuous and exact per sample index (no drift over long runs).
    """

    __slots__ = ("amplitude", "freq_hz", "level_db")

    def __init__(self, freq_hz: float, level_db: float = -12.0) -> None:
        if not math.isfinite(freq_hz):
            raise ValueError(f"freq_hz must be finite, got {freq_hz}")
        self.freq_hz = float(freq_hz)
        self.level_db = float(level_db)
        self.amplitude = _db_to_amplitude(level_db)

    def __call__(self, n: int, start: int, rate: float, iq: bool) -> NDArray[Any]:
        phase = (2.0 * math.pi) * _cycles(self.freq_hz, rate, start, n)
        out: NDArray[Any] = self.amplitude * (np.exp(1j * phase) if iq else np.sin(phase))
        return out

    def __repr__(self) -> str:
        return f"tone({self.freq_hz:g}, {self.level_db:g})"


class Noise:
    """White Gaussian noise at RMS ``level_db`` dBFS (complex: total RMS, split over I and Q).

    Generated in blocks of :attr:`BLOCK` samples, block ``b`` from
    ``numpy.random.default_rng([seed, b, iq])``, so sample ``i`` depends only on ``(seed, i, iq)``.
    """

    BLOCK: Final = 4096
    __slots__ = ("_cache", "_lock", "level_db", "rms", "seed")

    def __init__(self, level_db: float = -60.0, seed: int = 0) -> None:
        self.level_db = float(level_db)
        self.rms = _db_to_amplitude(level_db)
        self.seed = int(seed)
        self._cache: OrderedDict[tuple[int, bool], NDArray[Any]] = OrderedDict()
        self._lock = threading.Lock()

    def _block(self, b: int, iq: bool) -> NDArray[Any]:
        key = (b, iq)
        with self._lock:
            blk = self._cache.get(key)
            if blk is not None:
                self._cache.move_to_end(key)
                return blk
        rng = np.random.default_rng([self.seed, b, int(iq)])
        if iq:
            g = rng.standard_normal((2, self.BLOCK))
            blk = (g[0] + 1j * g[1]) * (self.rms / math.sqrt(2.0))
        else:
            blk = rng.standard_normal(self.BLOCK) * self.rms
        with self._lock:
            self._cache[key] = blk
            while len(self._cache) > 8:
                self._cache.popitem(last=False)
        return blk

    def __call__(self, n: int, start: int, rate: float, iq: bool) -> NDArray[Any]:
        out = np.empty(n, dtype=np.complex128 if iq else np.float64)
        pos = 0
        while pos < n:
            i = start + pos
            b, off = divmod(i, self.BLOCK)
            take = min(self.BLOCK - off, n - pos)
            out[pos : pos + take] = self._block(b, iq)[off : off + take]
            pos += take
        return out

    def __repr__(self) -> str:
        return f"noise({self.level_db:g}, seed={self.seed})"


@dataclass(frozen=True, slots=True)
class _Burst:
    """One speech-like burst, times in seconds from the stream start."""

    t_on: float
    t_off: float
    f0: float
    depth: float
    mod_rate: float
    mod_phase: float
    decl: float
    syl_rate: float
    syl_phase: float
    f1: float
    f2: float


class SpeechLike:
    """Speech-like bursts over a noise floor, deterministic from ``seed`` and the sample index.

    Bursts last ``on_s`` (1-4 s) separated by pauses of ``off_s`` (2-6 s), the stream starting
    with a pause. Each burst is a harmonic series (fundamental 90-220 Hz with a sinusoidal pitch
    contour and a falling declination, harmonics up to 3.4 kHz weighted by two formants),
    amplitude-modulated at a syllable rate of 3-6 Hz with 30 ms fades, peak ``level_db`` dBFS.
    In IQ mode the harmonics are complex exponentials (positive frequencies). The noise floor is
    :class:`Noise` at ``noise_db`` with seed ``seed + 1``.

    The burst list is drawn in chunks of :attr:`CHUNK` bursts, chunk ``c`` from
    ``default_rng([seed, 0x5BEEC4, c])``; :meth:`bursts` returns it in samples (the ground truth
    for detector tests). Calls with the same ``(n, start, rate, iq)`` give bit-identical output;
    different chunkings of the same range agree to ~1e-12.
    """

    CHUNK: Final = 32
    FADE_S: Final = 0.03

    def __init__(
        self,
        seed: int = 0,
        level_db: float = -12.0,
        noise_db: float | None = -55.0,
        on_s: tuple[float, float] = (1.0, 4.0),
        off_s: tuple[float, float] = (2.0, 6.0),
    ) -> None:
        if not (0 < on_s[0] <= on_s[1] and 0 < off_s[0] <= off_s[1]):
            raise ValueError(f"bad on_s/off_s ranges {on_s}, {off_s}")
        self.seed = int(seed)
        self.level_db = float(level_db)
        self.amplitude = _db_to_amplitude(level_db)
        self.on_s = (float(on_s[0]), float(on_s[1]))
        self.off_s = (float(off_s[0]), float(off_s[1]))
        self.noise_floor = Noise(noise_db, self.seed + 1) if noise_db is not None else None
        self._lock = threading.Lock()
        self._chunk_start: list[float] = [0.0]  # start time (s) of chunk c; grows lazily
        self._chunks: OrderedDict[int, list[_Burst]] = OrderedDict()

    def __repr__(self) -> str:
        return f"speech_like(seed={self.seed})"

    def _make_chunk(self, c: int, t0: float) -> tuple[list[_Burst], float]:
        rng = np.random.default_rng([self.seed, 0x5BEEC4, c])
        bursts: list[_Burst] = []
        t = t0
        for _ in range(self.CHUNK):
            p = rng.uniform(0.0, 1.0, 12)
            t_on = t + self.off_s[0] + p[0] * (self.off_s[1] - self.off_s[0])
            t_off = t_on + self.on_s[0] + p[1] * (self.on_s[1] - self.on_s[0])
            bursts.append(
                _Burst(
                    t_on=t_on,
                    t_off=t_off,
                    f0=90.0 + 130.0 * p[2],
                    depth=0.05 + 0.15 * p[3],
                    mod_rate=0.3 + 1.2 * p[4],
                    mod_phase=2.0 * math.pi * p[5],
                    decl=0.1 + 0.15 * p[6],
                    syl_rate=3.0 + 3.0 * p[7],
                    syl_phase=p[8],
                    f1=300.0 + 500.0 * p[9],
                    f2=900.0 + 1600.0 * p[10],
                )
            )
            t = t_off
        return bursts, t

    def _chunk(self, c: int) -> list[_Burst]:
        """Bursts of chunk ``c`` (extends the chunk start list as needed; thread-safe)."""
        with self._lock:
            cached = self._chunks.get(c)
            if cached is not None:
                self._chunks.move_to_end(c)
                return cached
            while len(self._chunk_start) <= c + 1:
                k = len(self._chunk_start) - 1
                _, end = self._make_chunk(k, self._chunk_start[k])
                self._chunk_start.append(end)
            bursts, _ = self._make_chunk(c, self._chunk_start[c])
            self._chunks[c] = bursts
            while len(self._chunks) > 4:
                self._chunks.popitem(last=False)
            return bursts

    def _chunk_index(self, t: float) -> int:
        with self._lock:
            known = self._chunk_start[-1]
        while known <= t:
            self._chunk(len(self._chunk_start))  # extend
            with self._lock:
                known = self._chunk_start[-1]
        with self._lock:
            return max(0, bisect.bisect_right(self._chunk_start, t) - 1)

    def _overlapping(self, start: int, stop: int, rate: float) -> list[tuple[int, int, _Burst]]:
        out: list[tuple[int, int, _Burst]] = []
        c = self._chunk_index(max(0.0, start / rate - 1.0))
        while True:
            bursts = self._chunk(c)
            for b in bursts:
                s0, s1 = round(b.t_on * rate), round(b.t_off * rate)
                if s1 > start and s0 < stop:
                    out.append((s0, s1, b))
            if round(bursts[-1].t_off * rate) >= stop:
                return out
            c += 1

    def bursts(self, rate: float, stop: int, start: int = 0) -> list[tuple[int, int]]:
        """Burst intervals ``[on, off)`` in samples at ``rate`` that overlap ``[start, stop)``."""
        return [(s0, s1) for s0, s1, _ in self._overlapping(start, stop, rate)]

    def _burst_samples(self, b: _Burst, s0: int, s1: int, idx: NDArray[np.int64], rate: float, iq: bool) -> NDArray[Any]:
        t = (idx - s0).astype(np.float64) / rate
        dur = (s1 - s0) / rate
        two_pi = 2.0 * math.pi
        f0, d, m, ph = b.f0, b.depth, b.mod_rate, b.mod_phase
        # Phase = 2 pi * integral of f0(t) = f0 (1 + d sin(2 pi m t + ph)) - f0 decl t / dur.
        phi = two_pi * (f0 * t - (f0 * d / (two_pi * m)) * (np.cos(two_pi * m * t + ph) - math.cos(ph)) - f0 * b.decl * t * t / (2.0 * dur))
        top = min(3400.0, 0.45 * rate)
        n_harm = max(1, int(top // (f0 * (1.0 + d))))
        k = np.arange(1, n_harm + 1, dtype=np.float64)
        fk = k * f0
        w = 1.0 / (1.0 + ((fk - b.f1) / 150.0) ** 2) + 0.6 / (1.0 + ((fk - b.f2) / 250.0) ** 2) + 0.03
        w /= w.sum()
        acc = np.zeros(idx.shape[0], dtype=np.complex128 if iq else np.float64)
        for kk in range(n_harm):
            if iq:
                acc += w[kk] * np.exp(1j * (kk + 1) * phi)
            else:
                acc += w[kk] * np.cos((kk + 1) * phi)
        syl = np.sin(math.pi * (b.syl_rate * t + b.syl_phase)) ** 2
        fade = np.clip(np.minimum(t, dur - t) / self.FADE_S, 0.0, 1.0)
        env = (0.5 - 0.5 * np.cos(math.pi * fade)) * (0.1 + 0.9 * syl)
        return self.amplitude * env * acc

    def __call__(self, n: int, start: int, rate: float, iq: bool) -> NDArray[Any]:
        if self.noise_floor is not None:
            out = self.noise_floor(n, start, rate, iq)
        else:
            out = np.zeros(n, dtype=np.complex128 if iq else np.float64)
        stop = start + n
        for s0, s1, b in self._overlapping(start, stop, rate):
            lo, hi = max(s0, start), min(s1, stop)
            idx = np.arange(lo, hi, dtype=np.int64)
            out[lo - start : hi - start] += self._burst_samples(b, s0, s1, idx, rate, iq)
        return out


class Mix:
    """The sum of several signals (clipped only by the final quantisation)."""

    __slots__ = ("signals",)

    def __init__(self, *signals: SignalFn) -> None:
        if not signals:
            raise ValueError("mix() needs at least one signal")
        self.signals = tuple(signals)

    def __call__(self, n: int, start: int, rate: float, iq: bool) -> NDArray[Any]:
        out = np.zeros(n, dtype=np.complex128 if iq else np.float64)
        for s in self.signals:
            out += s(n, start, rate, iq)
        return out

    def __repr__(self) -> str:
        return "mix(" + ", ".join(repr(s) for s in self.signals) + ")"


def tone(freq_hz: float, level_db: float = -12.0) -> Tone:
    """A tone at ``freq_hz`` (negative = below the carrier in IQ) with peak ``level_db`` dBFS."""
    return Tone(freq_hz, level_db)


def noise(level_db: float = -60.0, seed: int = 0) -> Noise:
    """White Gaussian noise with RMS ``level_db`` dBFS, deterministic from ``seed``."""
    return Noise(level_db, seed)


def speech_like(seed: int = 0, level_db: float = -12.0, noise_db: float | None = -55.0) -> SpeechLike:
    """Speech-like bursts (1-4 s on, 2-6 s off) over a noise floor; see :class:`SpeechLike`."""
    return SpeechLike(seed, level_db, noise_db)


def mix(*signals: SignalFn) -> Mix:
    """The sum of ``signals``."""
    return Mix(*signals)


def default_stations() -> dict[float, SignalFn]:
    """The default station list (fresh instances): see the module docstring."""
    return {
        7074.0: mix(tone(1500.0, -12.0), noise(-40.0, seed=7074)),
        7100.0: speech_like(seed=7100),
        10000.0: tone(1000.0, -20.0),
        14200.0: speech_like(seed=14200),
    }


def quantize(x: NDArray[Any], iq: bool) -> NDArray[np.int16]:
    """Float samples in [-1, 1] -> int16 ``clip(rint(x * 32767))``; IQ -> shape (n, 2) [I, Q]."""
    if iq:
        z = np.asarray(x, dtype=np.complex128)
        out = np.empty((z.shape[0], 2), dtype=np.int16)
        out[:, 0] = np.clip(np.rint(z.real * 32767.0), -32768, 32767)
        out[:, 1] = np.clip(np.rint(z.imag * 32767.0), -32768, 32767)
        return out
    r = np.asarray(x, dtype=np.float64)
    return np.clip(np.rint(r * 32767.0), -32768, 32767).astype(np.int16)


def frame_smeter_dbm(samples: NDArray[np.int16]) -> float:
    """S-meter of a frame (module docstring): mean power re full scale + :data:`SMETER_OFFSET_DB`.

    ``samples`` is int16, shape (n,) or (n, 2) for IQ (``I^2 + Q^2`` per sample).
    """
    if samples.size == 0:
        return -math.inf
    s = samples.astype(np.float64) / 32768.0
    power = np.sum(s * s, axis=1) if s.ndim == 2 else s * s
    p = float(np.mean(power))
    return 10.0 * math.log10(max(p, 1e-30)) + SMETER_OFFSET_DB


def parse_station_spec(spec: str) -> tuple[float, SignalFn]:
    """``KHZ=KIND[:ARG...]`` -> ``(khz, signal)``. Kinds: ``tone:HZ[:DB]``, ``noise[:DB[:SEED]]``,
    ``speech[:SEED[:DB]]``; ``+`` mixes, e.g. ``7074=tone:1500:-12+noise:-40:1``.

    Raises:
        ValueError: malformed spec.
    """
    freq_s, sep, body = spec.partition("=")
    if not sep or not body:
        raise ValueError(f"station spec {spec!r}: expected KHZ=KIND[:ARGS]")
    try:
        khz = float(freq_s)
    except ValueError:
        raise ValueError(f"station spec {spec!r}: bad frequency {freq_s!r}") from None
    if not math.isfinite(khz) or khz < 0:
        raise ValueError(f"station spec {spec!r}: bad frequency {freq_s!r}")
    parts: list[SignalFn] = []
    for item in body.split("+"):
        kind, *args = item.split(":")
        try:
            nums = [float(a) for a in args]
        except ValueError:
            raise ValueError(f"station spec {spec!r}: non-numeric argument in {item!r}") from None
        if kind == "tone" and 1 <= len(nums) <= 2:
            parts.append(tone(*nums))
        elif kind == "noise" and len(nums) <= 2:
            parts.append(noise(nums[0] if nums else -60.0, int(nums[1]) if len(nums) > 1 else 0))
        elif kind == "speech" and len(nums) <= 2:
            parts.append(speech_like(int(nums[0]) if nums else 0, nums[1] if len(nums) > 1 else -12.0))
        else:
            raise ValueError(f"station spec {spec!r}: unknown kind or wrong arguments in {item!r}")
    return khz, (parts[0] if len(parts) == 1 else mix(*parts))


# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class FaultConfig:
    """Faults to inject (all off by default). Times are seconds of loop (monotonic) time.

    Attributes:
        drop_every: Drop (never send) every frame whose seq is a multiple of N (0 = off). The
            encoder state still advances, as when a real server discards a queued frame.
        drop_seqs: Drop the frames with these seq numbers.
        too_busy: Refuse every connection with ``MSG too_busy=<rx_chans>``.
        badp: Force this ``badp`` code (1..7) in the auth reply (0 = normal password check).
        down: Refuse with ``MSG reason_disabled=<down_reason> down=<code>`` (None = off).
        down_reason: Text of ``reason_disabled``.
        redirect: Refuse with ``MSG redirect=<url>`` (None = off).
        kick_after: ``MSG kiwi_kick=1,<kick_message>`` this long after auth, then drop.
        kick_message: Text of the kick.
        inactivity_timeout: ``MSG inactivity_timeout=<mins>`` this long after the last
            frequency/mode change (or ``SET inactivity_ack``), then drop.
        stall_after: Stop sending frames this long after the first frame; the socket stays open
            and commands are still processed.
        slow: Deliver at this fraction of real time (0 < slow; 1 = normal). Ignored at speed 0.
        malformed: ``{seq: kind}``: send that frame malformed (``truncated``: 7 bytes;
            ``bad_tag``: tag ``SNX``; ``odd_payload``: last payload byte cut, a violation for
            every frame kind; ``text``: a text WebSocket message instead of the frame).
        close_mid_frame: At this seq write half of the frame's WebSocket bytes, then close the
            TCP connection (no WebSocket close frame).
        sample_rate: Send this text as ``MSG sample_rate=`` instead of the true rate (e.g.
            ``abc`` or ``0``); pacing keeps the true rate.
        max_frames: After the frame with this seq, close the connection cleanly (code 1000).
    """

    drop_every: int = 0
    drop_seqs: frozenset[int] = frozenset()
    too_busy: bool = False
    badp: int = 0
    down: int | None = None
    down_reason: str = "down for maintenance"
    redirect: str | None = None
    kick_after: float | None = None
    kick_message: str = "kicked by the emulator"
    inactivity_timeout: float | None = None
    stall_after: float | None = None
    slow: float = 1.0
    malformed: dict[int, str] = field(default_factory=dict)
    close_mid_frame: int | None = None
    sample_rate: str | None = None
    max_frames: int | None = None

    def validate(self) -> None:
        """Raise ValueError on out-of-range values."""
        if self.drop_every < 0:
            raise ValueError(f"drop_every must be >= 0, got {self.drop_every}")
        if not 0 <= self.badp <= 7:
            raise ValueError(f"badp must be 0..7, got {self.badp}")
        if self.down is not None and self.down not in (0, 1, 2):
            raise ValueError(f"down must be 0, 1 or 2, got {self.down}")
        for name in ("kick_after", "inactivity_timeout", "stall_after"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v}")
        if not (math.isfinite(self.slow) and self.slow > 0):
            raise ValueError(f"slow must be > 0, got {self.slow}")
        for seq, kind in self.malformed.items():
            if kind not in MALFORMED_KINDS:
                raise ValueError(f"malformed kind {kind!r} at seq {seq}; expected one of {sorted(MALFORMED_KINDS)}")
        if self.max_frames is not None and self.max_frames < 1:
            raise ValueError(f"max_frames must be >= 1, got {self.max_frames}")
        if self.redirect is not None and not self.redirect:
            raise ValueError("redirect needs a URL")

    def drops(self, seq: int) -> bool:
        """Whether the frame with this seq is dropped."""
        return (self.drop_every > 0 and seq % self.drop_every == 0) or seq in self.drop_seqs

    def copy(self) -> FaultConfig:
        """An independent copy."""
        return dataclasses.replace(self, malformed=dict(self.malformed))


def _parse_seconds(key: str, value: str) -> float:
    try:
        v = float(value)
    except ValueError:
        raise ValueError(f"fault {key}: expected seconds, got {value!r}") from None
    if not (math.isfinite(v) and v >= 0):
        raise ValueError(f"fault {key}: expected seconds >= 0, got {value!r}")
    return v


def _parse_int_value(key: str, value: str) -> int:
    if not _INT_RE.match(value.strip()):
        raise ValueError(f"fault {key}: expected an integer, got {value!r}")
    return int(value)


def _apply_fault_item(f: FaultConfig, key: str, value: str | None) -> None:
    key = key.strip()
    v = "" if value is None else value.strip()
    if key == "too_busy":
        f.too_busy = v.lower() not in ("0", "false", "no", "off")
        return
    if value is None:
        raise ValueError(f"fault {key!r} needs a value ({key}=...)")
    if key == "drop_every":
        f.drop_every = _parse_int_value(key, v)
    elif key in ("drop", "drop_seqs"):
        f.drop_seqs = frozenset(_parse_int_value(key, s) for s in v.split(",") if s.strip())
    elif key == "badp":
        f.badp = _parse_int_value(key, v)
    elif key == "down":
        f.down = _parse_int_value(key, v)
    elif key == "down_reason":
        f.down_reason = value
    elif key == "redirect":
        f.redirect = v
    elif key in ("kick", "kick_after"):
        f.kick_after = _parse_seconds(key, v)
    elif key == "kick_message":
        f.kick_message = value
    elif key == "inactivity_timeout":
        f.inactivity_timeout = _parse_seconds(key, v)
    elif key in ("stall", "stall_after"):
        f.stall_after = _parse_seconds(key, v)
    elif key == "slow":
        try:
            f.slow = float(v)
        except ValueError:
            raise ValueError(f"fault slow: expected a fraction, got {value!r}") from None
    elif key == "malformed":
        for item in v.split(","):
            if not item.strip():
                continue
            seq_s, sep, kind = item.partition(":")
            if not sep:
                raise ValueError(f"fault malformed: expected SEQ:KIND, got {item!r}")
            f.malformed[_parse_int_value(key, seq_s)] = kind.strip()
    elif key == "close_mid_frame":
        f.close_mid_frame = _parse_int_value(key, v)
    elif key == "sample_rate":
        if not v or " " in v:
            raise ValueError(f"fault sample_rate: expected one token, got {value!r}")
        f.sample_rate = v
    elif key == "max_frames":
        f.max_frames = _parse_int_value(key, v)
    else:
        raise ValueError(f"unknown fault {key!r}")


_FAULT_KEYS: Final[frozenset[str]] = frozenset(
    {
        "too_busy", "drop_every", "drop", "drop_seqs", "badp", "down", "down_reason", "redirect",
        "kick", "kick_after", "kick_message", "inactivity_timeout", "stall", "stall_after", "slow",
        "malformed", "close_mid_frame", "sample_rate", "max_frames",
    }
)  # fmt: skip


def parse_fault_spec(spec: str | Iterable[str], base: FaultConfig | None = None) -> FaultConfig:
    """Parse ``key[=value];key[=value]...`` (or several such strings) into a FaultConfig.

    Keys: ``drop_every=N``, ``drop=S1,S2``, ``too_busy``, ``badp=N``, ``down=N``,
    ``down_reason=TEXT``, ``redirect=URL``, ``kick=T``, ``kick_message=TEXT``,
    ``inactivity_timeout=T``, ``stall=T``, ``slow=F``, ``malformed=SEQ:KIND,...``,
    ``close_mid_frame=SEQ``, ``sample_rate=TEXT``, ``max_frames=K``.

    Args:
        spec: One spec string or several.
        base: Start from a copy of this (default: no faults).

    Raises:
        ValueError: unknown key, bad value.
    """
    f = base.copy() if base is not None else FaultConfig()
    for s in [spec] if isinstance(spec, str) else spec:
        for item in s.split(";"):
            if not item.strip():
                continue
            key, sep, value = item.partition("=")
            _apply_fault_item(f, key, value if sep else None)
    f.validate()
    return f


DropAction: TypeAlias = Literal["silent", "close", "abort"]


@dataclass(slots=True)
class EmulatorConfig:
    """Server configuration (see the module docstring for the behaviour).

    Attributes:
        host: Address to bind (loopback by default).
        port: Port to bind; 0 picks a free one (:meth:`KiwiEmulator.start` returns it).
        sample_rate: True audio rate in Hz (``MSG sample_rate``; 12001.188, or 11999.028).
        audio_rate: Nominal rate (``MSG audio_rate``).
        password: Channel password; None or "" = no password.
        rx_chans: Number of receiver channels (simultaneous streaming clients).
        speed: Pacing multiplier (1 = real time, 0 = as fast as the client reads).
        signals: Stations: ``{freq_khz: signal}``.
        noise_floor: Signal heard away from every station.
        faults: Server-wide faults (each connection starts from a copy, then its URL query).
        pre_auth_timeout: ``MSG password_timeout`` + drop when not authenticated this long after
            the first message (20 s).
        keepalive_timeout: Drop when no ``SET keepalive`` for this long after auth (60 s).
        setup_timeout: Drop when authenticated but the five bits are incomplete this long after
            auth (20 s; None = off).
        drop_action: What "drop" does on the wire: ``silent`` (firmware: stop sending, keep the
            socket), ``close`` (close frame 1000) or ``abort`` (TCP reset).
        drop_linger: Close (1001) a dropped or refused connection the client keeps open, or one
            that never sent a message, after this long (None = never).
        gps_solution: ``last_gps_solution`` of IQ frames: None cycles 0..3 (fix), 255 = no fix.
        gps_epoch: GPS time (s since 1980-01-06, GPS scale) of sample 0; None = the wall clock
            at the first frame.
        is_local: Report the client as local (``is_local``, ``audio_init``).
        record_frames: Frames per connection whose samples are kept in the log (0 = none).
        max_logs: Connection logs kept (oldest finished ones are discarded).
        max_sessions: Stop listening once this many channel-holding sessions have ended (§5.2's
            deterministic capture); None = never.
        cache_signals: Cache quantised signal blocks shared by connections (signals must be
            deterministic).
        close_timeout: WebSocket closing-handshake timeout (s).
        stop_timeout: How long :meth:`KiwiEmulator.stop` waits for handlers before aborting.
        rx_gps: GNSS position in ``load_cfg`` (kiwiclient parses it).
        rx_name: Receiver name in ``load_cfg``.
    """

    host: str = "127.0.0.1"
    port: int = 0
    sample_rate: float = 12001.188
    audio_rate: int = 12000
    password: str | None = field(default=None, repr=False)
    rx_chans: int = 8
    speed: float = 1.0
    signals: dict[float, SignalFn] = field(default_factory=default_stations)
    noise_floor: SignalFn = field(default_factory=lambda: noise(-60.0, seed=0))
    faults: FaultConfig = field(default_factory=FaultConfig)
    pre_auth_timeout: float = 20.0
    keepalive_timeout: float = 60.0
    setup_timeout: float | None = 20.0
    drop_action: DropAction = "silent"
    drop_linger: float | None = 60.0
    gps_solution: int | None = None
    gps_epoch: float | None = None
    is_local: bool = False
    record_frames: int = 10_000
    max_logs: int = 1000
    max_sessions: int | None = None
    cache_signals: bool = True
    close_timeout: float = 2.0
    stop_timeout: float = 5.0
    rx_gps: str = "(52.000000, 0.000000)"
    rx_name: str = "streamkit KiwiSDR emulator"

    def validate(self) -> None:
        """Raise ValueError on out-of-range values."""
        if not (math.isfinite(self.sample_rate) and 1000.0 <= self.sample_rate <= 1e6):
            raise ValueError(f"sample_rate must be in 1000..1e6 Hz, got {self.sample_rate}")
        if self.audio_rate <= 0:
            raise ValueError(f"audio_rate must be > 0, got {self.audio_rate}")
        if not 1 <= self.rx_chans <= 64:
            raise ValueError(f"rx_chans must be 1..64, got {self.rx_chans}")
        if not (math.isfinite(self.speed) and self.speed >= 0):
            raise ValueError(f"speed must be >= 0, got {self.speed}")
        for name in ("pre_auth_timeout", "keepalive_timeout", "setup_timeout", "drop_linger"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be > 0, got {v}")
        if self.drop_action not in ("silent", "close", "abort"):
            raise ValueError(f"drop_action must be silent, close or abort, got {self.drop_action!r}")
        if self.gps_solution is not None and not 0 <= self.gps_solution <= 255:
            raise ValueError(f"gps_solution must be 0..255, got {self.gps_solution}")
        if self.record_frames < 0 or self.max_logs < 1:
            raise ValueError("record_frames must be >= 0 and max_logs >= 1")
        if self.max_sessions is not None and self.max_sessions < 1:
            raise ValueError(f"max_sessions must be >= 1, got {self.max_sessions}")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be 0..65535, got {self.port}")
        self.faults.validate()


# --------------------------------------------------------------------------------------------
# per-connection log
# --------------------------------------------------------------------------------------------


class Phase(str, enum.Enum):
    """Server-side state of one connection."""

    WAITING = "waiting"
    """Upgraded; no client message yet (the server does nothing, §1.2)."""
    REFUSED = "refused"
    """Refused (too_busy, down, redirect): every later message gets the refusal again."""
    DUPLICATE = "duplicate"
    """Same ``<ts>`` as a live session: ignored silently (§1.2)."""
    AUTH = "auth"
    """Channel allocated, ``sample_rate`` sent, waiting for a successful ``SET auth``."""
    SETUP = "setup"
    """Authenticated; waiting for the five command bits (§1.4)."""
    STREAMING = "streaming"
    """Sending frames."""
    STALLED = "stalled"
    """``stall`` fault: no more frames, socket open, commands processed."""
    DROPPED = "dropped"
    """Dropped by the server (kick, timeout, rule): nothing more is sent."""
    CLOSED = "closed"
    """The WebSocket connection is gone."""


@dataclass(frozen=True, slots=True)
class ReceivedCommand:
    """A client message as received.

    Attributes:
        t: Loop (monotonic) time of arrival.
        text: The message text (binary messages decoded as UTF-8 with replacement).
        name: Command name from :func:`~streamkit.protocols.kiwi.parse_client_command`, or "".
        outcome: What the server did: ``ok``, ``ignored``, ``unknown``, ``bad_params``,
            ``refused``, ``dropped``, ``kicked`` (caused a drop), ``empty``.
    """

    t: float
    text: str
    name: str
    outcome: str


@dataclass(frozen=True, slots=True)
class SentMessage:
    """A non-frame message sent (``MSG ...`` as bytes)."""

    t: float
    data: bytes

    @property
    def keys(self) -> list[str]:
        """The ``MSG`` keys in order."""
        return [tok.partition("=")[0] for tok in self.data[4:].decode("utf-8", "replace").split(" ") if tok]

    @property
    def text(self) -> str:
        """The message as text."""
        return self.data.decode("utf-8", "replace")


@dataclass(frozen=True, slots=True, eq=False)
class SentFrame:
    """One SND frame the server produced (sent, dropped or malformed).

    Attributes:
        seq: Sequence number.
        t: Loop time when it was sent (or dropped).
        flags: Flags byte.
        smeter_raw: Raw S-meter (§2.3).
        start_index: Connection sample index of the first sample.
        samples: The int16 samples encoded: shape (n,) mono, (n, 2) IQ ``[I, Q]`` (read-only).
        decoded: What a correct client decodes: the ADPCM reconstruction for compressed
            frames, else ``samples``.
        gps: The GNSS stamp (IQ frames).
        freq_khz: Dial frequency.
        mode: Mode.
        status: ``sent``, ``dropped``, ``malformed:<kind>`` or ``cut`` (close_mid_frame).
        nbytes: Bytes of the SND message as built.
    """

    seq: int
    t: float
    flags: int
    smeter_raw: int
    start_index: int
    samples: NDArray[np.int16]
    decoded: NDArray[np.int16]
    gps: GpsStamp | None
    freq_khz: float
    mode: str
    status: str
    nbytes: int

    @property
    def iq(self) -> bool:
        """IQ layout (flag 0x08)."""
        return bool(self.flags & SndFlag.MODE_IQ)

    @property
    def compressed(self) -> bool:
        """ADPCM payload."""
        return bool(self.flags & SndFlag.COMPRESSED)

    @property
    def smeter_dbm(self) -> float:
        """S-meter as the client computes it (``raw / 10 - 127``)."""
        return self.smeter_raw / 10.0 - 127.0

    def complex(self) -> NDArray[np.complex128]:
        """IQ samples as ``I + jQ`` (int values); raises ValueError for mono frames."""
        if not self.iq:
            raise ValueError("not an IQ frame")
        return self.decoded[:, 0].astype(np.float64) + 1j * self.decoded[:, 1].astype(np.float64)


@dataclass(slots=True, eq=False)
class ConnectionLog:
    """Everything about one connection (mutated by the server while it runs).

    Read it from the emulator's loop, or after the connection ended (``closed_at`` set).
    """

    id: int
    path: str
    ts: int
    query: dict[str, str]
    peer: str
    opened_at: float
    faults: FaultConfig
    phase: Phase = Phase.WAITING
    closed_at: float | None = None
    channel: int | None = None
    authenticated: bool = False
    badp: int | None = None
    refusal: str | None = None
    """``too_busy``, ``down``, ``redirect`` or ``duplicate``."""
    drop_reason: str | None = None
    """Why the server dropped the connection (``keepalive timeout``, ``kiwi_kick`` ...)."""
    end_reason: str | None = None
    """How the connection ended (``client closed``, ``max_frames``, ``close_mid_frame`` ...)."""
    command_bits: int = 0
    commands: list[ReceivedCommand] = field(default_factory=list)
    messages: list[SentMessage] = field(default_factory=list)
    frames: list[SentFrame] = field(default_factory=list)
    frames_sent: int = 0
    frames_dropped: int = 0
    frames_malformed: int = 0
    bytes_sent: int = 0
    unknown_commands: int = 0
    bad_params: int = 0
    keepalives: int = 0
    slips: int = 0
    frames_not_recorded: int = 0

    def msg_keys(self) -> list[str]:
        """First key of every ``MSG`` sent, in order."""
        return [m.keys[0] if m.keys else "" for m in self.messages]

    def delivered(self) -> list[SentFrame]:
        """Recorded frames that went out well-formed (status ``sent``)."""
        return [f for f in self.frames if f.status == "sent"]

    def expected_pcm(self, frames: Iterable[SentFrame] | None = None) -> NDArray[np.int16]:
        """Concatenated decoded int16 of the delivered mono frames (or of ``frames``)."""
        chosen = [f for f in (self.delivered() if frames is None else frames) if not f.iq]
        return np.concatenate([f.decoded for f in chosen]) if chosen else np.zeros(0, np.int16)

    def expected_iq(self, frames: Iterable[SentFrame] | None = None) -> NDArray[np.complex128]:
        """Concatenated ``I + jQ`` of the delivered IQ frames (or of ``frames``)."""
        chosen = [f for f in (self.delivered() if frames is None else frames) if f.iq]
        return np.concatenate([f.complex() for f in chosen]) if chosen else np.zeros(0, np.complex128)


# --------------------------------------------------------------------------------------------
# one connection
# --------------------------------------------------------------------------------------------


def _ws_frame_bytes(payload: bytes, binary: bool = True) -> bytes:
    """An unmasked, unfragmented server WebSocket frame (RFC 6455 §5.2)."""
    n = len(payload)
    head = bytes([0x82 if binary else 0x81])
    if n < 126:
        head += bytes([n])
    elif n < 1 << 16:
        head += bytes([126]) + n.to_bytes(2, "big")
    else:
        head += bytes([127]) + n.to_bytes(8, "big")
    return head + payload


class _Session:
    """Server side of one WebSocket connection: a reader task processes commands, the clock
    coroutine (run by the connection handler) owns timers and frames."""

    def __init__(self, emu: KiwiEmulator, ws: ServerConnection, log: ConnectionLog) -> None:
        self.emu = emu
        self.cfg = emu.config
        self.ws = ws
        self.log = log
        self.faults = log.faults
        self.loop = asyncio.get_running_loop()
        self.rate = float(self.cfg.sample_rate)
        self._rate_frac = _exact_fraction(self.rate)
        self._wake = asyncio.Event()
        self._send_lock = asyncio.Lock()
        self._peer_closed = False
        self._stop_requested = False
        self._pending_drop_action = False

        self.phase_since = log.opened_at
        self.started_at: float | None = None
        self.auth_at: float | None = None
        self.last_keepalive: float | None = None
        self.last_tune: float | None = None
        self.stream_started_at: float | None = None
        self.keepalives_before_setup = 0
        self._refusal_msg: bytes | None = None

        # receiver state (§1.4, §1.5)
        self.bits = 0
        self.mode: str | None = None
        self.freq_khz: float = -1.0
        self.passband: tuple[int, int] | None = None
        self.agc_set = False
        self.compression = True
        self.little_endian = False
        self._pending_flags = 0

        # stream state
        self.encoder = AdpcmEncoder()
        self._mirror = AdpcmDecoder()
        self.seq = 0
        self.sample_index = 0
        self._sent_first_iq = False
        self._anchor_t = 0.0
        self._anchor_samples = 0
        self._anchor_speed = -1.0
        self._gps_epoch_ns: int | None = None

    # ------------------------------------------------------------------ helpers

    def _set_phase(self, phase: Phase, now: float) -> None:
        if self.log.phase is not phase:
            self.log.phase = phase
            self.phase_since = now
            self.emu._notify()

    def wake(self) -> None:
        self._wake.set()

    def request_stop(self) -> None:
        self._stop_requested = True
        self._wake.set()

    def _eff_speed(self) -> float:
        s = self.cfg.speed
        return s * self.faults.slow if s > 0 else 0.0

    def _frame_layout(self) -> tuple[bool, bool, int]:
        """(iq, compressed, samples per frame) for the current mode and compression."""
        iq = self.mode in STEREO_MODES
        if iq:
            return True, False, _SAMPLES_IQ
        if self.compression:
            return False, True, _SAMPLES_ADPCM
        return False, False, _SAMPLES_PCM

    def _reset_encoder(self) -> None:
        self.encoder.reset()
        self._mirror.reset()

    async def _send(self, data: bytes | str) -> bool:
        """Send one message (binary for bytes); False if the connection is gone."""
        if self._peer_closed:
            return False
        async with self._send_lock:
            try:
                await self.ws.send(data)
            except ConnectionClosed:
                self._peer_closed = True
                self._wake.set()
                return False
        n = len(data)
        self.log.bytes_sent += n
        if isinstance(data, bytes) and data[:3] == b"MSG" and len(self.log.messages) < 10_000:
            self.log.messages.append(SentMessage(self.loop.time(), data))
        return True

    async def _send_all(self, messages: list[bytes]) -> None:
        for m in messages:
            if not await self._send(m):
                return

    def _drop(self, reason: str, now: float) -> None:
        """Drop the connection (§4.2): stop sending; the wire action follows drop_action."""
        if self.log.phase in (Phase.DROPPED, Phase.CLOSED):
            return
        self.log.drop_reason = reason
        self.emu._release_channel(self)
        self._set_phase(Phase.DROPPED, now)
        self._pending_drop_action = self.cfg.drop_action != "silent"
        _rlog.log(logging.INFO, "drop", "kiwi emulator: connection %d dropped (%s)", self.log.id, reason)
        self._wake.set()

    # ------------------------------------------------------------------ reader side

    async def reader(self) -> None:
        """Receive client messages until the connection closes."""
        try:
            async for message in self.ws:
                now = self.loop.time()
                if isinstance(message, str):
                    text = message
                else:
                    text = bytes(message).decode("utf-8", "replace")
                try:
                    out = self._on_message(text, now)
                except Exception:  # never let a bad command kill the connection handler
                    logger.exception("kiwi emulator: internal error on command %r", text[:200])
                    out = []
                if out:
                    await self._send_all(out)
                self._wake.set()
        except ConnectionClosed:
            pass
        finally:
            self._peer_closed = True
            self._wake.set()

    def _record(self, now: float, text: str, name: str, outcome: str) -> None:
        cmds = self.log.commands
        if len(cmds) < 10_000:
            cmds.append(ReceivedCommand(now, text, name, outcome))

    def _on_message(self, text: str, now: float) -> list[bytes]:
        """Process one client message; returns the messages to send (in order)."""
        text = text.removesuffix("\n")
        if not text:
            self._record(now, text, "", "empty")  # ignored, not a keepalive (§1.1)
            return []
        phase = self.log.phase
        out: list[bytes] = []
        if phase is Phase.WAITING:
            refusal = self.emu._admit(self)
            if refusal is not None:
                kind, msg = refusal
                self.log.refusal = kind
                if kind == "duplicate":  # dropped without a message (§1.2)
                    self._set_phase(Phase.DUPLICATE, now)
                    self._record(now, text, "", "ignored")
                    return []
                self._refusal_msg = msg
                self._set_phase(Phase.REFUSED, now)
                self._record(now, text, "", "refused")
                return [msg]
            self.started_at = now
            self._set_phase(Phase.AUTH, now)
            rate_text: object = self.faults.sample_rate if self.faults.sample_rate is not None else self.rate
            out.append(build_msg(**{"sample_rate": rate_text}))
        elif phase is Phase.REFUSED:
            self._record(now, text, "", "refused")
            return [self._refusal_msg] if self._refusal_msg else []
        elif phase in (Phase.DUPLICATE, Phase.DROPPED, Phase.CLOSED):
            self._record(now, text, "", "ignored")
            return []

        if not text.startswith("SET "):
            self.log.unknown_commands += 1
            self._record(now, text, "", "unknown")
            _rlog.log(logging.INFO, "unknown", "kiwi emulator: connection %d: unknown message %r", self.log.id, text[:80])
            return out
        try:
            name, params = parse_client_command(text)
        except ValueError:
            self.log.unknown_commands += 1
            self._record(now, text, "", "unknown")
            return out
        outcome = self._on_command(name, params, now, out)
        self._record(now, text, name, outcome)
        return out

    def _on_command(self, name: str, params: dict[str, str], now: float, out: list[bytes]) -> str:
        if name == "keepalive":
            self.log.keepalives += 1
            self.last_keepalive = now if self.log.authenticated else self.last_keepalive
            if self.bits != _CMD_ALL:
                self.keepalives_before_setup += 1
                if self.keepalives_before_setup > 4:
                    self._drop("connection hang: more than 4 keepalives before setup", now)
                    return "kicked"
            return "ok"
        if name == "auth":
            out.extend(self._on_auth(params, now))
            return "ok"
        if name == "options":
            return "ok"
        if not self.log.authenticated:
            self._drop(f"SET {name} before auth", now)
            return "kicked"
        handler = {
            "mod": self._on_mod,
            "agc": self._on_agc,
            "AR OK": self._on_ar_ok,
            "compression": self._on_compression,
        }.get(name)
        if handler is not None:
            ok = handler(params, now)
            if not ok:
                self.log.bad_params += 1
                _rlog.log(logging.INFO, "bad params", "kiwi emulator: connection %d: bad parameters for %s: %s", self.log.id, name, params)
            self._check_setup(now)
            return "ok" if ok else "bad_params"
        if name == "reinit":
            self._reset_encoder()
            self._pending_flags |= SndFlag.RESTART
            return "ok"
        if name == "little-endian":
            self.little_endian = True
            return "ok"
        if name == "inactivity_ack":
            self.last_tune = now
            return "ok"
        if name in _ACCEPTED_NOOP:
            return "ignored"
        self.log.unknown_commands += 1  # "SND BAD PARAMS": logged, counted, no reply (§1.5)
        _rlog.log(logging.INFO, "unknown", "kiwi emulator: connection %d: unknown command %r", self.log.id, name)
        return "unknown"

    def _on_auth(self, params: dict[str, str], now: float) -> list[bytes]:
        password = params.get("p", "")
        if password == "#":
            password = ""
        forced = self.faults.badp
        if forced:
            badp = forced
        elif self.cfg.password and password != self.cfg.password:
            badp = 1
        else:
            badp = 0
        self.log.badp = badp
        n = self.cfg.rx_chans
        free_no_pwd = 0 if self.cfg.password else n
        peer_ip = self.log.peer.rsplit(":", 1)[0] if self.log.peer else "127.0.0.1"
        out = [
            build_msg(client_public_ip=peer_ip),
            build_msg(rx_chans=n),
            build_msg(chan_no_pwd=free_no_pwd),
            build_msg(chan_no_pwd_true=free_no_pwd),
        ]
        local = int(self.cfg.is_local)
        if badp == 0:
            out.append(build_msg(is_local=f"{self.log.channel},{local},{local}"))
        out.append(build_msg(max_camp=_MAX_CAMP))
        out.append(build_msg(badp=badp))
        if badp == 0 and not self.log.authenticated:
            self.log.authenticated = True
            self.auth_at = self.last_keepalive = self.last_tune = now
            self._set_phase(Phase.SETUP, now)
            cfg_json = json.dumps(
                {
                    "rx_name": self.cfg.rx_name,
                    "rx_location": "loopback",
                    "rx_gps": self.cfg.rx_gps,
                    "rx_antenna": "dummy load",
                    "inactivity_timeout_mins": 0,
                },
                separators=(",", ":"),
            )
            out += [
                build_msg(version_maj=1, version_min=711, debian_ver=11, model="kiwi", platform="emulator", ext_clk=0, abyy=0, freq_offset=0.0),
                build_msg(load_cfg=cfg_json),
                build_msg(load_dxcfg='{"dx":[]}'),
                build_msg(load_dxcomm_cfg='{"dx":[]}'),
                build_msg(cfg_loaded=None),
                build_msg(center_freq=15_000_000, bandwidth=30_000_000, adc_clk_nom=66_666_600),
                build_msg(audio_init=local, audio_rate=self.cfg.audio_rate),
            ]
            self._check_setup(now)
        return out

    def _on_mod(self, params: dict[str, str], now: float) -> bool:
        mode = params.get("mod", "")
        try:
            lo = int(params["low_cut"])
            hi = int(params["high_cut"])
            freq = float(params["freq"])
        except (KeyError, ValueError):
            return False
        if not mode or not math.isfinite(freq):
            return False
        changed = False
        if mode != "x":
            if mode not in MODES:
                _rlog.log(logging.INFO, "mode", "kiwi emulator: unknown mode %r, using am", mode)
                mode = "am"
            self.bits |= _CMD_MODE
            if mode != self.mode:
                if self.mode in STEREO_MODES and mode not in STEREO_MODES and self.agc_set:
                    self._reset_encoder()  # §3.2 event 4
                changed = self.mode is not None
                self.mode = mode
        if freq != self.freq_khz:
            self.bits |= _CMD_FREQ
            changed = changed or self.freq_khz >= 0
            self.freq_khz = freq
        if not (lo == 0 and hi == 0):
            limit = int(self.rate / 2) - 1
            lo, hi = max(-limit, min(limit, lo)), max(-limit, min(limit, hi))
            if (lo, hi) != self.passband:
                self.bits |= _CMD_PASSBAND
                if self.passband is not None and self.stream_started_at is not None:
                    self._pending_flags |= SndFlag.LPF
                self.passband = (lo, hi)
        if changed:
            self.last_tune = now
            if self.stream_started_at is not None:
                self._pending_flags |= SndFlag.NEW_FREQ
        return True

    def _on_agc(self, params: dict[str, str], now: float) -> bool:
        if not all(k in params and _INT_RE.match(params[k]) for k in _AGC_FIELDS):
            return False
        self.bits |= _CMD_AGC
        self.agc_set = True
        return True

    def _on_ar_ok(self, params: dict[str, str], now: float) -> bool:
        out_rate = params.get("out", "")
        if "in" not in params or not _INT_RE.match(out_rate) or not _INT_RE.match(params["in"]):
            return False
        if int(out_rate) != 0:
            self.bits |= _CMD_AR_OK
        return True

    def _on_compression(self, params: dict[str, str], now: float) -> bool:
        v = params.get("compression", "")
        if not _INT_RE.match(v):
            return False
        on = int(v) != 0
        if on and not self.compression:
            self._reset_encoder()  # §3.2 event 2
        self.compression = on
        return True

    def _check_setup(self, now: float) -> None:
        self.log.command_bits = self.bits
        if self.log.phase is Phase.SETUP and self.bits == _CMD_ALL:
            self._set_phase(Phase.STREAMING, now)
            self._anchor(now)

    # ------------------------------------------------------------------ clock side

    def _anchor(self, now: float) -> None:
        self._anchor_t = now
        self._anchor_samples = self.sample_index
        self._anchor_speed = self._eff_speed()

    def _frame_due(self, now: float) -> float:
        speed = self._eff_speed()
        if speed != self._anchor_speed:
            self._anchor(now)
        if speed <= 0:
            return now
        n = self._frame_layout()[2]
        return self._anchor_t + (self.sample_index + n - self._anchor_samples) / (self.rate * speed)

    def _next_action(self, now: float) -> tuple[float | None, Callable[[float], Awaitable[bool]] | None]:
        """Earliest pending timer of the current phase (ties: listed first wins)."""
        phase = self.log.phase
        cands: list[tuple[float, Callable[[float], Awaitable[bool]]]] = []
        if self._pending_drop_action:
            return now, self._do_drop_action
        if phase is Phase.AUTH and self.started_at is not None:
            cands.append((self.started_at + self.cfg.pre_auth_timeout, self._on_password_timeout))
        if phase in (Phase.SETUP, Phase.STREAMING, Phase.STALLED):
            assert self.auth_at is not None and self.last_keepalive is not None and self.last_tune is not None
            f = self.faults
            if f.kick_after is not None:
                cands.append((self.auth_at + f.kick_after, self._on_kick))
            if f.inactivity_timeout is not None:
                cands.append((self.last_tune + f.inactivity_timeout, self._on_inactivity))
            cands.append((self.last_keepalive + self.cfg.keepalive_timeout, self._on_keepalive_timeout))
            if phase is Phase.SETUP and self.cfg.setup_timeout is not None:
                cands.append((self.auth_at + self.cfg.setup_timeout, self._on_setup_timeout))
        if phase is Phase.STREAMING:
            if self.faults.stall_after is not None and self.stream_started_at is not None:
                cands.append((self.stream_started_at + self.faults.stall_after, self._on_stall))
            cands.append((self._frame_due(now), self._on_frame_due))
        if phase in (Phase.WAITING, Phase.DROPPED, Phase.REFUSED, Phase.DUPLICATE) and self.cfg.drop_linger is not None:
            cands.append((self.phase_since + self.cfg.drop_linger, self._on_linger))
        if not cands:
            return None, None
        return min(cands, key=lambda c: c[0])

    async def _sleep_until(self, deadline: float | None) -> None:
        handle = self.loop.call_at(deadline, self._wake.set) if deadline is not None else None
        try:
            await self._wake.wait()
        finally:
            if handle is not None:
                handle.cancel()
            self._wake.clear()

    async def clock(self) -> None:
        """Run timers and frames until the session ends."""
        while not self._peer_closed and not self._stop_requested:
            now = self.loop.time()
            deadline, action = self._next_action(now)
            if action is None or deadline is None or deadline > now:
                await self._sleep_until(deadline)
                continue
            if await action(now):
                return

    async def _on_password_timeout(self, now: float) -> bool:
        await self._send(build_msg(password_timeout=None))
        self._drop("password timeout", now)
        return False

    async def _on_kick(self, now: float) -> bool:
        await self._send(build_msg(kiwi_kick=f"1,{self.faults.kick_message}"))
        self._drop("kiwi_kick", now)
        return False

    async def _on_inactivity(self, now: float) -> bool:
        t = self.faults.inactivity_timeout or 0.0
        await self._send(build_msg(inactivity_timeout=max(1, math.ceil(t / 60.0))))
        self._drop("inactivity timeout", now)
        return False

    async def _on_keepalive_timeout(self, now: float) -> bool:
        self._drop("keepalive timeout", now)
        return False

    async def _on_setup_timeout(self, now: float) -> bool:
        self._drop("incomplete connection", now)
        return False

    async def _on_stall(self, now: float) -> bool:
        self._set_phase(Phase.STALLED, now)
        _rlog.log(logging.INFO, "stall", "kiwi emulator: connection %d stalled (fault)", self.log.id)
        return False

    async def _on_linger(self, now: float) -> bool:
        self.log.end_reason = self.log.end_reason or f"{self.log.phase.value}: closed after drop_linger"
        with contextlib.suppress(ConnectionClosed):
            await self.ws.close(1001, "idle")
        return True

    async def _do_drop_action(self, now: float) -> bool:
        self._pending_drop_action = False
        if self.cfg.drop_action == "close":
            self.log.end_reason = f"dropped ({self.log.drop_reason}): closed"
            with contextlib.suppress(ConnectionClosed):
                await self.ws.close(1000, "")
            return True
        if self.cfg.drop_action == "abort":
            self.log.end_reason = f"dropped ({self.log.drop_reason}): aborted"
            self.ws.transport.abort()
            return True
        return False

    def _gps_stamp(self, start_index: int, first: bool) -> GpsStamp:
        if first:
            return GpsStamp(0, 0, 0)
        if self._gps_epoch_ns is None:
            if self.cfg.gps_epoch is not None:
                self._gps_epoch_ns = round(self.cfg.gps_epoch * _NS)
            else:
                self._gps_epoch_ns = (time.time_ns() - _GPS_EPOCH_UNIX_S * _NS) + GPS_UTC_LEAP_SECONDS * _NS
        num, den = self._rate_frac.numerator, self._rate_frac.denominator
        offset_ns = (2 * start_index * den * _NS + num) // (2 * num)  # round(start * 1e9 / rate)
        tow = (self._gps_epoch_ns + offset_ns) % _GPS_WEEK_NS
        if self.cfg.gps_solution is not None:
            sol = self.cfg.gps_solution
        else:
            sol = int(start_index / self.rate) % 4
        return GpsStamp(sol, tow // _NS, tow % _NS)

    def _signal_block(self, n: int, start: int, iq: bool) -> tuple[NDArray[np.int16], float]:
        fn = self.emu._select_signal(self.freq_khz, self.passband)
        return self.emu._signal_block(fn, n, start, iq)

    async def _on_frame_due(self, now: float) -> bool:
        """Build, send (or drop / corrupt) the next frame; True when the session is over."""
        due = self._frame_due(now)
        iq, compressed, n = self._frame_layout()
        period = n / (self.rate * self._eff_speed()) if self._eff_speed() > 0 else 0.0
        if period and now - due > period:
            self.log.slips += 1  # more than one frame late: re-anchor, no burst
            self._anchor_t = now - period
            self._anchor_samples = self.sample_index
        start = self.sample_index
        samples, dbm = self._signal_block(n, start, iq)
        seq = (self.seq + 1) % _U32
        self.seq = seq
        flags = self._pending_flags
        self._pending_flags = 0
        if iq:
            flags |= SndFlag.MODE_IQ
        elif compressed:
            flags |= SndFlag.COMPRESSED
        if self.little_endian:
            flags |= SndFlag.LITTLE_ENDIAN
        flags = int(flags)
        gps = None
        if iq:
            gps = self._gps_stamp(start, first=not self._sent_first_iq)
            self._sent_first_iq = True
        frame = build_snd_frame(seq, dbm, samples.reshape(-1), flags, gps, encoder=self.encoder if compressed else None)
        self.sample_index += n
        if self.stream_started_at is None:
            self.stream_started_at = now

        record = len(self.log.frames) < self.cfg.record_frames
        decoded = samples
        if compressed and record:
            # The encoder updates its state by decoding its own codes (§3.1), so a decoder kept
            # in step with it yields exactly what a correct client decodes.
            decoded = self._mirror.decode(frame[10:])

        f = self.faults
        status = "sent"
        payload: bytes | str = frame
        if f.drops(seq):
            status = "dropped"
        elif f.close_mid_frame is not None and seq == f.close_mid_frame:
            status = "cut"
        elif seq in f.malformed:
            kind = f.malformed[seq]
            status = f"malformed:{kind}"
            if kind == "truncated":
                payload = frame[:7]
            elif kind == "bad_tag":
                payload = b"SNX" + frame[3:]
            elif kind == "odd_payload":
                payload = frame[:-1]
            else:
                payload = f"SND frame {seq} sent as a text message"

        if record:
            self.log.frames.append(
                SentFrame(seq, now, flags, smeter_raw(dbm), start, samples, decoded, gps, self.freq_khz, self.mode or "", status, len(frame))
            )
        else:
            self.log.frames_not_recorded += 1

        if status == "dropped":
            self.log.frames_dropped += 1
        elif status == "cut":
            await self._cut(frame)
            return True
        else:
            if not await self._send(payload):
                return True
            if status == "sent":
                self.log.frames_sent += 1
            else:
                self.log.frames_malformed += 1
        if self.cfg.speed <= 0:
            await asyncio.sleep(0)  # as fast as the client reads, but let other tasks run
        if f.max_frames is not None and seq >= f.max_frames:
            self.log.end_reason = "max_frames"
            with contextlib.suppress(ConnectionClosed):
                await self.ws.close(1000, "")
            return True
        return False

    async def _cut(self, frame: bytes) -> None:
        """close_mid_frame: write the first half of the frame's WebSocket bytes straight to the
        transport, then close TCP (FIN after the buffered bytes; no WebSocket close frame), as a
        server process dying mid-write would."""
        raw = _ws_frame_bytes(frame)
        async with self._send_lock:
            transport = self.ws.transport
            transport.write(raw[: len(raw) // 2])
            self.log.bytes_sent += len(raw) // 2
            transport.close()
        self.log.end_reason = "close_mid_frame"
        self._peer_closed = True


# --------------------------------------------------------------------------------------------
# the server
# --------------------------------------------------------------------------------------------


class KiwiEmulator:
    """A KiwiSDR-compatible WebSocket server (see the module docstring).

    Usage::

        async with KiwiEmulator(EmulatorConfig(speed=4.0)) as emu:
            url = f"ws://127.0.0.1:{emu.port}/123/SND"
            ...
            log = emu.connections[-1]

    Args:
        config: Server configuration (validated in :meth:`start`); None = defaults. The emulator
            works on a copy (:attr:`config`); change faults with :meth:`set_faults`.
        **overrides: Field overrides applied to that copy.
    """

    def __init__(self, config: EmulatorConfig | None = None, **overrides: Any) -> None:
        base = config if config is not None else EmulatorConfig()
        self.config = dataclasses.replace(base, **overrides)
        self.config.faults = self.config.faults.copy()  # set_faults never mutates the caller's object
        self.config.signals = dict(self.config.signals)
        self._server: Server | None = None
        self._port: int | None = None
        self._logs: deque[ConnectionLog] = deque()
        self._sessions: dict[int, _Session] = {}
        self._channels: dict[int, _Session] = {}
        self._next_id = 1
        self._ended_sessions = 0
        self._listening = False
        self._stopping = False
        self._changed: asyncio.Event | None = None
        self._cache: OrderedDict[tuple[object, int, int, bool], tuple[NDArray[np.int16], float]] = OrderedDict()

    # ------------------------------------------------------------------ lifecycle

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        if self._port is None:
            raise RuntimeError("the emulator is not started")
        return self._port

    @property
    def listening(self) -> bool:
        """Whether new connections are accepted."""
        return self._listening

    def url(self, ts: int = 1, query: str = "") -> str:
        """``ws://host:port/<ts>/SND[?query]``."""
        return f"ws://{format_hostport(self.config.host, self.port)}/{ts}/SND" + (f"?{query}" if query else "")

    async def start(self) -> int:
        """Bind and start serving; returns the port.

        Raises:
            ValueError: invalid configuration.
            OSError: the port cannot be bound.
        """
        if self._server is not None:
            raise RuntimeError("already started")
        self.config.validate()
        await asyncio.to_thread(_adpcm_warmup)  # compile (or load) the numba kernels off the loop
        self._changed = asyncio.Event()
        self._stopping = False
        self._server = await serve(
            self._handler,
            self.config.host,
            self.config.port,
            process_request=self._process_request,
            compression=None,
            ping_interval=None,
            close_timeout=self.config.close_timeout,
            max_size=1 << 16,
            max_queue=16,
            server_header="KiwiSDR-emulator (streamkit)",
        )
        sockets = list(self._server.sockets)
        self._port = int(sockets[0].getsockname()[1])
        self._listening = True
        logger.info(
            "kiwi emulator listening on ws://%s/<ts>/SND (rate %.6f Hz, speed %g)",
            format_hostport(self.config.host, self._port),
            self.config.sample_rate,
            self.config.speed,
        )
        return self._port

    async def stop(self) -> None:
        """Stop listening, close every connection (1001) and wait for the handlers (bounded by
        ``stop_timeout``; stragglers are aborted). Idempotent."""
        server = self._server
        if server is None:
            return
        self._listening = False
        self._stopping = True
        server.close(close_connections=True)  # close frames 1001 "going away"
        try:
            await asyncio.wait_for(server.wait_closed(), self.config.stop_timeout)
        except asyncio.TimeoutError:  # noqa: UP041 (not the builtin on 3.10)
            logger.warning("kiwi emulator: handlers did not finish in %.1f s; aborting connections", self.config.stop_timeout)
            for s in list(self._sessions.values()):
                s.request_stop()
                s.ws.transport.abort()
            with contextlib.suppress(asyncio.TimeoutError):  # noqa: UP041
                await asyncio.wait_for(server.wait_closed(), self.config.stop_timeout)
        self._server = None
        logger.info("kiwi emulator stopped")

    async def __aenter__(self) -> KiwiEmulator:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def stop_listening(self) -> None:
        """Stop accepting new connections; existing ones carry on."""
        if self._server is not None and self._listening:
            self._listening = False
            self._server.server.close()
            logger.info("kiwi emulator: stopped listening")
            self._notify()

    # ------------------------------------------------------------------ introspection

    @property
    def connections(self) -> list[ConnectionLog]:
        """Logs of the connections, oldest first (at most ``max_logs``)."""
        return list(self._logs)

    @property
    def active_channels(self) -> int:
        """Channels in use."""
        return len(self._channels)

    def set_faults(self, conn_id: int | None = None, spec: str | None = None, **changes: Any) -> None:
        """Change faults at run time (call from the emulator's loop).

        Args:
            conn_id: Only this connection; None = the server config and every live connection.
            spec: A fault spec string (:func:`parse_fault_spec`) applied first.
            **changes: :class:`FaultConfig` fields.

        Raises:
            ValueError: bad spec or values; KeyError: unknown connection.
        """

        def apply(f: FaultConfig) -> None:
            new = parse_fault_spec(spec, f) if spec else f.copy()
            for k, v in changes.items():
                if not hasattr(new, k):
                    raise ValueError(f"unknown fault {k!r}")
                setattr(new, k, v)
            new.validate()
            for fld in dataclasses.fields(FaultConfig):
                setattr(f, fld.name, getattr(new, fld.name))

        if conn_id is not None:
            s = self._sessions.get(conn_id)
            if s is None:
                raise KeyError(f"no live connection {conn_id}")
            apply(s.faults)
            s.wake()
            return
        apply(self.config.faults)
        for s in self._sessions.values():
            apply(s.faults)
            s.wake()

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``predicate()`` is true; it is re-checked whenever a connection changes
        phase or ends. Returns False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0 or self._changed is None:
                return False
            ev = self._changed
            if math.isinf(remaining):
                await ev.wait()
                continue
            with contextlib.suppress(asyncio.TimeoutError):  # noqa: UP041
                await asyncio.wait_for(ev.wait(), remaining)
        return True

    async def wait_stopped_listening(self) -> None:
        """Return when the server no longer listens and every connection has ended."""
        await self.wait_until(lambda: not self._listening and not self._sessions, timeout=math.inf)

    def _notify(self) -> None:
        ev = self._changed
        if ev is not None:
            self._changed = asyncio.Event()
            ev.set()

    # ------------------------------------------------------------------ internals

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        path = urlsplit(request.path).path
        if not _PATH_RE.match(path):
            return connection.respond(http.HTTPStatus.NOT_FOUND, "Not Found\n")
        return None

    async def _handler(self, ws: ServerConnection) -> None:
        loop = asyncio.get_running_loop()
        parts = urlsplit(ws.request.path if ws.request is not None else "/0/SND")
        m = _PATH_RE.match(parts.path)
        ts = int(m.group(1)) if m else 0
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        faults = self.config.faults.copy()
        try:
            specs = [f"{k}={v}" if v else k for k, v in query.items() if k in _FAULT_KEYS]
            if "fault" in query:
                specs.append(query["fault"])
            if specs:
                faults = parse_fault_spec(specs, faults)
        except ValueError as exc:
            logger.warning("kiwi emulator: bad fault in query %r: %s", parts.query, exc)
        peer = ws.remote_address
        peer_s = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)
        log = ConnectionLog(self._next_id, ws.request.path if ws.request else "", ts, query, peer_s, loop.time(), faults)
        self._next_id += 1
        self._logs.append(log)
        self._trim_logs()
        session = _Session(self, ws, log)
        self._sessions[log.id] = session
        _rlog.log(logging.INFO, "connect", "kiwi emulator: connection %d from %s path %s", log.id, peer_s, log.path)
        reader = asyncio.create_task(session.reader(), name=f"kiwi-emulator-reader-{log.id}")
        try:
            await session.clock()
        except Exception as exc:  # e.g. a signal callable that raised: end this connection only
            logger.exception("kiwi emulator: connection %d failed", log.id)
            log.end_reason = f"internal error: {exc!r}"
            with contextlib.suppress(ConnectionClosed):
                await ws.close(1011, "emulator error")
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            self._release_channel(session)
            had_channel = log.channel is not None
            log.closed_at = loop.time()
            if log.end_reason is None:
                log.end_reason = "server stopped" if self._stopping else "client closed"
            log.phase = Phase.CLOSED
            del self._sessions[log.id]
            _rlog.log(logging.INFO, "disconnect", "kiwi emulator: connection %d ended (%s), %d frames sent", log.id, log.end_reason, log.frames_sent)
            if had_channel:
                self._ended_sessions += 1
                if self.config.max_sessions is not None and self._ended_sessions >= self.config.max_sessions:
                    self.stop_listening()
            self._notify()

    def _trim_logs(self) -> None:
        while len(self._logs) > self.config.max_logs:
            for i, old in enumerate(self._logs):
                if old.closed_at is not None:
                    del self._logs[i]
                    break
            else:
                return

    def _admit(self, session: _Session) -> tuple[str, bytes] | None:
        """On the first client message: ``(refusal kind, MSG)`` or None (channel allocated).

        Order: ``down``, ``redirect``, duplicate ``<ts>`` (no message), ``too_busy``.
        """
        f = session.faults
        if f.down is not None:
            return "down", build_msg(reason_disabled=f.down_reason, down=f.down)
        if f.redirect is not None:
            return "redirect", build_msg(redirect=f.redirect)
        peer_ip = session.log.peer.rsplit(":", 1)[0]
        for other in self._channels.values():
            if other.log.ts == session.log.ts and other.log.peer.rsplit(":", 1)[0] == peer_ip:
                return "duplicate", b""
        free = [c for c in range(self.config.rx_chans) if c not in self._channels]
        if f.too_busy or not free:
            return "too_busy", build_msg(too_busy=self.config.rx_chans)
        session.log.channel = free[0]
        self._channels[free[0]] = session
        return None

    def _release_channel(self, session: _Session) -> None:
        ch = session.log.channel
        if ch is not None and self._channels.get(ch) is session:
            del self._channels[ch]

    def _select_signal(self, freq_khz: float, passband: tuple[int, int] | None) -> SignalFn:
        reach_khz = max(abs(passband[0]), abs(passband[1])) / 1000.0 if passband else 0.0
        best: tuple[float, SignalFn] | None = None
        for khz, fn in self.config.signals.items():
            d = abs(khz - freq_khz)
            if d <= reach_khz + 1e-9 and (best is None or d < best[0]):
                best = (d, fn)
        return best[1] if best is not None else self.config.noise_floor

    def _signal_block(self, fn: SignalFn, n: int, start: int, iq: bool) -> tuple[NDArray[np.int16], float]:
        key = (fn, n, start, iq)
        if self.config.cache_signals:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        x = np.asarray(fn(n, start, self.config.sample_rate, iq))
        if x.shape != (n,):
            raise ValueError(f"signal {fn!r} returned shape {x.shape}, expected ({n},)")
        if not iq and np.iscomplexobj(x):
            raise ValueError(f"signal {fn!r} returned complex samples for a mono frame")
        if not np.all(np.isfinite(x)):
            raise ValueError(f"signal {fn!r} returned non-finite samples")
        samples = quantize(x, iq)
        samples.flags.writeable = False
        value = (samples, frame_smeter_dbm(samples))
        if self.config.cache_signals:
            self._cache[key] = value
            while len(self._cache) > 256:
                self._cache.popitem(last=False)
        return value


# --------------------------------------------------------------------------------------------
# thread runner
# --------------------------------------------------------------------------------------------


class EmulatorThread:
    """Run a :class:`KiwiEmulator` in a background thread with its own event loop.

    Usage::

        with EmulatorThread(EmulatorConfig(speed=4)) as t:
            url = f"ws://127.0.0.1:{t.port}/1/SND"
            ...
            logs = t.call(lambda: t.emulator.connections)

    Args:
        config: Server configuration; None = defaults.
        **overrides: Field overrides.
    """

    def __init__(self, config: EmulatorConfig | None = None, **overrides: Any) -> None:
        self.emulator = KiwiEmulator(config, **overrides)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.port: int = 0
        """The bound port (after :meth:`start`)."""

    def start(self, timeout: float = 30.0) -> int:
        """Start the thread and the server; returns the port.

        Raises:
            RuntimeError: already started, or the server did not come up in time.
            Exception: whatever :meth:`KiwiEmulator.start` raised.
        """
        if self._thread is not None:
            raise RuntimeError("already started")
        self._thread = threading.Thread(target=self._run, name="kiwi-emulator", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError("the kiwi emulator did not start in time")
        if self._error is not None:
            self._thread.join()
            raise self._error
        return self.port

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop_event = asyncio.Event()
            try:
                self.port = await self.emulator.start()
            except BaseException as exc:
                self._error = exc
                self._ready.set()
                return
            self._ready.set()
            try:
                await self._stop_event.wait()
            finally:
                await self.emulator.stop()

        asyncio.run(main())

    def call(self, fn: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Run ``fn()`` in the emulator's loop (e.g. ``set_faults``) and return its result."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("not started")

        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server and join the thread. Idempotent."""
        thread, loop, ev = self._thread, self._loop, self._stop_event
        if thread is None:
            return
        if loop is not None and ev is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(ev.set)
        thread.join(timeout)
        if thread.is_alive():
            raise RuntimeError("the kiwi emulator thread did not stop in time")
        self._thread = None

    def __enter__(self) -> EmulatorThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------


def add_emulator_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``streamkit emulate kiwi`` options to ``parser``."""
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 = any free port)")
    parser.add_argument("--sample-rate", type=float, default=12001.188, help="true audio rate in Hz (default 12001.188; the WB build uses 11999.028)")
    parser.add_argument("--audio-rate", type=int, default=12000, help="nominal audio_rate (default 12000)")
    add_password_arguments(parser, help_what="channel password (default: none)")
    parser.add_argument("--rx-chans", type=int, default=8, help="receiver channels (default 8)")
    parser.add_argument("--speed", type=float, default=1.0, help="pacing: 1 = real time, 2 = twice as fast, 0 = as fast as the client reads")
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="SPEC",
        help="fault spec, repeatable: drop_every=N; drop=S1,S2; too_busy; badp=N; down=N; down_reason=TEXT; redirect=URL; kick=T; "
        "kick_message=TEXT; inactivity_timeout=T; stall=T; slow=F; malformed=SEQ:KIND,...; close_mid_frame=SEQ; sample_rate=TEXT; max_frames=K",
    )
    parser.add_argument(
        "--station", action="append", default=[], metavar="KHZ=KIND", help="add a station, e.g. 7074=tone:1500:-12+noise:-40 or 9500=speech:3"
    )
    parser.add_argument("--no-default-stations", action="store_true", help="start from an empty station list")
    parser.add_argument("--duration", type=float, default=None, help="stop after S seconds (default: until Ctrl-C)")
    parser.add_argument("--max-sessions", type=int, default=None, help="stop after N sessions have ended (deterministic captures)")
    parser.add_argument("--gps-solution", type=int, default=None, help="last_gps_solution of IQ frames (255 = no fix; default cycles 0..3)")
    parser.add_argument("--keepalive-timeout", type=float, default=60.0, help="drop after S s without keepalive (default 60)")
    parser.add_argument("--pre-auth-timeout", type=float, default=20.0, help="password_timeout after S s without auth (default 20)")
    parser.add_argument(
        "--drop-action",
        choices=("silent", "close", "abort"),
        default="silent",
        help="what a drop does on the wire (default silent, like the firmware)",
    )
    parser.add_argument("--record-frames", type=int, default=0, help="frames per connection kept in memory for inspection (default 0)")


def config_from_args(ns: argparse.Namespace) -> EmulatorConfig:
    """Build an :class:`EmulatorConfig` from parsed :func:`add_emulator_arguments` options.

    Raises:
        ValueError: invalid option values.
    """
    signals = {} if ns.no_default_stations else default_stations()
    for spec in ns.station:
        khz, fn = parse_station_spec(spec)
        signals[khz] = fn
    cfg = EmulatorConfig(
        host=ns.host,
        port=ns.port,
        sample_rate=ns.sample_rate,
        audio_rate=ns.audio_rate,
        password=password_from_args(ns) or None,
        rx_chans=ns.rx_chans,
        speed=ns.speed,
        signals=signals,
        faults=parse_fault_spec(ns.fault),
        pre_auth_timeout=ns.pre_auth_timeout,
        keepalive_timeout=ns.keepalive_timeout,
        drop_action=ns.drop_action,
        gps_solution=ns.gps_solution,
        record_frames=ns.record_frames,
        max_sessions=ns.max_sessions,
    )
    cfg.validate()
    if ns.duration is not None and not (math.isfinite(ns.duration) and ns.duration > 0):
        raise ValueError(f"--duration must be > 0, got {ns.duration}")
    return cfg


async def run_emulator(config: EmulatorConfig, duration: float | None = None, stop: asyncio.Event | None = None) -> KiwiEmulator:
    """Serve until ``duration`` elapses, ``stop`` is set, or (with ``max_sessions``) the server
    stopped listening and every connection ended. Returns the stopped emulator (for its logs)."""
    emu = KiwiEmulator(config)
    await emu.start()
    print(f"KiwiSDR emulator listening on ws://{format_hostport(config.host, emu.port)}/<ts>/SND", file=sys.stderr, flush=True)
    waiters: list[asyncio.Future[Any]] = [asyncio.ensure_future(emu.wait_stopped_listening())]
    if stop is not None:
        waiters.append(asyncio.ensure_future(stop.wait()))
    try:
        await asyncio.wait(waiters, timeout=duration, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
        await emu.stop()
    return emu


def run_from_args(ns: argparse.Namespace) -> int:
    """Run the emulator from parsed options until Ctrl-C, ``--duration`` or ``--max-sessions``.

    Returns:
        0 on a normal stop, 2 for invalid options or a port that cannot be bound.
    """
    try:
        cfg = config_from_args(ns)
    except (ValueError, ConfigError) as exc:
        print(f"streamkit: error: {exc}", file=sys.stderr)
        return 2

    async def amain() -> KiwiEmulator:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        installed = []
        for sig in (_signal.SIGINT, _signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
                installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        try:
            return await run_emulator(cfg, ns.duration, stop)
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)

    try:
        emu = asyncio.run(amain())
    except OSError as exc:
        print(f"streamkit: error: cannot listen on {cfg.host}:{cfg.port}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    logs = emu.connections
    print(f"KiwiSDR emulator stopped: {len(logs)} connections, {sum(c.frames_sent for c in logs)} frames sent", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None, prog: str = "streamkit emulate kiwi") -> int:
    """``streamkit emulate kiwi [options]`` (also ``python -m streamkit.io.kiwi_emulator``)."""
    parser = argparse.ArgumentParser(prog=prog, description="KiwiSDR-compatible loopback server: the real SND protocol, programmable signals per frequency, fault injection.")
    add_emulator_arguments(parser)
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    ns = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if ns.verbose else logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run_from_args(ns)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
