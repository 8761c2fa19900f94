"""Blocks: the units of a graph, and the contract the runtime holds them to.

Lifecycle (the same for every flavour)::

    __init__(**params)   validate and store parameters only: cheap, picklable, JSON-describable
    negotiate(inputs)    pure: input StreamSpecs -> output StreamSpecs, ConfigError on mismatch
    start(ctx)           allocate state, load models, warm up JIT/torch on ctx.dummy_input(...)
    work...(x, ctx)      process items (flavour-specific signature, below)
    drain(ctx)           before a reset at a gap: return the items the block holds back (RateBlock)
    reset(cause)         drop internal state (called on a Gap when on_gap is RESET, on errors)
    flush(ctx)           end of stream: return trailing output, emit pending events
    stop()               release resources; never raises

Flavours:

* :class:`SyncBlock`: 1 item out per item in (``gr.sync_block``).
* :class:`RateBlock`: an exact rational ``ratio`` = out_rate / in_rate and a group ``delay``; the
  runtime moves tags with exact :class:`~fractions.Fraction` arithmetic.
* :class:`WindowBlock`: fixed ``window`` and ``hop``; the runtime owns the buffering and hands the
  block every complete window (as a strided, read-only view) in one call.
* :class:`Source`: no input; the runtime pulls items with :meth:`Source.read`.
* :class:`Sink`: no output; the runtime hands it chunks with :meth:`Sink.consume`.

Events leave any block through ``ctx.emit``; event subscribers (:class:`EventSink`) live outside
the data path.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from streamkit.core.errors import ConfigError
from streamkit.core.tags import Gap
from streamkit.core.types import Chunk, StreamSpec, Tag

if TYPE_CHECKING:
    from streamkit.core.context import Context
    from streamkit.core.events import Event


class GapPolicy(str, enum.Enum):
    """What the runtime does when a ``Gap`` tag reaches a block."""

    CONTINUE = "continue"  #: nothing: the block sees contiguous items, the tag is forwarded
    RESET = "reset"  #: split the work call at the gap and call reset(gap) in between
    ZERO_FILL = "zero_fill"  #: insert ``gap.lost`` zeros (capped) so the block sees a continuous timeline


class ErrorPolicy(str, enum.Enum):
    """What the runtime does when ``work`` raises."""

    RAISE = "raise"  #: re-raise as BlockError: stops the graph (the default in tests)
    RESET = "reset"  #: emit block.error, reset(), output zeros of the contracted length tagged Gap(BLOCK_ERROR)
    BYPASS = "bypass"  #: emit block.error, pass the input through (only when in spec == out spec)


class TagPolicy(str, enum.Enum):
    """How tags on the input reach the output."""

    FORWARD = "forward"  #: every input tag goes out at its (remapped) offset
    NONE = "none"  #: tags stop here (standard tags still reach the block's context)
    CUSTOM = "custom"  #: the block adds tags itself with ctx.add_tag; input tags are not forwarded



def require_audio(block: str, spec: StreamSpec, rate: int, channels: int = 1, dtype: Any = np.float32) -> None:
    """Refuse an input format a block cannot take, saying what to put in front (for ``negotiate``).

    Raises:
        ConfigError: the rate, channel count or sample type differs.
    """
    if spec.rate != rate:
        raise ConfigError(f"{block}: needs {rate} Hz input, got {float(spec.rate):g} Hz; put dsp.resample (to {rate} Hz) in front")
    if spec.channels != channels:
        raise ConfigError(f"{block}: needs {'mono' if channels == 1 else f'{channels}-channel'} input, got {spec.channels} channels")
    if spec.dtype != np.dtype(dtype):
        raise ConfigError(f"{block}: needs {np.dtype(dtype)} audio, got {spec.dtype}")

class Block:
    """Base of all blocks. See the module docstring for the lifecycle.

    Class attributes a block sets:
        inputs / outputs: port names (streamkit blocks have at most one of each; fan-out is free).
        emits: event kinds the block may emit (checked by ctx.emit).
        tag_policy, on_gap, on_error: policies above.
        registry_name: set by :func:`streamkit.core.registry.register`.
    """

    inputs: ClassVar[tuple[str, ...]] = ("in",)
    outputs: ClassVar[tuple[str, ...]] = ("out",)
    emits: ClassVar[tuple[str, ...]] = ()
    tag_policy: ClassVar[TagPolicy] = TagPolicy.FORWARD
    on_gap: GapPolicy = GapPolicy.CONTINUE  # class default; may be overridden per instance
    on_error: ErrorPolicy = ErrorPolicy.RESET
    registry_name: ClassVar[str | None] = None

    #: parameters passed to __init__, recorded by __new__ so a graph can be written back to a file
    _init_params: dict[str, Any]

    def __new__(cls, *args: Any, **kwargs: Any) -> Block:
        obj = super().__new__(cls)
        if args:
            raise TypeError(f"{cls.__name__} takes keyword arguments only")
        params = dict(kwargs)
        params.pop("name", None)
        obj._init_params = params
        return obj

    def __init__(self, *, name: str | None = None) -> None:
        self.name: str = name or ""
        self._staged: dict[str, Any] = {}
        # policies may be overridden per instance (tests force RAISE)
        self.on_gap = type(self).on_gap
        self.on_error = type(self).on_error

    # -- description ------------------------------------------------------------------------------
    def params(self) -> dict[str, Any]:
        """The keyword arguments this block was built with (for graph files)."""
        return dict(self._init_params)

    def algorithmic_latency(self) -> int:
        """Items of input the block must see before it can output the result for an item.

        Window - hop for windowed blocks, look-ahead, hangover... Summed per path by
        :meth:`Graph.describe`. Valid after negotiate().
        """
        return 0

    # -- lifecycle --------------------------------------------------------------------------------
    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        """Output specs from input specs. Pure. Default: pass the input spec through."""
        if "in" in inputs:
            return {name: inputs["in"] for name in self.outputs}
        return {}

    def start(self, ctx: Context) -> None:
        """Allocate state and warm up. Called once negotiate() has fixed the specs."""

    def drain(self, ctx: Context) -> np.ndarray | None:
        """Before a reset at a gap: return the output items the block still holds back (or None).

        For a :class:`RateBlock` that delays its output (a delay line, a look-ahead: e.g.
        ``dsp.speech_gate``): when a gap arrives under ``on_gap`` RESET, the runtime calls
        ``drain`` and forwards what it returns before it calls :meth:`reset`, so that nothing is lost
        but what the source lost. ``ctx.position`` is the index the held items end at. Default:
        nothing held (the runtime calls only a subclass's own ``drain``).
        """
        return None

    def reset(self, cause: Gap | None = None) -> None:
        """Drop internal state. Idempotent and cheap."""

    def flush(self, ctx: Context) -> np.ndarray | None:
        """End of stream: return trailing output items (or None) and emit pending events."""
        return None

    def stop(self) -> None:
        """Release resources. Never raises."""

    # -- staged parameter changes (GNU Radio's d_new_* pattern) -------------------------------------
    def set_params(self, **changes: Any) -> None:
        """Stage parameter changes; the runtime applies them between chunks and tags ParamChange."""
        self._staged.update(changes)

    def apply_params(self, changes: Mapping[str, Any]) -> None:
        """Apply staged changes (called by the runtime between work calls). Default: setattr."""
        for k, v in changes.items():
            if not hasattr(self, k):
                raise ConfigError(f"{self.name}: unknown parameter {k!r}")
            setattr(self, k, v)

    def __repr__(self) -> str:
        p = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({p}{', ' if p else ''}name={self.name!r})"


class SyncBlock(Block):
    """One output item per input item (``len(work(x)) == len(x)``); tags keep their offsets."""

    def work(self, x: np.ndarray, ctx: Context) -> np.ndarray:
        raise NotImplementedError


class RateBlock(Block):
    """A fixed rational rate change.

    Attributes (set in ``negotiate``):
        ratio: out_rate / in_rate, exact.
        delay: group delay in input items; a tag at input index ``i`` goes to output index
            ``round_half_up((i + delay) * ratio)``.
        length_slack: tolerated |items_out - items_in * ratio| after flush (checked by the runtime).
    """

    ratio: Fraction = Fraction(1)
    delay: Fraction = Fraction(0)
    length_slack: int = 1

    def work(self, x: np.ndarray, ctx: Context) -> np.ndarray:
        raise NotImplementedError


class WindowBlock(Block):
    """Fixed windows of ``window`` items every ``hop`` items; one output item per window.

    The runtime buffers the input and calls :meth:`work_windows` with every window that is
    complete, as a read-only strided view of shape ``(k, window, channels)``; the block returns an
    array of shape ``(k, out_channels)`` (or ``None`` for a block with no output port). The view is
    only valid during the call.

    Attributes (set in ``__init__`` or ``negotiate``):
        window, hop: in input items.
        lookahead: future items the result for an item needs (counts toward latency).
        pad_start: zeros the runtime puts in front of the stream (``window // 2`` centres frame j
            on input item ``j * hop``, as scipy's ``stft(boundary='zeros')``).
        pad_end: zeros appended at end of stream.
        flush_partial: at end of stream, zero-pad the last partial window and emit it (scipy's
            ``padded=True``).
    """

    window: int = 1
    hop: int = 1
    lookahead: int = 0
    pad_start: int = 0
    pad_end: int = 0
    flush_partial: bool = False

    def work_windows(self, frames: np.ndarray, start: int, ctx: Context) -> np.ndarray | None:
        """Process ``k`` windows; ``start`` is the (padded) input index of ``frames[0, 0]``."""
        raise NotImplementedError

    def algorithmic_latency(self) -> int:
        # the output for item i is the window centred near i (see ``delay``): it needs the
        # items up to about i + window/2, plus any look-ahead the block declares.
        return int(self.window - self.window // 2 + self.lookahead)

    @property
    def ratio(self) -> Fraction:
        return Fraction(1, self.hop)

    @property
    def delay(self) -> Fraction:
        # frame j covers padded items [j*hop, j*hop + window); its centre is input item
        # j*hop + window/2 - pad_start, so input item i maps to frame (i + pad_start - window/2)/hop.
        return Fraction(self.pad_start) - Fraction(self.window, 2)


@dataclass(slots=True)
class SourceRead:
    """What :meth:`Source.read` returns: items plus tags at absolute output offsets."""

    samples: np.ndarray
    tags: list[Tag] = field(default_factory=list)
    end: bool = False


class Source(Block):
    """A block with no input. The runtime pulls with :meth:`read`.

    ``live = True`` marks a source fed by a device or network thread (it owns a bounded
    :class:`~streamkit.core.ring.SampleRing` and never blocks its producer); the runtime waits on
    it with :meth:`wait`. A ``live = False`` source (file, synthetic) is paced by the runner and
    simply not read while the graph is busy (real backpressure).
    """

    inputs: ClassVar[tuple[str, ...]] = ()
    live: ClassVar[bool] = False

    def read(self, max_items: int, ctx: Context) -> SourceRead | None:
        """Up to ``max_items`` items; an empty read means "nothing yet" (live sources only),
        None or ``end=True`` means the stream is over."""
        raise NotImplementedError

    def wait(self, timeout: float) -> bool:
        """Block until items may be available or ``timeout`` seconds pass (live sources)."""
        return True

    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        raise NotImplementedError


class Sink(Block):
    """A block with no output."""

    outputs: ClassVar[tuple[str, ...]] = ()

    def consume(self, chunk: Chunk, ctx: Context) -> None:
        """Take one chunk (``chunk.samples`` is read-only; copy what you keep)."""
        raise NotImplementedError

    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        return {}


class EventSink:
    """A subscriber to events. Runs on the event dispatcher thread, never on the data path.

    Subclasses implement :meth:`handle`; :meth:`open` and :meth:`close` bracket a run. Registered
    with ``Graph.subscribe(sink, kinds=("vad.*", ...))``.

    A sink whose output can stall (a terminal) sets ``may_drop = True``: it then gets its own
    thread and a queue of at most ``queue_size`` events (``streamkit.core.sink_queue``), so that
    it never holds up the other subscribers (event files); when it falls behind, its oldest events
    are dropped and counted, and at the end of a run it gets ``close_timeout_s`` to catch up.
    Its ``open``, ``handle`` and ``close`` all run on that thread.
    """

    registry_name: ClassVar[str | None] = None
    may_drop: ClassVar[bool] = False
    queue_size: ClassVar[int] = 1000
    close_timeout_s: ClassVar[float] = 5.0
    _init_params: dict[str, Any]

    def __new__(cls, *args: Any, **kwargs: Any) -> EventSink:
        obj = super().__new__(cls)
        obj._init_params = dict(kwargs)
        return obj

    def params(self) -> dict[str, Any]:
        return dict(self._init_params)

    def open(self, graph_name: str) -> None:
        """Called once before the first event."""

    def handle(self, event: Event) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Called once after the last event; flush files here."""
