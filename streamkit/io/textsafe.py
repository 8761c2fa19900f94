"""Text that reaches a terminal: :func:`printable` escapes what could act on it.

Much of what the console shows was written by someone else: a server's kick, redirect or error
message, a station name, a ``source.state`` detail, a model's transcript. Printed raw, an ANSI
escape sequence in it could move the cursor, clear the screen or recolour the output, and a
newline could forge a whole line ("streamkit: all stations OK"). Every console printer passes such
text through :func:`printable` first, and rich renderings wrap it in :class:`rich.text.Text`
(never a markup string), so ``[bold]`` in a message is shown as typed.
"""

from __future__ import annotations

import logging
import re
from typing import Any

__all__ = ["SafeLogFormatter", "printable"]

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

#: Unicode format characters that reorder or hide text on a terminal: bidirectional embeddings,
#: overrides and isolates (the "Trojan source" characters), plus the line and paragraph separators.
_REORDERING = "\u061c\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"

#: C0 controls (ESC, newline, ... included), DEL, C1 controls (U+0080-U+009F) and the above
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f{_REORDERING}]")


def _escape(m: re.Match[str]) -> str:
    c = m.group(0)
    named = _NAMED.get(c)
    if named is not None:
        return named
    o = ord(c)
    return f"\\x{o:02x}" if o <= 0xFF else f"\\u{o:04x}"


def printable(s: Any) -> str:
    """``s`` as a string that a terminal shows as it is, on one line.

    Control characters are written as escapes (``\\x1b``, ``\\n``, ``\\r``, ``\\t``, ``\\x7f``,
    ``\\x9b``, ``\\u202e``); every other character, non-ASCII letters included, stays. Not a
    quoting: a literal backslash is left alone, so the result is for reading, not for parsing back.
    """
    text = s if isinstance(s, str) else str(s)
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


class SafeLogFormatter(logging.Formatter):
    """A log formatter whose messages go through :func:`printable`.

    Log messages quote servers too (``kiwi: kiwi_kick: <the server's message>``); the command line
    installs this on its stderr handler. A traceback (``-v``) is appended as usual, unescaped: it
    is ours, and its lines are real lines.
    """

    def formatMessage(self, record: logging.LogRecord) -> str:
        safe = logging.makeLogRecord(record.__dict__)
        safe.message = printable(record.message)
        return super().formatMessage(safe)
