"""Open-set LID of the LID RNN-T: calibrate the ``unknown`` threshold on dev, measure it on test.

The benchmark's code is in :mod:`streamkit.eval.bench.rnnt_openset` (its docstring has the usage); this script runs it.
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # (before torch is imported)
os.environ.setdefault("MKL_NUM_THREADS", "1")

from streamkit.eval.bench.rnnt_openset import main

if __name__ == "__main__":
    raise SystemExit(main())
