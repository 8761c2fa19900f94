"""`streamkit monitor` (and `run`) on a terminal, in a pipe, quiet, with a closed pipe and a hostile server.

A terminal is a real pseudo-terminal (``pty``); every run has a generous hang bound and nothing
here measures time.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamkit.cli import EXIT_CONSOLE_LOST, EXIT_RUNTIME

HANG_S = 120
ROOT = Path(__file__).resolve().parents[1]
CMD = [sys.executable, "-m", "streamkit"]


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.pop("NO_COLOR", None)
    e.update(TERM="xterm-256color", COLUMNS="160", LINES="50")
    return e


def run_in_pty(args: list[str]) -> tuple[int | None, str]:
    """Run the CLI with stdin/stdout/stderr on a pseudo-terminal; returns (exit status or None if hung, output)."""
    pty = pytest.importorskip("pty")
    master, slave = pty.openpty()
    p = subprocess.Popen([*CMD, *args], stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, env=env(), close_fds=True)
    os.close(slave)
    buf = bytearray()
    deadline = time.monotonic() + HANG_S
    try:
        while time.monotonic() < deadline:
            if not select.select([master], [], [], 0.5)[0]:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal has gone
                break
            if not data:
                break
            buf += data
        try:
            rc: int | None = p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            rc = None
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(30)
        os.close(master)
    return rc, buf.decode("utf-8", "replace")


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CMD, *args], capture_output=True, text=True, timeout=HANG_S, cwd=ROOT)


def check_event_files(d: Path, duration: float, n: int = 3) -> None:
    files = sorted(d.glob("*.jsonl"))
    assert len(files) == n
    for f in files:
        recs = [json.loads(line) for line in f.read_text().splitlines()]
        assert recs[-1]["kind"] == "graph.state" and recs[-1]["payload"]["state"] == "stopped", f.name
        final = [r["payload"] for r in recs if r["kind"] == "graph.stats"][-1]
        assert final["stream_s"] >= duration - 0.1, f.name  # the whole duration, not cut when the console went


def test_monitor_in_a_terminal_shows_the_live_table_and_the_summary(tmp_path):
    rc, out = run_in_pty(["monitor", "--duration", "4", "--events", str(tmp_path)])
    assert rc == 0, out[-3000:]
    assert "streamkit monitor — 3 station(s)" in out and "┃" in out  # the rich live table was drawn
    assert "summary (per station):" in out and out.count("RT factor total") == 3
    check_event_files(tmp_path, 4.0)


def test_monitor_in_a_pipe_prints_plain_lines_and_the_summary(tmp_path):
    r = run_cli("monitor", "--duration", "4", "--events", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "┃" not in r.stdout  # plain text for a pipe
    assert r.stdout.startswith("streamkit ") and "summary (per station):" in r.stdout and r.stdout.count("RT factor total") == 3
    assert r.stderr == ""
    check_event_files(tmp_path, 4.0)


def test_monitor_quiet_prints_one_summary_line_per_station(tmp_path):
    r = run_cli("monitor", "--duration", "4", "--quiet", "--events", str(tmp_path))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 3 and all("s of stream" in line for line in lines) and r.stderr == ""
    check_event_files(tmp_path, 4.0)


@pytest.mark.parametrize("quiet", [False, True])
def test_monitor_with_stdout_closed_by_its_reader_goes_on_and_says_so_once(tmp_path, quiet):
    p = subprocess.Popen([*CMD, "monitor", "--duration", "4", "--events", str(tmp_path), *(["--quiet"] if quiet else [])],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)  # fmt: skip
    try:
        if not quiet:
            assert p.stdout.readline().startswith(b"streamkit ")  # the header; then the reader goes away
        p.stdout.close()
        err = p.stderr.read().decode()
        rc = p.wait(HANG_S)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(30)
    assert "Traceback" not in err and "Exception" not in err
    assert err.splitlines() == [
        "streamkit: console output lost (closed by its reader): live view stopped; the run goes on and its event files are still written"
    ]
    assert rc == EXIT_CONSOLE_LOST
    check_event_files(tmp_path, 4.0)


def test_run_with_stdout_closed_by_its_reader(tmp_path):
    g = tmp_path / "g.yaml"
    g.write_text(
        "name: tone\nblocks:\n  src: {type: io.tone, rate: 8000, freq_hz: 440, duration_s: 3.0}\n  lvl: {type: dsp.level, interval_s: 0.1}\nchain: [src, lvl]\n"
    )
    p = subprocess.Popen([*CMD, "run", str(g), "--events", str(tmp_path / "ev.jsonl")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        p.stdout.close()
        err = p.stderr.read().decode()
        rc = p.wait(HANG_S)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(30)
    assert len(err.splitlines()) == 1 and err.startswith("streamkit: console output lost") and rc == EXIT_CONSOLE_LOST
    recs = [json.loads(line) for line in (tmp_path / "ev.jsonl").read_text().splitlines()]
    assert recs[-1]["kind"] == "graph.state" and sum(r["kind"] == "level.update" for r in recs) == 30


FORGED = "bye\x1b[2J\x1b[H\nstreamkit: all stations OK [bold]x[/]"


@pytest.mark.parametrize("terminal", [False, True])
def test_a_kick_message_cannot_forge_a_console_line(tmp_path, terminal):
    from streamkit.io.kiwi_emulator import EmulatorThread, FaultConfig

    with EmulatorThread(faults=FaultConfig(kick_after=0.5, kick_message=FORGED)) as t:
        args = ["monitor", "--station", f"127.0.0.1:{t.port}:7100:lsb", "--duration", "3", "--events", str(tmp_path)]
        if terminal:
            rc, out = run_in_pty(args)
            err = out
        else:
            r = run_cli(*args)
            rc, out, err = r.returncode, r.stdout, r.stderr
    assert rc == EXIT_RUNTIME  # the only station was kicked
    for text in (out, err):
        assert "\x1b[2J" not in text and "\x1b[H" not in text
        assert not any(line.lstrip("│ ").startswith("streamkit: all stations OK") for line in text.splitlines())
    shown = "bye\\x1b[2J\\x1b[H\\nstreamkit: all stations OK [bold]x[/]"
    assert f"streamkit: error: station 127.0.0.1-{t.port}-7100lsb: kiwi_kick: kicked by the admin: {shown}" in err
    if not terminal:
        assert shown in out  # the live view's state line, escaped too
    # the event file keeps the server's text as it was, JSON-escaped
    recs = [json.loads(line) for line in next(tmp_path.glob("*.jsonl")).read_text().splitlines()]
    assert any(FORGED in str(r["payload"].get("detail", "")) for r in recs if r["kind"] == "source.state")
