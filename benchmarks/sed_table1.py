"""The paper's Table 1 on our SED corpus: six training methods, real and synthetic domain.

The benchmark's code is in :mod:`streamkit.eval.bench.sed_table1` (its docstring has the usage); this script runs it.
"""

from streamkit.eval.bench.sed_table1 import main

if __name__ == "__main__":
    raise SystemExit(main())
