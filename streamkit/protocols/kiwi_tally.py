"""Sans-I/O bookkeeping of what a KiwiSDR server sends besides audio.

:class:`MessageTally` counts the messages received since the last audio frame by kind (``MSG`` and
its first key, ``text message``, ``W/F``, a malformed ``SND``...), so that a server that floods a
client with messages instead of audio is reported as doing exactly that, not as "stalled".
:class:`WarningLimiter` keeps a stream of per-message warnings (one per malformed message) from
flooding an event file: the first few pass, then one summary per interval.

Server text in the labels is escaped (:func:`escape`): it may end up on a terminal.
"""

from __future__ import annotations

from collections import Counter
from typing import Final

__all__ = ["MessageTally", "WarningLimiter", "escape", "message_kind"]

_MAX_KINDS: Final = 16
_LABEL_LEN: Final = 40


def escape(text: str, limit: int = _LABEL_LEN) -> str:
    """Printable ASCII only (``\\x1b``, ``\\n``, ``\\u2028`` escaped as in Python literals), cut to ``limit`` characters."""
    out = ascii(text)[1:-1]
    return out if len(out) <= limit else out[: limit - 3] + "..."


def message_kind(data: bytes | bytearray | memoryview | str) -> str:
    """A short, escaped label for one WebSocket message: ``MSG <first key>``, ``text message``,
    ``SND``, ``W/F``, ``unknown tag 'XYZ'``, ``short message``."""
    if isinstance(data, str):
        return "text message"
    mv = memoryview(data).cast("B") if not isinstance(data, bytes | bytearray) else data
    if len(mv) < 3:
        return "short message"
    tag = bytes(mv[:3])
    if tag == b"MSG":
        first = bytes(mv[4 : 4 + 200]).decode("utf-8", "replace").strip(" ").split(" ", 1)[0]
        key = first.partition("=")[0]
        return f"MSG {escape(key)}" if key else "empty MSG"
    if tag in (b"SND", b"W/F", b"EXT", b"DAT", b"CLI"):
        return tag.decode("ascii")
    return f"unknown tag {escape(tag.decode('latin-1'))!r}"


class MessageTally:
    """Counts of messages by kind since the last :meth:`clear` (the last audio frame)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.total = 0

    def add(self, kind: str) -> None:
        """Count one message of ``kind`` (past 16 distinct kinds, as ``other``)."""
        if kind not in self.counts and len(self.counts) >= _MAX_KINDS:
            kind = "other"
        self.counts[kind] += 1
        self.total += 1

    def clear(self) -> None:
        self.counts.clear()
        self.total = 0

    def summary(self, top: int = 4) -> str:
        """``"MSG flood x195, text message x3"`` (the ``top`` most frequent kinds, then ``+N more kinds``)."""
        items = self.counts.most_common()
        text = ", ".join(f"{k} x{n}" for k, n in items[:top])
        if len(items) > top:
            text += f", +{len(items) - top} more kinds"
        return text


class WarningLimiter:
    """Pass the first ``burst`` warnings, then at most one per ``interval_s`` carrying the count
    of those held back since the last one passed."""

    def __init__(self, burst: int = 5, interval_s: float = 5.0) -> None:
        self.burst = burst
        self.interval_s = interval_s
        self.passed = 0
        self.suppressed = 0
        self._last: float | None = None

    def offer(self, text: str, now: float) -> str | None:
        """The text to emit now (with a ``(+N similar held back)`` suffix), or None to hold it back."""
        if self.passed < self.burst or (self._last is not None and now - self._last >= self.interval_s):
            self.passed += 1
            self._last = now
            if self.suppressed:
                text = f"{text} (+{self.suppressed} similar held back)"
                self.suppressed = 0
            return text
        self.suppressed += 1
        return None
