"""The command line: one-line errors with non-zero exits, --help everywhere, run/bench/describe."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from streamkit.cli import build_parser, main

GRAPH = """
name: tone8k
blocks:
  src: {type: io.tone, rate: "12001.188", freq_hz: 1000, duration_s: 2.0}
  rs:  {type: dsp.resample, to_hz: 8000}
  lvl: {type: dsp.level, interval_s: 0.5}
chain: [src, rs, lvl]
"""


def run_cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "streamkit", *args], capture_output=True, text=True, timeout=timeout)


def test_version():
    r = run_cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("streamkit ")


@pytest.mark.parametrize("cmd", ["monitor", "mic", "run", "bench", "devices", "blocks", "describe", "emulate", "corpus"])
def test_help_on_each_command(cmd, capsys):
    with pytest.raises(SystemExit) as ei:
        main([cmd, "--help"])
    assert ei.value.code == 0
    assert "usage: streamkit" in capsys.readouterr().out


def test_emulate_kiwi_help():
    r = run_cli("emulate", "kiwi", "--help")
    assert r.returncode == 0 and "--fault" in r.stdout and "--sample-rate" in r.stdout


def test_sad_and_eval_help_and_errors(tmp_path):
    r = run_cli("sad", "--help")
    assert r.returncode == 0 and "--system" in r.stdout
    r = run_cli("eval", "sad", "--help")
    assert r.returncode == 0 and "--corpus" in r.stdout
    r = run_cli("sad", str(tmp_path / "nope.wav"), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "nope.wav" in r.stderr


def test_sed_help_lists_the_known_classes(capsys):
    with pytest.raises(SystemExit) as ei:
        main(["sed", "--help"])
    out = " ".join(capsys.readouterr().out.split())  # (argparse wraps the epilog)
    assert ei.value.code == 0 and "Known classes" in out
    for cls in ("Alarm_bell_ringing", "Blender", "Cat", "Dishes", "Dog", "Electric_shaver_toothbrush", "Frying", "Running_water",
                "Speech", "Vacuum_cleaner"):  # fmt: skip
        assert cls in out


def test_corpus_hf_help():
    r = run_cli("corpus", "hf", "--help")
    assert r.returncode == 0 and "--hours" in r.stdout and "--seed" in r.stdout


def test_missing_graph_file_is_one_line_error(tmp_path):
    r = run_cli("run", str(tmp_path / "nope.yaml"))
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"streamkit: error: graph file not found: {tmp_path / 'nope.yaml'}"]


@pytest.mark.parametrize(
    "text, msg",
    [
        ("blocks: [unclosed", "cannot parse graph file"),
        ("blocks:\n  a: {type: dsp.nope}\n", "unknown block type 'dsp.nope'"),
        ("blocks:\n  a: {type: io.tone, rate: 8000}\n  b: {type: dsp.resample, to_hz: 8000}\nedges: [[b, a]]\n", "has no input"),
        ("blocks:\n  a: {type: io.tone, rate: 8000}\n  b: {type: dsp.highpass, cutoff_hz: 5000}\nchain: [a, b]\n", "a -> b"),
    ],
)
def test_bad_graph_is_one_line_error(tmp_path, text, msg):
    p = tmp_path / "g.yaml"
    p.write_text(text)
    r = run_cli("run", str(p))
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("streamkit: error: ") and msg in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_run_quiet_prints_summary_and_writes_events(tmp_path):
    p = tmp_path / "g.yaml"
    p.write_text(GRAPH)
    ev = tmp_path / "ev.jsonl"
    r = run_cli("run", str(p), "--quiet", "--events", str(ev))
    assert r.returncode == 0, r.stderr
    assert "tone8k: 2.00 s of stream" in r.stdout
    kinds = [json.loads(line)["kind"] for line in ev.read_text().splitlines()]
    assert kinds.count("level.update") == 4 and kinds[-1] == "graph.state"


def test_bench_writes_json_table(tmp_path):
    p = tmp_path / "g.yaml"
    p.write_text(GRAPH)
    out = tmp_path / "b.json"
    r = run_cli("bench", str(p), "--repeat", "1", "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert "RT factor" in r.stdout and "TOTAL" in r.stdout
    for blk in ("src", "rs", "lvl"):
        assert blk in r.stdout
    d = json.loads(out.read_text())
    assert d["stats"]["blocks"]["rs"]["items_in"] == round(2.0 * 12001.188)
    assert d["machine"]["cpu_count"] >= 1 and d["stats"]["rtf_total"] > 0


def test_describe_shows_specs_and_latency(tmp_path):
    p = tmp_path / "g.yaml"
    p.write_text(GRAPH)
    r = run_cli("describe", str(p))
    assert r.returncode == 0 and "8000 Hz" in r.stdout and "12001.188000 Hz" in r.stdout and "latency" in r.stdout


def test_blocks_lists_registry():
    r = run_cli("blocks")
    assert r.returncode == 0
    for n in ("dsp.resample", "dsp.stft", "io.kiwi", "io.file", "io.mic", "io.jsonl_events"):
        assert n in r.stdout


def test_monitor_bad_station_is_one_line_error():
    r = run_cli("monitor", "--station", "host:notaport:7100:lsb", "--duration", "1")
    assert r.returncode == 2 and r.stderr.strip().startswith("streamkit: error: station") and "Traceback" not in r.stderr


def test_monitor_unreachable_station_fails_clearly(tmp_path):
    r = run_cli("monitor", "--station", "127.0.0.1:1:7100:lsb", "--duration", "1", "--quiet", "--max-retries", "1", "--events", str(tmp_path), timeout=60)
    assert r.returncode == 1
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("streamkit: error: station 127.0.0.1-1-7100lsb: gave up after 2 attempts") and "Connect" in err[0]


def test_monitor_on_builtin_emulator(tmp_path):
    rec = tmp_path / "rec"
    r = run_cli("monitor", "--duration", "3", "--quiet", "--events", str(tmp_path), "--record", str(rec), timeout=120)
    assert r.returncode == 0, r.stderr
    import soundfile as sf

    wavs = sorted(rec.glob("*.wav"))
    assert len(wavs) == 3
    for w in wavs:
        info = sf.info(str(w))
        side = json.loads(w.with_name(w.name + ".json").read_text())
        assert info.samplerate == 12001 and info.frames == round(3 * 12001.188) and side["rate"] == "3000297/250"
    files = sorted(p.name for p in tmp_path.glob("*.jsonl"))
    assert len(files) == 3 and all("127.0.0.1" in f for f in files)
    for f in tmp_path.glob("*.jsonl"):
        kinds = [json.loads(line)["kind"] for line in f.read_text().splitlines()]
        assert "source.state" in kinds and "level.update" in kinds and kinds[-1] == "graph.state"
    assert r.stdout.count("s of stream") == 3


@pytest.mark.parametrize(("choice", "sources"), [("both", {"stat_sad", "dnn_sad"}), ("all", {"stat_sad", "dnn_sad", "vad"})])
def test_monitor_with_the_statistical_and_dnn_sad(tmp_path, choice, sources):
    r = run_cli("monitor", "--duration", "6", "--quiet", "--sad", choice, "--events", str(tmp_path), timeout=120)
    assert r.returncode == 0, r.stderr
    f = next(p for p in tmp_path.glob("*.jsonl") if "7100lsb" in p.name)
    segs = [json.loads(line) for line in f.read_text().splitlines() if json.loads(line)["kind"] == "vad.segment"]
    assert {s["source"] for s in segs} == sources  # every detector asked for ran on the speech-like station
    for name in sources - {"vad"}:
        found = [s["payload"] for s in segs if s["source"] == name]
        assert any(p["start_s"] < 3.0 < p["end_s"] for p in found), name  # the burst at about 2-5.5 s of stream time


def test_parser_builds_without_heavy_imports():
    code = "import sys, streamkit.cli as c; c.build_parser(); print(any(m in sys.modules for m in ('websockets', 'torch', 'sounddevice')))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "False"
    assert build_parser().prog == "streamkit"
