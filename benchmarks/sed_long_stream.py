"""The SED block on long recordings: eval clips joined into continuous streams, with and without clip gates.

The benchmark's code is in :mod:`streamkit.eval.bench.sed_long_stream` (its docstring has the usage); this script runs it.
"""

from streamkit.eval.bench.sed_long_stream import main

if __name__ == "__main__":
    raise SystemExit(main())
