"""WavSink: record a stream to an audio file, with a JSON sidecar that says what was lost.

Audio files store an integer sample rate, so a stream at the KiwiSDR's 12001.188 Hz is written at
``int(round(rate))`` = 12001 Hz, as kiwirecorder does; the exact rate goes into the sidecar. The
sidecar ``<path>.json`` (e.g. ``rec.wav.json``), written when the sink stops, holds the exact rate
(``str(Fraction)``), the item count, the channel layout and every ``Gap`` and ``TimeAnchor`` tag
seen, so a recording states where items were lost and how its items map to UTC.

IQ streams (complex64) are written as interleaved real channels: ``I, Q`` for one complex channel
(``I0, Q0, I1, Q1, ...`` for several).

The file takes the format of the items it receives, not of the format negotiated before the
stream began: a live source learns its true rate from the server (a KiwiSDR reports e.g. 11999.028
or 20250.3 Hz) and announces it with a ``FormatChange`` before its first item; the file, opened at
``start()`` so that a bad path fails before any audio, is then re-created at that rate. A format
change *after* items were written (a reconnect to a server reporting another rate) never stops the
recording and never mis-rates it: the file is closed with its sidecar and the recording goes on in
``<stem>.1<suffix>`` (then ``.2``...), with a ``record.file`` event saying where and why; each
file's sidecar names the one before and after it and the stream index of its first item.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from streamkit.core.block import Sink
from streamkit.core.errors import ConfigError
from streamkit.core.registry import register
from streamkit.core.tags import GAP, TIME, Gap, GapCause, TimeAnchor
from streamkit.core.types import Chunk, StreamSpec
from streamkit.io.outputs import OutputPathError, check_output_path, open_soundfile, write_text

if TYPE_CHECKING:
    import soundfile

    from streamkit.core.context import Context

__all__ = ["WavSink", "read_sidecar"]

log = logging.getLogger("streamkit.io.wav_sink")

_SUBTYPES = ("PCM_16", "PCM_24", "PCM_32", "FLOAT")
_FORMATS = {".wav": "WAV", ".flac": "FLAC", ".ogg": "OGG", ".aiff": "AIFF", ".aif": "AIFF", ".w64": "W64", ".rf64": "RF64"}
SIDECAR_VERSION = 1
RECORD_FILE = "record.file"  #: event: the recording continues in a new file (payload: path, previous, rate, reason)


def read_sidecar(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load the sidecar of the recording at ``path`` (``rate`` comes back as a :class:`Fraction`)."""
    p = Path(os.fspath(path) + ".json")
    d: dict[str, Any] = json.loads(p.read_text())
    d["rate"] = Fraction(d["rate"])
    return d


@register("io.wav_sink")
class WavSink(Sink):
    """Write items to an audio file through soundfile, plus a ``<path>.json`` sidecar.

    Ports:
        in: float32 (or float64/int16) audio at any rate and channel count, or complex64 IQ.
    Parameters:
        path: output file; the suffix picks the container (``.wav`` default; ``.flac``, ``.w64``,
            ``.rf64``, ``.aiff`` also work where the subtype allows). Parent directories are created.
        subtype: ``"PCM_16"`` (default), ``"PCM_24"``, ``"PCM_32"`` or ``"FLOAT"``. Integer subtypes
            clip to [-1, 1] first (libsndfile would otherwise wrap); clipped values are counted.
        sidecar: write ``<path>.json`` at stop (default True).
    Tags:
        Consumes ``sk:gap`` and ``sk:time``: all of them are listed in the sidecar with their offsets
        (items from the start of the file). Follows ``sk:format`` (see the module docstring).
    Events:
        ``record.file`` when a format change after the first items makes the recording go on in a
        new file: ``{"path", "previous", "rate" (exact), "rate_hz", "file_rate", "reason"}``.
    Latency:
        0 items (what is consumed is handed to libsndfile at once; libsndfile buffers).
    State:
        The open file and the counters; ``start()`` creates/truncates the file (re-created at the
        stream's rate if it changes before the first item), ``stop()`` closes it and writes the sidecar.

    Sidecar fields:
        ``version``, ``path``, ``rate`` (exact, ``"3000297/250"``), ``rate_hz``, ``file_rate`` (what
        the header says), ``items``, ``channels`` (of the stream), ``file_channels``, ``dtype``,
        ``layout`` (``"audio"`` or ``"iq"``), ``subtype``, ``clipped``, ``gaps`` (count),
        ``lost_items`` (sum of known losses), ``stream_offset`` (stream index of the file's first
        item), ``previous`` / ``next`` (the neighbouring files of a recording split by a format
        change, or null), ``tags``: a list of ``{"offset", "key": "sk:gap", "cause", "lost", "filled",
        "detail"}`` and ``{"offset", "key": "sk:time", "utc_ns", "source", "uncertainty_ns"}`` in
        stream order. The WAV header's ``comment`` (LIST INFO) also states the exact rate.
    """

    emits = (RECORD_FILE,)

    def __init__(self, *, path: str | os.PathLike[str], subtype: str = "PCM_16", sidecar: bool = True, name: str | None = None) -> None:
        super().__init__(name=name)
        self.path = os.fspath(path)
        if not self.path:
            raise ConfigError("path must not be empty")
        st = str(subtype).upper()
        if st not in _SUBTYPES:
            raise ConfigError(f"subtype must be one of {list(_SUBTYPES)}, got {subtype!r}")
        self.subtype = st
        suffix = Path(self.path).suffix.lower()
        self._format = _FORMATS.get(suffix, "WAV")
        if suffix and suffix not in _FORMATS:
            raise ConfigError(f"io.wav_sink: unknown file type {suffix!r} for {self.path} (use one of {sorted(_FORMATS)})")
        if self._format == "OGG":
            self.subtype = "VORBIS"  # an OGG file holds Vorbis (lossy): for listening, not for analysis
        if self._format == "FLAC" and st in ("FLOAT", "PCM_32"):
            raise ConfigError(f"io.wav_sink: FLAC cannot store subtype {st} (use PCM_16 or PCM_24)")
        self.sidecar = bool(sidecar)
        self._spec: StreamSpec | None = None
        self._sf: soundfile.SoundFile | None = None
        self._file_spec: StreamSpec | None = None  # the format of the open file
        self.file_path: str = self.path  # the file being written (``path``, then ``<stem>.1<suffix>``... after a format change)
        self._part = 0
        self._stream_pos = 0  # stream items written, over every file
        self._prev_file: str | None = None
        self._reset_counters()

    # -- lifecycle --------------------------------------------------------------------------------
    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        spec = inputs["in"]
        if spec.dtype not in (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int16), np.dtype(np.complex64)):
            raise ConfigError(f"io.wav_sink: cannot write {spec.dtype} items (float32, float64, int16 or complex64 IQ)")
        file_rate = int(round(float(spec.rate)))
        if file_rate < 1:
            raise ConfigError(f"io.wav_sink: rate {float(spec.rate):g} Hz rounds to {file_rate} Hz; audio files need >= 1 Hz")
        self._spec = spec
        return {}

    def start(self, ctx: Context | None) -> None:
        if self._sf is not None:  # a restart after a format change of the same spec: keep writing
            return
        spec = ctx.input_spec() if ctx is not None else self._spec
        if spec is None:
            raise ConfigError("io.wav_sink: start() before negotiate()")
        self._spec = spec
        self._part = 0
        self._stream_pos = 0
        self._prev_file: str | None = None
        self._reset_counters()
        try:
            import soundfile as sf
        except (ImportError, OSError) as exc:
            raise ConfigError(f"io.wav_sink: soundfile/libsndfile unavailable: {exc}") from None
        if not sf.check_format(self._format, self.subtype):
            raise ConfigError(f"io.wav_sink: {self._format} cannot store subtype {self.subtype}")
        if self.sidecar:
            try:
                check_output_path(self.path + ".json")  # refused now, not when the recording ends
            except OutputPathError:
                raise
            except OSError as exc:
                raise ConfigError(f"io.wav_sink: cannot create {self.path}.json: {exc.strerror or exc}") from None
        self._open(self.path, spec)

    def _open(self, path: str, spec: StreamSpec) -> None:
        """Create (truncate) ``path`` for items of ``spec``."""
        self._file_spec = spec
        self._iq = spec.dtype == np.dtype(np.complex64)
        self._file_channels = spec.channels * (2 if self._iq else 1)
        self._file_rate = int(round(float(spec.rate)))
        try:
            f = open_soundfile(path, samplerate=self._file_rate, channels=self._file_channels, subtype=self.subtype, format=self._format)
        except OutputPathError:  # a symlink, FIFO, device ... at the path: said as it is
            raise
        except Exception as exc:
            raise ConfigError(f"io.wav_sink: cannot create {path}: {str(exc).strip() or type(exc).__name__}") from None
        try:
            f.comment = f"streamkit: true sample rate {float(spec.rate):.6f} Hz ({spec.rate}); the header holds {self._file_rate} Hz"
        except Exception:  # a container without text chunks
            pass
        self._sf = f
        self.file_path = path

    def _follow_format(self, ctx: Context | None) -> None:
        """The stream's format changed since the file was opened: re-create the file if it holds no
        item yet, else close it (with its sidecar) and go on in the next ``<stem>.<k><suffix>``."""
        spec = self._spec
        assert spec is not None and self._sf is not None
        if self._items == 0:
            self._sf.close()
            self._sf = None
            self._open(self.file_path, spec)
            return
        old = self.file_path
        old_rate = float(self._file_spec.rate)
        self._close_file(next_path := self._part_path(self._part + 1))
        self._part += 1
        self._prev_file = os.path.basename(old)
        self._reset_counters()
        self._open(next_path, spec)
        reason = f"format change from {old_rate:g} Hz to {float(spec.rate):g} Hz ({spec}) after {self._stream_pos} items"
        log.warning("io.wav_sink: %s: %s; recording goes on in %s", old, reason, next_path)
        if ctx is not None:
            ctx.emit(RECORD_FILE, {"path": next_path, "previous": old, "rate": str(spec.rate), "rate_hz": float(spec.rate),
                                   "file_rate": self._file_rate, "reason": reason}, span=(self._stream_pos, self._stream_pos))  # fmt: skip

    def _part_path(self, k: int) -> str:
        p = Path(self.path)
        return str(p.with_name(f"{p.stem}.{k}{p.suffix}"))

    def consume(self, chunk: Chunk, ctx: Context | None) -> None:
        if self._sf is None:
            raise RuntimeError(f"io.wav_sink: {self.path} is not open (consume before start, or after stop)")
        if self._spec is not None and self._spec != self._file_spec:
            self._follow_format(ctx)
        base = self._stream_pos - self._items  # stream index of the file's first item
        for t in chunk.tags:
            if t.key == GAP:
                self._tags.append(_gap_record(t.offset - base, t.value))
                self._gaps += 1
                if isinstance(t.value, Gap) and t.value.lost:
                    self._lost += int(t.value.lost)
            elif t.key == TIME:
                self._tags.append(_anchor_record(t.offset - base, t.value))
        n = len(chunk)
        if n == 0:
            return
        x = chunk.samples
        if self._iq:
            x = np.ascontiguousarray(x).view(np.float32).reshape(n, self._file_channels)
        if self.subtype.startswith("PCM") and x.dtype != np.int16:
            over = np.abs(x) > 1.0
            if over.any():
                self._clipped += int(np.count_nonzero(over))
                x = np.clip(x, -1.0, 1.0)
        self._sf.write(x)
        self._items += n
        self._stream_pos += n

    def stop(self) -> None:
        """Close the file and write the sidecar. Never raises (failures are logged)."""
        self._close_file(None)

    def _close_file(self, next_path: str | None) -> None:
        f, self._sf = self._sf, None
        if f is None:
            return
        path = self.file_path
        try:
            f.close()
        except Exception:
            log.exception("io.wav_sink: closing %s failed", path)
        if self.sidecar:
            try:
                d = self.describe()
                d["next"] = os.path.basename(next_path) if next_path else None
                write_text(path + ".json", json.dumps(d, indent=1))
            except Exception:
                log.exception("io.wav_sink: writing the sidecar of %s failed", path)

    # -- description ------------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """The sidecar's content (what has been written so far)."""
        spec = self._file_spec if self._file_spec is not None else self._spec
        assert spec is not None
        return {
            "version": SIDECAR_VERSION,
            "path": os.path.basename(self.file_path or self.path),
            "rate": str(spec.rate),
            "rate_hz": float(spec.rate),
            "file_rate": self._file_rate,
            "items": self._items,
            "channels": spec.channels,
            "file_channels": self._file_channels,
            "dtype": str(spec.dtype),
            "layout": "iq" if self._iq else "audio",
            "subtype": self.subtype,
            "clipped": self._clipped,
            "gaps": self._gaps,
            "lost_items": self._lost,
            "stream_offset": self._stream_pos - self._items,
            "previous": self._prev_file,
            "next": None,
            "tags": list(self._tags),
        }

    @property
    def items(self) -> int:
        return self._items

    def _reset_counters(self) -> None:
        self._items = 0
        self._gaps = 0
        self._lost = 0
        self._clipped = 0
        self._tags: list[dict[str, Any]] = []
        self._iq = False
        self._file_channels = 0
        self._file_rate = 0


def _gap_record(offset: int, g: Any) -> dict[str, Any]:
    if not isinstance(g, Gap):
        return {"offset": int(offset), "key": GAP, "value": str(g)}
    cause = g.cause.value if isinstance(g.cause, GapCause) else str(g.cause)
    return {"offset": int(offset), "key": GAP, "cause": cause, "lost": g.lost, "filled": g.filled, "detail": g.detail}


def _anchor_record(offset: int, a: Any) -> dict[str, Any]:
    if not isinstance(a, TimeAnchor):
        return {"offset": int(offset), "key": TIME, "value": str(a)}
    return {"offset": int(offset), "key": TIME, "utc_ns": int(a.utc_ns), "source": a.source, "uncertainty_ns": int(a.uncertainty_ns or 0)}
