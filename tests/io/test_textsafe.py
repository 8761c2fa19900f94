"""printable(): what servers send reaches the terminal escaped, on one line."""

from __future__ import annotations

import io
import logging

import pytest

from streamkit.io.textsafe import SafeLogFormatter, printable

FORGED = "bye\x1b[2J\x1b[H\nstreamkit: all stations OK"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain text, é, 中文, emoji 📻", "plain text, é, 中文, emoji 📻"),
        (FORGED, "bye\\x1b[2J\\x1b[H\\nstreamkit: all stations OK"),
        ("a\rb\tc\x00d\x07e\x7ff", "a\\rb\\tc\\x00d\\x07e\\x7ff"),
        ("c1 \x9b31m csi, \x85 nel", "c1 \\x9b31m csi, \\x85 nel"),
        ("rtl \u202eevil\u202c, \u2028 ls", "rtl \\u202eevil\\u202c, \\u2028 ls"),
        ("[bold red]markup[/] stays text", "[bold red]markup[/] stays text"),
    ],
)
def test_control_characters_are_escaped_and_nothing_else(raw, shown):
    assert printable(raw) == shown


def test_every_c0_c1_and_del_character_is_escaped():
    for c in [*range(0x20), *range(0x7F, 0xA0)]:
        out = printable(f"x{chr(c)}y")
        assert out.isprintable() and out.startswith("x\\") and out.endswith("y"), hex(c)


def test_idempotent_and_any_value():
    assert printable(printable(FORGED)) == printable(FORGED)
    assert printable(42) == "42" and printable(None) == "None"


def test_log_messages_are_escaped_tracebacks_are_not():
    buf = io.StringIO()
    h = logging.StreamHandler(buf)
    h.setFormatter(SafeLogFormatter("%(levelname)s %(name)s: %(message)s"))
    lg = logging.getLogger("streamkit.test_textsafe")
    lg.addHandler(h)
    lg.propagate = False
    try:
        lg.error("kiwi: %s", FORGED)
        try:
            raise ValueError("boom")
        except ValueError:
            lg.exception("failed")
    finally:
        lg.removeHandler(h)
    lines = buf.getvalue().splitlines()
    assert lines[0] == "ERROR streamkit.test_textsafe: kiwi: bye\\x1b[2J\\x1b[H\\nstreamkit: all stations OK"
    assert "\x1b" not in buf.getvalue() and not any(line.startswith("streamkit: all") for line in lines)
    assert lines[1] == "ERROR streamkit.test_textsafe: failed" and lines[2].startswith("Traceback")
