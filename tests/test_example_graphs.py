"""Every shipped example graph (examples/graphs/*.yaml) describes, runs a short while and benches.

The file graphs read ``input.wav`` and write next to it (relative paths, as a user edits them), so
each test runs in a temporary directory holding a generated ``input.wav``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from streamkit.cli import main

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples" / "graphs").glob("*.yaml"))


def test_the_examples_are_found():
    assert {p.name for p in EXAMPLES} >= {"demo_signal.yaml", "file_to_8k.yaml", "sed_file.yaml", "stft_roundtrip.yaml"}


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    sf = pytest.importorskip("soundfile")
    rng = np.random.default_rng(0)
    sf.write(tmp_path / "input.wav", (0.1 * rng.standard_normal((3 * 22050, 2))).astype(np.float32), 22050, subtype="PCM_16")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("graph", EXAMPLES, ids=lambda p: p.stem)
def test_example_graph_describes_and_runs(graph, workdir, capsys):
    assert main(["describe", str(graph)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("graph ") and "latency" in out
    assert main(["run", str(graph), "--duration", "1", "--quiet"]) == 0
    summary = capsys.readouterr().out
    assert "1.00 s of stream" in summary, summary


@pytest.mark.parametrize("graph", [p for p in EXAMPLES if p.stem in ("stft_roundtrip", "demo_signal")], ids=lambda p: p.stem)
def test_example_graph_benches(graph, workdir, capsys):
    out = workdir / "bench.json"
    assert main(["bench", str(graph), "--duration", "1", "--repeat", "1", "--json", str(out)]) == 0
    assert "TOTAL" in capsys.readouterr().out
    assert json.loads(out.read_text())["stats"]["stream_s"] == pytest.approx(1.0, abs=1e-3)
