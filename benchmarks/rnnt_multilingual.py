"""Streaming multilingual RNN-T on our espeak-ng corpus: the paper's Tables 2/4/5/7, one thread.

The benchmark's code is in :mod:`streamkit.eval.bench.rnnt_multilingual` (its docstring has the usage); this script runs it.
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # (before torch is imported)
os.environ.setdefault("MKL_NUM_THREADS", "1")

from streamkit.eval.bench.rnnt_multilingual import main

if __name__ == "__main__":
    raise SystemExit(main())
