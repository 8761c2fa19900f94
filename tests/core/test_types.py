"""StreamSpec, Chunk, Tag, exact rates."""

from fractions import Fraction

import numpy as np
import pytest

from streamkit.core.errors import ConfigError
from streamkit.core.types import Chunk, StreamSpec, Tag, as_fraction, readonly


def test_float_rate_is_exact_decimal():
    assert as_fraction(12001.188) == Fraction(3000297, 250)
    assert as_fraction("12001.188") == Fraction(3000297, 250)
    assert as_fraction(8000) == Fraction(8000)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "abc", True])
def test_bad_rates_rejected(bad):
    with pytest.raises(ConfigError):
        as_fraction(bad)


def test_streamspec_normalises_and_validates():
    s = StreamSpec(12001.188, 2, "float32")
    assert s.rate == Fraction(3000297, 250) and s.channels == 2 and s.dtype == np.float32
    assert StreamSpec.from_dict(s.to_dict()) == s
    assert s.replace(channels=1).channels == 1
    with pytest.raises(ConfigError):
        StreamSpec(8000, 0)
    with pytest.raises(ConfigError):
        StreamSpec(8000, 1, "int64")
    assert s.items(1.0) == 12001 and abs(s.seconds(12001) - 12001 / 12001.188) < 1e-12


def test_chunk_stop_and_tags():
    x = readonly(np.zeros((10, 1), np.float32))
    c = Chunk(100, x, (Tag(105, "user:a", 1),))
    assert c.stop == 110 and len(c) == 10 and not c.samples.flags.writeable
    assert c.tags_with("user:a")[0].offset == 105
