"""Beam width x word penalty grid for lexicon-constrained RNN-T decoding (the language known).

The benchmark's code is in :mod:`streamkit.eval.bench.rnnt_lexicon_grid` (its docstring has the usage); this script runs it.
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # (before torch is imported)
os.environ.setdefault("MKL_NUM_THREADS", "1")

from streamkit.eval.bench.rnnt_lexicon_grid import main

if __name__ == "__main__":
    raise SystemExit(main())
