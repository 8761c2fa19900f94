"""``drain(ctx)`` is part of the block lifecycle: a method of :class:`Block` with a no-op default, which
the runtime calls on a rate block that defines its own, before the reset at a gap."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from streamkit.core import tags as T
from streamkit.core.block import Block, GapPolicy, RateBlock
from streamkit.core.tags import Gap, GapCause
from streamkit.testing import run_block

RATE = 8000


class Delay(RateBlock):
    """Holds back the last ``d`` items (a delay line); ``drain`` hands them on."""

    on_gap = GapPolicy.RESET

    def __init__(self, *, d: int = 3, drains: bool = True, name: str | None = None) -> None:
        super().__init__(name=name)
        self.d = d
        self.drains = drains
        self.drained_at: list[int] = []

    def negotiate(self, inputs):
        self.ratio = Fraction(1)
        self.delay = Fraction(0)  # output item k is input item k, only later
        return {"out": inputs["in"]}

    def start(self, ctx):
        self._held = np.zeros((0, 1), np.float32)

    def work(self, x, ctx):
        buf = np.concatenate([self._held, x])
        self._held = buf[-self.d :].copy()
        return buf[: -self.d]

    def drain(self, ctx):
        if not self.drains:
            return super().drain(ctx)
        self.drained_at.append(ctx.position)
        out, self._held = self._held, np.zeros((0, 1), np.float32)
        return out

    def reset(self, cause=None):
        self._held = np.zeros((0, 1), np.float32)

    def flush(self, ctx):
        return self._held


class NoDrain(Delay):
    """The same delay line without its own ``drain``: what it holds at a gap is dropped by ``reset``."""

    drain = Block.drain


def test_block_has_a_no_op_drain_in_its_lifecycle():
    assert Block().drain(None) is None  # type: ignore[arg-type]
    import streamkit.core.block as block_module

    assert "drain(ctx)" in (block_module.__doc__ or "")


def test_runtime_drains_a_rate_block_before_the_reset_at_a_gap():
    x = np.arange(1, 1001, dtype=np.float32)[:, None]
    gap = Gap(lost=5, cause=GapCause.SEQ_GAP)
    blk = Delay()
    out = run_block(blk, x, rate=RATE, sizes=100, gaps=[(450, gap)])
    assert blk.drained_at == [450]
    np.testing.assert_array_equal(out.samples, x)  # nothing lost but what the source lost
    assert [t.offset for t in out.tags if t.key == T.GAP] == [450]


def test_a_block_without_its_own_drain_loses_what_it_held():
    x = np.arange(1, 1001, dtype=np.float32)[:, None]
    out = run_block(NoDrain(), x, rate=RATE, sizes=100, gaps=[(450, Gap(lost=5, cause=GapCause.SEQ_GAP))])
    assert out.samples.shape[0] == 1000 - 3  # the three items held at the gap went with the reset
    np.testing.assert_array_equal(out.samples[:447], x[:447])
