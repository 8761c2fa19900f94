"""Counters every block and graph keeps, and the RT factor computed from them.

RT factor = processing time / audio duration. For a block it is ``busy_ns`` over the duration of
the items it consumed; the first work call (JIT compile, model warm-up, cache misses) is counted
apart in ``first_call_ns`` and left out of ``rtf``, and ``start_ns`` (the cost of ``start()``) is
reported on its own as well.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class BlockMetrics:
    """Counters of one block (updated by the runtime only)."""

    calls: int = 0
    items_in: int = 0
    items_out: int = 0
    busy_ns: int = 0
    max_call_ns: int = 0
    first_call_ns: int = 0
    first_call_items: int = 0
    start_ns: int = 0
    errors: int = 0
    resets: int = 0
    events: int = 0
    length_error: float = 0.0

    def rtf(self, rate_in: float) -> float | None:
        """busy time / duration of the consumed items (first call excluded)."""
        items = self.items_in - self.first_call_items
        if rate_in <= 0 or items <= 0:
            return None
        return (self.busy_ns / 1e9) / (items / rate_in)

    def to_dict(self, rate_in: float | None = None) -> dict[str, Any]:
        d: dict[str, Any] = {
            "calls": self.calls,
            "items_in": self.items_in,
            "items_out": self.items_out,
            "busy_ms": self.busy_ns / 1e6,
            "max_call_ms": self.max_call_ns / 1e6,
            "first_call_ms": self.first_call_ns / 1e6,
            "start_ms": self.start_ns / 1e6,
            "errors": self.errors,
            "resets": self.resets,
            "events": self.events,
            "length_error": self.length_error,
        }
        if rate_in:
            d["rtf"] = self.rtf(rate_in)
        return d


@dataclass(slots=True)
class LatencyStats:
    """A small reservoir of latencies (ms) with percentiles."""

    values: list[float] = field(default_factory=list)
    count: int = 0
    max_keep: int = 4096

    def add(self, ms: float) -> None:
        self.count += 1
        if len(self.values) < self.max_keep:
            self.values.append(ms)
        else:  # keep a deterministic thinning: replace a slot by rotation
            self.values[self.count % self.max_keep] = ms

    def summary(self) -> dict[str, float | int | None]:
        if not self.values:
            return {"count": 0, "p50_ms": None, "p95_ms": None, "max_ms": None}
        v = sorted(self.values)

        def pct(p: float) -> float:
            k = min(len(v) - 1, max(0, int(math.ceil(p / 100.0 * len(v))) - 1))
            return v[k]

        return {"count": self.count, "p50_ms": pct(50), "p95_ms": pct(95), "max_ms": v[-1]}
