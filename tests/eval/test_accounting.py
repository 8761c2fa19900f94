"""streamkit.eval.accounting (the fault matrix's arithmetic) on synthetic events and server logs, and one
quick scenario of ``benchmarks/fault_matrix.py`` end to end (a subprocess, bounded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamkit.eval.accounting import ServerFrame, ServerStream, account, client_report, read_jsonl

RATE = 12000.0
N = 512


def ev(kind: str, payload: dict, *, span: tuple[int, int] = (0, 0), source: str = "kiwi", t_ns: int = 0) -> dict:
    return {"kind": kind, "stream": "st", "source": source, "span": list(span), "emitted_ns": t_ns, "payload": payload}


def gap(at: int, lost: int | None, cause: str = "seq_gap", t_ns: int = 0) -> dict:
    return ev("stream.gap", {"cause": cause, "lost": lost}, span=(at, at), source="runtime", t_ns=t_ns)


def final_stats(items_out: int, t_ns: int = 0) -> dict:
    return ev("graph.stats", {"state": "stopped", "blocks": {"kiwi": {"items_out": items_out}}}, source="runtime", t_ns=t_ns)


def frames(n_frames: int, t0: float = 100.0, start: int = 0, status: dict[int, str] | None = None) -> ServerStream:
    """``n_frames`` frames of N samples paced at RATE from loop time t0; ``status``: {frame index: fate}."""
    status = status or {}
    return ServerStream(tuple(ServerFrame(t0 + (k + 1) * N / RATE, start + k * N, N, status.get(k, "sent")) for k in range(n_frames)))


def test_client_report_counts_gaps_reconnects_states_and_silence() -> None:
    events = [
        ev("source.state", {"state": "connecting", "detail": "ws://h:1"}, t_ns=0),
        ev("kiwi.info", {"sample_rate": 12001.188}, t_ns=1_000_000_000),
        gap(4 * N, N, t_ns=1_500_000_000),
        ev("source.state", {"state": "retrying", "detail": "connection_lost: closed"}, t_ns=2_000_000_000),
        gap(10 * N, 3000, cause="reconnect", t_ns=5_000_000_000),
        gap(12 * N, None, cause="xrun", t_ns=5_100_000_000),
        ev("stream.end", {"reason": "duration reached", "items": 20 * N}, span=(20 * N, 20 * N), t_ns=5_200_000_000),
        final_stats(20 * N, t_ns=5_300_000_000),
    ]
    c = client_report(events)
    assert (c.delivered, c.lost, c.unknown_gaps) == (20 * N, N + 3000, 1)
    assert c.gaps_by_cause == {"seq_gap": 1, "reconnect": 1, "xrun": 1}
    assert c.reconnect_offsets == (10 * N,) and c.retries == 1 and c.rate == 12001.188
    assert c.end_reason == "duration reached" and c.final_detail == "connection_lost: closed"
    assert c.max_silence_s == pytest.approx(3.0)  # 2.0 s -> 5.0 s without an event
    assert client_report([ev("stream.end", {"reason": "x", "items": 7})]).delivered == 7  # no final stats: stream.end


def test_one_connection_with_dropped_frames_is_exact_and_the_tail_after_the_stop_is_not_expected() -> None:
    # 40 frames built; frames 5 and 9 dropped; the client stopped after 20 delivered frames (its
    # duration) and reported both drops: the 18 frames the server built after that are not expected
    srv = frames(40, status={5: "dropped", 9: "dropped"})
    c = client_report([gap(5 * N, N), gap(8 * N, N), final_stats(20 * N)])
    a = account(c, [srv], RATE, requested=20 * N)
    assert (a.delivered, a.lost, a.expected, a.unaccounted, a.missing_tail) == (20 * N, 2 * N, 22 * N, 0, 0)
    assert a.accounted_pct == 100.0 and a.notes == ()
    # a drop the client did not report shows
    silent = account(client_report([gap(5 * N, N), final_stats(20 * N)]), [srv], RATE, requested=20 * N)
    assert silent.unaccounted == N and silent.accounted_pct == pytest.approx(100 * 21 / 22)


def test_a_stop_mid_frame_counts_to_that_sample() -> None:
    srv = frames(10, status={2: "malformed:truncated"})
    a = account(client_report([gap(2 * N, N), final_stats(3 * N + 100)]), [srv], RATE)
    assert a.expected == 4 * N + 100 and a.unaccounted == 0


def test_reconnect_outage_is_expected_at_the_true_rate_on_the_server_clock() -> None:
    # connection 1: 10 frames (the last one cut), then 0.5 s without a connection, then connection 2
    c1 = frames(10, t0=100.0, status={9: "cut"})
    end1 = c1.frames[-1].t
    c2 = frames(30, t0=end1 + 0.5)  # its first sample starts 0.5 s after the last of c1
    outage = round(0.5 * RATE)
    lost_reported = N + outage  # the cut frame plus the outage, as the client estimates them
    c = client_report([gap(9 * N, lost_reported, cause="reconnect"), final_stats(9 * N + 20 * N)])
    a = account(c, [c2, c1], RATE, requested=29 * N)  # any order
    assert a.covered == 10 * N + outage + 20 * N
    assert a.unaccounted == 0 and a.accounted_pct == 100.0
    # the client underestimating the outage by 10 ms shows as unaccounted samples
    c_short = client_report([gap(9 * N, lost_reported - 120, cause="reconnect"), final_stats(29 * N)])
    assert account(c_short, [c1, c2], RATE, requested=29 * N).unaccounted == 120


def test_a_station_that_stops_early_is_short_of_its_requested_stream() -> None:
    srv = frames(3)
    c = client_report([final_stats(3 * N)])
    a = account(c, [srv], RATE, requested=10 * N)
    assert (a.covered, a.missing_tail, a.expected) == (3 * N, 7 * N, 10 * N) and a.accounted_pct == pytest.approx(30.0)
    assert account(c, [srv], RATE).accounted_pct == 100.0  # a stop was the expected outcome: what it covered
    nothing = account(client_report([]), [], RATE, requested=10 * N)  # never streamed at all
    assert nothing.accounted_pct == 0.0 and nothing.unaccounted == 10 * N and "no final statistics" in nothing.notes[0]
    assert account(client_report([final_stats(0)]), [], RATE).accounted_pct is None  # refused: nothing expected


def test_inconsistent_counts_are_noted() -> None:
    srv = frames(4)
    a = account(client_report([gap(2 * N, 10, cause="reconnect"), final_stats(7 * N)]), [srv], RATE)  # 5 frames after the reconnect, 4 sent
    assert any("client saw 2 connections, server streamed 1" in n for n in a.notes)
    assert any("beyond the last connection" in n for n in a.notes)


def test_a_malformed_frame_is_reported_lost_or_counted_as_passed_on() -> None:
    srv = frames(10, status={3: "malformed:odd_payload"})
    reported = account(client_report([gap(3 * N, N), final_stats(6 * N)]), [srv], RATE)
    assert (reported.expected, reported.unaccounted, reported.malformed_passed) == (7 * N, 0, 0)
    # accepted without a gap (a client decoding what it should reject): its samples count as delivered
    passed = account(client_report([final_stats(6 * N)]), [srv], RATE)
    assert (passed.expected, passed.unaccounted, passed.malformed_passed) == (6 * N, 0, 1)
    assert "1 malformed frame(s) passed on, not reported lost" in passed.notes


def test_read_jsonl_skips_a_cut_last_line(tmp_path: Path) -> None:
    p = tmp_path / "st.jsonl"
    p.write_text(json.dumps(final_stats(5)) + "\n" + '{"kind": "stream.ga', encoding="utf-8")
    events, bad = read_jsonl(p)
    assert len(events) == 1 and bad == 1


def test_fault_matrix_runs_one_quick_scenario(tmp_path: Path) -> None:
    """``python benchmarks/fault_matrix.py --only drop_every --duration 3``: the monitor CLI against the
    emulator, every dropped frame reported lost (no reconnect: exact), exit 0, no traceback."""
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "fault_matrix.py"
    out = tmp_path / "fm.json"
    env = {**os.environ, "PYTHONPATH": str(script.parents[1])}  # (this checkout's streamkit, as an editable install gives it)
    proc = subprocess.run(
        [sys.executable, str(script), "--only", "drop_every", "--duration", "3", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=script.parents[1],
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| scenario |" in proc.stdout and "| drop_every |" in proc.stdout
    (row,) = json.loads(out.read_text())["rows"]
    assert row["name"] == "drop_every" and row["exit_status"] == 0 and row["tracebacks"] == 0
    assert row["delivered"] == round(3 * 12001.188) and row["lost"] > 0 and row["lost"] % 2048 == 0  # whole ADPCM frames
    assert row["unaccounted"] == 0 and row["accounted_pct"] == 100.0 and row["ok"]
