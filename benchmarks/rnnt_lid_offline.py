"""Utterance language ID of LID RNN-T models from the encoder and LID head alone (no decoders).

The benchmark's code is in :mod:`streamkit.eval.bench.rnnt_lid_offline` (its docstring has the usage); this script runs it.
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # (before torch is imported)
os.environ.setdefault("MKL_NUM_THREADS", "1")

from streamkit.eval.bench.rnnt_lid_offline import main

if __name__ == "__main__":
    raise SystemExit(main())
