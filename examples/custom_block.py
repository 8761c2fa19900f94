"""Write your own block: a numba DC blocker (the pattern of design section 11), and prove it streams.

    python examples/custom_block.py
"""

import numba as nb
import numpy as np

from streamkit import GapPolicy, SyncBlock
from streamkit.testing import assert_chunking_invariant, run_block


@nb.njit(cache=True, nogil=True)
def dc_block(x, r, state):
    y = np.empty_like(x)
    for c in range(x.shape[1]):
        xp, yp = state[0, c], state[1, c]
        for n in range(x.shape[0]):
            yn = x[n, c] - xp + r * yp
            y[n, c] = yn
            xp, yp = x[n, c], yn
        state[0, c], state[1, c] = xp, yp
    return y


class DCBlocker(SyncBlock):
    """y[n] = x[n] - x[n-1] + r y[n-1]; resets on gaps."""

    on_gap = GapPolicy.RESET

    def __init__(self, *, cutoff_hz=20.0, name=None):
        super().__init__(name=name)
        self.cutoff_hz = float(cutoff_hz)

    def start(self, ctx):
        spec = ctx.input_spec()
        self._r = np.float32(np.exp(-2 * np.pi * self.cutoff_hz / float(spec.rate)))
        self._state = np.zeros((2, spec.channels), np.float32)
        dc_block(ctx.dummy_input(n=1), self._r, self._state.copy())  # JIT warm-up, read-only like real chunks

    def work(self, x, ctx):
        return dc_block(x, self._r, self._state)

    def reset(self, cause=None):
        self._state[:] = 0


if __name__ == "__main__":
    x = (0.5 + np.random.default_rng(0).standard_normal((16000, 1)) * 0.1).astype(np.float32)
    assert_chunking_invariant(DCBlocker, x, rate=16000)
    y = run_block(DCBlocker(), x, rate=16000).samples
    print(f"mean before {x.mean():.3f}, after (last 0.5 s) {y[8000:].mean():.4f}; chunking invariant: yes")
