"""The live view in a real browser: Debian's chromium, headless, driven by playwright, against the
real CLI (``streamkit monitor --web``) on the built-in KiwiSDR emulator.

Set ``STREAMKIT_SCREENSHOTS=DIR`` to keep the screenshots the browser takes (docs/img holds them).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(240)

CHROMIUM = os.environ.get("STREAMKIT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM:
        pytest.fail("chromium is not installed: run .ci/setup (it installs Debian's chromium), or set STREAMKIT_CHROMIUM")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--autoplay-policy=no-user-gesture-required"])
        yield b
        b.close()


def start_monitor(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    p = subprocess.Popen([sys.executable, "-m", "streamkit", "monitor", "--events", str(tmp_path / "events"), *args],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path)  # fmt: skip
    deadline = time.monotonic() + 60
    seen = []
    assert p.stdout is not None
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        seen.append(line)
        m = re.search(r"live view: (http\S+)", line)
        if m:
            return p, m.group(1)
    p.kill()
    raise AssertionError("no live view URL printed:\n" + "".join(seen))


def wait_for(page, predicate, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    snap = None
    while time.monotonic() < deadline:
        snap = page.evaluate("window.streamkit.snapshot()")
        if predicate(snap):
            return snap
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}: {json.dumps(snap)[:2000]}")


def shot(page, tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    page.screenshot(path=str(path), full_page=True)
    keep = os.environ.get("STREAMKIT_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / name)
    return path


def test_monitor_web_page_in_a_real_browser(browser, tmp_path):
    proc, url = start_monitor(tmp_path, "--web", "127.0.0.1:0", "--duration", "26")
    assert url.startswith("http://127.0.0.1:") and "token" not in url
    page = browser.new_page(viewport={"width": 1400, "height": 1100})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(url)
        # every station's waterfall canvas gets non-blank rows within a few seconds
        snap = wait_for(page, lambda s: len(s["stations"]) == 3 and all(st["nonBlankRows"] > 5 and st["painted"] > 5 for st in s["stations"]),
                        "waterfall rows on all 3 stations", timeout=20)  # fmt: skip
        assert {st["state"] for st in snap["stations"]} == {"streaming"}
        page.click(".station[data-index='0'] .listen")  # click to listen
        # the emulator's speech bursts show as speech segments; its dropped frame (1 in 60) as a gap on the timeline
        snap = wait_for(page, lambda s: any(st["segments"] for st in s["stations"]) and all(st["gaps"] for st in s["stations"]),
                        "a speech segment and a gap on the timelines", timeout=40)  # fmt: skip
        gap = snap["stations"][0]["gaps"][0]
        assert gap["cause"] == "seq_gap" and 0.1 < gap["lost"] < 0.3  # one ADPCM frame: 2048 items at 12001 Hz = 0.171 s
        # the audio reached the Web Audio graph: samples played, not all silence, the gap heard as silence
        snap = wait_for(
            page, lambda s: (s["audio"].get("played") or 0) > 8000 and s["audio"].get("gapsHeard", 0) >= 1, "audio played through the gap", timeout=30
        )
        a = snap["audio"]
        assert a["contextState"] == "running" and a["station"] == 0 and a["nonZero"] > 4000 and a["lostHeardS"] > 0.1
        # the event log: search, then download what is shown as JSONL
        page.fill("#log-q", "seq_gap")
        page.wait_for_timeout(300)
        rows = page.locator("#log-table tbody tr")
        assert rows.count() == 3 and all("stream.gap" in rows.nth(i).inner_text() for i in range(3))
        with page.expect_download() as dl:
            page.click("#log-dl")
        lines = [json.loads(x) for x in Path(dl.value.path()).read_text().splitlines()]
        assert len(lines) == 3 and {d["kind"] for d in lines} == {"stream.gap"} and all("station" not in d for d in lines)
        page.fill("#log-q", "")
        # filters: "speech now" and a name filter hide stations (and tell the server what to send)
        page.fill("#f-name", "14200")
        page.wait_for_timeout(600)
        assert [st["hidden"] for st in page.evaluate("window.streamkit.snapshot()")["stations"]] == [True, False, True]
        page.fill("#f-name", "")
        wait_for(page, lambda s: min(st["rows"] for st in s["stations"]) >= 200, "20 s of waterfall", timeout=30)
        shot(page, tmp_path, "web-live-view.png")
        proc.wait(timeout=60)
        out = proc.stdout.read() if proc.stdout else ""
        snap = wait_for(page, lambda s: s["ended"] is not None, "the end of the run on the page", timeout=10)
        assert snap["viewer"]["dropped_frames"] == 0 and snap["viewer"]["missed_rows"] == 0
        assert proc.returncode == 0, out
        assert re.search(r"live view: 1 viewer\(s\), \d+ kB sent", out), out
        assert not errors, errors
    finally:
        page.close()
        if proc.poll() is None:
            proc.kill()


def test_a_non_loopback_view_shows_nothing_without_its_token(browser, tmp_path):
    proc, url = start_monitor(tmp_path, "--web", "0.0.0.0:0", "--duration", "12", "--quiet")
    m = re.match(r"http://[^/]+:(\d+)/\?token=([\w-]+)$", url)
    assert m, url
    port, token = m.groups()
    page = browser.new_page()
    try:
        page.goto(f"http://127.0.0.1:{port}/")  # no token: the page loads, the data does not
        page.wait_for_timeout(2500)
        snap = page.evaluate("window.streamkit.snapshot()")
        assert snap["stations"] == [] and snap["conn"].startswith("disconnected") and snap["framesIn"] == 0
        page.goto(f"http://127.0.0.1:{port}/?token={token}")
        wait_for(page, lambda s: len(s["stations"]) == 3 and all(st["nonBlankRows"] > 0 for st in s["stations"]), "data with the token", timeout=20)
    finally:
        page.close()
        proc.wait(timeout=60)
    out = proc.stdout.read() if proc.stdout else ""
    assert "request(s) refused" not in out or token not in out  # the token is printed once, in the URL, never in a refusal
    assert proc.returncode == 0


def test_search_box_finds_and_plays_what_the_monitor_indexed(browser, tmp_path):
    """``monitor --record --index --web``: the page's search box lists windows indexed during the run and plays one."""
    root = Path(__file__).resolve().parents[2]  # run this checkout's streamkit (python -m puts the cwd first)
    cmd = [sys.executable, "-m", "streamkit", "monitor", "--events", str(tmp_path / "events"), "--record", str(tmp_path / "rec"),
           "--index", str(tmp_path / "idx"), "--web", "127.0.0.1:0", "--duration", "40", "--quiet"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}, cwd=root)
    try:
        assert proc.stdout is not None
        url = next((m.group(1) for line in proc.stdout if (m := re.search(r"live view: (http\S+)", line))), None)
        assert url, "no live view URL printed"
        page = browser.new_page()
        page.goto(url)
        page.wait_for_selector("#search:not([hidden])", timeout=30000)
        deadline = time.monotonic() + 60
        hits = []
        while time.monotonic() < deadline and not hits:  # the first 10 s window is indexed within ~15 s of the start
            page.fill("#search-q", "people talking")
            page.click("#search-go")
            _until(page, "document.querySelector('#search-status').textContent !== 'searching…'")
            hits = page.evaluate("window.streamkitSearch.result ? window.streamkitSearch.result.hits : []")
            if not hits:
                time.sleep(1.0)
        assert hits and hits[0]["kind"] == "window" and hits[0]["utc_start"], page.text_content("#search-status")
        assert page.locator("#search-table tbody tr").count() == len(hits)
        assert hits[0]["station"] in page.text_content("#search-table tbody tr:first-child")
        page.click("#search-table tbody tr:first-child button")
        _until(page, "document.querySelector('#search-audio').readyState >= 1")
        dur = page.evaluate("document.querySelector('#search-audio').duration")
        assert abs(dur - (hits[0]["end_s"] - hits[0]["start_s"])) < 0.1
    finally:
        proc.kill()
        proc.wait(30)


def _until(page, expr: str, timeout: float = 30.0) -> None:
    """Poll ``expr`` in the page (page.wait_for_function evaluates strings, which the page's CSP forbids)."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expr):
        if time.monotonic() >= deadline:  # a hang bound, not a timing check
            raise AssertionError(f"timed out waiting for {expr}")
        time.sleep(0.2)
