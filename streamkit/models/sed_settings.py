"""Settings of the sliding-window sound event detector: defaults, per-class parameters, and where
the weights and the post-processing come from.

Shared by the engine (:mod:`streamkit.models.sed_engine`), the block ``models.sed``
(:mod:`streamkit.models.sed_stream`), the functions without a graph
(:mod:`streamkit.models.sed_offline`) and ``streamkit sed``. Importing it does not import torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from streamkit.core.errors import ConfigError
from streamkit.core.params import number

if TYPE_CHECKING:
    from streamkit.models.sed_crnn import SedModel

__all__ = [
    "DEFAULT_HIGH",
    "DEFAULT_HOP_S",
    "DEFAULT_LOW",
    "DEFAULT_MEDIAN_S",
    "DEFAULT_WINDOW_S",
    "POSTS",
    "PerClass",
    "check_per_class",
    "check_post",
    "default_weights",
    "load_meta",
    "per_class_values",
    "resolve_gate",
    "resolve_post",
]

DEFAULT_WINDOW_S = 10.0
DEFAULT_HOP_S = 1.0
DEFAULT_MEDIAN_S = 0.45  # the DCASE 2020 baseline's median window (= sed_post.DEFAULT_MEDIAN_S)
DEFAULT_HIGH = 0.5  # = sed_post.DEFAULT_THRESHOLD, what the trainer selects models with
DEFAULT_LOW = None  # None: = threshold_high (no hysteresis)


# ------------------------------------------------------------------------------------------------
# per-class parameters
# ------------------------------------------------------------------------------------------------


PerClass = float | Sequence[float] | Mapping[str, float]


def check_per_class(name: str, v: Any, lo: float, hi: float) -> Any:
    """Validate a number, a list of numbers or a {class: number} mapping (class names checked in start)."""
    if isinstance(v, Mapping):
        if not v:
            raise ConfigError(f"{name}: empty mapping")
        return {str(k): number(f"{name}[{k!r}]", x, lo, hi) for k, x in v.items()}
    if isinstance(v, (list, tuple, np.ndarray)):
        if len(v) == 0:
            raise ConfigError(f"{name}: empty list")
        return [number(f"{name}[{i}]", x, lo, hi) for i, x in enumerate(v)]
    return number(name, v, lo, hi)


def per_class_values(name: str, v: Any, classes: Sequence[str], default: float | None = None) -> np.ndarray:
    """Expand a validated per-class value to an array over ``classes`` (a mapping may omit classes when a default is given)."""
    n = len(classes)
    if isinstance(v, Mapping):
        unknown = sorted(set(v) - set(classes))
        if unknown:
            raise ConfigError(f"{name}: unknown classes {unknown}; the model's are {list(classes)}")
        missing = [c for c in classes if c not in v]
        if missing and default is None:
            raise ConfigError(f"{name}: no value for classes {missing}")
        return np.array([float(v.get(c, default)) for c in classes], dtype=np.float64)
    if isinstance(v, list):
        if len(v) != n:
            raise ConfigError(f"{name}: {len(v)} values for the model's {n} classes")
        return np.array(v, dtype=np.float64)
    return np.full(n, float(v), dtype=np.float64)


# ------------------------------------------------------------------------------------------------
# weights and post-processing
# ------------------------------------------------------------------------------------------------


def default_weights() -> Path:
    """The shipped SED weights (``streamkit.models.SED_WEIGHTS``).

    Raises:
        ConfigError: none shipped (yet), or the file is missing.
    """
    import streamkit.models as sm

    path = getattr(sm, "SED_WEIGHTS", None)
    if path is None:
        raise ConfigError("no shipped SED weights yet (streamkit.models.SED_WEIGHTS is not defined); pass a weight file (weights=... / --weights PATH), "
                          "e.g. one written by `streamkit train sed`")  # fmt: skip
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"the shipped SED weights {p} are missing; pass a weight file (weights=... / --weights PATH)")
    return p


def load_meta(model: Any) -> tuple[SedModel, dict[str, Any]]:
    """A model and its weight file's meta, from a path or from a :class:`SedModel` (then with an empty meta)."""
    from streamkit.models.sed_crnn import SedModel, load_model

    if isinstance(model, SedModel):
        return model.eval(), {}
    return load_model(model)


POSTS = ("auto", "fixed", "tuned")


def check_post(post: Any) -> str:
    if post not in POSTS:
        raise ConfigError(f"post must be one of {', '.join(POSTS)}, got {post!r}")
    return str(post)


def resolve_post(
    post: str, meta: Mapping[str, Any], classes: Sequence[str], median_s: PerClass | None, threshold_high: PerClass | None, where: str
) -> tuple[PerClass, PerClass, str]:
    """The median windows and on-thresholds to run with: ``(median_s, threshold_high, "fixed" | "tuned")``.

    ``fixed``: ``median_s`` and ``threshold_high`` (None: 0.45 s and 0.5). ``tuned``: per class
    from the weight file's ``meta["post_tuned"]`` (``streamkit train sed-post``); ConfigError when it
    has none, a malformed one, or when ``median_s`` / ``threshold_high`` are given too. ``auto``:
    ``tuned`` when the file has a setting and neither value is given, else ``fixed``.
    """
    from streamkit.models.sed_post import META_KEY, post_from_meta

    post = check_post(post)
    given = median_s is not None or threshold_high is not None
    if post == "auto":
        post = "tuned" if not given and META_KEY in meta else "fixed"
    if post == "fixed":
        return (DEFAULT_MEDIAN_S if median_s is None else median_s), (DEFAULT_HIGH if threshold_high is None else threshold_high), "fixed"
    if given:
        raise ConfigError("post='tuned' takes the median windows and thresholds from the weight file; leave median_s / threshold_high unset")
    try:
        med, high = post_from_meta(meta, classes, where=where)
    except ValueError as exc:
        raise ConfigError(f"post='tuned': {exc}") from None
    return med, high, "tuned"


def resolve_gate(post_used: str, meta: Mapping[str, Any], classes: Sequence[str], clip_gate: PerClass | None, where: str) -> PerClass:
    """The clip gates to run with: ``clip_gate`` when given; else the weight file's tuned gates when
    the post-processing in use is ``tuned`` and the tuning has them (``streamkit train sed-post``);
    else 0 (none)."""
    from streamkit.models.sed_post import clip_gate_from_meta

    if clip_gate is not None:
        return check_per_class("clip_gate", clip_gate, 0.0, 1.0)
    if post_used != "tuned":
        return 0.0
    try:
        gates = clip_gate_from_meta(meta, classes, where=where)
    except ValueError as exc:
        raise ConfigError(f"post='tuned': {exc}") from None
    return 0.0 if gates is None else gates
