"""The runner's record of each block of a running graph (:class:`Node`), by kind, and its call accounting."""

from __future__ import annotations

from typing import Any

from streamkit.core.block import Block, TagPolicy
from streamkit.core.buffers import TagMapper, WindowBuffer
from streamkit.core.context import Context
from streamkit.core.types import StreamSpec

__all__ = ["SINK", "SOURCE", "SYNC", "RATE", "WINDOW", "Node", "count_call"]

#: node kinds: how the runner calls the block
SOURCE, SYNC, RATE, WINDOW, SINK = range(5)


class Node:
    """A block in a running graph: its context, specs, item indices, buffers and metrics."""

    __slots__ = (
        "name", "block", "ctx", "kind", "children", "in_spec", "out_spec", "in_index", "out_index",
        "mapper", "wbuf", "fill_shift", "consecutive_errors", "ended", "rate_in", "work",
        "forward", "limit", "t0", "next_due", "m", "first_done", "length_checked", "live",
    )  # fmt: skip

    def __init__(self, name: str, block: Block, ctx: Context, kind: int) -> None:
        self.name = name
        self.block = block
        self.ctx = ctx
        self.kind = kind
        self.children: list[Node] = []
        self.in_spec: StreamSpec | None = ctx.in_specs.get("in")
        self.out_spec: StreamSpec | None = ctx.out_specs.get("out")
        self.in_index = 0
        self.out_index = 0
        self.mapper: TagMapper | None = None
        self.wbuf: WindowBuffer | None = None
        self.fill_shift = 0
        self.consecutive_errors = 0
        self.ended = False
        self.rate_in = float(self.in_spec.rate) if self.in_spec is not None else (float(self.out_spec.rate) if self.out_spec else 0.0)
        self.work: Any = None
        self.forward = block.tag_policy == TagPolicy.FORWARD
        self.limit: int | None = None
        self.t0 = 0.0
        self.next_due = 0.0
        self.m = ctx.metrics
        self.first_done = False
        self.length_checked = False
        self.live = bool(getattr(block, "live", False))


def count_call(node: Node, dt: int, n: int) -> None:
    """Account one call: the first call with items is the warm-up, kept apart from busy time.
    (The SyncBlock fast path in :meth:`_push` does the same inline.)"""
    m = node.m
    if not node.first_done and n:
        node.first_done = True
        m.first_call_ns = dt
        m.first_call_items = n
    else:
        m.busy_ns += dt
        if dt > m.max_call_ns:
            m.max_call_ns = dt
    m.calls += 1
