"""The live view's server in-process: a graph of the built-in demo signal, real sockets, Python clients.

What a browser does is in ``test_browser.py``; here: the WebSocket stream (hello, rows, events,
audio), a stalled viewer next to a good one, the token on a non-loopback bind, the Origin check,
bad client messages and the event log download.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from streamkit.core.clock import FreeRun, RealTime
from streamkit.core.events import Event
from streamkit.core.graph import Graph
from streamkit.core.registry import lookup
from streamkit.core.runtime import Runner
from streamkit.web import frames
from streamkit.web.attach import LiveView
from tests.web.ws_reader import WsTally

pytestmark = pytest.mark.timeout(120)


class Keep:
    """An event subscriber that keeps vad segments and gaps (what "the monitor's results" are)."""

    def __init__(self):
        from streamkit.core.block import EventSink

        class _S(EventSink):
            def handle(s, e: Event) -> None:
                self.events.append(e)

        self.events: list[Event] = []
        self.sink = _S()

    def results(self):
        return sorted((e.kind, e.span) for e in self.events if e.kind in ("vad.segment", "stream.gap"))


def demo_graph(name="demo", seconds=8.0):
    g = Graph(name)
    src = g.add(lookup("io.demo_signal")(duration_s=seconds, dropouts=2.0, seed=3), name="src")
    rs = g.add(lookup("dsp.resample")(to_hz=8000), name="rs")
    lvl = g.add(lookup("dsp.level")(interval_s=0.5), name="level")
    g.chain(src, rs, lvl)
    g.connect(lvl, g.add(lookup("dsp.energy_vad")(), name="vad"))
    keep = Keep()
    g.subscribe(keep.sink)
    return g, keep


def ws_url(url: str) -> str:
    base, _, query = url.partition("?")
    return base.replace("http://", "ws://").rstrip("/") + "/ws" + (f"?{query}" if query else "")


def test_stream_and_a_stalled_viewer_beside_a_good_one():
    ref_g, ref = demo_graph()
    Runner(ref_g, FreeRun()).run()  # the same graph offline, no live view: the results to match

    g, keep = demo_graph()
    view = LiveView("127.0.0.1:0")
    view.attach(g, tap="level", freq_khz=7100, mode="lsb")
    url = view.start(queue_frames=8, sndbuf_bytes=4096, write_buffer_bytes=4096)  # small buffers: the stall shows within seconds
    assert url.startswith("http://127.0.0.1:") and "token" not in url  # loopback: no token

    # the stalled viewer: a 4 kB receive buffer, a client queue of one message, and it never reads
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window it advertises stays small
    raw.connect(("127.0.0.1", view.server.port))
    stalled = connect(ws_url(url), sock=raw, max_queue=1, open_timeout=10).__enter__()
    stalled.send(json.dumps({"listen": 0}))  # audio too: it stalls sooner

    got = WsTally()
    good = connect(ws_url(url), open_timeout=10, max_size=None).__enter__()
    good.send(json.dumps({"listen": 0}))

    reader = threading.Thread(target=got.read, args=(good,))
    reader.start()
    st = Runner(g, RealTime(), duration=None).run()
    time.sleep(0.6)  # the last status
    stalled_sessions = [s for s in view.server.viewers if s.viewer.listen == 0]
    dropped = max(s.viewer.stats.dropped_frames for s in stalled_sessions)
    summary = view.close()
    reader.join(20)
    good.close()
    stalled.close()

    # the stalled viewer lost frames (counted) ...
    assert dropped > 0 and summary["dropped_frames"] >= dropped and summary["viewers"] == 2
    # ... and changed nothing else: the graph's results equal the offline run's, no event was dropped
    assert keep.results() == ref.results() and any(k == "vad.segment" for k, _ in ref.results())
    assert st["events_dropped"] == 0 and set(st["gaps_by_cause"]) == {"seq_gap"}
    # the good viewer got every row the tap made (history + live), the gaps, the audio, and lost nothing
    feed = view.hub.feed("demo")
    missed = got.status["viewer"]
    assert got.rows[0] == feed.rows.last and got.gap_rows == st["gaps"] == 3
    assert got.audio[0] > 0.8 * 8 * 8000 and {"hello", "events", "status", "end"} <= got.types
    assert missed == {**missed, "dropped_frames": 0, "missed_rows": 0, "missed_events": 0}


def test_no_token_no_data_on_a_non_loopback_bind(caplog):
    caplog.set_level(logging.DEBUG)
    g, _ = demo_graph(seconds=1.0)
    view = LiveView("0.0.0.0:0")
    view.attach(g, tap="level")
    url = view.start()
    token = view.server.token
    assert token and len(token) >= 20 and url.endswith(f"/?token={token}")
    base = f"http://127.0.0.1:{view.server.port}"
    try:
        for path in ("/api/stations", f"/api/stations?token={token[:-1]}x", "/api/events.jsonl"):
            with pytest.raises(urllib.error.HTTPError) as exc:
                urllib.request.urlopen(base + path, timeout=10)
            assert exc.value.code == 401
        for q in ("", "?token=wrong"):
            with pytest.raises(InvalidStatus) as exc:
                connect(f"ws://127.0.0.1:{view.server.port}/ws{q}", open_timeout=10)
            assert exc.value.response.status_code == 401
        # the page itself is no data: it loads, and asks for the token
        page = urllib.request.urlopen(base + "/", timeout=10).read().decode()
        assert "streamkit" in page and "Content-Security-Policy" in dict(urllib.request.urlopen(base + "/", timeout=10).headers)
        ok = json.loads(urllib.request.urlopen(f"{base}/api/stations?token={token}", timeout=10).read())
        assert ok["stations"][0]["name"] == "demo"
        req = urllib.request.Request(f"{base}/api/stations", headers={"Authorization": f"Bearer {token}"})
        assert json.loads(urllib.request.urlopen(req, timeout=10).read())["stations"]
        with connect(f"ws://127.0.0.1:{view.server.port}/ws?token={token}", open_timeout=10) as c:
            assert json.loads(c.recv(timeout=10))["type"] == "hello"
        assert view.server.refused == 5
    finally:
        view.close()
    server_logs = [r for r in caplog.records if not r.name.startswith("websockets.client")]  # (the test's own client logs its request line)
    assert server_logs is not None and not [r for r in server_logs if token in r.getMessage()]  # the token is in no log line of the server


def test_origin_bad_messages_and_the_event_log():
    g, keep = demo_graph(seconds=8.0)
    view = LiveView("127.0.0.1:0")
    view.attach(g, tap="level")
    url = view.start()
    Runner(g, FreeRun()).run()
    try:
        with pytest.raises(InvalidStatus) as exc:  # a page of another site cannot read the stream
            connect(ws_url(url), origin="http://evil.example", open_timeout=10)
        assert exc.value.response.status_code == 403
        with connect(ws_url(url), origin=url.rstrip("/"), open_timeout=10) as c:  # the page itself can
            c.send("not json")
            c.send(json.dumps([1, 2]))
            c.send(b"\x00\x01")
            c.send(json.dumps({"listen": "x"}))
            errors = []
            deadline = time.monotonic() + 10
            while len(errors) < 4 and time.monotonic() < deadline:
                m = c.recv(timeout=10)
                if isinstance(m, str) and json.loads(m)["type"] == "error":
                    errors.append(json.loads(m)["error"])
            assert len(errors) == 4 and "binary" in errors[2]
            c.send(json.dumps({"watch": [0]}))  # still connected and served
            assert c.recv(timeout=10)
        body = urllib.request.urlopen(url.rstrip("/") + "/api/events.jsonl?kind=vad.*", timeout=10)
        assert "attachment" in body.headers["Content-Disposition"]
        lines = [json.loads(x) for x in body.read().decode().splitlines()]
        assert lines and {d["kind"] for d in lines} == {"vad.segment"}
        assert len(lines) == sum(1 for e in keep.events if e.kind == "vad.segment")
        assert urllib.request.urlopen(url.rstrip("/") + "/api/events.jsonl?q=zzzz-nothing", timeout=10).read() == b""
    finally:
        view.close()


def test_bind_errors_are_one_clear_line():
    from streamkit.core.errors import ConfigError

    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        view = LiveView(f"127.0.0.1:{busy.getsockname()[1]}")
        with pytest.raises(ConfigError, match="cannot listen on 127.0.0.1"):
            view.start()
    finally:
        busy.close()
    with pytest.raises(ConfigError, match="bad --web port"):
        LiveView("localhost:http")
    g, _ = demo_graph()
    with pytest.raises(ConfigError, match="no block 'nope'"):
        LiveView("0").attach(g, tap="nope")


def _cli(*args, cwd=None):
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-m", "streamkit", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)


def test_run_graph_web_serves_the_graph(tmp_path):
    """``streamkit run GRAPH --web``: the graph's first source is shown (or ``--web-tap BLOCK``)."""
    import re
    from pathlib import Path

    graph = Path(__file__).resolve().parents[2] / "examples" / "graphs" / "demo_signal.yaml"
    p = _cli("run", str(graph), "--mode", "realtime", "--duration", "6", "--web", "127.0.0.1:0", "--quiet", cwd=tmp_path)  # its events/ go there
    line = p.stdout.readline()
    m = re.search(r"live view: (http\S+)", line)
    assert m, line + p.stderr.read()
    rows, hello = 0, None
    with connect(ws_url(m.group(1)), open_timeout=10) as c:
        deadline = time.monotonic() + 20
        while rows < 20 and time.monotonic() < deadline:
            msg = c.recv(timeout=10)
            if isinstance(msg, bytes):
                rows += sum(len(d[1]) for d in frames.decode_all(msg) if isinstance(d, tuple))
            elif json.loads(msg)["type"] == "hello":
                hello = json.loads(msg)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert hello["stations"][0]["name"] == "demo-signal" and rows >= 20
    assert "live view: 1 viewer(s)" in out


def test_web_options_refused_with_one_line():
    from pathlib import Path

    graph = Path(__file__).resolve().parents[2] / "examples" / "graphs" / "demo_signal.yaml"
    for args, want in [(("run", str(graph), "--web", "0", "--web-tap", "nope"), "no block 'nope'"),
                       (("monitor", "--web", "localhost:http"), "bad --web port")]:  # fmt: skip
        p = _cli(*args)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 2 and want in err and err.count("\n") == 1 and "Traceback" not in err, (args, err)


def test_mic_web_shows_the_level_meter_output():
    from streamkit.cli import build_parser
    from streamkit.cli.monitor import build_mic_graph

    a = build_parser().parse_args(["mic", "--web", "127.0.0.1:0"])
    g = build_mic_graph(a)
    view = LiveView(a.web)
    view.attach(g, tap="level", station="mic")
    assert g.blocks["web"].hub_id == view.hub.id and view.hub.feed("mic") is not None
