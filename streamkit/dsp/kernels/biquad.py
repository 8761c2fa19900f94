"""Second-order-section (biquad cascade) IIR filter kernel with explicit state.

Transposed direct form II per section, the arithmetic of ``scipy.signal.sosfilt``::

    y      = b0*x + z0
    z0'    = b1*x - a1*y + z1
    z1'    = b2*x - a2*y

computed in float64 whatever the input dtype; the state ``zi`` (sections, 2, channels) is updated
in place (the ``sosfilt(sos, x, zi=zi) -> zf`` pattern), so a stream filtered chunk by chunk is
bit-identical to the whole signal filtered at once.
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, nogil=True)
def sos_filter(x: np.ndarray, sos: np.ndarray, zi: np.ndarray) -> np.ndarray:
    """Filter ``x`` (n, channels) through the cascade ``sos`` (sections, 6), state ``zi`` in place.

    Args:
        x: (n, channels) input, float32 (any real dtype works; one compiled specialization each).
        sos: (sections, 6) float64 rows ``[b0, b1, b2, a0, a1, a2]`` with ``a0 == 1``.
        zi: (sections, 2, channels) float64 filter state, updated in place.

    Returns:
        (n, channels) float32 output.

    Raises:
        ValueError: the shapes of ``sos``/``zi`` do not fit ``x`` (checked: numba does not
            bounds-check, a mismatch would corrupt memory).
    """
    n, ch = x.shape
    ns = sos.shape[0]
    if sos.shape[1] != 6 or zi.shape[0] != ns or zi.shape[1] != 2 or zi.shape[2] != ch:
        raise ValueError("sos_filter: sos must be (sections, 6) and zi (sections, 2, channels of x)")
    y = np.empty((n, ch), dtype=np.float32)
    z = np.empty((ns, 2), dtype=np.float64)  # one channel's state, kept local in the hot loop
    for c in range(ch):
        for s in range(ns):
            z[s, 0] = zi[s, 0, c]
            z[s, 1] = zi[s, 1, c]
        for i in range(n):
            v = np.float64(x[i, c])
            for s in range(ns):
                out = sos[s, 0] * v + z[s, 0]
                z[s, 0] = sos[s, 1] * v - sos[s, 4] * out + z[s, 1]
                z[s, 1] = sos[s, 2] * v - sos[s, 5] * out
                v = out
            y[i, c] = v
        for s in range(ns):
            zi[s, 0, c] = z[s, 0]
            zi[s, 1, c] = z[s, 1]
    return y
