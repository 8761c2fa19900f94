"""Helpers for testing blocks: run one block on an array, check streaming == offline.

``run_block(block, x, rate=...)`` wires ``VectorSource -> block -> CollectSink`` in a graph, runs
it in FreeRun with ``on_error=RAISE`` and returns the output items, tags and events.
``assert_chunking_invariant(factory, x, rate, sizes=...)`` runs fresh blocks with one chunk, many
chunks, 1-item chunks and random sizes, and asserts identical output (bit-exact unless a tolerance
is given) and identical tags.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamkit.core.block import Block, ErrorPolicy, Sink
from streamkit.core.events import Event
from streamkit.core.graph import Graph
from streamkit.core.runtime import Runner
from streamkit.core.tags import Gap
from streamkit.core.types import Tag
from streamkit.io.collect import CollectSink, VectorSource
from streamkit.testing.fake_sounddevice import FakeInputStream, FakeSoundDevice

__all__ = [
    "BlockRun",
    "run_block",
    "assert_chunking_invariant",
    "assert_tags_at",
    "FakeInputStream",
    "FakeSoundDevice",
]


@dataclass
class BlockRun:
    """What :func:`run_block` returns."""

    samples: np.ndarray
    tags: list[Tag]
    events: list[Event]
    stats: dict[str, Any]
    starts: list[int] = field(default_factory=list)

    def tag_offsets(self, key: str) -> list[int]:
        return [t.offset for t in self.tags if t.key == key]

    def events_of(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]


def run_block(
    block: Block,
    x: np.ndarray,
    *,
    rate: Any,
    sizes: int | Sequence[int] | str = 1024,
    tags: Iterable[tuple[int, str, Any]] = (),
    gaps: Iterable[tuple[int, Gap]] = (),
    error_policy: ErrorPolicy | None = ErrorPolicy.RAISE,
    seed: int = 0,
    mean_size: int = 64,
    chunk: int | None = None,
) -> BlockRun:
    """Run ``block`` alone on ``x`` and collect what comes out.

    ``sizes`` are the source's chunk sizes, capped by the runner's read size ``chunk`` (default:
    the runner's 20 ms); pass ``chunk`` to push larger chunks (e.g. to time a block at 100 ms).
    """
    g = Graph("test")
    src = g.add(VectorSource(samples=x, rate=rate, sizes=sizes, tags=tags, gaps=gaps, seed=seed, mean_size=mean_size), name="src")
    g.add(block, name=block.name or "dut")
    g.connect(src, block)
    sink: CollectSink | None = None
    if not isinstance(block, Sink) and block.outputs:
        sink = CollectSink()
        g.add(sink, name="sink")
        g.connect(block, sink)
    r = Runner(g, chunk=chunk, keep_events=True, threaded_events=False, stats_interval_s=0, error_policy=error_policy)
    st = r.run()
    if sink is None:
        return BlockRun(np.zeros((0, 1), np.float32), [], r.events, st)
    return BlockRun(sink.samples, list(sink.tags), r.events, st, list(sink.starts))


def assert_chunking_invariant(
    factory: Callable[[], Block],
    x: np.ndarray,
    *,
    rate: Any,
    sizes: Sequence[int | str] = ("all", 1, 7, 160, "random"),
    atol: float = 0.0,
    rtol: float = 0.0,
    tags: Iterable[tuple[int, str, Any]] = (),
    gaps: Iterable[tuple[int, Gap]] = (),
    check_tags: bool = True,
    check_events: bool = True,
) -> BlockRun:
    """Output (items, tags, events) is the same whatever the chunking of the input.

    ``"all"`` means one chunk with the whole input; ints are fixed sizes; ``"random"`` draws sizes
    from a seeded generator. Bit-exact by default; pass ``atol``/``rtol`` to allow float noise.
    Returns the one-chunk run.
    """
    tags = list(tags)
    gaps = list(gaps)
    n = np.asarray(x).shape[0]
    runs: list[tuple[Any, BlockRun]] = []
    for s in sizes:
        size: Any = max(n, 1) if s == "all" else s
        runs.append((s, run_block(factory(), x, rate=rate, sizes=size, tags=tags, gaps=gaps)))
    ref_s, ref = runs[0]
    for s, r in runs[1:]:
        assert r.samples.shape == ref.samples.shape, f"chunk size {s!r}: output shape {r.samples.shape} != {ref.samples.shape} (sizes {ref_s!r})"
        if atol == 0 and rtol == 0:
            np.testing.assert_array_equal(r.samples, ref.samples, err_msg=f"chunk size {s!r} differs from {ref_s!r}")
        else:
            np.testing.assert_allclose(r.samples, ref.samples, atol=atol, rtol=rtol, err_msg=f"chunk size {s!r} differs from {ref_s!r}")
        if check_tags:
            assert [(t.offset, t.key, t.value) for t in r.tags] == [(t.offset, t.key, t.value) for t in ref.tags], f"chunk size {s!r}: tags differ"
        if check_events:
            ea = [(e.kind, e.span, e.payload) for e in r.events if not e.kind.startswith(("graph.", "stream.end"))]
            eb = [(e.kind, e.span, e.payload) for e in ref.events if not e.kind.startswith(("graph.", "stream.end"))]
            assert ea == eb, f"chunk size {s!r}: events differ"
    return ref


def assert_tags_at(run: BlockRun, expected: dict[str, list[int]]) -> None:
    """Tags of each key sit exactly at the expected offsets."""
    for key, offs in expected.items():
        got = run.tag_offsets(key)
        assert got == list(offs), f"tag {key!r} at {got}, expected {list(offs)}"
