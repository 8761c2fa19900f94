"""streamkit transcribe: SAD + RNN-T over files, text and JSON Lines output, error paths."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf

from streamkit.cli import main
from streamkit.models.transcribe import transcribe_array
from tests.dsp.test_stat_sad import make
from tests.models.test_rnnt_stream import make_model


def speech_file(tmp_path, name="a.wav", rate=16000, seconds=14.0, seed=5):
    x, truth = make(seconds, snr_db=15.0, seed=seed)
    if rate != 8000:
        import soxr

        x = soxr.resample(x, 8000, rate)
    p = tmp_path / name
    sf.write(p, np.stack([x, x], axis=1).astype(np.float32), rate)  # stereo at another rate: mixed and resampled
    return p, truth


def test_transcribe_array_utterances_follow_the_sad(tmp_path):
    weights = make_model(tmp_path)
    x, truth = make(14.0, snr_db=15.0, seed=5)
    utts, st = transcribe_array(x.astype(np.float32), weights, beam=2)
    assert utts, "the SAD found speech, so the ASR must report utterances"
    for u in utts:
        assert 0 <= u["start_s"] < u["end_s"] <= 14.0
        assert u["lang"] in ("en", "hi", "ta")
        assert set(u["lid"]) == {"en", "hi", "ta"}
        assert 0 < u["confidence"] <= 1
    # every utterance overlaps a true speech burst (the ASR runs on the SAD's segments only)
    for u in utts:
        lo, hi = u["start_s"] * 8000, u["end_s"] * 8000
        assert any(a < hi and lo < b for a, b in truth)
    # no SAD: the whole file is decoded as one utterance (shorter than --max-utterance-s)
    one, _ = transcribe_array(x.astype(np.float32), weights, sad="none", beam=1)
    assert len(one) == 1 and one[0]["start_s"] == 0.0


def test_cli_text_and_json(tmp_path, capsys):
    weights = make_model(tmp_path)
    p, _ = speech_file(tmp_path)
    assert main(["transcribe", str(p), "--weights", weights, "--beam", "2"]) == 0
    out = capsys.readouterr()
    lines = [ln for ln in out.out.splitlines() if ln.strip()]
    assert lines and all(ln.startswith(str(p)) for ln in lines)
    assert "RT factor" in out.err
    assert main(["transcribe", str(tmp_path), "--weights", weights, "--json", "--tau", "inf", "--s-th", "inf"]) == 0
    objs = [json.loads(ln) for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    assert len(objs) == len(lines)
    assert {"file", "start_s", "end_s", "lang", "text", "confidence", "lid", "t_avg", "words"} <= set(objs[0])
    # --lid-select last: the same utterances (the SAD decides them), each with a language of the model
    assert main(["transcribe", str(tmp_path), "--weights", weights, "--json", "--tau", "inf", "--s-th", "inf", "--lid-select", "last"]) == 0
    last = [json.loads(ln) for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    assert [(o["start_s"], o["end_s"]) for o in last] == [(o["start_s"], o["end_s"]) for o in objs]
    assert all(o["lang"] in ("en", "hi", "ta") for o in last)


def record_starts(monkeypatch, what):
    """Every ASR block the CLI starts appends ``what(block)`` to the returned list."""
    import streamkit.models.rnnt_stream as rs

    seen = []
    real_start = rs.RnntAsr.start

    def start(self, ctx):
        real_start(self, ctx)
        seen.append(what(self))

    monkeypatch.setattr(rs.RnntAsr, "start", start)
    return seen


def test_cli_lid_score_reaches_the_block(tmp_path, capsys, monkeypatch):
    """--lid-score (default auto) goes to the ASR block; a value outside the choices is a usage error."""
    weights = make_model(tmp_path)
    p, _ = speech_file(tmp_path)
    seen = record_starts(monkeypatch, lambda b: (b.lid_score, b._dec.lid.score))
    assert main(["transcribe", str(p), "--weights", weights, "--beam", "1"]) == 0
    assert main(["transcribe", str(p), "--weights", weights, "--beam", "1", "--lid-score", "last"]) == 0
    assert seen == [("auto", "sum"), ("last", "last")]  # the tiny model's LID head is linear: auto = the paper's sum
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["transcribe", str(p), "--weights", weights, "--lid-score", "mean"])


def test_cli_lid_prior(tmp_path, capsys, monkeypatch):
    """--lid-prior none|train|LANG=W,... reaches the block as weights per model language; misfits are usage errors before any file."""
    weights = make_model(tmp_path)
    p, _ = speech_file(tmp_path)
    seen = record_starts(monkeypatch, lambda b: None if b._dec.lid.log_prior is None else [round(float(v), 6) for v in np.exp(b._dec.lid.log_prior)])
    assert main(["transcribe", str(p), "--weights", weights, "--beam", "1"]) == 0
    assert main(["transcribe", str(p), "--weights", weights, "--beam", "1", "--lid-prior", "en=3,hi=1,ta=1"]) == 0
    assert seen == [None, [0.6, 0.2, 0.2]]
    capsys.readouterr()
    for spec, msg in (("en=3", "missing"), ("en=x", "language prior"), ("train", "records no training hours")):
        assert main(["transcribe", str(p), "--weights", weights, "--lid-prior", spec]) == 2
        err = capsys.readouterr().err
        assert "--lid-prior" in err and msg in err
    assert len(seen) == 2  # no file was decoded after a bad prior


def test_cli_errors(tmp_path, capsys):
    weights = make_model(tmp_path)
    assert main(["transcribe", str(tmp_path / "missing.wav"), "--weights", weights]) == 2
    assert "path not found" in capsys.readouterr().err
    assert main(["transcribe", str(tmp_path), "--weights", str(tmp_path / "none.pt")]) == 2
    assert "no RNN-T weights" in capsys.readouterr().err
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF not really a wav")
    assert main(["transcribe", str(bad), "--weights", weights]) == 1
    assert "bad.wav" in capsys.readouterr().err
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(b"\x00" * 64)
    p, _ = speech_file(tmp_path, "b.wav", rate=8000, seconds=8.0)
    assert main(["transcribe", str(p), "--weights", str(corrupt)]) == 2
    assert "corrupt.pt" in capsys.readouterr().err


def test_cli_lexicon(tmp_path, capsys):
    weights = make_model(tmp_path)
    p, _ = speech_file(tmp_path, "c.wav", rate=8000, seconds=10.0)
    lists = {"en": ["a", "ab", "abcb", "de", "d"], "hi": ["kl", "mn", "m"], "ta": ["p", "pq", "st", "s"]}
    lex = tmp_path / "lex"
    lex.mkdir()
    for lg, ws in lists.items():
        (lex / f"{lg}.words.txt").write_text("\n".join(ws) + "\n", encoding="utf-8")
    assert main(["transcribe", str(p), "--weights", weights, "--json", "--lexicon", str(lex), "--word-penalty", "0.3"]) == 0
    objs = [json.loads(ln) for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    assert objs and any(o["words"] for o in objs)
    for o in objs:
        assert all(w["word"] in lists[o["lang"]] for w in o["words"]), o
    assert main(["transcribe", str(p), "--weights", weights, "--word-penalty", "1"]) == 2
    assert "--word-penalty needs --lexicon" in capsys.readouterr().err
    assert main(["transcribe", str(p), "--weights", weights, "--lexicon", str(tmp_path / "nowhere")]) == 2
    assert "--lexicon:" in capsys.readouterr().err
    assert main(["transcribe", str(p), "--weights", weights, "--lexicon", str(lex), "--word-penalty", "-1"]) == 2
    assert "--word-penalty must be" in capsys.readouterr().err


def test_cli_streams_the_file_in_bounded_chunks(tmp_path, capsys, monkeypatch):
    """transcribe reads the file through io.file in bounded chunks (never loads it whole) and gives
    what the same samples, loaded whole, give through the same graph."""
    from streamkit.eval import sad_systems as ss
    from streamkit.io.file_source import FileSource
    from streamkit.models.transcribe import transcribe_file

    weights = make_model(tmp_path)
    p, _ = speech_file(tmp_path, rate=16000, seconds=10.0)
    x = ss.load_audio(p).x
    ref, _ = transcribe_array(x, weights, beam=1)
    reads = []
    real_read = FileSource.read

    def read(self, max_items, ctx):
        r = real_read(self, max_items, ctx)
        reads.append(0 if r is None else r.samples.shape[0])
        return r

    def no_whole_file(*a, **k):
        raise AssertionError("load_audio called: the file was loaded whole")

    monkeypatch.setattr(FileSource, "read", read)
    monkeypatch.setattr(ss, "load_audio", no_whole_file)
    got, st = transcribe_file(p, weights, beam=1)
    assert max(reads) <= int(0.2 * 16000) and sum(reads) == 10 * 16000
    assert st["samples_8k"] == len(x)
    assert [(u["start_s"], u["end_s"], u["text"]) for u in got] == [(u["start_s"], u["end_s"], u["text"]) for u in ref]
    reads.clear()
    assert main(["transcribe", str(p), "--weights", weights, "--beam", "1"]) == 0
    assert reads and max(reads) <= int(0.2 * 16000)
