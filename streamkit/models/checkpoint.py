"""Weight files of streamkit's models: one format, one loader, one set of error messages.

A file is a ``torch.save`` of ``{"format": FORMAT, "config": cfg.to_dict(), "state_dict": ...,
"meta": {...}}`` plus any extra keys a model family needs (e.g. a decision threshold). It is
written atomically (temporary file, then rename) and read with ``weights_only=True`` (no pickled
code runs). Every way a file can be wrong raises :class:`~streamkit.core.errors.ModelError` naming
the file: missing, not a torch file (corrupt, truncated), another format, an invalid config, a
config that differs from what the caller expects, a state dict that does not fit its config.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch

from streamkit.core.errors import ModelError
from streamkit.io.outputs import write_bytes

__all__ = ["load_checkpoint", "save_checkpoint"]


class _Config(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


C = TypeVar("C", bound=_Config)
M = TypeVar("M", bound=torch.nn.Module)


def save_checkpoint(path: str | Path, fmt: str, model: torch.nn.Module, cfg: _Config, *, meta: Mapping[str, Any] | None = None,
                    storage_dtype: torch.dtype | None = None, **extra: Any) -> Path:  # fmt: skip
    """Write ``{format, config, state_dict, meta, **extra}`` atomically; returns the path.

    ``storage_dtype`` (e.g. ``torch.float16``) stores the floating-point tensors in that type (half
    the size of a shipped file); :func:`load_checkpoint` loads them into the model's own float32
    parameters (``load_state_dict`` converts), and the file records ``"storage_dtype"``.
    """
    path = Path(path)

    def stored(v: torch.Tensor) -> torch.Tensor:
        v = v.detach().cpu().clone()
        return v.to(storage_dtype) if storage_dtype is not None and v.is_floating_point() else v

    obj = {
        "format": fmt,
        "config": cfg.to_dict(),
        "state_dict": {k: stored(v) for k, v in model.state_dict().items()},
        "meta": dict(meta or {}),
        **extra,
    }
    if storage_dtype is not None:
        obj["storage_dtype"] = str(storage_dtype).removeprefix("torch.")
    buf = io.BytesIO()
    torch.save(obj, buf)
    write_bytes(path, buf.getvalue())
    return path


def load_checkpoint(
    path: str | Path,
    *,
    fmt: str,
    what: str,
    from_dict: Callable[[Mapping[str, Any]], C],
    build: Callable[[C], M],
    expect: C | Mapping[str, Any] | None = None,
    missing_hint: str = "",
    article: str = "a",
) -> tuple[M, C, dict[str, Any]]:
    """Read a file written by :func:`save_checkpoint`: ``(model in eval mode, config, raw dict)``.

    Args:
        fmt: the format string the file must carry.
        what: the model family in messages ("RNN-T", "SAD-DNN", ...).
        from_dict: the config class's constructor from a dict (may raise TypeError/ValueError/ModelError).
        build: model from config.
        expect: a config, or some of its fields, the file must match.
        missing_hint: appended to the not-found message (e.g. how to train one).
        article: "a" or "an" before ``what`` ("an RNN-T weight file").

    Raises:
        ModelError: see the module docstring.
    """
    p = Path(path)
    if not p.is_file():
        raise ModelError(f"{what} weight file not found: {p}{missing_hint}")
    try:
        obj = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling/zip error means a corrupt file
        raise ModelError(f"{what} weight file {p} is corrupt or not a torch file: {type(exc).__name__}: {exc}") from None
    if not isinstance(obj, dict) or obj.get("format") != fmt:
        got = obj.get("format") if isinstance(obj, dict) else type(obj).__name__
        raise ModelError(f"{p} is not {article} {what} weight file (format {got!r}, expected {fmt!r})")
    try:
        cfg = from_dict(obj.get("config") or {})
    except (TypeError, ValueError) as exc:
        raise ModelError(f"{p}: invalid model config: {exc}") from None
    if expect is not None:
        try:
            want = from_dict({**cfg.to_dict(), **(expect.to_dict() if hasattr(expect, "to_dict") else dict(expect))})  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            raise ModelError(f"invalid expected config: {exc}") from None
        if want != cfg:
            w, c = want.to_dict(), cfg.to_dict()
            diff = {k: (w[k], c.get(k)) for k in w if c.get(k) != w[k]}
            raise ModelError(f"{p}: weight file config does not match the requested one (requested, file): {diff}")
    model = build(cfg)
    try:
        model.load_state_dict(obj["state_dict"], strict=True)
    except (RuntimeError, KeyError, TypeError) as exc:
        raise ModelError(f"{p}: weights do not match their config {cfg.to_dict()}: {str(exc).splitlines()[0]}") from None
    model.eval()
    return model, cfg, obj
