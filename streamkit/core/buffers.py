"""What the runtime keeps per block between calls: the tag mapper of a rate change and the window buffer of a window block."""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from fractions import Fraction
from math import floor

import numpy as np

from streamkit.core.tags import Gap
from streamkit.core.types import Tag

__all__ = ["TagMapper", "WindowBuffer", "round_half_up"]

_HALF = Fraction(1, 2)


def round_half_up(x: Fraction) -> int:
    return floor(x + _HALF)


class TagMapper:
    """Moves tags through a rate change: input ``i`` -> output ``round_half_up((i - in_base + delay) * ratio) + out_base``.

    Re-based after a reset so that the mapping restarts where the output actually is.
    Tags are held until the output reaches their offset (a resampler's output lags its input).
    """

    __slots__ = ("ratio", "delay", "in_base", "out_base", "pending")

    def __init__(self, ratio: Fraction, delay: Fraction) -> None:
        self.ratio = Fraction(ratio)
        self.delay = Fraction(delay)
        self.in_base = 0
        self.out_base = 0
        self.pending: deque[Tag] = deque()

    def map(self, offset: int) -> int:
        return self.out_base + round_half_up((Fraction(offset - self.in_base) + self.delay) * self.ratio)

    def rebase(self, in_index: int, out_index: int) -> None:
        self.in_base = in_index
        self.out_base = out_index

    def add(self, tag: Tag) -> None:
        value = tag.value
        if isinstance(value, Gap) and value.lost is not None and self.ratio != 1:  # ``lost`` counts items of the port it is on
            value = replace(value, lost=round_half_up(Fraction(value.lost) * self.ratio))
        self.pending.append(Tag(max(self.map(tag.offset), self.out_base), tag.key, value))

    def take(self, out_start: int, out_stop: int, final: bool = False) -> list[Tag]:
        res: list[Tag] = []
        p = self.pending
        last = max(out_start, out_stop - 1)
        while p and (final or p[0].offset < out_stop):
            t = p.popleft()
            off = t.offset
            if off < out_start:
                off = out_start
            elif final and off > last:
                off = last
            res.append(t if off == t.offset else Tag(off, t.key, t.value))
        return res


class WindowBuffer:
    """The runtime-owned history of a :class:`WindowBlock`."""

    __slots__ = ("window", "hop", "pad_start", "buf", "n", "pos", "real", "emitted")

    def __init__(self, window: int, hop: int, channels: int, dtype: np.dtype, pad_start: int, first_index: int = 0) -> None:
        self.window = window
        self.hop = hop
        self.pad_start = pad_start
        self.buf = np.zeros((max(2 * window, 1024), channels), dtype=dtype)
        self.n = pad_start
        self.pos = first_index - pad_start  # input index of buf[0] (negative inside the padding)
        self.real = 0
        self.emitted = 0

    def reset(self, index: int) -> None:
        self.buf[: self.pad_start] = 0
        self.n = self.pad_start
        self.pos = index - self.pad_start
        self.real = 0
        self.emitted = 0

    def append(self, x: np.ndarray, real: bool = True) -> None:
        m = x.shape[0]
        need = self.n + m
        if need > self.buf.shape[0]:
            nb = np.zeros((max(need, 2 * self.buf.shape[0]), self.buf.shape[1]), dtype=self.buf.dtype)
            nb[: self.n] = self.buf[: self.n]
            self.buf = nb
        self.buf[self.n : need] = x
        self.n = need
        if real:
            self.real += m

    def count(self) -> int:
        return (self.n - self.window) // self.hop + 1 if self.n >= self.window else 0

    def frames(self, k: int) -> np.ndarray:
        # the ndarray constructor on the (C-contiguous) buffer: the same read-only strided view as
        # numpy's as_strided, at a quarter of its cost (it is made on every call of a window block)
        s0, s1 = self.buf.strides
        v = np.ndarray((k, self.window, self.buf.shape[1]), self.buf.dtype, buffer=self.buf, strides=(self.hop * s0, s0, s1))
        v.flags.writeable = False
        return v

    def consume(self, k: int) -> None:
        adv = k * self.hop
        rest = self.n - adv
        if rest > 0:
            self.buf[:rest] = self.buf[adv : self.n]
        self.n = max(rest, 0)
        self.pos += adv
        self.emitted += k
