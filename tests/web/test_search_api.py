"""The live view's search routes: ``/api/search`` (JSON hits) and ``/api/clip`` (a hit's audio as WAV)."""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from streamkit.index import build_index
from streamkit.web.attach import LiveView
from streamkit.web.hub import LiveHub
from streamkit.web.server import LiveServer
from tests.index.test_index import RATE, STATION, _station_archive

TOKEN = "search-test-token-0123456789"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = _station_archive(tmp_path_factory.mktemp("arch") / "rec")
    idx = root.parent / "idx"
    assert build_index(root, idx).failed == []
    return idx


@pytest.fixture(scope="module")
def server(index: Path) -> Iterator[LiveServer]:
    srv = LiveServer(LiveHub(), "127.0.0.1", 0, token=TOKEN, index=str(index))
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def _get(srv: LiveServer, path: str, token: str | None = TOKEN, **q: object) -> tuple[int, bytes, str]:
    if token is not None:
        q["token"] = token
    url = f"http://127.0.0.1:{srv.port}{path}?{urllib.parse.urlencode(q)}"
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read(), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers.get("Content-Type", "")


def test_no_token_no_search(server: LiveServer) -> None:
    for path, q in (("/api/search", {"q": "dog"}), ("/api/clip", {"file": "x", "start": 0, "end": 1})):
        assert _get(server, path, token=None, **q)[0] == 401
        assert _get(server, path, token="wrong", **q)[0] == 401


def test_search_returns_hits_and_a_hit_plays(server: LiveServer) -> None:
    st, body, ctype = _get(server, "/api/search", q="a dog barks", top=3, station="7100")
    assert st == 200 and ctype.startswith("application/json")
    res = json.loads(body)
    assert res["classes"] == ["Dog"] and 1 <= len(res["hits"]) <= 3
    h = res["hits"][0]
    assert h["station"] == STATION and h["utc_start"].startswith("2026-01-01T00:00:1") and h["score"] > 0
    st, wav, ctype = _get(server, "/api/clip", file=h["file"], start=h["start_sample"], end=h["end_sample"])
    assert st == 200 and ctype == "audio/wav"
    x, rate = sf.read(io.BytesIO(wav), dtype="float32")
    want = sf.read(h["file"], dtype="float32", start=h["start_sample"], stop=h["end_sample"])[0]
    assert rate == RATE and x.shape == want.shape and np.max(np.abs(x - want)) < 1e-4
    # transcripts are searchable as text; another station's filter finds nothing
    hits = json.loads(_get(server, "/api/search", q="weather forecast")[1])["hits"]
    assert hits and "weather forecast" in hits[0]["transcript"]
    assert json.loads(_get(server, "/api/search", q="dog", station="14200")[1])["hits"] == []


@pytest.mark.parametrize(("path", "q", "why"), [
    ("/api/search", {}, "q is missing"),
    ("/api/search", {"q": "x" * 301}, "longer than 300"),
    ("/api/search", {"q": "dog", "top": "lots"}, "top must be an integer"),
    ("/api/search", {"q": "dog", "top": 0}, "top must be 1 to 100"),
    ("/api/search", {"q": "dog", "since": "yesterday"}, "bad time 'yesterday'"),
    ("/api/clip", {"file": "x", "start": 5, "end": 1}, "need 0 <= start < end"),
    ("/api/clip", {"start": 0, "end": 1}, "file is missing"),
])  # fmt: skip
def test_bad_requests_get_400_with_the_reason(server: LiveServer, path: str, q: dict[str, object], why: str) -> None:
    st, body, _ = _get(server, path, **q)
    assert st == 400 and why in body.decode()


def test_a_clip_only_from_a_file_the_index_lists(server: LiveServer, index: Path) -> None:
    assert _get(server, "/api/clip", file="/etc/passwd", start=0, end=10)[0] == 404
    wav = str(index.parent / "rec" / f"{STATION}.wav")
    st, body, _ = _get(server, "/api/clip", file=wav, start=0, end=31 * RATE)
    assert st == 400 and "past the file's" in body.decode()


def test_without_an_index_the_routes_say_so() -> None:
    view = LiveView("127.0.0.1:0")
    view.start()
    try:
        st, body, _ = _get(view.server, "/api/search", token=None, q="dog")
        assert st == 404 and "--index" in body.decode()
        assert json.loads(_get(view.server, "/api/stations", token=None)[1])["search"] is False
    finally:
        view.close()
