"""Parameters of graph files: declared graph parameters, ``${name}`` references, block overrides.

A graph file may declare its own parameters, each with a default and a help text, and use them in
any value below ``blocks``, ``events``, ``run`` (and ``name``)::

    parameters:
      input: {default: input.wav, help: audio file to read}
      threshold: 0.185                      # short form: the default alone
    blocks:
      src: {type: io.file, path: "${input}"}
      sad: {type: dsp.stat_sad, threshold: "${threshold}"}
      out: {type: io.wav_sink, path: "out/${input}.8k.wav"}

A value that is exactly ``"${name}"`` becomes the parameter's value with its type (a number stays a
number, a list a list); ``${name}`` inside a longer string is replaced by the value's text; ``$${``
writes a literal ``${``. A parameter without a default must be given.

Overrides (:func:`apply_params`, ``streamkit run/bench/describe --set KEY=VALUE``) are a mapping:

* ``name``: a declared graph parameter;
* ``block.param``: a block's parameter, set after the references are replaced (it wins over the
  file's value).

Unknown names are a :class:`~streamkit.core.errors.ConfigError` naming what is known; a value of the
wrong type is the block's own ConfigError when the block is built.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from streamkit.core.errors import ConfigError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_REF = re.compile(r"\$\$\{|\$\{([^}]*)\}")
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\Z")
_DECL_KEYS = {"default", "help"}
_REQUIRED = object()


def parse_assignments(items: Iterable[str], option: str = "--set") -> dict[str, Any]:
    """``["src.path=x.wav", "threshold=0.2"]`` -> ``{"src.path": "x.wav", "threshold": 0.2}``.

    Each value is read as YAML (numbers, booleans, ``null``, ``[lists]``, ``{mappings}``, else a
    string; quote it to force a string: ``name='"no"'``); ``1e-3`` and ``inf`` are numbers too.
    """
    import yaml

    out: dict[str, Any] = {}
    for item in items:
        key, eq, text = str(item).partition("=")
        key = key.strip()
        if not eq or not key:
            raise ConfigError(f"{option} {item!r}: want NAME=VALUE (a graph parameter) or BLOCK.PARAM=VALUE (a block parameter)")
        try:
            value = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError as exc:
            raise ConfigError(f"{option} {key}: cannot read {text!r} as a YAML value: {str(exc).splitlines()[0]}") from None
        if isinstance(value, str) and value == text.strip():  # not quoted: YAML 1.1 reads 1e-3 and inf as strings
            if _NUMBER.match(value) or value.lower() in ("inf", "+inf", "-inf"):
                value = float(value)
        if key in out:
            raise ConfigError(f"{option} {key} given twice")
        out[key] = value
    return out


def declared_parameters(spec: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The graph's ``parameters`` section as ``name -> {"default": value (absent: required), "help": text}``."""
    raw = spec.get("parameters")
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError("graph spec: 'parameters' must be a mapping name -> {default: VALUE, help: TEXT} (or name -> default)")
    out: dict[str, dict[str, Any]] = {}
    for name, decl in raw.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigError(f"graph spec: parameters: bad name {name!r} (letters, digits and _; no dots: a dot names a block's parameter)")
        if isinstance(decl, Mapping):
            unknown = set(decl) - _DECL_KEYS
            if unknown:
                raise ConfigError(f"graph spec: parameters.{name}: unknown keys {sorted(unknown)} (known: default, help)")
            d = {"help": str(decl.get("help", ""))}
            if "default" in decl:
                d["default"] = decl["default"]
        else:
            d = {"default": decl, "help": ""}
        out[name] = d
    return out


def _block_param_names(type_name: str) -> list[str] | None:
    """The keyword parameters of a block type, or None when it takes any (``**params``)."""
    from streamkit.core.registry import lookup

    sig = inspect.signature(lookup(type_name).__init__)
    names = []
    for p in list(sig.parameters.values())[1:]:
        if p.kind == p.VAR_KEYWORD:
            return None
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "name":
            names.append(p.name)
    return names


def _substitute(value: Any, values: Mapping[str, Any], where: str) -> Any:
    if isinstance(value, str):
        m = _REF.fullmatch(value)
        if m is not None and m.group(1) is not None:
            return values[_known(m.group(1), values, where)]

        def text(m: re.Match[str]) -> str:
            if m.group(1) is None:  # "$${": a literal "${"
                return "${"
            v = values[_known(m.group(1), values, where)]
            return "" if v is None else str(v)

        return _REF.sub(text, value)
    if isinstance(value, list):
        return [_substitute(v, values, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        return {k: _substitute(v, values, f"{where}.{k}") for k, v in value.items()}
    return value


def _known(name: str, values: Mapping[str, Any], where: str) -> str:
    name = name.strip()
    if name not in values:
        have = f"declared: {', '.join(sorted(values))}" if values else "the graph declares no 'parameters'"
        raise ConfigError(f"graph spec: {where}: unknown graph parameter ${{{name}}} ({have})")
    return name


def apply_params(spec: Mapping[str, Any], params: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The spec with its ``${}`` references replaced and ``params`` applied, and the graph parameters' values.

    ``params``: ``{"name": value}`` for declared graph parameters, ``{"block.param": value}`` for
    block parameters. The returned spec has no ``parameters`` section.
    """
    decl = declared_parameters(spec)
    graph_set: dict[str, Any] = {}
    block_set: dict[str, tuple[str, Any]] = {}
    for key, value in (params or {}).items():
        key = str(key)
        if "." in key:
            blk, _, param = key.partition(".")
            if not blk or not param or "." in param:
                raise ConfigError(f"bad parameter name {key!r}: want BLOCK.PARAM (a block's parameter) or NAME (a graph parameter)")
            block_set[key] = (blk, value)
        elif key in decl:
            graph_set[key] = value
        else:
            have = f"declared: {', '.join(decl)}" if decl else "this graph declares no 'parameters'"
            in_file = spec.get("blocks")
            names = ", ".join(map(str, in_file)) if isinstance(in_file, Mapping) else ""
            raise ConfigError(
                f"unknown graph parameter {key!r} ({have}); a block's parameter is BLOCK.PARAM" + (f" (blocks: {names})" if names else "")
            )
    values: dict[str, Any] = {n: graph_set[n] if n in graph_set else d.get("default", _REQUIRED) for n, d in decl.items()}
    missing = [n for n, v in values.items() if v is _REQUIRED]
    if missing:
        n = missing[0]
        raise ConfigError(f"graph parameter {n!r} has no default: give it a value (streamkit run GRAPH --set {n}=VALUE)")
    out = {k: _substitute(v, values, k) for k, v in spec.items() if k != "parameters"}
    if block_set:
        given = out.get("blocks")
        if not isinstance(given, Mapping):
            raise ConfigError("graph spec: 'blocks' must be a non-empty mapping of name -> {type: ..., params}")
        blocks: dict[Any, Any] = {k: dict(v) if isinstance(v, Mapping) else v for k, v in given.items()}
        out["blocks"] = blocks
        for key, (blk, value) in block_set.items():
            param = key.partition(".")[2]
            if blk not in blocks:
                raise ConfigError(f"unknown block {blk!r} in {key} (blocks: {', '.join(map(str, blocks))})")
            bspec = blocks[blk]
            if not isinstance(bspec, dict) or "type" not in bspec:
                raise ConfigError(f"graph spec: blocks.{blk} must be a mapping with a 'type'")
            if param == "type":
                raise ConfigError(f"{key}: a block's type is not a parameter")
            known = _block_param_names(str(bspec["type"]))
            if known is not None and param not in known:
                raise ConfigError(f"block {blk!r} ({bspec['type']}) has no parameter {param!r} (its parameters: {', '.join(known)})")
            bspec[param] = value
    return out, values


def format_value(v: Any) -> str:
    """A parameter value as a graph file would write it (for ``describe``)."""
    if isinstance(v, float) and math.isinf(v):
        return ".inf" if v > 0 else "-.inf"
    return repr(v) if isinstance(v, str) else str(v)
