"""SED on real recordings (the eval split of `streamkit corpus real`): the shipped model and others in one run.

The benchmark's code is in :mod:`streamkit.eval.bench.sed_real` (its docstring has the usage); this script runs it.
"""

from streamkit.eval.bench.sed_real import main

if __name__ == "__main__":
    raise SystemExit(main())
