"""Monitor with --asr (speech gate + RNN-T) and --sed (sliding-window SED) on the emulator, with tiny models."""

from __future__ import annotations

import json

import numpy as np
import pytest

import streamkit.models
from streamkit.core.errors import ConfigError
from streamkit.monitor import build_station_graph, run_monitor
from tests.models.test_rnnt_stream import make_model


def test_monitor_asr_transcribes_the_speech_station(tmp_path, monkeypatch):
    from pathlib import Path

    monkeypatch.setattr(streamkit.models, "RNNT_WEIGHTS", Path(make_model(tmp_path)))
    res = run_monitor([], duration=7.0, events_dir=str(tmp_path / "ev"), console=False, detectors=("stat", "asr"))
    assert not res["failures"] and not res["fatal"]
    f = next(p for p in (tmp_path / "ev").glob("*.jsonl") if "7100lsb" in p.name)
    ev = [json.loads(line) for line in f.read_text().splitlines()]
    kinds = [e["kind"] for e in ev]
    assert "asr.final" in kinds and "lid.result" in kinds
    # the gate does not repeat the stat SAD's segments (one vad.segment source per segment)
    assert {e["source"] for e in ev if e["kind"] == "vad.segment"} == {"stat_sad"}
    finals = [e for e in ev if e["kind"] == "asr.final"]
    segs = [e["span"] for e in ev if e["kind"] == "vad.segment"]
    assert segs
    for fin in finals:  # every utterance lies on a speech segment of the SAD (same 8 kHz index space)
        lo, hi = fin["span"]
        assert lo < hi and any(a - 800 <= lo and hi <= b + 800 for a, b in segs) or hi >= max(b for _, b in segs)


def test_monitor_asr_without_weights_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(streamkit.models, "RNNT_WEIGHTS", tmp_path / "absent.pt")
    with pytest.raises(ConfigError, match="RNN-T weights"):
        build_station_graph({"host": "127.0.0.1", "port": 1, "freq_khz": 7100, "mode": "lsb"}, detectors=("asr",))


def test_monitor_sed_runs_on_every_station(tmp_path, monkeypatch):
    from pathlib import Path

    import torch

    from streamkit.models.sed_crnn import SedModel, save_model
    from tests.models.test_sed_stream import tiny_cfg

    torch.manual_seed(0)
    w = save_model(tmp_path / "sed.pt", SedModel(tiny_cfg()).eval())
    monkeypatch.setattr(streamkit.models, "SED_WEIGHTS", Path(w), raising=False)
    res = run_monitor([], duration=12.0, events_dir=str(tmp_path / "ev"), console=False, detectors=("energy", "sed"))
    assert not res["failures"] and not res["fatal"]
    for name, st in res["stations"].items():
        b = st["blocks"]["sed"]
        assert b["items_in"] >= 16000 * 11, name  # the 16 kHz branch got the whole stream
        assert b["rtf"] is not None
    for f in (tmp_path / "ev").glob("*.jsonl"):
        kinds = [json.loads(line)["kind"] for line in f.read_text().splitlines()]
        assert "block.error" not in kinds


def test_monitor_sed_without_weights_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(streamkit.models, "SED_WEIGHTS", tmp_path / "absent.pt", raising=False)
    with pytest.raises(ConfigError, match="SED weights"):
        build_station_graph({"host": "127.0.0.1", "port": 1, "freq_khz": 7100, "mode": "lsb"}, detectors=("sed",))


def test_monitor_asr_lexicon_keeps_the_words_in_the_lists(tmp_path, monkeypatch):
    import argparse
    from pathlib import Path

    from streamkit.cli.monitor import _asr_options
    from streamkit.models.rnnt_stream import DEFAULT_LEXICON_BEAM, DEFAULT_WORD_PENALTY

    assert _asr_options(argparse.Namespace(asr_lexicon=None)) == {}
    from streamkit.cli import build_parser

    for cmd in ("monitor", "mic"):  # both commands take the option and hand it to the ASR block
        assert _asr_options(build_parser().parse_args([cmd, "--asr", "--asr-lexicon", "system"]))["lexicon"] == "system"
        assert _asr_options(build_parser().parse_args([cmd, "--asr"])) == {}
    opts = _asr_options(argparse.Namespace(asr_lexicon=str(tmp_path / "lex")))
    assert opts == {"lexicon": str(tmp_path / "lex")}
    from streamkit.models.rnnt_stream import RnntAsr

    blk = RnntAsr(**opts)  # with a lexicon the block's defaults are the lexicon beam and word penalty
    assert (blk.beam, blk.word_penalty) == (DEFAULT_LEXICON_BEAM, DEFAULT_WORD_PENALTY)
    lists = {"en": ["a", "ab", "abcb", "de", "d"], "hi": ["kl", "mn", "m"], "ta": ["p", "pq", "st", "s"]}
    (tmp_path / "lex").mkdir()
    for lg, ws in lists.items():
        (tmp_path / "lex" / f"{lg}.words.txt").write_text("\n".join(ws) + "\n", encoding="utf-8")
    monkeypatch.setattr(streamkit.models, "RNNT_WEIGHTS", Path(make_model(tmp_path)))
    res = run_monitor(
        [], duration=7.0, events_dir=str(tmp_path / "ev"), console=False, detectors=("stat", "asr"), asr_options={**opts, "word_penalty": 0.2}
    )
    assert not res["failures"] and not res["fatal"]
    f = next(p for p in (tmp_path / "ev").glob("*.jsonl") if "7100lsb" in p.name)
    finals = [e["payload"] for e in map(json.loads, f.read_text().splitlines()) if e["kind"] == "asr.final"]
    assert finals and any(d["words"] for d in finals)
    for d in finals:
        assert all(w["text"] in lists[d["lang"]] for w in d["words"]), d


def test_live_sed_runs_without_the_files_clip_gates(tmp_path, monkeypatch):
    """monitor --sed and mic --sed run the weight file's tuned thresholds and windows but not its clip gates
    (a live stream is not cut into the 10 s clips the gates were fitted on); models.sed alone keeps them."""
    from pathlib import Path

    import torch

    from streamkit.cli import build_parser
    from streamkit.cli.monitor import build_mic_graph
    from streamkit.core.registry import lookup
    from streamkit.models.sed_crnn import SedModel, save_model
    from tests.models.test_sed_stream import tiny_cfg

    torch.manual_seed(0)
    cfg = tiny_cfg()
    tuned = {"median_s": dict.fromkeys(cfg.classes, 0.2), "threshold": dict.fromkeys(cfg.classes, 0.4),
             "clip_gate": dict.fromkeys(cfg.classes, 0.7)}  # fmt: skip
    w = save_model(tmp_path / "sed.pt", SedModel(cfg).eval(), meta={"post_tuned": tuned})
    monkeypatch.setattr(streamkit.models, "SED_WEIGHTS", Path(w), raising=False)
    alone = lookup("models.sed")()
    alone._prepare()
    assert alone.post_used == "tuned" and set(alone.clip_gates_used.values()) == {0.7}
    live = build_station_graph({"host": "127.0.0.1", "port": 1, "freq_khz": 7100, "mode": "lsb"}, detectors=("sed",)).blocks["sed"]
    mic = build_mic_graph(build_parser().parse_args(["mic", "--sed"])).blocks["sed"]
    for b in (live, mic):
        b._prepare()
        assert b.post_used == "tuned" and set(b.clip_gates_used.values()) == {0.0}
        np.testing.assert_array_equal(b._eng.high, alone._eng.high)
