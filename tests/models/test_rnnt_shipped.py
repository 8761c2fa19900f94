"""The packaged multilingual RNN-T weights: they load with their card, are small, and run in the streaming block."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest

from streamkit.models import RNNT_WEIGHTS


@pytest.fixture(scope="module")
def shipped():
    if not RNNT_WEIGHTS.is_file():
        pytest.skip("no shipped RNN-T weights (train them with `streamkit train rnnt --variant lid`)")
    from streamkit.models.rnnt import load_model

    return load_model(RNNT_WEIGHTS)


def test_weights_and_card(shipped):
    model, meta = shipped
    cfg = model.cfg
    assert cfg.variant == "lid" and list(cfg.languages) == ["en", "hi", "ta", "gu"]
    assert RNNT_WEIGHTS.stat().st_size < 8_000_000
    assert set(meta["symbols"]) == set(cfg.languages)
    assert [len(meta["symbols"][lg]) for lg in cfg.languages] == list(cfg.vocab_sizes)
    card = json.loads(RNNT_WEIGHTS.with_suffix(".json").read_text(encoding="utf-8"))
    assert card["config"] == cfg.to_dict()
    assert card["weights"] == RNNT_WEIGHTS.name
    assert "streamkit train" in card["training"]["command"]
    text = json.dumps(card)
    repo = str(Path(__file__).resolve().parents[2])
    assert repo not in text and tempfile.gettempdir() not in text  # no machine paths


def test_streaming_block_runs_on_the_shipped_model():
    """2.5 s of a voiced signal as one utterance: one final with a known language, LID posteriors that sum to 1."""
    if not RNNT_WEIGHTS.is_file():
        pytest.skip("no shipped RNN-T weights")
    from streamkit.models.rnnt_stream import RnntAsr
    from streamkit.testing import run_block

    rate = 8000
    t = np.arange(int(2.5 * rate)) / rate
    f0 = 120 + 30 * np.sin(2 * np.pi * 0.8 * t)
    x = sum(0.3 / k * np.sin(2 * np.pi * k * np.cumsum(f0) / rate) for k in range(1, 12)) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t) ** 2)
    r = run_block(
        RnntAsr(model=str(RNNT_WEIGHTS), utterance_mode="always", beam=2, tau_frames=30, s_th=0.5), x.astype(np.float32), rate=rate, sizes=800
    )
    finals = [e.payload for e in r.events if e.kind == "asr.final"]
    lids = [e.payload for e in r.events if e.kind == "lid.result"]
    assert len(finals) == 1 and len(lids) == 1
    assert finals[0].lang in ("en", "hi", "ta", "gu")
    assert sum(lids[0].posteriors.values()) == pytest.approx(1.0, abs=1e-4)
