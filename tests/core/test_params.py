"""The shared parameter checks of ``streamkit.core.params``, used by every block that validates numbers."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest

from streamkit.core.errors import ConfigError
from streamkit.core.params import integer, number, optional_number


def test_number_checks_type_finiteness_and_range():
    assert number("x", 3) == 3.0 and isinstance(number("x", np.float32(0.5), 0.0, 1.0), float)
    for bad in (True, "1", None, math.nan, math.inf):
        with pytest.raises(ConfigError, match="x must be a finite number"):
            number("x", bad)
    with pytest.raises(ConfigError, match=r"x must be a finite number in \[0, 1\], got 1.5"):
        number("x", 1.5, 0.0, 1.0)
    with pytest.raises(ConfigError, match="gamma must be a finite number > 0, got 0"):
        number("gamma", 0, 0.0, lo_open=True)
    assert number("tau", math.inf, 0.0, finite=False) == math.inf
    with pytest.raises(ConfigError, match="tau must be a number >= 0"):
        number("tau", math.nan, 0.0, finite=False)


def test_optional_number_and_integer():
    assert optional_number("s_th", None, 0.0) is None and optional_number("s_th", 2, 0.0) == 2.0
    with pytest.raises(ConfigError, match="s_th must be a finite number >= 0 or None, got -1"):
        optional_number("s_th", -1, 0.0)
    assert integer("n", np.int64(4), 1, 8) == 4
    for bad in (True, 4.0, 0, 9, "4"):
        with pytest.raises(ConfigError, match=r"n must be an int in 1\.\.8"):
            integer("n", bad, 1, 8)


@pytest.mark.parametrize("module", ["streamkit.dsp.stat_sad", "streamkit.models.sad_dnn_block", "streamkit.models.sed_stream", "streamkit.models.rnnt_stream"])
def test_blocks_use_the_shared_checks(module):
    m = importlib.import_module(module)
    assert not hasattr(m, "_num") and not hasattr(m, "_int")  # no private copy left
    assert m.number is number and m.integer is integer


def test_block_parameters_are_checked_by_the_shared_helper():
    from streamkit.dsp.stat_sad import StatSAD
    from streamkit.models.sad_dnn_block import SadDnnBlock

    with pytest.raises(ConfigError, match="vote_window must be an int in 1..1001"):
        SadDnnBlock(vote_window=0)
    with pytest.raises(ConfigError, match="hysteresis must be a finite number >= 0"):
        StatSAD(hysteresis=-1.0)
