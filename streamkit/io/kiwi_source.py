"""KiwiSource: a live source that receives one KiwiSDR channel over WebSocket.

The protocol itself is the sans-I/O :class:`~streamkit.protocols.kiwi_client.KiwiClientProtocol`; this
module is the thin asyncio adapter around it: it owns the socket, the reconnect loop
with a replaceable ``classify`` + ``backoff`` pair (websockets' ``process_exception`` and
``backoff`` style), the keepalive/watchdog ticker, and the hand-off of decoded samples to the
graph through a bounded :class:`~streamkit.core.ring.SampleRing`.

All stations of a process share one asyncio loop on one thread (:class:`KiwiLoop`), so a monitor
of hundreds of stations costs one thread, not hundreds.

Time: in IQ mode the GNSS stamp of each frame gives ``TimeAnchor(source="gps")`` (when the Kiwi
has a fix); otherwise the host clock at receipt minus the frame's duration gives
``TimeAnchor(source="host")`` at every (re)connect and every ``anchor_every_s``.
Loss: a sequence jump becomes ``Gap(cause=SEQ_GAP, lost=<samples>)``; a reconnect becomes
``Gap(cause=RECONNECT, lost=<estimated samples from the wall-clock outage>)`` plus a fresh anchor;
nothing is ever zero-filled.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamkit.core import events as E
from streamkit.core import tags as T
from streamkit.core.block import Source, SourceRead
from streamkit.core.context import Context
from streamkit.core.errors import ConfigError
from streamkit.core.registry import register
from streamkit.core.ring import SampleRing
from streamkit.core.tags import FormatChange, Gap, GapCause, TimeAnchor
from streamkit.core.types import StreamSpec, as_fraction
from streamkit.io.kiwi_secrets import install_log_redaction, resolve_password
from streamkit.protocols.kiwi_tally import WarningLimiter
from streamkit.protocols.kiwi_url import DEFAULT_KIWI_PORT, KiwiAddress, parse_kiwi_url

log = logging.getLogger("streamkit.kiwi")

DEFAULT_RATE = "12001.188"
MAX_REDIRECTS = 3
"""Redirects followed in a row (without audio in between) before the station gives up."""
install_log_redaction()  # websockets' debug log prints every frame, `SET auth t=kiwi p=...` included
_TS_COUNTER = itertools.count(1)


# --------------------------------------------------------------------------- retry policy
@dataclass(frozen=True, slots=True)
class Retry:
    """Reconnect after at least ``min_delay`` seconds (the backoff may wait longer)."""

    reason: str
    min_delay: float = 0.0
    redirect_url: str | None = None


@dataclass(frozen=True, slots=True)
class Fatal:
    """Do not reconnect; the station stops with this message."""

    reason: str


def classify(cause: Any) -> Retry | Fatal:
    """Default retry classification of a session's end.

    ``cause`` is a :class:`~streamkit.protocols.kiwi_events.Terminal` event or an exception from the
    transport. Busy servers, redirects, dropped or stalled connections and refused connections are
    retried; a bad password, a kick, an inactivity or 24-h limit are final (reconnecting would
    defeat the operator's policy).
    """
    from streamkit.protocols.kiwi_events import Terminal

    if isinstance(cause, Terminal):
        if cause.retryable:
            return Retry(f"{cause.kind.value}: {cause.message}", cause.retry_after or 0.0, cause.redirect_url)
        return Fatal(f"{cause.kind.value}: {cause.message}")
    if isinstance(cause, (ConnectionRefusedError, ConnectionResetError, TimeoutError, asyncio.TimeoutError, OSError, EOFError)):
        return Retry(f"{type(cause).__name__}: {cause}")
    try:
        import websockets.exceptions as wse

        if isinstance(cause, wse.InvalidStatus):
            code = cause.response.status_code
            if code in (404, 401, 403):
                return Fatal(f"HTTP {code} on the WebSocket upgrade")
            return Retry(f"HTTP {code}")
        if isinstance(cause, (wse.ConnectionClosed, wse.InvalidHandshake)):
            return Retry(f"{type(cause).__name__}: {cause}")
    except ImportError:  # pragma: no cover
        pass
    return Retry(f"{type(cause).__name__}: {cause}")


def backoff(initial: float = 1.0, factor: float = 1.618, cap: float = 60.0, jitter: float = 0.5) -> Iterator[float]:
    """Exponential delays with random jitter up front, growing to ``cap`` (websockets' shape)."""
    d = initial * (1.0 + random.random() * jitter)
    while True:
        yield min(d, cap)
        d *= factor


# --------------------------------------------------------------------------- shared loop
class KiwiLoop:
    """One asyncio event loop on one daemon thread, shared by every KiwiSource of the process."""

    _lock = threading.Lock()
    _instance: KiwiLoop | None = None

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="streamkit-kiwi-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @classmethod
    def get(cls) -> KiwiLoop:
        with cls._lock:
            if cls._instance is None or not cls._instance.thread.is_alive():
                cls._instance = cls()
            return cls._instance

    def submit(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)


# --------------------------------------------------------------------------- the block
@register("io.kiwi")
class KiwiSource(Source):
    """Receive one KiwiSDR channel.

    Ports:
        out: float32 mono audio (``iq``: complex64, I + jQ) at the rate the server announces
            (``MSG sample_rate``, e.g. 12001.188 Hz); until connected the stream is negotiated
            at ``expected_rate`` and a ``FormatChange`` follows if the server differs.
    Parameters:
        host, port: the receiver (default port 8073). ``url`` ("ws://host:port") may be given instead.
        freq_khz: dial frequency in kHz. mode: am, amn, lsb, usb, cw, nbfm, iq, ... (firmware list).
        low_cut, high_cut: passband in Hz relative to the carrier (None: the mode's default).
        password, user: channel password, name shown in the Kiwi's user list. The password may
            come instead from ``password_env`` (an environment variable's name) or ``password_file``
            (a file's path); it is never recorded in the block's parameters (graph files, describe,
            repr). It is sent only to the server configured here: after a redirect to another
            host or port it is withheld unless ``password_follows_redirect`` is True.
        compression: ADPCM (default) or 16-bit PCM for mono modes (IQ is never compressed).
        agc: True for AGC, False for manual gain ``man_gain`` dB.
        expected_rate: rate to negotiate before the server speaks (default 12001.188).
        buffer_s: capacity of the hand-off ring in seconds (overload drops oldest, counted).
        keepalive_s: keepalive period; stall_s: no-data watchdog (reconnect after this silence, or after
            this long with messages but no audio: ``no_audio``, naming the kinds and counts received).
        max_retries: give up after this many consecutive failed attempts (None: never).
        backoff_initial_s (0.5, what ``streamkit monitor`` runs with), backoff_cap_s: reconnect delays.
        anchor_every_s: host-clock re-anchoring period in mono modes.
        open_timeout_s: TCP + WebSocket handshake timeout.
        resume_after_wall: wall time (``time.time()``) at which an earlier process last received this
            station (``streamkit.distributed`` restarting a shard): the first frame is then preceded by
            ``Gap(RECONNECT)`` with the samples estimated lost since, as after a reconnect of this block.
    Tags:
        emits ``sk:time`` (gps or host), ``sk:gap`` (SEQ_GAP, RECONNECT), ``sk:format`` (rate).
    Events:
        ``source.state`` (connecting, open, streaming, retrying, fatal, closed), ``kiwi.smeter``
        (S-meter in dBm, every ``smeter_every_s``), ``kiwi.info`` (server version, rate...).
    Latency:
        0 items (frames are delivered as they arrive: 170 ms per ADPCM frame, 43 ms PCM/IQ).
    State:
        the connection; reset() does nothing (the stream is live).
    """

    live = True
    emits = (E.SOURCE_STATE, "kiwi.smeter", "kiwi.info")

    def __init__(
        self,
        *,
        host: str | None = None,
        port: int = 8073,
        url: str | None = None,
        freq_khz: float = 7100.0,
        mode: str = "lsb",
        low_cut: int | None = None,
        high_cut: int | None = None,
        password: str = "",
        password_env: str | None = None,
        password_file: str | None = None,
        password_follows_redirect: bool = False,
        user: str = "streamkit",
        compression: bool = True,
        agc: bool = True,
        man_gain: int = 50,
        expected_rate: Any = DEFAULT_RATE,
        buffer_s: float = 5.0,
        keepalive_s: float = 1.0,
        stall_s: float = 10.0,
        max_retries: int | None = None,
        backoff_initial_s: float = 0.5,
        backoff_cap_s: float = 60.0,
        anchor_every_s: float = 10.0,
        smeter_every_s: float = 1.0,
        open_timeout_s: float = 10.0,
        resume_after_wall: float | None = None,
        name: str | None = None,
        classify_fn: Callable[[Any], Retry | Fatal] | None = None,
    ) -> None:
        super().__init__(name=name)
        self._init_params.pop("classify_fn", None)
        self._init_params.pop("password", None)  # a secret is not a graph-file parameter
        from streamkit.protocols.kiwi_frames import MODES

        if url is not None:
            if not url.startswith(("ws://", "http://")):
                raise ConfigError(f"url must start with ws:// (got {url!r}); KiwiSDR has no TLS")
            try:
                addr = parse_kiwi_url(url, default_port=DEFAULT_KIWI_PORT)
            except ValueError as exc:
                raise ConfigError(f"bad url {url!r}: {exc}") from None
            host, port = addr.host, addr.port
        elif host and host.startswith("[") and host.endswith("]"):
            host = host[1:-1]  # an IPv6 literal written as in a URL
        if not host:
            raise ConfigError("KiwiSource needs host (or url)")
        if mode not in MODES:
            raise ConfigError(f"unknown KiwiSDR mode {mode!r} (one of {', '.join(sorted(MODES))})")
        if not (0 <= float(freq_khz) <= 32000):
            raise ConfigError(f"freq_khz {freq_khz} out of the HF range 0..32000 kHz")
        if not 0 < int(port) < 65536:
            raise ConfigError(f"bad port {port}")
        self.host = host
        self.port = int(port)
        self.freq_khz = float(freq_khz)
        self.mode = mode
        self.low_cut = low_cut
        self.high_cut = high_cut
        self.password = resolve_password(password, env=password_env, file=password_file)
        self.password_follows_redirect = bool(password_follows_redirect)
        self.user = user
        self.compression = bool(compression)
        self.agc = bool(agc)
        self.man_gain = int(man_gain)
        self.expected_rate = as_fraction(expected_rate)
        self.buffer_s = float(buffer_s)
        self.keepalive_s = float(keepalive_s)
        self.stall_s = float(stall_s)
        self.max_retries = max_retries
        self.backoff_initial_s = float(backoff_initial_s)
        self.backoff_cap_s = float(backoff_cap_s)
        self.anchor_every_s = float(anchor_every_s)
        self.smeter_every_s = float(smeter_every_s)
        self.open_timeout_s = float(open_timeout_s)
        self.resume_after_wall = None if resume_after_wall is None else float(resume_after_wall)
        self.classify_fn = classify_fn or classify
        self.iq = mode in ("iq", "drm", "sas", "qam")
        # run-time state (start())
        self._ring: SampleRing | None = None
        self._future: Any = None
        self._stop_evt: asyncio.Event | None = None
        self._pending: collections.deque[tuple[str, Any]] = collections.deque()
        self._finished = False
        self.fatal_message: str | None = None
        self.stats: dict[str, Any] = {}

    # -- negotiation / lifecycle -------------------------------------------------------------------
    def _spec(self, rate: Any) -> StreamSpec:
        return StreamSpec(rate, 1, np.complex64 if self.iq else np.float32)

    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        return {"out": self._spec(self.expected_rate)}

    def start(self, ctx: Context) -> None:
        spec = ctx.output_spec()
        self._ctx = ctx
        self._ring = SampleRing(spec, max(1024, int(self.buffer_s * float(spec.rate))), notify=ctx.notify)
        self._finished = False
        self.fatal_message = None
        self.stats = {"connects": 0, "reconnects": 0, "frames": 0, "lost_samples": 0, "violations": 0, "last_smeter_dbm": None}
        self._rate = spec.rate
        if self.compression:  # compile (or load) the ADPCM decoder now, not on the loop at the first frame
            from streamkit.protocols.adpcm import AdpcmDecoder

            AdpcmDecoder().decode(b"\x00")
        self._loop = KiwiLoop.get()
        self._future = self._loop.submit(self._main())

    def stop(self) -> None:
        if self._future is not None and self._stop_evt is not None:
            try:
                self._loop.loop.call_soon_threadsafe(self._stop_evt.set)
                self._future.result(timeout=5)
            except Exception:
                self._future.cancel()
        self._future = None

    # -- graph side ----------------------------------------------------------------------------------
    def read(self, max_items: int, ctx: Context) -> SourceRead | None:
        ring = self._ring
        assert ring is not None
        while self._pending:
            kind, payload = self._pending.popleft()
            at = ring.delivered
            ctx.emit(kind, payload, span=(at, at))
        x, tags = ring.read(max_items)
        if x.shape[0] == 0 and not tags:
            if self._finished and ring.available == 0:
                return None
            return SourceRead(x)
        return SourceRead(x, tags)

    def wait(self, timeout: float) -> bool:
        return True

    # -- asyncio side ----------------------------------------------------------------------------------
    def _state(self, state: str, detail: str = "", retry_in: float | None = None, attempt: int = 0) -> None:
        self._pending.append((E.SOURCE_STATE, E.SourceState(state, detail, retry_in, attempt)))
        if self._ring is not None and self._ring.notify is not None:
            self._ring.notify.set()

    async def _main(self) -> None:
        self._stop_evt = asyncio.Event()
        delays = backoff(self.backoff_initial_s, cap=self.backoff_cap_s)
        failures = 0
        last_audio_wall: float | None = self.resume_after_wall
        origin = KiwiAddress(self.host, self.port)
        addr, password = origin, self.password
        redirects = 0
        try:
            while not self._stop_evt.is_set():
                self._state("connecting", addr.ws_url(), attempt=failures + 1)
                outcome, got_audio, last_wall = await self._session(addr, password, last_audio_wall)
                if last_wall is not None:
                    last_audio_wall = last_wall
                if self._stop_evt.is_set():
                    break
                if got_audio:
                    failures = 0
                    redirects = 0
                    delays = backoff(self.backoff_initial_s, cap=self.backoff_cap_s)
                decision = self.classify_fn(outcome)
                if isinstance(decision, Fatal):
                    self._fatal(decision.reason)
                    log.error("%s: %s", self.name, decision.reason)
                    break
                failures += 1
                if self.max_retries is not None and failures > self.max_retries:
                    self._fatal(f"gave up after {failures} attempts: {decision.reason}")
                    break
                reason = decision.reason
                if decision.redirect_url:
                    redirects += 1
                    try:
                        target = parse_kiwi_url(decision.redirect_url)
                    except ValueError as exc:
                        self._fatal(f"redirect to an invalid URL {decision.redirect_url[:200]!r}: {exc}")
                        break
                    if redirects > MAX_REDIRECTS:
                        self._fatal(f"too many redirects ({redirects} in a row), the last to {target.ws_url()}")
                        break
                    addr = target
                    if target.same_server(origin) or self.password_follows_redirect:
                        password = self.password
                    else:
                        password = ""
                        if self.password:
                            reason += "; the password is not sent to another server (--password-follows-redirect to send it)"
                delay = max(next(delays), decision.min_delay)
                self._state("retrying", reason, retry_in=round(delay, 3), attempt=failures)
                try:
                    await asyncio.wait_for(self._stop_evt.wait(), timeout=delay)
                except asyncio.TimeoutError:
                    pass
        except Exception as exc:  # a bug here must not end the station without a word
            log.exception("%s: internal error", self.name)
            self._fatal(f"internal error: {type(exc).__name__}: {exc}")
        finally:
            detail = self.fatal_message or ("stopped" if self._stop_evt.is_set() else "ended")
            self._state("closed", detail)  # queued before _finished, so read() delivers it
            self._finished = True
            if self._ring is not None:
                self._ring.close()

    def _fatal(self, reason: str) -> None:
        self.fatal_message = reason
        self._state("fatal", reason)

    async def _session(self, addr: KiwiAddress, password: str, last_audio_wall: float | None) -> tuple[Any, bool, float | None]:
        """One connection. Returns (cause of its end, whether audio flowed, wall time of last audio)."""
        import websockets
        from websockets.asyncio.client import connect

        from streamkit import protocols as K

        proto = K.KiwiClientProtocol(
            self.freq_khz, self.mode, self.low_cut, self.high_cut, password=password, user=self.user, compression=self.compression,
            agc=self.agc, man_gain=self.man_gain, keepalive_interval=self.keepalive_s, stall_timeout=self.stall_s,
        )  # fmt: skip
        # a fresh <ts> per session (the server silently ignores a duplicate SND on the same <ts>);
        # the process-wide counter makes two stations started in the same millisecond differ
        ts = (int(time.time() * 1000) + next(_TS_COUNTER)) & 0xFFFFFFFF
        uri = addr.ws_url(proto.url_path(ts))
        ring = self._ring
        assert ring is not None
        got_audio = False
        last_wall: float | None = None
        first_frame = True
        last_anchor_wall = 0.0
        last_smeter = 0.0
        outcome: Any = None
        warnings = WarningLimiter()
        try:
            ws = await connect(uri, compression=None, ping_interval=None, max_size=2**22, open_timeout=self.open_timeout_s, close_timeout=1)
        except Exception as exc:  # refused, DNS, handshake, timeout
            return exc, False, None
        self.stats["connects"] += 1
        self._state("open", uri)
        stop_evt = self._stop_evt
        assert stop_evt is not None

        async def ticker() -> None:
            while True:
                await asyncio.sleep(0.25)
                proto.tick(time.monotonic())
                await flush()
                if proto.terminal is not None:
                    await ws.close()
                    return

        async def flush() -> None:
            for cmd in proto.data_to_send():
                await ws.send(cmd)

        tick_task = asyncio.create_task(ticker())
        stop_task = asyncio.create_task(stop_evt.wait())
        try:
            proto.connection_made(time.monotonic())
            await flush()
            recv = ws.__aiter__()
            while True:
                nxt = asyncio.ensure_future(recv.__anext__())
                done, _ = await asyncio.wait({nxt, stop_task}, return_when=asyncio.FIRST_COMPLETED)
                if stop_task in done:
                    nxt.cancel()
                    outcome = "stopped"
                    break
                try:
                    msg = nxt.result()
                except StopAsyncIteration:
                    proto.connection_lost(time.monotonic())
                    msg = None
                except websockets.exceptions.ConnectionClosed as exc:
                    proto.connection_lost(time.monotonic())
                    outcome = exc
                    msg = None
                if msg is not None:
                    proto.receive_message(msg, time.monotonic())
                for ev in proto.events_received():
                    if isinstance(ev, K.AudioFrame):
                        now_wall = time.time()
                        n = ev.samples.shape[0]
                        if first_frame:
                            first_frame = False
                            if last_audio_wall is not None:
                                lost = int(round((now_wall - last_audio_wall) * float(self._rate))) - n
                                ring.mark_gap(Gap(lost=max(lost, 0), cause=GapCause.RECONNECT, detail="reconnected"))
                        anchor: TimeAnchor | None = None
                        if ev.gps is not None and ev.gps.valid:
                            anchor = TimeAnchor(ev.gps.to_utc_ns(time.time_ns()), "gps", 1000)
                        elif now_wall - last_anchor_wall >= self.anchor_every_s:
                            dur = n / float(self._rate)
                            anchor = TimeAnchor(int((now_wall - dur) * 1e9), "host", int(dur * 1e9))
                        if anchor is not None and (anchor.source == "gps" or now_wall - last_anchor_wall >= self.anchor_every_s):
                            ring.mark_anchor(anchor)
                            last_anchor_wall = now_wall
                        samples = ev.samples
                        ring.write(samples.reshape(n, 1))
                        got_audio = True
                        last_wall = now_wall
                        self.stats["frames"] += 1
                        self.stats["last_smeter_dbm"] = ev.smeter_dbm
                        if now_wall - last_smeter >= self.smeter_every_s:
                            last_smeter = now_wall
                            self._pending.append(("kiwi.smeter", {"dbm": ev.smeter_dbm, "seq": ev.seq, "adc_overload": ev.adc_overload}))
                    elif isinstance(ev, K.SequenceGap):
                        if ev.lost_samples > 0:
                            self.stats["lost_samples"] += ev.lost_samples
                            ring.mark_gap(Gap(lost=ev.lost_samples, cause=GapCause.SEQ_GAP, detail=f"seq {ev.expected}->{ev.got}"))
                            last_anchor_wall = 0.0  # re-anchor after a loss
                        elif ev.reason != K.GapReason.LOST:
                            self._pending.append((E.SOURCE_STATE, E.SourceState("warning", f"sequence {ev.reason.value}: {ev.expected}->{ev.got}")))
                    elif isinstance(ev, K.SampleRate):
                        rate = as_fraction(f"{ev.rate:.6f}".rstrip("0").rstrip("."))
                        if rate != self._rate:
                            self._rate = rate
                            ring.spec = self._spec(rate)
                            ring.mark(T.FORMAT, FormatChange(self._spec(rate)))
                        self._pending.append(("kiwi.info", {"sample_rate": ev.rate, "audio_rate": ev.nominal}))
                        self._state("streaming", f"sample_rate={ev.rate}")
                    elif isinstance(ev, K.ProtocolViolation):
                        self.stats["violations"] += 1
                        text = warnings.offer(f"protocol violation: {ev.reason}", time.monotonic())
                        if text is not None:  # a flood of bad messages is summarised, not echoed one event each
                            self._pending.append((E.SOURCE_STATE, E.SourceState("warning", text)))
                    elif isinstance(ev, K.Terminal):
                        outcome = ev
                    elif isinstance(ev, K.ServerInfo) and ev.key in ("version_maj", "version_min"):
                        self._pending.append(("kiwi.info", {ev.key: ev.value}))
                await flush()
                if proto.terminal is not None or msg is None:
                    if outcome is None:
                        outcome = proto.terminal
                    break
        except Exception as exc:
            outcome = exc
        finally:
            tick_task.cancel()
            stop_task.cancel()
            try:
                await ws.close()
            except Exception:
                pass
        if outcome is None:
            outcome = proto.terminal
        if ring.notify is not None:
            ring.notify.set()
        return outcome, got_audio, last_wall


def parse_station(text: str) -> dict[str, Any]:
    """``host:port:freq_khz:mode`` (port and mode optional) -> KiwiSource parameters.

    An IPv6 address is written in brackets: ``[::1]:8073:7100:lsb``.
    """
    if text.startswith("["):
        literal, sep, rest = text[1:].partition("]:")
        if not sep or not literal:
            raise ConfigError(f"station {text!r}: want [ipv6]:port:freq_khz[:mode]")
        parts = [literal, *rest.split(":")]
    else:
        parts = text.split(":")
    if len(parts) < 2 or len(parts) > 4:
        raise ConfigError(f"station {text!r}: want host:port:freq_khz[:mode] or host:freq_khz[:mode]")
    host = parts[0]
    try:
        if len(parts) == 2:
            return {"host": host, "port": 8073, "freq_khz": float(parts[1]), "mode": "lsb"}
        if len(parts) == 3:
            if parts[2].isalpha():
                return {"host": host, "port": 8073, "freq_khz": float(parts[1]), "mode": parts[2]}
            return {"host": host, "port": int(parts[1]), "freq_khz": float(parts[2]), "mode": "lsb"}
        return {"host": host, "port": int(parts[1]), "freq_khz": float(parts[2]), "mode": parts[3]}
    except ValueError:
        raise ConfigError(f"station {text!r}: port must be an integer and frequency a number in kHz") from None


def station_name(p: Mapping[str, Any]) -> str:
    """A file-system-safe station name, e.g. ``kiwi.example.org-8073-7100lsb``."""
    f = float(p["freq_khz"])
    fs = f"{f:.3f}".rstrip("0").rstrip(".")
    return f"{p['host']}-{p.get('port', 8073)}-{fs}{p.get('mode', 'lsb')}".replace("/", "_").replace(":", "_")
