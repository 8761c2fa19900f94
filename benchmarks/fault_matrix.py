"""Fault matrix: `streamkit monitor` against the KiwiSDR emulator under every fault, one row each.

Each scenario runs what a user runs, ``python -m streamkit monitor --station HOST:PORT:FREQ:MODE
--duration D --events DIR --quiet`` (plus the scenario's options), in a subprocess, against emulators
started in this process (so that their per-connection logs, every frame built with its fate, are the
ground truth). Scenarios: every emulator fault (``drop_every``, ``drop``, the four ``malformed``
kinds, ``close_mid_frame``, ``stall``, ``slow``, ``max_frames``, ``kick``, ``inactivity_timeout``,
``badp``, ``too_busy``, ``down``, an absurd ``sample_rate``), a server killed (connections reset)
and restarted on the same port, true rates other than 12001.188 Hz (11999.028, 20250.3; also with
``--record``), IQ and PCM transports, redirects to an IPv4 and to an IPv6 URL (with ``--password``
given for the first server: the row says whether the password reached the second), and a stalled
console consumer (no ``--quiet``; stdout a 4 KiB pipe already holding 3.5 KiB, never read, as a
64 KiB pipe is once full; after ``D + 20`` s the reader goes away).

Columns: samples delivered and reported lost (from the station's JSONL events), the expected
stream and accounted % (:mod:`streamkit.eval.accounting`: every sample the server generated, each
outage between connections at the true rate, up to where the client's stream ended, plus whatever
of the requested ``D`` s never came), reconnect attempts, the exit status, the longest time the event
files did not grow while the monitor ran (polled), tracebacks (client stderr/stdout and emulator
logs) and the message a user sees (the first ``streamkit: error`` line, else the station's last
fatal/closed/retrying reason, else the summary line). ``expect``: ``stream`` rows should deliver the
whole ``D`` s with every loss reported and exit 0; ``stop`` rows should stop with a reason and a
non-zero exit status. A row is ``ok`` when its accounting is within tolerance (exact without
reconnects; 0.1 s of audio per reconnect otherwise), no malformed frame was passed on as audio
without a reported loss, its expectation holds, the monitor ended by
itself (no SIGINT needed), the event files never stood still for more than 5 s, nothing printed a
traceback, and (redirects) the password stayed with the first server.

    python benchmarks/fault_matrix.py [--duration 6] [--only NAME,NAME] [--list] [--out PATH]

Writes benchmarks/results/fault_matrix.json and prints a Markdown table with the machine.
"""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _bench import write_result  # noqa: E402

from streamkit.core.machine import machine_info  # noqa: E402
from streamkit.eval.accounting import ServerStream, account, client_report, read_jsonl  # noqa: E402
from streamkit.io.kiwi_emulator import EmulatorConfig, EmulatorThread, parse_fault_spec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).resolve().parent / "results" / "fault_matrix.json"
PASSWORD = "fm-secret-1"


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str
    faults: str = ""
    """Emulator fault spec (server-wide: every connection)."""
    freq: float = 7100.0
    mode: str = "lsb"
    sample_rate: float = 12001.188
    args: tuple[str, ...] = ()
    """More ``streamkit monitor`` options."""
    expect: str = "stream"
    """``stream``: the whole duration, every loss reported; ``stop``: a reason and a non-zero exit."""
    kind: str = "plain"
    """``plain``, ``kill`` (server reset and restarted), ``redirect4``/``redirect6``, ``stalled_stdout``."""
    emulator: dict[str, Any] = field(default_factory=dict)
    """More EmulatorConfig fields."""


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("baseline", "no fault (ADPCM, 12001.188 Hz)"),
    Scenario("pcm", "no fault, 16-bit PCM transport", args=("--no-compression",)),
    Scenario("iq", "no fault, IQ mode (GNSS stamps)", freq=10000.0, mode="iq"),
    Scenario("drop_every", "every 7th frame dropped", faults="drop_every=7"),
    Scenario("drop_burst", "frames 5-7 dropped", faults="drop=5,6,7"),
    Scenario("malformed_truncated", "frame 8 truncated to 7 bytes", faults="malformed=8:truncated"),
    Scenario("malformed_bad_tag", "frame 8 tagged SNX", faults="malformed=8:bad_tag"),
    Scenario("malformed_odd_adpcm", "frame 8 one byte short (ADPCM)", faults="malformed=8:odd_payload"),
    Scenario("malformed_odd_pcm", "frame 8 one byte short (PCM)", faults="malformed=8:odd_payload", args=("--no-compression",)),
    Scenario("malformed_text", "frame 8 sent as a text message", faults="malformed=8:text"),
    Scenario("close_mid_frame", "TCP closed halfway through frame 12, every connection", faults="close_mid_frame=12"),
    Scenario("stall", "frames stop 2 s into every connection (--stall 1.5)", faults="stall=2", args=("--stall", "1.5")),
    Scenario("slow", "server at half real time", faults="slow=0.5"),
    Scenario("max_frames", "clean close (1000) after 15 frames, every connection", faults="max_frames=15"),
    Scenario("kill_restart", "server reset at 2.5 s, back on the same port 1.5 s later", kind="kill"),
    Scenario("rate_11999", "true rate 11999.028 Hz", sample_rate=11999.028),
    Scenario("rate_20250", "true rate 20250.3 Hz", sample_rate=20250.3),
    Scenario("record_11999", "--record at 11999.028 Hz", sample_rate=11999.028, args=("--record", "{rec}")),
    Scenario("record_20250", "--record at 20250.3 Hz", sample_rate=20250.3, args=("--record", "{rec}")),
    Scenario("redirect_ipv4", "redirect to http://127.0.0.1:PORT/ (--password)", kind="redirect4", args=("--password", PASSWORD)),
    Scenario("redirect_ipv6", "redirect to http://[::1]:PORT/ (--password)", kind="redirect6", args=("--password", PASSWORD)),
    Scenario("stalled_stdout", "console into a 4 KiB pipe nobody reads (no --quiet)", faults="drop_every=5", kind="stalled_stdout"),
    Scenario("kick", "kiwi_kick 3 s after auth", faults="kick=3;kick_message=kicked by the fault matrix", expect="stop"),
    Scenario("inactivity", "inactivity timeout 3 s after tuning", faults="inactivity_timeout=3", expect="stop"),
    Scenario("badp", "bad password (badp=1)", faults="badp=1", expect="stop"),
    Scenario("too_busy", "all channels busy (--max-retries 1)", faults="too_busy", args=("--max-retries", "1"), expect="stop"),
    Scenario("down", "server down (--max-retries 0)", faults="down=1;down_reason=back at 12:00", args=("--max-retries", "0"), expect="stop"),
    Scenario("bad_sample_rate", "MSG sample_rate=abc", faults="sample_rate=abc", expect="stop"),
)


class _ErrorLog(logging.Handler):
    """Collects the emulator's error records (exceptions in a connection handler)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(self.format(record))


def _emulator(sc: Scenario, **over: Any) -> EmulatorThread:
    fields: dict[str, Any] = {"sample_rate": sc.sample_rate, "faults": parse_fault_spec(sc.faults), "record_frames": 50_000}
    cfg = EmulatorConfig(**{**fields, **sc.emulator, **over})
    t = EmulatorThread(cfg)
    t.start()
    return t


def _kill(t: EmulatorThread) -> None:
    """Reset every connection (TCP RST, no close frame) and stop: a server process killed."""

    def abort_all() -> None:
        emu = t.emulator
        emu.stop_listening()
        for s in list(emu._sessions.values()):
            s.ws.transport.abort()

    t.call(abort_all)
    t.stop()


def _streams(threads: list[EmulatorThread]) -> tuple[list[ServerStream], list[Any]]:
    logs = [c for t in threads for c in t.emulator.connections]
    streams = [s for s in (ServerStream.from_frames(c.frames) for c in logs) if s is not None]
    return streams, logs


class _FileWatch(threading.Thread):
    """Polls the size of the event files while the monitor runs: the longest time they did not grow
    (from their first byte to the process's exit), i.e. how long a reader of the files saw nothing new."""

    def __init__(self, events: Path, proc: subprocess.Popen[bytes], period: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.events, self.proc, self.period = events, proc, period
        self.max_stall_s: float | None = None

    def _size(self) -> int:
        return sum(f.stat().st_size for f in self.events.glob("*.jsonl")) if self.events.is_dir() else 0

    def run(self) -> None:
        last_size, last_change = 0, None
        while True:
            done = self.proc.poll() is not None
            now, size = time.monotonic(), self._size()
            if size != last_size:
                last_size, last_change = size, now
            if last_change is not None:
                self.max_stall_s = max(self.max_stall_s or 0.0, now - last_change)
            if done:
                return
            time.sleep(self.period)


def _escape(text: str) -> str:
    return "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in text)


def _recording(rec: Path) -> dict[str, Any] | None:
    wavs = sorted(rec.glob("*.wav")) if rec.is_dir() else []
    if not wavs:
        return None
    import soundfile as sf

    out = []
    for w in wavs:
        try:
            info = sf.info(str(w))
            out.append({"file": w.name, "rate": info.samplerate, "frames": info.frames, "channels": info.channels})
        except Exception as exc:  # a file left unreadable is a finding, not a crash of the benchmark
            out.append({"file": w.name, "error": f"{type(exc).__name__}: {exc}"})
    return {"files": out}


def run_scenario(sc: Scenario, duration: float, python: str = sys.executable) -> dict[str, Any]:
    """Run one scenario; its row (see the module docstring)."""
    work = Path(tempfile.mkdtemp(prefix=f"fm-{sc.name}-"))
    events, rec = work / "events", work / "rec"
    errors = _ErrorLog()
    emu_logger = logging.getLogger("streamkit.io.kiwi_emulator")
    emu_logger.addHandler(errors)
    threads: list[EmulatorThread] = []
    truth_threads: list[EmulatorThread] = []
    killer: threading.Thread | None = None
    notes: list[str] = []
    try:
        host = "127.0.0.1"
        if sc.kind in ("redirect4", "redirect6"):
            target_host = "::1" if sc.kind == "redirect6" else "127.0.0.1"
            target = _emulator(sc, host=target_host)
            url_host = f"[{target_host}]" if ":" in target_host else target_host
            origin = _emulator(sc, faults=parse_fault_spec(f"redirect=http://{url_host}:{target.port}/"), password=PASSWORD)
            threads += [target, origin]
            truth_threads = [target]
            port = origin.port
        else:
            first = _emulator(sc)
            threads.append(first)
            truth_threads = threads
            port = first.port
        args = [a.replace("{rec}", str(rec)) for a in sc.args]
        cmd = [
            python,
            "-m",
            "streamkit",
            "monitor",
            "--station",
            f"{host}:{port}:{sc.freq:g}:{sc.mode}",
            "--duration",
            f"{duration:g}",
            "--events",
            str(events),
        ]
        if sc.kind != "stalled_stdout":
            cmd.append("--quiet")
        cmd += args
        wall_limit = duration / (0.5 if "slow=" in sc.faults else 1.0) + 60.0

        if sc.kind == "kill":

            def kill_and_restart() -> None:
                t0 = threads[0]
                deadline = time.monotonic() + 60.0
                while time.monotonic() < deadline:
                    started = t0.call(lambda: [c.frames[0].t for c in t0.emulator.connections if c.frames])
                    if started and time.monotonic() - started[0] >= 2.5:
                        break
                    time.sleep(0.05)
                _kill(t0)
                time.sleep(1.5)
                threads.append(_emulator(sc, port=port))

            killer = threading.Thread(target=kill_and_restart, daemon=True)

        stdout_path, stderr_path = work / "stdout.txt", work / "stderr.txt"
        t_start = time.monotonic()
        how = ""
        with open(stderr_path, "wb") as err_f:
            if sc.kind == "stalled_stdout":
                # a 4 KiB pipe already holding 3.5 KiB that nobody reads: the banner and a few lines
                # fit, then every console write waits (as a 64 KiB pipe does after 64 KiB)
                r_fd, w_fd = os.pipe()
                try:
                    fcntl.fcntl(w_fd, fcntl.F_SETPIPE_SZ, 4096)
                    os.write(w_fd, b"." * 3583 + b"\n")
                except (AttributeError, OSError) as exc:
                    notes.append(f"pipe not prepared: {exc}")
                proc = subprocess.Popen(cmd, cwd=ROOT, stdout=w_fd, stderr=err_f, stdin=subprocess.DEVNULL)
                os.close(w_fd)
                watch = _FileWatch(events, proc)
                watch.start()
                try:
                    proc.wait(timeout=duration + 20.0)
                    how = "exited while stdout was not read"
                except subprocess.TimeoutExpired:
                    how = "stdout reader gone at D+20 s"
                finally:
                    os.close(r_fd)  # the reader goes away: the next console write breaks
                stdout_text = ""
            else:
                with open(stdout_path, "wb") as out_f:
                    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out_f, stderr=err_f, stdin=subprocess.DEVNULL)
                    watch = _FileWatch(events, proc)
                    watch.start()
                    if killer is not None:
                        killer.start()
            try:
                proc.wait(timeout=wall_limit)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGINT)
                how = (how + "; " if how else "") + f"SIGINT after {wall_limit:.0f} s"
                try:
                    proc.wait(timeout=20.0)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                    how += "; SIGKILL"
        wall_s = time.monotonic() - t_start
        watch.join(timeout=10.0)
        if killer is not None:
            killer.join(timeout=60.0)
        if sc.kind != "stalled_stdout":
            stdout_text = stdout_path.read_text(encoding="utf-8", errors="replace")
        stderr_text = stderr_path.read_text(encoding="utf-8", errors="replace")
    finally:
        for t in threads:
            try:
                t.stop()
            except Exception as exc:
                notes.append(f"emulator stop: {exc}")
        emu_logger.removeHandler(errors)

    if sc.kind == "kill":
        truth_threads = threads
    streams, logs = _streams(truth_threads)
    files = sorted(events.glob("*.jsonl")) if events.is_dir() else []
    evs: list[dict[str, Any]] = []
    bad_lines = 0
    for f in files:
        e, b = read_jsonl(f)
        evs += e
        bad_lines += b
    if bad_lines:
        notes.append(f"{bad_lines} unreadable event lines")
    client = client_report(evs)
    rate = sc.sample_rate
    requested = round(duration * rate) if sc.expect == "stream" else None
    acc = account(client, streams, rate, requested)
    notes += acc.notes
    if any(c.frames_not_recorded for c in logs):
        notes.append("emulator frame log truncated")
    pw_forwarded = None
    if sc.kind in ("redirect4", "redirect6"):
        pw_forwarded = any(f"p={PASSWORD}" in cmd_.text for c in threads[0].emulator.connections for cmd_ in c.commands)
        notes.append(f"password {'forwarded' if pw_forwarded else 'not forwarded'} to the redirect target")
    recording = _recording(rec) if any("--record" in a for a in sc.args) else None
    if recording is not None:
        for w in recording["files"]:
            if "frames" in w:
                notes.append(f"recorded {w['frames']} samples at {w['rate']} Hz")
            else:
                notes.append(f"recording unreadable: {w['error']}")
    elif any("--record" in a for a in sc.args):
        notes.append("no recording written")

    tracebacks = stderr_text.count("Traceback") + stdout_text.count("Traceback") + len(errors.records)
    err_lines = [ln for ln in stderr_text.splitlines() if ln.strip()]
    user_err = [ln for ln in err_lines if ln.startswith("streamkit: error")]
    if user_err:
        message = user_err[0]
    elif err_lines and sc.kind == "stalled_stdout":
        message = err_lines[-1]
    elif client.final_detail:
        message = client.final_detail
    else:
        quiet_lines = [ln for ln in stdout_text.splitlines() if ln.strip()]
        message = quiet_lines[-1] if quiet_lines else (err_lines[-1] if err_lines else "(no message)")
    rc = proc.returncode
    exit_s = f"signal {-rc}" if rc is not None and rc < 0 else f"exit {rc}"
    reconnect_tolerance = round(0.1 * rate) * (len(client.reconnect_offsets) + (1 if sc.kind == "kill" else 0))
    checks = {
        "accounted": acc.accounted_pct is None or abs(acc.unaccounted) <= reconnect_tolerance,
        "no_traceback": tracebacks == 0,
        "no_malformed_passed": acc.malformed_passed == 0,
        "ended_by_itself": "SIGINT" not in how and "SIGKILL" not in how,
        "events_live": watch.max_stall_s is not None and watch.max_stall_s <= 5.0,
        "expectation": (acc.missing_tail == 0 and rc == 0) if sc.expect == "stream" else (rc not in (0, None) and bool(message.strip())),
    }
    if sc.kind in ("redirect4", "redirect6"):
        checks["password_kept"] = not pw_forwarded
    row = {
        "name": sc.name,
        "what": sc.what,
        "expect": sc.expect,
        "command": " ".join(["streamkit", *cmd[3:]]).replace(str(work), "$TMP"),
        "faults": sc.faults,
        "sample_rate": rate,
        "duration_s": duration,
        "wall_s": round(wall_s, 2),
        "delivered": acc.delivered,
        "lost": acc.lost,
        "expected": acc.expected,
        "covered": acc.covered,
        "missing_tail": acc.missing_tail,
        "unaccounted": acc.unaccounted,
        "malformed_passed": acc.malformed_passed,
        "accounted_pct": None if acc.accounted_pct is None else round(acc.accounted_pct, 3),
        "tolerance": reconnect_tolerance,
        "gaps_by_cause": client.gaps_by_cause,
        "unknown_gaps": client.unknown_gaps,
        "reconnects": client.retries,
        "server_connections": len(logs),
        "server_streams": len(streams),
        "server_generated": sum(s.generated for s in streams),
        "exit_status": rc,
        "exit": exit_s + (f" ({how})" if how else ""),
        "events": client.events,
        "event_file_max_stall_s": None if watch.max_stall_s is None else round(watch.max_stall_s, 2),
        "events_max_gap_emitted_s": None if client.max_silence_s is None else round(client.max_silence_s, 2),
        "tracebacks": tracebacks,
        "emulator_errors": errors.records[:5],
        "message": _escape(message)[:300],
        "stderr_tail": _escape(stderr_text[-2000:]),
        "stdout_tail": _escape(stdout_text[-1000:]),
        "password_forwarded": pw_forwarded,
        "recording": recording,
        "notes": notes,
        "checks": checks,
        "ok": all(checks.values()),
    }
    shutil.rmtree(work, ignore_errors=True)
    return row


def _cell(text: str, n: int = 70) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= n else text[: n - 1] + "…"


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| scenario | expect | delivered | lost | expected | unaccounted | accounted % | reconnects | exit | event file max stall s | tracebacks | ok "
        "| message a user sees / notes |"
    )
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---|"]
    for r in rows:
        pct = "n/a" if r["accounted_pct"] is None else f"{r['accounted_pct']:.2f}"
        msg = r["message"] + (" — " + "; ".join(r["notes"]) if r["notes"] else "")
        lines.append(
            f"| {r['name']} | {r['expect']} | {r['delivered']} | {r['lost']} | {r['expected']} | {r['unaccounted']} | {pct} | {r['reconnects']} | {_cell(r['exit'], 40)} | "
            f"{r['event_file_max_stall_s']} | {r['tracebacks']} | {'yes' if r['ok'] else '**no**'} | {_cell(msg, 160)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=6.0, help="seconds of stream asked of each monitor (default 6)")
    ap.add_argument("--only", default=None, metavar="NAME,NAME", help="run these scenarios only")
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    ap.add_argument("--out", default=str(OUT), help="result JSON (default benchmarks/results/fault_matrix.json)")
    a = ap.parse_args(argv)
    if a.list:
        for sc in SCENARIOS:
            print(f"{sc.name:22s} {sc.expect:7s} {sc.what}")
        return 0
    chosen = list(SCENARIOS)
    if a.only:
        names = [n.strip() for n in a.only.split(",") if n.strip()]
        unknown = sorted(set(names) - {sc.name for sc in SCENARIOS})
        if unknown:
            print(f"fault_matrix: unknown scenario(s): {', '.join(unknown)} (see --list)", file=sys.stderr)
            return 2
        chosen = [sc for sc in SCENARIOS if sc.name in names]
    if not (a.duration > 0):
        print("fault_matrix: --duration must be > 0", file=sys.stderr)
        return 2
    rows = []
    t0 = time.monotonic()
    for sc in chosen:
        print(f"[{time.monotonic() - t0:6.1f} s] {sc.name}: {sc.what}", file=sys.stderr, flush=True)
        rows.append(run_scenario(sc, a.duration))
        r = rows[-1]
        print(f"          delivered {r['delivered']}, lost {r['lost']}, expected {r['expected']}, accounted {r['accounted_pct']} %, "
              f"{r['exit']}, ok={r['ok']}", file=sys.stderr, flush=True)  # fmt: skip
    mi = machine_info()
    ok = sum(r["ok"] for r in rows)
    print(f"Fault matrix: `streamkit monitor` against the KiwiSDR emulator, {a.duration:g} s per scenario "
          f"({mi.get('cpu', '?')}, {mi['cpu_count']} CPUs, Python {mi['python']}, streamkit {mi['streamkit']}); "
          f"{ok}/{len(rows)} rows ok, {time.monotonic() - t0:.0f} s in all\n")  # fmt: skip
    print(table(rows))
    result = {"benchmark": "fault_matrix", "machine": mi, "duration_s": a.duration, "rows_ok": ok, "rows": rows,
              "total_wall_s": round(time.monotonic() - t0, 1), "argv": sys.argv[1:]}  # fmt: skip
    return write_result(a.out, result)


if __name__ == "__main__":
    sys.exit(main())
