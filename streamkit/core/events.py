"""Events: results meant for people, storage or another graph.

A block calls ``ctx.emit(kind, payload, span=(a, b))``; the runtime fills in the stream name, the
emitting block, the clock domain of the span, UTC times from the anchors, the emit time and a
per-stream sequence number. Sinks receive :class:`Event` objects and usually write them as JSON
Lines (:func:`event_to_dict`).
"""

from __future__ import annotations

import dataclasses
import enum
import fnmatch
import json
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

# Standard kinds. Blocks declare the kinds they may emit in their ``emits`` class attribute.
STREAM_GAP = "stream.gap"
STREAM_XRUN = "stream.xrun"
STREAM_FORMAT = "stream.format"
STREAM_END = "stream.end"
SOURCE_STATE = "source.state"
BLOCK_ERROR = "block.error"
GRAPH_STATS = "graph.stats"
GRAPH_STALL = "graph.stall"
GRAPH_STATE = "graph.state"
LEVEL = "level.update"

RUNTIME_KINDS = (STREAM_GAP, STREAM_XRUN, STREAM_FORMAT, STREAM_END, SOURCE_STATE, BLOCK_ERROR, GRAPH_STATS, GRAPH_STALL, GRAPH_STATE)


@dataclass(frozen=True, slots=True)
class Event:
    """One result.

    Attributes:
        kind: dotted kind, e.g. ``"vad.segment"``, ``"stream.gap"``.
        stream: graph / station name.
        source: name of the emitting block (``"runtime"`` for the engine itself).
        port: clock domain of ``span``, e.g. ``"rs.out"``.
        span: ``[start, stop)`` absolute item indices on ``port``.
        t_start_ns: UTC of ``span[0]`` from the port's time anchors (None before any anchor).
        t_end_ns: UTC of ``span[1]``.
        emitted_ns: wall clock (``time.time_ns()``) when the block emitted it.
        seq: per-stream sequence number, strictly increasing.
        payload: a frozen dataclass (or dict) specific to ``kind``.
    """

    kind: str
    stream: str
    source: str
    port: str
    span: tuple[int, int]
    t_start_ns: int | None
    t_end_ns: int | None
    emitted_ns: int
    seq: int
    payload: Any = None


# --- payloads of the runtime's own events -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GapInfo:
    """Payload of ``stream.gap``: items lost at ``span[0]``."""

    cause: str
    lost: int | None
    filled: bool
    total_lost: int
    count: int
    detail: str = ""


@dataclass(frozen=True, slots=True)
class XrunInfo:
    """Payload of ``stream.xrun``: the audio device reported an overflow."""

    flags: str
    count: int


@dataclass(frozen=True, slots=True)
class SourceState:
    """Payload of ``source.state``: connecting / open / retrying / closed / fatal."""

    state: str
    detail: str = ""
    retry_in_s: float | None = None
    attempt: int = 0


@dataclass(frozen=True, slots=True)
class BlockErrorInfo:
    """Payload of ``block.error``."""

    error: str
    message: str
    policy: str
    traceback: str
    consecutive: int


@dataclass(frozen=True, slots=True)
class LevelInfo:
    """Payload of ``level.update``: signal level over the span."""

    rms_dbfs: float
    peak_dbfs: float


@dataclass(frozen=True, slots=True)
class ActivitySegment:
    """Payload of ``vad.segment``-style events: an interval judged active."""

    detector: str
    score: float
    start_s: float
    end_s: float


def _jsonable(x: Any) -> Any:
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _jsonable(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, enum.Enum):
        return x.value
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, Fraction):
        return float(x) if x.denominator != 1 else int(x)
    if isinstance(x, np.generic):
        return _jsonable(x.item())
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return str(x)


def event_to_dict(ev: Event) -> dict[str, Any]:
    """A JSON-ready dict of an event (payload dataclasses become dicts)."""
    return {
        "kind": ev.kind,
        "stream": ev.stream,
        "source": ev.source,
        "port": ev.port,
        "span": [int(ev.span[0]), int(ev.span[1])],
        "t_start_ns": ev.t_start_ns,
        "t_end_ns": ev.t_end_ns,
        "emitted_ns": ev.emitted_ns,
        "seq": ev.seq,
        "payload": _jsonable(ev.payload),
    }


def event_to_json(ev: Event) -> str:
    """One JSON Lines record."""
    return json.dumps(event_to_dict(ev), separators=(",", ":"), allow_nan=False)


def kind_matches(kind: str, patterns: tuple[str, ...] | None) -> bool:
    """True when ``kind`` matches any shell-style pattern (``"asr.*"``); None matches all."""
    if patterns is None:
        return True
    return any(fnmatch.fnmatchcase(kind, p) for p in patterns)
