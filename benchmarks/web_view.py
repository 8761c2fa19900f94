"""The live view's cost: server CPU per viewed station and bytes per second per station per viewer (1, 10, 100 stations x 1, 5 viewers).

The benchmark's code is in :mod:`streamkit.eval.bench.web_view` (its docstring has the usage); this script runs it.
"""

from streamkit.eval.bench.web_view import main

if __name__ == "__main__":
    raise SystemExit(main())
