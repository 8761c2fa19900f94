"""Per-class post-processing fitted on validation: does it change the Table 1 ranking?

The benchmark's code is in :mod:`streamkit.eval.bench.sed_post_tune` (its docstring has the usage); this script runs it.
"""

from streamkit.eval.bench.sed_post_tune import main

if __name__ == "__main__":
    raise SystemExit(main())
