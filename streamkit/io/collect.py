"""In-memory source and sinks: feed an array in chosen chunk sizes, collect items, tags and events.

Used by :mod:`streamkit.testing`, by :mod:`streamkit.api` and by anyone embedding streamkit in a
program that already has its audio in memory.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from streamkit.core.block import EventSink, Sink, Source, SourceRead
from streamkit.core.context import Context
from streamkit.core.errors import ConfigError
from streamkit.core.events import Event
from streamkit.core.registry import register
from streamkit.core.tags import GAP, TIME, Gap, TimeAnchor
from streamkit.core.types import Chunk, StreamSpec, Tag, as_fraction


class VectorSource(Source):
    """Emit a fixed array, in fixed, listed or random chunk sizes.

    Ports:
        out: the array's items at ``rate``.
    Parameters:
        samples: array ``(n,)`` or ``(n, channels)``.
        rate: item rate in Hz (any exact rational, e.g. ``"12001.188"``).
        sizes: chunk sizes: an int, a list (cycled), or ``"random"`` (seeded, 1..2*mean).
        tags: ``(offset, key, value)`` triples attached at absolute offsets.
        gaps: ``(offset, Gap)`` pairs (a shortcut for ``sk:gap`` tags).
        seed: for ``"random"`` sizes.
        utc_ns: UTC of item 0 (a ``TimeAnchor(source="synthetic")`` is put there), or None.
    Latency: 0.
    """

    def __init__(
        self,
        *,
        samples: np.ndarray,
        rate: Any,
        sizes: int | Sequence[int] | str = 1024,
        tags: Iterable[tuple[int, str, Any]] = (),
        gaps: Iterable[tuple[int, Gap]] = (),
        seed: int = 0,
        mean_size: int = 64,
        utc_ns: int | None = 0,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        a = np.asarray(samples)
        if a.ndim == 1:
            a = a[:, None]
        if a.ndim != 2:
            raise ConfigError("samples must be 1-D or 2-D")
        if a.dtype == np.float64:
            a = a.astype(np.float32)
        self.samples = np.ascontiguousarray(a)
        self.rate = as_fraction(rate)
        self.sizes = sizes
        self.seed = seed
        self.mean_size = mean_size
        tl = [Tag(int(o), k, v) for o, k, v in tags] + [Tag(int(o), GAP, g) for o, g in gaps]
        if utc_ns is not None:
            tl.insert(0, Tag(0, TIME, TimeAnchor(int(utc_ns), "synthetic")))
        self.tag_list = sorted(tl, key=lambda t: t.offset)
        self._pos = 0
        self._k = 0
        self._rng = np.random.default_rng(seed)

    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        return {"out": StreamSpec(self.rate, self.samples.shape[1], self.samples.dtype)}

    def start(self, ctx: Context) -> None:
        self._pos = 0
        self._k = 0
        self._rng = np.random.default_rng(self.seed)

    def _next_size(self) -> int:
        s = self.sizes
        if isinstance(s, str):
            if s != "random":
                raise ConfigError(f"sizes must be an int, a list or 'random', got {s!r}")
            return int(self._rng.integers(1, 2 * self.mean_size + 1))
        if isinstance(s, (int, np.integer)):
            return int(s)
        v = int(s[self._k % len(s)])
        self._k += 1
        return v

    def read(self, max_items: int, ctx: Context) -> SourceRead | None:
        n_total = self.samples.shape[0]
        if self._pos >= n_total:
            return None
        n = max(1, min(self._next_size(), max_items, n_total - self._pos))
        lo, hi = self._pos, self._pos + n
        self._pos = hi
        tags = [t for t in self.tag_list if lo <= t.offset < hi or (hi == n_total and t.offset >= hi)]
        return SourceRead(self.samples[lo:hi], tags, end=hi >= n_total)


@register("io.collect")
class CollectSink(Sink):
    """Keep every item and tag in memory (tests, notebooks).

    Attributes after a run: ``samples`` (concatenated), ``tags`` (all, absolute offsets),
    ``starts`` (chunk starts seen), ``chunks`` (count).
    """

    def __init__(self, *, name: str | None = None) -> None:
        super().__init__(name=name)
        self._parts: list[np.ndarray] = []
        self.tags: list[Tag] = []
        self.starts: list[int] = []
        self.spec: StreamSpec | None = None

    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        self.spec = inputs["in"]
        return {}

    def start(self, ctx: Context) -> None:
        self._parts = []
        self.tags = []
        self.starts = []

    def consume(self, chunk: Chunk, ctx: Context) -> None:
        self.starts.append(chunk.start)
        if len(chunk):
            self._parts.append(np.array(chunk.samples))
        self.tags.extend(chunk.tags)

    @property
    def samples(self) -> np.ndarray:
        if not self._parts:
            ch = self.spec.channels if self.spec else 1
            dt = self.spec.dtype if self.spec else np.float32
            return np.zeros((0, ch), dtype=dt)
        return np.concatenate(self._parts)

    @property
    def chunks(self) -> int:
        return len(self.starts)


class EventCollector(EventSink):
    """Keep a graph's events in memory: ``c = g.subscribe(EventCollector(), ["vad.*"])``.

    After (or during) a run, ``c.events`` holds the events delivered, in order; ``c.of(kind)``
    those of one kind, ``c.payloads(kind)`` their payloads. A new run (``open``) starts an empty
    list. Safe to read from another thread while the graph runs (``snapshot()`` copies).
    :func:`streamkit.collect` subscribes one, runs the graph and returns its events.
    """

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()

    def open(self, graph_name: str) -> None:
        with self._lock:
            self.events = []

    def handle(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)

    def snapshot(self) -> list[Event]:
        """A copy of the events so far."""
        with self._lock:
            return list(self.events)

    def of(self, kind: str) -> list[Event]:
        """The events of ``kind`` (exact kind, e.g. ``"vad.segment"``)."""
        return [e for e in self.snapshot() if e.kind == kind]

    def payloads(self, kind: str) -> list[Any]:
        """The payloads of the events of ``kind``."""
        return [e.payload for e in self.of(kind)]
