"""Streaming ASR step costs: the packed one-step LSTM cell against ``nn.LSTM``, per call and in the whole block.

The benchmark's code is in :mod:`streamkit.eval.bench.rnnt_step` (its docstring has the usage); this script runs it.
"""

from streamkit.eval.bench.rnnt_step import main

if __name__ == "__main__":
    raise SystemExit(main())
