"""Checks of block parameters, shared by the blocks: a bad value raises :class:`ConfigError` naming the parameter.

Graph files and ``set_params`` hand blocks plain YAML/JSON values, so a parameter is checked for
its type as well as its range: ``True`` is not a number here, and a float is not an int.

>>> number("threshold", 0.5, 0.0, 1.0)
0.5
>>> integer("vote_window", 7, 1, 1001)
7
>>> number("gamma", 0.0, 0.0, lo_open=True)
Traceback (most recent call last):
...
streamkit.core.errors.ConfigError: gamma must be a finite number > 0, got 0.0
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from streamkit.core.errors import ConfigError

__all__ = ["integer", "number", "optional_number"]


def _range(lo: float | None, hi: float | None, lo_open: bool) -> str:
    if lo is not None and hi is not None and not lo_open:
        return f" in [{lo:g}, {hi:g}]"
    parts = [f"{'>' if lo_open else '>='} {lo:g}"] if lo is not None else []
    parts += [f"<= {hi:g}"] if hi is not None else []
    return " " + " and ".join(parts) if parts else ""


def number(name: str, v: Any, lo: float | None = None, hi: float | None = None, *, lo_open: bool = False, finite: bool = True) -> float:
    """``v`` as a float: a real number (not a bool), finite unless ``finite=False`` (then only NaN is refused), in ``[lo, hi]``
    (``(lo, hi]`` with ``lo_open``; a bound of ``None`` is open-ended)."""
    ok = not isinstance(v, bool) and isinstance(v, (int, float, np.integer, np.floating))
    f = float(v) if ok else math.nan
    if not ok or math.isnan(f) or (finite and math.isinf(f)) or (lo is not None and (f < lo or (lo_open and f == lo))) or (hi is not None and f > hi):
        raise ConfigError(f"{name} must be a {'finite ' if finite else ''}number{_range(lo, hi, lo_open)}, got {v!r}")
    return f


def optional_number(
    name: str, v: Any, lo: float | None = None, hi: float | None = None, *, lo_open: bool = False, finite: bool = True
) -> float | None:
    """``None``, or ``v`` checked as by :func:`number`."""
    if v is None:
        return None
    try:
        return number(name, v, lo, hi, lo_open=lo_open, finite=finite)
    except ConfigError:
        raise ConfigError(f"{name} must be a {'finite ' if finite else ''}number{_range(lo, hi, lo_open)} or None, got {v!r}") from None


def integer(name: str, v: Any, lo: int, hi: int) -> int:
    """``v`` as an int: an integer (not a bool, not a float) in ``lo..hi``."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= int(v) <= hi:
        raise ConfigError(f"{name} must be an int in {lo}..{hi}, got {v!r}")
    return int(v)
