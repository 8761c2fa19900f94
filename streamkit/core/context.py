"""Context: what the runtime hands a block (emit events, time of an index, specs, dummy input)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from streamkit.core.clock import AnchorTrack
from streamkit.core.errors import ConfigError
from streamkit.core.metrics import BlockMetrics
from streamkit.core.types import StreamSpec, Tag

if TYPE_CHECKING:
    from streamkit.core.block import Block


class Context:
    """Per-block view of the running graph.

    Attributes:
        name: the block's name in the graph.
        stream: the graph (station) name, copied into every event.
        threads: threads the block may use (torch.set_num_threads, numba).
        metrics: this block's counters (read-only for the block).
        position: absolute input index of the first item of the current work call.
        log: a logger named after the block.
    """

    def __init__(
        self,
        block: Block,
        stream: str,
        in_specs: dict[str, StreamSpec],
        out_specs: dict[str, StreamSpec],
        emit_fn: Callable[..., None],
        threads: int = 1,
        port_in: str | None = None,
        notify: Any = None,
    ) -> None:
        self.block = block
        self.name = block.name
        self.stream = stream
        self.in_specs = in_specs
        self.out_specs = out_specs
        self.threads = threads
        self.metrics = BlockMetrics()
        self.position = 0
        self.log = logging.getLogger(f"streamkit.{stream}.{block.name}")
        self._emit_fn = emit_fn
        self._emits = frozenset(getattr(block, "emits", ()))
        spec = in_specs.get("in") or out_specs.get("out")
        self.anchors = AnchorTrack(spec.rate if spec is not None else 1)  # type: ignore[arg-type]
        self.port = port_in or (f"{block.name}.out")
        self.added_tags: list[Tag] = []
        self.notify = notify  # threading.Event a live source's producer sets after writing

    # -- specs ------------------------------------------------------------------------------------
    def input_spec(self, port: str = "in") -> StreamSpec:
        try:
            return self.in_specs[port]
        except KeyError:
            raise ConfigError(f"{self.name}: no input port {port!r}") from None

    def output_spec(self, port: str = "out") -> StreamSpec:
        try:
            return self.out_specs[port]
        except KeyError:
            raise ConfigError(f"{self.name}: no output port {port!r}") from None

    def dummy_input(self, port: str = "in", n: int = 1) -> np.ndarray:
        """Zeros shaped, typed *and read-only* like real chunks, for JIT warm-up in ``start()``.

        numba compiles a separate specialization for non-writeable arrays, so a writable dummy
        would leave a compile for the first live chunk.
        """
        spec = self.input_spec(port)
        a = np.zeros((n, spec.channels), dtype=spec.dtype)
        a.flags.writeable = False
        return a

    # -- time -------------------------------------------------------------------------------------
    def time_of(self, index: int) -> int | None:
        """UTC ns of input item ``index`` from the anchors seen so far (None before any)."""
        return self.anchors.time_of(index)

    # -- output -----------------------------------------------------------------------------------
    def emit(self, kind: str, payload: Any = None, span: tuple[int, int] | None = None, port: str | None = None) -> None:
        """Emit an event. ``span`` is in input indices (default: the current call's span).

        Raises:
            ConfigError: ``kind`` is not in the block's ``emits`` declaration.
        """
        if kind not in self._emits:
            raise ConfigError(f"{self.name}: emits undeclared event kind {kind!r} (declare it in {type(self.block).__name__}.emits)")
        self._emit_fn(self, kind, payload, span, port)

    def add_tag(self, offset: int, key: str, value: Any) -> None:
        """Add a tag to the *output* at absolute output index ``offset`` (within this call's output)."""
        self.added_tags.append(Tag(int(offset), key, value))
