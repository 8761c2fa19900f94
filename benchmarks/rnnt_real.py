"""The LID RNN-T on real English beside pocketsphinx, and the synthetic split's shutoff figures, one run.

The benchmark's code is in :mod:`streamkit.eval.bench.rnnt_real` (its docstring has the usage); this script runs it.
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # (before torch is imported)
os.environ.setdefault("MKL_NUM_THREADS", "1")

from streamkit.eval.bench.rnnt_real import main

if __name__ == "__main__":
    raise SystemExit(main())
