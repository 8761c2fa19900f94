"""SampleRing: the bounded hand-off between a live producer thread and the graph thread.

The producer (a PortAudio callback, an asyncio WebSocket task) calls :meth:`SampleRing.write`,
which copies, stamps and returns at once: it never blocks and never grows. When the graph falls
behind and the ring is full, the *oldest* items are dropped, counted, and the next read starts with
a ``Gap(cause=OVERLOAD)`` tag plus a fresh time anchor (so time stays right after the loss).
Producers mark their own losses (device overflow, sequence gaps, reconnects) with :meth:`mark_gap`
and their clock with :meth:`mark_anchor`; those marks travel with the items they precede.

Indices: the ring counts *written* items (``write_index``) and *delivered* items (the source's
output index). The difference is what was dropped.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np

from streamkit.core import tags as T
from streamkit.core.tags import Gap, GapCause, TimeAnchor
from streamkit.core.types import StreamSpec, Tag


class SampleRing:
    """Bounded, drop-oldest, counted ring of items with position-exact marks.

    Args:
        spec: format of the items (rate is used to re-time anchors after drops).
        capacity: items it holds; writing more than fit drops the oldest.
        notify: optional ``threading.Event`` set after each write (the runner waits on it).
    """

    def __init__(self, spec: StreamSpec, capacity: int, notify: threading.Event | None = None) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.spec = spec
        self.capacity = int(capacity)
        self._buf = np.zeros((self.capacity, spec.channels), dtype=spec.dtype)
        self._lock = threading.Lock()
        self._w = 0  # total items written (producer index)
        self._r = 0  # producer index of the next item to read
        self._dropped = 0  # total items dropped for overload
        self._delivered = 0  # total items read
        self._marks: list[Tag] = []  # offsets in producer index space, sorted
        self._pending_overload = 0  # items dropped since the last read
        self._pending_marks: list[Gap] = []  # other losses whose items were dropped with them
        self._last_anchor: tuple[int, TimeAnchor] | None = None
        self._closed = False
        self.notify = notify
        self.high_water = 0
        self.overload_events = 0

    # -- producer side (any thread; must stay cheap) ----------------------------------------------
    def write(self, x: np.ndarray) -> int:
        """Copy ``x`` (shape ``(n, channels)`` or ``(n,)`` for mono) in; returns items dropped."""
        n = x.shape[0]
        if n == 0:
            return 0
        if x.ndim == 1:
            x = x.reshape(n, 1)
        dropped = 0
        with self._lock:
            if n > self.capacity:  # keep only the newest `capacity` items of x itself
                skip = n - self.capacity
                self._drop_locked(self._w - self._r)  # everything buffered is older still
                self._w += skip
                self._r = self._w
                self._pending_overload += skip
                self._dropped += skip
                dropped += skip
                x = x[skip:]
                n = self.capacity
            free = self.capacity - (self._w - self._r)
            if n > free:
                k = n - free
                self._drop_locked(k)
                dropped += k
            pos = self._w % self.capacity
            first = min(n, self.capacity - pos)
            self._buf[pos : pos + first] = x[:first]
            if first < n:
                self._buf[: n - first] = x[first:]
            self._w += n
            fill = self._w - self._r
            if fill > self.high_water:
                self.high_water = fill
        if self.notify is not None:
            self.notify.set()
        return dropped

    def mark_gap(self, gap: Gap) -> None:
        """The next written item follows a loss described by ``gap``."""
        with self._lock:
            self._marks.append(Tag(self._w, T.GAP, gap))

    def mark_anchor(self, anchor: TimeAnchor) -> None:
        """The next written item was captured at ``anchor.utc_ns``."""
        with self._lock:
            self._marks.append(Tag(self._w, T.TIME, anchor))
            self._last_anchor = (self._w, anchor)

    def mark(self, key: str, value: object) -> None:
        """Any other tag at the next written item."""
        with self._lock:
            self._marks.append(Tag(self._w, key, value))

    def close(self) -> None:
        """No more writes: readers see the end once the ring is drained."""
        with self._lock:
            self._closed = True
        if self.notify is not None:
            self.notify.set()

    def _drop_locked(self, k: int) -> None:
        if k <= 0:
            return
        new_r = self._r + k
        kept: list[Tag] = []
        for t in self._marks:
            if t.offset < new_r:
                if t.key == T.TIME:
                    self._last_anchor = (t.offset, t.value)
                elif t.key == T.GAP:
                    g: Gap = t.value
                    if g.cause == GapCause.OVERLOAD:
                        self._pending_overload += g.lost or 0
                    else:  # an xrun / sequence gap inside the dropped items: still reported, at the resume point
                        self._pending_marks.append(g)
                continue
            kept.append(t)
        self._marks = kept
        self._r = new_r
        self._dropped += k
        self._pending_overload += k
        self.overload_events += 1

    # -- consumer side (graph thread) -------------------------------------------------------------
    @property
    def available(self) -> int:
        with self._lock:
            return self._w - self._r

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._closed and self._w == self._r

    @property
    def dropped(self) -> int:
        return self._dropped

    @property
    def delivered(self) -> int:
        return self._delivered

    def read(self, max_items: int) -> tuple[np.ndarray, list[Tag]]:
        """Up to ``max_items`` items (a fresh array) and their tags at *delivered* offsets."""
        with self._lock:
            n = min(max_items, self._w - self._r)
            out_tags: list[Tag] = []
            base = self._delivered
            if self._pending_overload and (self._w - self._r) > 0:
                lost = self._pending_overload
                self._pending_overload = 0
                out_tags.append(Tag(base, T.GAP, Gap(lost=lost, cause=GapCause.OVERLOAD, detail="graph fell behind; oldest items dropped")))
                out_tags.extend(Tag(base, T.GAP, g) for g in self._pending_marks)
                self._pending_marks = []
                if self._last_anchor is not None:
                    a_off, a = self._last_anchor
                    shift_ns = int(round((self._r - a_off) * 1e9 / float(self.spec.rate)))
                    out_tags.append(Tag(base, T.TIME, replace(a, utc_ns=a.utc_ns + shift_ns)))
            if n <= 0:  # the overload news waits for the next real item
                return np.zeros((0, self.spec.channels), self.spec.dtype), []
            pos = self._r % self.capacity
            first = min(n, self.capacity - pos)
            out = np.empty((n, self.spec.channels), self.spec.dtype)
            out[:first] = self._buf[pos : pos + first]
            if first < n:
                out[first:] = self._buf[: n - first]
            stop = self._r + n
            keep: list[Tag] = []
            for t in self._marks:
                if t.offset < stop:
                    if t.key == T.TIME:
                        self._last_anchor = (t.offset, t.value)
                    out_tags.append(Tag(base + (t.offset - self._r), t.key, t.value))
                else:
                    keep.append(t)
            self._marks = keep
            self._r = stop
            self._delivered += n
        out_tags.sort(key=lambda t: t.offset)
        return out, self._merge_gaps(out_tags)

    @staticmethod
    def _merge_gaps(tags: list[Tag]) -> list[Tag]:
        """Several gaps of one cause at one offset become one (lost counts add up)."""
        res: list[Tag] = []
        for t in tags:
            if t.key == T.GAP and res:
                j = next((k for k in range(len(res) - 1, -1, -1) if res[k].offset == t.offset and res[k].key == T.GAP and res[k].value.cause == t.value.cause), None)
                if j is not None:
                    a: Gap = res[j].value
                    b: Gap = t.value
                    lost = None if a.lost is None and b.lost is None else (a.lost or 0) + (b.lost or 0)
                    detail = "; ".join(d for d in (a.detail, b.detail) if d)
                    res[j] = Tag(t.offset, T.GAP, Gap(lost=lost, cause=a.cause, filled=a.filled and b.filled, detail=detail))
                    continue
            res.append(t)
        return res
