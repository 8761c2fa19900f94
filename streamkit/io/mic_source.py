"""MicSource: live audio from a sound card through PortAudio (python-sounddevice).

The design follows python-sounddevice's own real-time contract:

* The PortAudio callback only copies ``indata`` into a bounded :class:`~streamkit.core.ring.SampleRing`
  and stamps marks on it; it never blocks, never allocates beyond the copy, never raises (a failure
  is stored and raised by the graph thread on its next :meth:`MicSource.read`).
* ``status.input_overflow`` (PortAudio discarded input before this block) becomes a
  ``Gap(lost=None, cause=XRUN)`` mark at the first item of the block, plus a fresh time anchor. The
  runtime turns it into ``stream.gap`` + ``stream.xrun`` events and counts it in ``xruns``. Flags are
  evidence, not truth (PortAudio/portaudio#171), so they are reported, never acted on otherwise.
* If the graph falls behind, the ring drops the *oldest* items and the next read starts with a
  counted ``Gap(cause=OVERLOAD)``: latency can never creep (python-sounddevice#384).
* ``blocksize=0`` and ``latency="high"`` are the defaults, as the library recommends for
  robustness; the latency PortAudio actually chose is reported in a ``source.state`` event.

Time: ``time.inputBufferAdcTime`` is the capture time of the block's first item on the stream's
clock; ``time.currentTime`` is that clock's "now" at the callback (the same value ``Stream.time``
returns, read without a PortAudio call). The anchor is therefore
``utc_now - (currentTime - inputBufferAdcTime)``, stamped at the start, after every overflow and
every ``anchor_every_s`` seconds of captured audio. Host APIs that report no stream times (all
zeros) or implausible ones get a ``source="host"`` anchor instead: ``utc_now`` minus the block's
duration and the stream's latency.

sounddevice is imported lazily (in ``negotiate``/``start``/``list_devices``), never at module level,
so machines without PortAudio can import :mod:`streamkit.io`. Tests pass
``backend=streamkit.testing.FakeSoundDevice()``.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from streamkit.core import events as E
from streamkit.core.block import Source, SourceRead
from streamkit.core.errors import ConfigError, SourceError
from streamkit.core.registry import register
from streamkit.core.ring import SampleRing
from streamkit.core.tags import GAP as TAG_GAP
from streamkit.core.tags import Gap, GapCause, TimeAnchor
from streamkit.core.types import StreamSpec, Tag, as_fraction

if TYPE_CHECKING:
    from streamkit.core.context import Context

__all__ = ["MicSource", "format_devices", "import_sounddevice", "list_devices"]

log = logging.getLogger("streamkit.io.mic")

PORTAUDIO_HINT = "install PortAudio with `apt-get install libportaudio2` (Debian/Ubuntu)"


def _line(exc: BaseException) -> str:
    return str(exc).strip().replace("\n", " ") or type(exc).__name__


def import_sounddevice(error: type[Exception] = ConfigError) -> Any:
    """Import :mod:`sounddevice`, turning a missing PortAudio into one clear ``error`` line.

    Raises:
        ConfigError (or ``error``): PortAudio's shared library or the sounddevice package is missing.
    """
    try:
        import sounddevice
    except OSError as exc:  # sounddevice raises OSError("PortAudio library not found")
        raise error(f"io.mic: {_line(exc)}; {PORTAUDIO_HINT}") from None
    except ImportError as exc:
        raise error(f"io.mic: the sounddevice package is not installed ({_line(exc)}); `pip install sounddevice`") from None
    return sounddevice


def _portaudio_error(backend: Any) -> tuple[type[BaseException], ...]:
    err = getattr(backend, "PortAudioError", None)
    return (err,) if isinstance(err, type) and issubclass(err, BaseException) else ()


def _default_input_index(backend: Any) -> int | None:
    try:
        dev = backend.default.device
        idx = dev[0] if isinstance(dev, (list, tuple)) or hasattr(dev, "__getitem__") else dev
        if isinstance(idx, (int, np.integer)) and idx >= 0:
            return int(idx)
    except Exception:
        pass
    try:
        d = backend.query_devices(kind="input")
        idx = d.get("index") if isinstance(d, Mapping) else None
        return int(idx) if idx is not None else None
    except Exception:
        return None


def list_devices(backend: Any = None) -> list[dict[str, Any]]:
    """The audio devices PortAudio sees, as plain dicts.

    Each dict has ``index``, ``name``, ``hostapi`` (name when known), ``max_input_channels``,
    ``max_output_channels``, ``default_samplerate`` and ``default_input`` (bool).

    Args:
        backend: a sounddevice-like module (default: import sounddevice).

    Raises:
        ConfigError: PortAudio is missing (with the install hint).
    """
    sd = backend if backend is not None else import_sounddevice(ConfigError)
    try:
        devs = list(sd.query_devices())
    except Exception as exc:
        raise ConfigError(f"io.mic: cannot list audio devices: {_line(exc)}") from None
    hostapis: list[str] = []
    qh = getattr(sd, "query_hostapis", None)
    if qh is not None:
        try:
            hostapis = [str(h.get("name", "")) for h in qh()]
        except Exception:
            hostapis = []
    default_in = _default_input_index(sd)
    out: list[dict[str, Any]] = []
    for i, d in enumerate(devs):
        idx = int(d.get("index", i))
        ha = d.get("hostapi", "")
        if isinstance(ha, (int, np.integer)) and 0 <= ha < len(hostapis):
            ha = hostapis[int(ha)]
        out.append(
            {
                "index": idx,
                "name": str(d.get("name", "")),
                "hostapi": ha,
                "max_input_channels": int(d.get("max_input_channels", 0)),
                "max_output_channels": int(d.get("max_output_channels", 0)),
                "default_samplerate": float(d.get("default_samplerate", 0.0)),
                "default_input": idx == default_in,
            }
        )
    return out


def format_devices(devices: list[dict[str, Any]] | None = None, backend: Any = None) -> str:
    """A readable table of :func:`list_devices` (what ``streamkit devices`` prints).

    The default input device is marked with ``>``; devices without input channels are listed too
    (marked ``out only``) so a user can see why their headset does not show up as a microphone.
    """
    devs = list_devices(backend) if devices is None else devices
    if not devs:
        return "no audio devices found (is a sound card or USB microphone connected? inside a container, pass /dev/snd through)"
    lines = [f"  {'#':>3}  {'name':<40} {'in':>3} {'out':>3} {'rate':>8}  host API"]
    for d in devs:
        mark = ">" if d.get("default_input") else " "
        note = "" if d["max_input_channels"] > 0 else "  (out only)"
        lines.append(
            f"{mark} {d['index']:>3}  {str(d['name'])[:40]:<40} {d['max_input_channels']:>3} {d['max_output_channels']:>3} "
            f"{d['default_samplerate']:>8.0f}  {d.get('hostapi', '')}{note}"
        )
    lines.append("  > default input;  use io.mic device=<index or part of the name>")
    return "\n".join(lines)


@register("io.mic")
class MicSource(Source):
    """Live audio from an input device (microphone, line-in, a USB sound card on a receiver).

    Ports:
        out: float32, ``rate`` Hz (the device default when not given), ``channels`` channels.
    Parameters:
        device: None for the default input, an int index, or a case-insensitive part of the name
            (see ``streamkit devices``).
        rate: capture rate in Hz; None asks the device for its default rate (this is the only
            case in which ``negotiate()`` talks to PortAudio).
        channels: input channels to capture.
        blocksize: frames per callback; 0 (default) lets PortAudio choose (most robust).
        latency: ``"high"`` (default, robust), ``"low"`` or seconds.
        buffer_s: capacity of the hand-off ring in seconds (default 2 s); when the graph falls
            behind by more, the oldest items are dropped into a counted ``Gap(OVERLOAD)``.
        anchor_every_s: seconds of audio between periodic time anchors (default 10 s).
        backend: a sounddevice-like module (``streamkit.testing.FakeSoundDevice()`` in tests);
            None imports sounddevice. Not part of the block's serialised parameters.
    Tags:
        ``sk:time`` TimeAnchor(source="device") at item 0, after every overflow and every
        ``anchor_every_s``; ``sk:gap`` Gap(lost=None, cause=XRUN, detail=<flags>) at the first item
        after a device overflow; ``sk:gap`` Gap(lost=k, cause=OVERLOAD) (from the ring) at the first
        item after items were dropped because the graph fell behind.
    Events:
        ``source.state``: ``open`` (device, rate, actual latency) at start and ``closed`` (counters)
        at stop. The runtime adds ``stream.gap``/``stream.xrun`` for the gap tags.
    Latency:
        0 items of algorithmic latency; the capture latency PortAudio reports (``latency_s``
        attribute after start) is reported in the ``open`` event.
    State:
        The open stream, the ring and the counters ``callbacks``, ``overflows``, ``frames``;
        ``start()`` opens a fresh stream and ring, ``stop()`` closes both.
    """

    live = True
    emits = (E.SOURCE_STATE,)

    callbacks: int  #: PortAudio callbacks seen since start()
    frames: int  #: items captured (written to the ring, dropped ones included)
    overflows: int  #: callbacks flagged input_overflow
    status_flags: int  #: callbacks with any status flag set
    _anchor_due: bool
    _since_anchor: int
    _anchor_every: int
    _rate_f: float
    _xrun_at: deque[int]
    _xrun_missing: int
    _logged_overflows: int
    _last_log: float

    def __init__(
        self,
        *,
        device: int | str | None = None,
        rate: Any = None,
        channels: int = 1,
        blocksize: int = 0,
        latency: str | float = "high",
        buffer_s: float = 2.0,
        anchor_every_s: float = 10.0,
        backend: Any = None,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self._init_params.pop("backend", None)  # a module is not a graph-file parameter
        if device is not None and not isinstance(device, (int, str)) or isinstance(device, bool):
            raise ConfigError(f"device must be None, an index or part of a name, got {device!r}")
        self.device = device
        self.rate: Fraction | None = None if rate is None else as_fraction(rate)
        if isinstance(channels, bool) or not isinstance(channels, (int, np.integer)) or channels < 1:
            raise ConfigError(f"channels must be an int >= 1, got {channels!r}")
        self.channels = int(channels)
        if isinstance(blocksize, bool) or not isinstance(blocksize, (int, np.integer)) or blocksize < 0:
            raise ConfigError(f"blocksize must be an int >= 0 (0: PortAudio chooses), got {blocksize!r}")
        self.blocksize = int(blocksize)
        if isinstance(latency, str):
            if latency not in ("high", "low"):
                raise ConfigError(f"latency must be 'high', 'low' or seconds, got {latency!r}")
        elif not (isinstance(latency, (int, float)) and math.isfinite(latency) and latency > 0):
            raise ConfigError(f"latency must be 'high', 'low' or seconds > 0, got {latency!r}")
        self.latency = latency
        self.buffer_s = float(buffer_s)
        if not math.isfinite(self.buffer_s) or self.buffer_s <= 0:
            raise ConfigError(f"buffer_s must be > 0, got {buffer_s!r}")
        self.anchor_every_s = float(anchor_every_s)
        if not math.isfinite(self.anchor_every_s) or self.anchor_every_s <= 0:
            raise ConfigError(f"anchor_every_s must be > 0, got {anchor_every_s!r}")
        self.backend = backend
        self._spec: StreamSpec | None = None
        self._ring: SampleRing | None = None
        self._stream: Any = None
        self._ctx: Context | None = None
        self._notify: threading.Event | None = None
        self._cb_error: BaseException | None = None
        self._stopping = False
        self.latency_s: float | None = None
        self.device_name: str | None = None
        self._reset_counters()

    # -- lifecycle --------------------------------------------------------------------------------
    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        rate = self.rate
        if rate is None:
            info = self._device_info(self._backend(ConfigError))
            dr = float(info.get("default_samplerate", 0.0) or 0.0)
            if not dr > 0:
                raise ConfigError(f"io.mic: device {info.get('name', self.device)!r} reports no default sample rate; give rate=...")
            rate = as_fraction(dr)
        self._spec = StreamSpec(rate, self.channels, np.dtype(np.float32))
        return {"out": self._spec}

    def start(self, ctx: Context | None) -> None:
        spec = ctx.output_spec() if ctx is not None else (self._spec or self.negotiate({})["out"])
        self.stop()  # a restart gets a fresh stream and ring
        self._stopping = False
        self._spec = spec
        self._ctx = ctx
        self._reset_counters()
        sd = self._backend(ConfigError)
        info = self._device_info(sd)  # a missing device is a ConfigError with the device named
        self.device_name = str(info.get("name", self.device))
        rate_f = float(spec.rate)
        self._notify = ctx.notify if ctx is not None and ctx.notify is not None else threading.Event()
        self._ring = SampleRing(spec, max(1, int(round(self.buffer_s * rate_f))), notify=self._notify)
        self._anchor_every = max(1, int(round(self.anchor_every_s * rate_f)))
        self._rate_f = rate_f
        dev = info.get("index", self.device) if self.device is not None else self.device
        kwargs = {"samplerate": rate_f, "channels": self.channels, "dtype": "float32", "blocksize": self.blocksize,
                  "latency": self.latency, "device": dev, "callback": self._callback}  # fmt: skip
        pa_err = _portaudio_error(sd)
        open_errs: tuple[type[BaseException], ...] = (*pa_err, ValueError, TypeError)
        try:
            stream = sd.InputStream(**kwargs)
        except open_errs as exc:
            raise SourceError(
                f"io.mic: cannot open input device {self.device_name!r} at {rate_f:g} Hz x{self.channels}: {_line(exc)}",
                retryable=bool(pa_err) and isinstance(exc, pa_err),
            ) from None
        lat = getattr(stream, "latency", None)
        self.latency_s = float(lat[0] if isinstance(lat, (tuple, list)) else lat) if lat is not None else None
        self._stream = stream  # before start(): the first callback may already need it (_anchor)
        try:
            stream.start()
        except Exception as exc:
            self._stream = None
            try:
                stream.close()
            except Exception:
                pass
            raise SourceError(f"io.mic: cannot start input device {self.device_name!r}: {_line(exc)}", retryable=True) from None
        if ctx is not None:
            lat_txt = f"{self.latency_s * 1e3:.1f} ms" if self.latency_s is not None else "unknown"
            ctx.emit(E.SOURCE_STATE, E.SourceState("open", f"device={self.device_name!r} rate={rate_f:g} Hz channels={self.channels} "
                                                           f"blocksize={self.blocksize or 'auto'} latency={lat_txt}"))  # fmt: skip

    def read(self, max_items: int, ctx: Context | None) -> SourceRead | None:
        if self._cb_error is not None:
            exc, self._cb_error = self._cb_error, None
            raise SourceError(f"io.mic: the audio callback failed: {type(exc).__name__}: {_line(exc)}") from exc
        ring = self._ring
        if ring is None:
            if self._stopping:
                return None
            raise SourceError("io.mic: read() before start()")
        x, tags = ring.read(max(0, int(max_items)))
        tags = self._restore_swallowed_xruns(ring, x.shape[0], tags)
        if x.shape[0] == 0 and not tags:
            if ring.closed:
                return None
            st = self._stream
            if st is not None and not self._stopping and not getattr(st, "active", True) and not getattr(st, "stopped", False):
                raise SourceError(f"io.mic: input device {self.device_name!r} stopped delivering audio (unplugged?)", retryable=True)
        self._summarise_overflows(ctx)
        return SourceRead(x, tags)

    def wait(self, timeout: float) -> bool:
        """Block until the ring holds items (or is closed) or ``timeout`` seconds pass."""
        ring, ev = self._ring, self._notify
        if ring is None or ev is None:
            return True
        if ring.available or ring.closed:
            return True
        ev.clear()
        if ring.available or ring.closed:  # a write between the check and the clear
            return True
        ev.wait(max(0.0, float(timeout)))
        return ring.available > 0 or ring.closed

    def stop(self) -> None:
        """Close the stream and the ring. Never raises."""
        self._stopping = True
        st, self._stream = self._stream, None
        if st is not None:
            for meth in ("stop", "close"):
                try:
                    getattr(st, meth)()
                except Exception:
                    log.debug("io.mic: stream.%s() failed", meth, exc_info=True)
        if self._ring is not None:
            self._ring.close()
            if self._ctx is not None and st is not None:
                try:
                    self._ctx.emit(E.SOURCE_STATE, E.SourceState("closed", self.counters_text()))
                except Exception:
                    log.debug("io.mic: closing event failed", exc_info=True)

    # -- counters ---------------------------------------------------------------------------------
    def counters(self) -> dict[str, int]:
        """Callbacks, frames captured, device overflows, callbacks with any status flag, items dropped."""
        ring = self._ring
        return {"callbacks": self.callbacks, "frames": self.frames, "overflows": self.overflows, "status_flags": self.status_flags,
                "dropped": ring.dropped if ring is not None else 0, "ring_high_water": ring.high_water if ring is not None else 0}  # fmt: skip

    def counters_text(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.counters().items())

    # -- the PortAudio thread -----------------------------------------------------------------------
    def _callback(self, indata: np.ndarray, frames: int, time_info: Any, status: Any) -> None:
        """Copy, stamp, enqueue. Runs on PortAudio's real-time thread: nothing else, never raise."""
        try:
            ring = self._ring
            if ring is None:
                return
            self.callbacks += 1
            if status:
                self.status_flags += 1
                if getattr(status, "input_overflow", False):
                    self.overflows += 1
                    self._xrun_at.append(self.frames)  # producer index of the mark (see _restore_swallowed_xruns)
                    ring.mark_gap(Gap(lost=None, cause=GapCause.XRUN, detail=str(status)))
                    self._anchor_due = True
            if self._anchor_due or self._since_anchor >= self._anchor_every:
                ring.mark_anchor(self._anchor(time_info, frames))
                self._anchor_due = False
                self._since_anchor = 0
            ring.write(indata)
            self._since_anchor += frames
            self.frames += frames
        except BaseException as exc:  # never propagate into PortAudio (it would stop the stream)
            if self._cb_error is None:
                self._cb_error = exc

    def _anchor(self, time_info: Any, frames: int) -> TimeAnchor:
        now = time.time_ns()
        adc = float(getattr(time_info, "inputBufferAdcTime", 0.0) or 0.0)
        cur = float(getattr(time_info, "currentTime", 0.0) or 0.0)
        if cur == 0.0 and self._stream is not None:
            try:
                cur = float(self._stream.time)
            except Exception:
                cur = 0.0
        age = cur - adc
        if (adc != 0.0 or cur != 0.0) and 0.0 <= age < 5.0:
            return TimeAnchor(now - int(round(age * 1e9)), "device")
        # no usable stream clock: the block's first item was captured about one block plus the
        # input latency ago
        lat = self.latency_s or 0.0
        back = frames / self._rate_f + lat
        return TimeAnchor(now - int(round(back * 1e9)), "host", uncertainty_ns=int(round(max(back, 0.001) * 1e9)))

    # -- helpers ----------------------------------------------------------------------------------
    def _restore_swallowed_xruns(self, ring: SampleRing, n: int, tags: list[Tag]) -> list[Tag]:
        """Re-report device overflows whose XRUN mark the ring discarded.

        ``SampleRing`` drops marks that fall inside items it drops for overload (unless they carry a
        known ``lost`` count) and merges a mark that lands on the overload gap's offset into that
        gap (cause OVERLOAD). Either way the runtime would never count the xrun. Every item the
        ring has consumed was delivered or dropped, so marks below ``delivered + dropped`` are
        settled: those not seen as XRUN tags were swallowed and are re-added here as one
        ``Gap(lost=None, cause=XRUN)`` at the first item of this read (next to the overload gap).
        """
        settled = ring.delivered + ring.dropped
        popped = 0
        while self._xrun_at and self._xrun_at[0] < settled:
            self._xrun_at.popleft()
            popped += 1
        if popped:
            seen = sum(1 for t in tags if t.key == TAG_GAP and isinstance(t.value, Gap) and t.value.cause == GapCause.XRUN)
            self._xrun_missing += max(0, popped - seen)
        if not self._xrun_missing or n == 0:
            return tags
        k, self._xrun_missing = self._xrun_missing, 0
        first = ring.delivered - n
        gap = Gap(lost=None, cause=GapCause.XRUN, detail=f"{k} input overflow(s) among the items dropped for overload")
        return sorted([*tags, Tag(first, TAG_GAP, gap)], key=lambda t: t.offset)

    def _reset_counters(self) -> None:
        self.callbacks = 0
        self.frames = 0
        self.overflows = 0
        self.status_flags = 0
        self._xrun_at = deque()  # producer indices of XRUN marks not yet accounted for
        self._xrun_missing = 0
        self._anchor_due = True  # the first block gets an anchor
        self._since_anchor = 0
        self._anchor_every = 1 << 62
        self._rate_f = 1.0
        self._cb_error = None
        self._logged_overflows = 0
        self._last_log = time.monotonic()

    def _summarise_overflows(self, ctx: Context | None) -> None:
        """Rate-limited logging of device overflows (never one line per xrun: no "aOaOaO").

        The first overflow is logged at once; later ones as one summary line per 10 s.
        """
        n = self.overflows - self._logged_overflows
        if n <= 0:
            return
        now = time.monotonic()
        lg = ctx.log if ctx is not None else log
        if self._logged_overflows == 0:
            lg.warning("%s: input overflow on device %r (PortAudio dropped input; tagged as Gap(XRUN)); "
                       "raise latency or blocksize if this repeats", self.name or "io.mic", self.device_name)  # fmt: skip
        elif now - self._last_log >= 10.0:
            lg.warning("%s: %d input overflow(s) in the last %.0f s on device %r", self.name or "io.mic", n, now - self._last_log, self.device_name)
        else:
            return
        self._logged_overflows = self.overflows
        self._last_log = now

    def _backend(self, error: type[Exception]) -> Any:
        return self.backend if self.backend is not None else import_sounddevice(error)

    def _device_info(self, sd: Any) -> dict[str, Any]:
        """Resolve ``device`` to its info dict. ConfigError naming the device when it is missing."""
        errs: tuple[type[BaseException], ...] = (ValueError, IndexError, KeyError, TypeError, *_portaudio_error(sd))
        try:
            info = sd.query_devices(self.device) if self.device is not None else sd.query_devices(kind="input")
        except errs as exc:
            if self.device is None:
                raise ConfigError(f"io.mic: no default input device ({_line(exc)}); connect a microphone or pick one with device=... "
                                  "(`streamkit devices` lists them)") from None  # fmt: skip
            raise ConfigError(f"io.mic: no input device {self.device!r} ({_line(exc)}); `streamkit devices` lists them") from None
        info = dict(info)
        n_in = int(info.get("max_input_channels", 0))
        if n_in < self.channels:
            what = "has no input channels" if n_in == 0 else f"has {n_in} input channel(s), {self.channels} requested"
            raise ConfigError(f"io.mic: device {info.get('name', self.device)!r} {what}; `streamkit devices` lists them")
        return info
