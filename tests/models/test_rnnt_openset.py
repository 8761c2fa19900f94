"""Open-set LID: the calibration on synthetic scores, the streaming tracker against the offline
rule, the calibration file, and the ``unknown`` path of models.rnnt_asr on a tiny random model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from streamkit.core.errors import ConfigError
from streamkit.core.tags import SPEECH, SpeechBoundary
from streamkit.models import rnnt_openset as osr
from streamkit.models.rnnt_stream import RnntAsr
from streamkit.testing import assert_chunking_invariant, run_block
from tests.models.test_rnnt_stream import RATE, make_model, signal


def test_calibrate_keeps_the_false_unknown_target() -> None:
    rng = np.random.default_rng(0)
    pos = rng.uniform(0.6, 1.0, 1000)
    neg = rng.uniform(0.2, 0.7, 500)
    for target in (0.0, 0.01, 0.05, 0.2):
        r = osr.calibrate(pos, neg, target)
        assert r["false_unknown"] <= target and np.mean(pos < r["threshold"]) == r["false_unknown"]
        assert r["unknown_rate"] == np.mean(neg < r["threshold"])
        # the highest such threshold: one step up would reject one more in-language utterance
        assert np.mean(pos <= r["threshold"]) > target
    assert osr.calibrate(pos, neg, 0.05)["unknown_rate"] >= 0.8  # separable scores: most negatives rejected
    assert osr.calibrate([0.5, 0.5, 0.5], [0.1], 0.0)["threshold"] == 0.5  # ties stay known
    with pytest.raises(ValueError):
        osr.calibrate([], [0.1])


def _posts(rng: np.random.Generator, n: int, conf: float, L: int = 3) -> list[np.ndarray]:
    out = []
    for _ in range(n):
        T = int(rng.integers(5, 80))
        logits = rng.standard_normal((T, L)) + conf * np.eye(L)[int(rng.integers(L))]
        p = np.exp(logits)
        out.append(p / p.sum(1, keepdims=True))
    return out


def test_tracker_is_the_offline_rule_and_choose_picks_a_score() -> None:
    rng = np.random.default_rng(1)
    pos, neg = _posts(rng, 200, 4.0), _posts(rng, 200, 0.0)
    rule, table = osr.choose(pos, neg, max_false_unknown=0.05, checkpoint_frames=20)
    assert set(table) == {"last", "mean", "frame"} and rule.score in table
    assert table[rule.score]["unknown_rate"] == max(v["unknown_rate"] for v in table.values()) > 0.5
    for kind in table:
        r = osr.OpenSet(kind, table[kind]["threshold"], 20)
        for p in pos[:40] + neg[:40]:
            tr = osr.OpenSetTracker(r)
            early = [tr.update(row) for row in p]
            assert tr.finish() == r.is_unknown(p)
            assert tr.value == pytest.approx(osr.checkpoint_score(p, kind, 20))
            if any(early):  # the early answer comes at the checkpoint frame only
                assert early.index(True) == 20 == tr.unknown_at


def test_probe_fit_and_streaming_agree() -> None:
    rng = np.random.default_rng(2)
    pos_e = [rng.standard_normal((int(rng.integers(10, 60)), 8)) + 1.0 for _ in range(60)]
    neg_e = [rng.standard_normal((int(rng.integers(10, 60)), 8)) - 1.0 for _ in range(60)]
    probe = osr.fit_probe(pos_e, neg_e, checkpoint_frames=5)
    posts = [np.full((e.shape[0], 3), 1 / 3) for e in pos_e + neg_e]
    rule, table = osr.choose(posts[:60], posts[60:], kinds=("last", "probe"), checkpoint_frames=5, pos_encs=pos_e, neg_encs=neg_e, probe=probe)
    assert rule.score == "probe" and table["probe"]["unknown_rate"] > 0.9 and rule.probe == probe
    for p, e in zip(posts[::7], (pos_e + neg_e)[::7]):
        tr = osr.OpenSetTracker(rule)
        for a, b in zip(p, e):
            tr.update(a, b)
        assert tr.finish() == rule.is_unknown(p, e) and tr.value == pytest.approx(osr.checkpoint_score(p, "probe", 5, e, probe))
    with pytest.raises(osr.OpenSetError, match="probe weights"):
        osr.OpenSet("probe", 0.5)


def test_calibration_file(tmp_path) -> None:
    r = osr.OpenSet("last", 0.75, 30, 0.03, {"n": 1}, "cmd")
    p = tmp_path / "m.openset.json"
    r.save(p)
    assert osr.load(p) == r and osr.sidecar(tmp_path / "m.pt") == p
    p.write_text(json.dumps({"format": osr.FORMAT, "score": "loudness", "threshold": 0.5}))
    with pytest.raises(osr.OpenSetError, match="score must be one of"):
        osr.load(p)
    p.write_text("{")
    with pytest.raises(osr.OpenSetError, match="not valid JSON"):
        osr.load(p)


TAGS = [(400, SPEECH, SpeechBoundary(True, "t")), (9000, SPEECH, SpeechBoundary(False, "t")),
        (10000, SPEECH, SpeechBoundary(True, "t")), (18000, SPEECH, SpeechBoundary(False, "t"))]  # fmt: skip


def _run(path: str, **kw):
    r = run_block(RnntAsr(model=path, tau_frames=10, s_th=0.5, pre_roll_s=0.0, **kw), signal(2.4), rate=RATE, sizes=500, tags=TAGS)
    return [e for e in r.events if e.kind == "asr.final"], [e for e in r.events if e.kind == "lid.result"]


def test_block_unknown_path(tmp_path) -> None:
    path = make_model(tmp_path, lid_hidden=6)
    closed_f, closed_l = _run(path, unknown=None)
    assert all(e.payload.open_set is None and e.payload.lang == e.payload.closed_set_lang in ("en", "hi", "ta") for e in closed_l)
    # auto without a calibration file next to the weights: closed set, the same events
    auto_f, auto_l = _run(path)
    assert [e.payload for e in auto_f] == [e.payload for e in closed_f] and [e.payload for e in auto_l] == [e.payload for e in closed_l]
    # a threshold no posterior reaches: every utterance unknown, no text, all decoders off after frame 5
    osr.OpenSet("last", 1.0, 5).save(osr.sidecar(path))
    f, lid = _run(path)
    assert len(f) == len(lid) == 2
    for a, b, ref in zip(f, lid, closed_l):
        assert a.payload.lang == b.payload.lang == "unknown" and a.payload.text == "" and a.payload.words == () and a.payload.confidence == 0.0
        assert b.payload.closed_set_lang in ("en", "hi", "ta") and b.payload.posteriors == ref.payload.posteriors
        assert b.payload.open_set["unknown_at"] == 5 and b.payload.open_set["threshold"] == 1.0 and b.payload.open_set["score"] == "last"
        assert set(b.payload.switched_off.values()) == {6}  # the shutoff stopped every decoder
        assert b.payload.t_avg == pytest.approx(3 * 6 / b.payload.frames) and b.payload.t_avg < ref.payload.t_avg
    # without the stop: the decoders run on, the answer is the same
    f2, lid2 = _run(path, unknown_stop=False)
    assert [e.payload.lang for e in lid2] == ["unknown", "unknown"] and all(e.payload.text == "" for e in f2)
    assert [e.payload.t_avg for e in lid2] == [e.payload.t_avg for e in closed_l]
    # threshold 0: never unknown; the answer is the closed set's
    osr.OpenSet("frame", 0.0, 5).save(tmp_path / "zero.json")
    f3, lid3 = _run(path, unknown=str(tmp_path / "zero.json"))
    assert [e.payload.text for e in f3] == [e.payload.text for e in closed_f]
    assert [e.payload.lang for e in lid3] == [e.payload.lang for e in closed_l] and all(e.payload.open_set["unknown_at"] is None for e in lid3)


def test_block_unknown_chunking_invariant_and_errors(tmp_path) -> None:
    path = make_model(tmp_path, lid_hidden=6)
    osr.OpenSet("mean", 0.9, 8).save(osr.sidecar(path))

    def factory():
        return RnntAsr(model=path, tau_frames=10, s_th=0.5, pre_roll_s=0.02, partial_interval_s=0.09)

    ref = assert_chunking_invariant(factory, signal(2.4), rate=RATE, sizes=("all", 1, 37, 1000), tags=TAGS, check_tags=False)
    assert [e.payload.lang for e in ref.events if e.kind == "lid.result"] == ["unknown", "unknown"]
    with pytest.raises(ConfigError, match="not found"):
        run_block(RnntAsr(model=path, unknown=str(tmp_path / "nope.json")), signal(0.5), rate=RATE, tags=TAGS[:1])
    with pytest.raises(ConfigError, match="several languages"):
        run_block(RnntAsr(model=path, unknown=str(osr.sidecar(path)), languages=["en"]), signal(0.5), rate=RATE, tags=TAGS[:1])
    with pytest.raises(ConfigError, match="unknown must be"):
        RnntAsr(model=path, unknown=3)  # type: ignore[arg-type]
