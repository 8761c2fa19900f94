"""benchmarks/sad_real.py as a user runs it, on a tiny corpus in the layout of `streamkit corpus real`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import soundfile as sf

from streamkit.eval.rttm import write_rttm
from streamkit.testing.signals import speechlike

REPO = Path(__file__).resolve().parents[2]


def _fake_real(root: Path) -> None:
    rng = np.random.default_rng(5)
    d = root / "eval" / "scenes"
    for sub in ("audio", "rttm", "labels"):
        (d / sub).mkdir(parents=True)
    for i in range(2):
        fid = f"eval-{i:04d}"
        x = rng.standard_normal(16000 * 12) * 0.003
        iv = [[16000 * 2, 16000 * 4], [16000 * 7, 16000 * 9]]
        for a, b in iv:
            x[a:b] += 0.3 * speechlike(b - a, rng, rate=16000)
        x[16000 * 5 : 16000 * 6] += 0.2 * np.sin(2 * np.pi * 700 * np.arange(16000) / 16000)  # a tone between the utterances
        sf.write(d / "audio" / f"{fid}.wav", x.astype(np.float32), 16000, subtype="PCM_16")
        write_rttm(d / "rttm" / f"{fid}.rttm", {fid: np.array(iv)}, 16000)
    o = root / "eval" / "offair"
    for sub in ("audio", "labels"):
        (o / sub).mkdir(parents=True)
    sf.write(o / "audio" / "carrier.wav", (0.3 * np.sin(2 * np.pi * 1000 * np.arange(8000 * 3) / 8000)).astype(np.float32), 8000)
    (o / "labels" / "carrier.json").write_text(json.dumps({"id": "carrier", "intervals": [], "kind": "carrier"}))


def test_sad_real_benchmark_runs_and_writes_its_json(tmp_path: Path) -> None:
    _fake_real(tmp_path / "real")
    out = tmp_path / "r.json"
    cmd = [sys.executable, "benchmarks/sad_real.py", "--real", str(tmp_path / "real"), "--systems", "stat,energy", "--seconds", "2", "--limit", "1",
           "--stat", "stat-gate=harmonic_gate=true", "--out", str(out)]  # fmt: skip
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["rows"]["_mic"]["files"] == 1 and set(r["rows"]) >= {"stat", "energy", "stat-gate", "_hf", "_nonspeech"}
    for name in ("stat", "energy", "stat-gate"):
        row = r["rows"][name]
        assert 0 <= row["mic"]["recall"] <= 1 and 0 <= row["nonspeech"]["false_alarm"] <= 1
        assert "offair-carrier" in row["nonspeech"]["per_item"] and len(row["nonspeech"]["per_item"]) >= 10  # every HF kind + the off-air file
    assert "mic P" in p.stdout and "offair-carrier" in p.stdout and r["machine"]["cpu_count"] >= 1


def test_sad_real_benchmark_without_a_corpus_says_how_to_make_one(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "benchmarks/sad_real.py", "--real", str(tmp_path), "--systems", "energy"], cwd=REPO, capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert p.returncode != 0 and "streamkit corpus real" in p.stderr
