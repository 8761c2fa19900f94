"""The singer-ID paper's Table 2 on a synthetic singers corpus: CRNN / residual BLSTM x log-mel / MFCC / STFT, split by recording.

The benchmark's code is in :mod:`streamkit.eval.bench.singer_table2` (its docstring has the usage); this script runs it.
"""

from streamkit.eval.bench.singer_table2 import main

if __name__ == "__main__":
    raise SystemExit(main())
