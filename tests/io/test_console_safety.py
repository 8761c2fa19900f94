"""The console views (io.console, the monitor's table) against what servers send and broken outputs.

Text from events (a kick message, a station's state detail) is escaped in plain lines and rich
panels, rich markup in it is shown as typed, and a closed output ends the view with one stderr
line instead of a traceback per write.
"""

from __future__ import annotations

import io
import threading

from streamkit.core import events as E
from streamkit.core.events import Event
from streamkit.io import ConsoleSink
from streamkit.io.console_out import ConsoleOut
from streamkit.monitor import MonitorConsole

KICK = "kicked: bye\x1b[2J\x1b[H\nstreamkit: all stations OK [bold red]x[/]"
SHOWN = "bye\\x1b[2J\\x1b[H\\nstreamkit: all stations OK [bold red]x[/]"
T = 1_700_000_000 * 10**9


def ev(kind, payload, stream="st1", seq=0):
    return Event(kind, stream, "kiwi", "kiwi.out", (10, 10), T, T, T, seq, payload)


def kicked_events(stream="st1"):
    return [
        ev(E.SOURCE_STATE, E.SourceState("fatal", KICK), stream, 0),
        ev(
            E.GRAPH_STATS,
            {
                "graph": stream,
                "state": "fatal",
                "fatal": KICK,
                "stream_s": 1.0,
                "rtf_total": 0.01,
                "first_call_ms": {},
                "blocks": {"kiwi\x1b[31m": {"rtf": 0.01, "calls": 1, "items_in": 1, "errors": 0}},
            },
            stream,
            1,
        ),  # fmt: skip
        ev(E.GRAPH_STATE, E.SourceState("fatal", KICK), stream, 2),
    ]


def assert_no_forged_line(text):
    assert "\x1b[2J" not in text and "\x1b[H" not in text  # the server's escape sequences are not sent to the terminal
    assert not any(line.lstrip("│ ").startswith("streamkit: all stations OK") for line in text.splitlines())


def test_console_plain_lines_and_summary_escape_server_text():
    out = io.StringIO()
    s = ConsoleSink(file=out, mode="plain")
    s.open("st1")
    for e in kicked_events():
        s.handle(e)
    s.close()
    text = out.getvalue()
    assert "\x1b" not in text
    assert_no_forged_line(text)
    assert text.count(SHOWN) >= 3  # the source.state and graph.state lines and the summary's state
    assert "kiwi\\x1b[31m" in text


def test_console_rich_panel_and_summary_escape_server_text_and_never_read_it_as_markup():
    out = io.StringIO()
    s = ConsoleSink(file=out, mode="rich", width=400)
    s.open("st1\x1b]0;title\x07")
    for e in kicked_events():
        s.handle(e)
    s.close()
    text = out.getvalue()
    assert_no_forged_line(text)
    assert "\x1b]0;" not in text and "st1\\x1b]0;title\\x07" in text  # a graph name cannot set the window title
    assert SHOWN in text  # the brackets are shown: "[bold red]x[/]" was not taken as markup


def test_monitor_table_escapes_server_text_plain():
    out = io.StringIO()
    m = MonitorConsole(file=out, mode="plain")
    m.open("st1")
    for e in kicked_events():
        m.handle(e)
    m.close()
    text = out.getvalue()
    assert "\x1b" not in text
    assert_no_forged_line(text)
    assert f"st1: fatal {SHOWN}" in text.replace("kicked: ", "")


def bounded(fn, timeout=60):
    """Run fn on a thread; fail (instead of hanging the suite) if it does not return in time."""
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "hung (a deadlock?)"


def test_monitor_table_escapes_server_text_rich():
    out = io.StringIO()  # not a terminal: rich adds no escapes of its own, so any ESC would be the server's
    m = MonitorConsole(file=out, mode="rich")

    def run():
        m.open("st[bold]1")
        for e in kicked_events("st[bold]1"):
            m.handle(e)
        m.close()

    bounded(run)
    text = out.getvalue()
    assert "\x1b" not in text
    assert_no_forged_line(text)
    assert "st[bold]1" in text.replace("\n", "")  # a station name with brackets is shown, not read as markup


def test_monitor_rich_open_does_not_deadlock():
    """Live renders through _render as it starts; open() must not hold the lock _render takes."""
    m = MonitorConsole(file=io.StringIO(), mode="rich")
    bounded(lambda: (m.open("a"), m.handle(ev(E.LEVEL, {"rms_dbfs": -20.0}, "a")), m.close()))
    assert "summary (per station):" in m.file.getvalue()


class BrokenPipeOut(io.StringIO):
    def write(self, s):
        raise BrokenPipeError(32, "Broken pipe")


def test_console_on_a_closed_pipe_says_so_once_on_stderr(capsys):
    s = ConsoleSink(file=BrokenPipeOut(), mode="plain")
    s.open("st1")
    for i in range(50):
        s.handle(ev(E.SOURCE_STATE, E.SourceState("streaming", f"#{i}"), seq=i))
    s.close()
    err = capsys.readouterr().err.splitlines()
    assert err == ["streamkit: console output lost (closed by its reader): live view stopped; the run goes on and its event files are still written"]
    assert s.output_lost == "closed by its reader"


def test_monitor_on_a_closed_pipe_says_so_once_on_stderr(capsys):
    out = ConsoleOut(BrokenPipeOut())
    m = MonitorConsole(file=out, mode="plain", plain_interval_s=0.0)
    for name in ("a", "b"):
        m.expect(name)
        m.open(name)
    for i in range(20):
        m.handle(ev(E.SOURCE_STATE, E.SourceState("streaming", f"#{i}"), "ab"[i % 2], i))
    m.close()
    m.close()
    assert len(capsys.readouterr().err.splitlines()) == 1
    assert m.output_lost == out.lost == "closed by its reader"


def test_monitor_summary_waits_for_every_expected_station():
    out = io.StringIO()
    m = MonitorConsole(file=out, mode="plain")
    for name in ("a", "b"):
        m.expect(name)
    m.open("a")
    m.close()  # station a ends before b has even opened (its queue thread was late)
    assert "summary" not in out.getvalue()
    m.open("b")
    m.close()
    assert out.getvalue().count("summary (per station):") == 1
