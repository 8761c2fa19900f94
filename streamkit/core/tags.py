"""Standard tag keys and their value types.

A tag is a fact at an exact item index (see :class:`~streamkit.core.types.Tag`). These are the
keys every block understands; blocks may add their own under ``"user:"`` or their module's prefix.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from streamkit.core.types import StreamSpec

TIME = "sk:time"  #: TimeAnchor: UTC of the item at the tag's offset
GAP = "sk:gap"  #: Gap: items were lost before the tag's offset
FORMAT = "sk:format"  #: FormatChange: the stream format changes at the tag's offset
EOS = "sk:eos"  #: EndOfStream: no item follows
PARAM = "sk:param"  #: ParamChange: a block applied staged parameters here
SPEECH = "sk:speech"  #: SpeechBoundary: speech starts or ends at the tag's offset

STANDARD_KEYS = (TIME, GAP, FORMAT, EOS, PARAM, SPEECH)


@dataclass(frozen=True, slots=True)
class TimeAnchor:
    """UTC time of the item at the tag's offset.

    The time of item ``i`` is ``utc_ns + (i - offset) * 1e9 / rate`` using the nearest preceding
    anchor. ``source`` ranks how trustworthy it is: ``gps`` > ``device`` > ``host`` > ``file``.

    Attributes:
        utc_ns: nanoseconds since the Unix epoch.
        source: ``"gps"``, ``"device"``, ``"host"``, ``"file"`` or ``"synthetic"``.
        uncertainty_ns: a rough bound on the error, 0 when unknown.
    """

    utc_ns: int
    source: str = "host"
    uncertainty_ns: int = 0


class GapCause(str, enum.Enum):
    """Why items were lost."""

    XRUN = "xrun"  #: the audio device overflowed (PortAudio input overflow)
    SEQ_GAP = "seq_gap"  #: a network source saw a sequence-number jump
    RECONNECT = "reconnect"  #: the source reconnected; what came in between is lost
    OVERLOAD = "overload"  #: the graph fell behind and the source ring dropped the oldest items
    BLOCK_ERROR = "block_error"  #: a block failed and its output was replaced by zeros
    RESTART = "restart"  #: the graph was restarted
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Gap:
    """Items were lost just before the tag's offset.

    Attributes:
        lost: number of items lost (in this port's rate), or None when unknown.
        cause: why.
        filled: True when zeros were inserted in place of the lost items (then the index did
            advance by ``lost``); False when the index simply continues.
        detail: free text for people (e.g. the error message).
    """

    lost: int | None = None
    cause: GapCause = GapCause.OTHER
    filled: bool = False
    detail: str = ""


@dataclass(frozen=True, slots=True)
class FormatChange:
    """From the tag's offset on, the port carries ``spec``. Downstream blocks renegotiate."""

    spec: StreamSpec


@dataclass(frozen=True, slots=True)
class EndOfStream:
    """The stream ends at the tag's offset."""

    reason: str = "eof"


@dataclass(frozen=True, slots=True)
class ParamChange:
    """A block applied staged parameter changes before the item at the tag's offset."""

    block: str
    changes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SpeechBoundary:
    """Speech starts (``start=True``) or ends at the tag's offset, according to ``detector``."""

    start: bool
    detector: str = ""
    score: float | None = None
