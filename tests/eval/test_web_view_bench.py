"""The pure parts of benchmarks/web_view.py: the per-point figures, the viewers' window deltas and the peer encodings."""

from __future__ import annotations

import json

import numpy as np
import pytest

from streamkit.eval.bench.web_view import (
    BYTES_GOAL,
    bin_centre_db,
    naive_row_json,
    peer_figures,
    point_figures,
    quantise,
    window_delta,
    ws_header_bytes,
)
from streamkit.web import frames


def test_ws_header_sizes():
    assert [ws_header_bytes(n) for n in (0, 125, 126, 65535, 65536)] == [2, 2, 4, 4, 10]


def test_quantise_inverts_dequantise_and_the_peer_encodes_the_same_rows():
    levels = np.arange(256, dtype=np.uint8)
    db = bin_centre_db(levels.tobytes())
    assert db.dtype == np.float32 and np.array_equal(quantise(db), levels)
    msg = json.loads(naive_row_json(3, 12.5, 0.0, db, decimals=1))
    assert msg["station"] == 3 and len(msg["db"]) == 256 and msg["db"][0] == -129.8 and msg["db"][-1] == -9.8
    rows = [(0, 1.0, 0.0, db), (1, 1.1, 0.064, db)]
    peer = peer_figures(rows, rows_per_s=10.0, repeat=1)
    one = len(frames.encode_rows(0, [(1.0, 0.0, False, None, levels.tobytes())], 256))
    assert peer["binary_uint8"]["bytes_per_row"] == one == 278  # frame header 8 + row header 14 + 256 bins
    assert peer["binary_uint8"]["Bps_per_station_per_viewer"] == (one + 4) * 10.0
    assert peer["json_float"]["bytes_vs_binary"] > peer["json_0.1dB"]["bytes_vs_binary"] > 5


def test_point_figures_per_station_per_viewer_and_the_goals():
    window = {"wall_s": 10.0, "station_s": 20.0, "proc_s": 1.0, "server_s": 0.1, "tap_s": 0.1, "rows_made": 200}
    v = {"rows": 50_000, "rows_frames_hdr": 1000, "rows_n": 200, "json": 9000, "json_frames_hdr": 0, "audio": 160_000, "audio_frames_hdr": 400,
         "audio_samples": 80_000, "json_by_type": {"status": 9000}}  # fmt: skip
    quiet = {**v, "audio": 0, "audio_frames_hdr": 0, "audio_samples": 0, "rows_n": 190}
    f = point_figures(2, 2, window, [v, quiet])
    assert f["server_cpu_pct_per_station"] == pytest.approx(1.0) and f["cpu_goal_met"]  # 0.2 s of CPU for 20 station-seconds
    assert f["process_cpu_pct_per_station"] == pytest.approx(5.0)
    assert f["total_Bps"] == pytest.approx(2 * 60_000 / (2 * 2 * 10.0)) and f["bytes_goal_met"] == (f["total_Bps"] <= BYTES_GOAL)
    assert f["json_by_type_Bps"] == {"status": pytest.approx(450.0)}
    assert f["listen_audio_Bps"] == pytest.approx(16_040.0)  # the listener's audio only, apart from the rows and JSON
    assert f["rows_delivered"] == pytest.approx(0.95)  # the worst viewer
    over = point_figures(2, 2, {**window, "server_s": 0.5}, [v, quiet])
    assert not over["cpu_goal_met"]
    engine = point_figures(2, 0, window, None)
    assert "server_cpu_pct_per_station" not in engine and engine["realtime"] == pytest.approx(1.0)


def test_window_delta_subtracts_each_viewers_counters():
    a = [{"rows": 10, "rows_n": 1, "json_by_type": {"hello": 5}}]
    b = [{"rows": 30, "rows_n": 3, "json": 7, "json_by_type": {"hello": 5, "status": 7}}]
    d = window_delta(a, b)[0]
    assert d["rows"] == 20 and d["rows_n"] == 2 and d["json"] == 7 and d["audio"] == 0 and d["json_by_type"] == {"hello": 0, "status": 7}
