"""Per-class SED post-processing fitted on validation (streamkit.train.sed_tune), on hand-made probabilities."""

from __future__ import annotations

import numpy as np
import pytest

from streamkit.eval.sed import Event, event_based
from streamkit.models.sed_crnn import SedConfig
from streamkit.models.sed_post import frames_to_events
from streamkit.train.sed_tune import events_for, tune_post, tuned_events

T = 154  # output frames of a 10 s clip


def _case():
    """Six clips; class 0 calibrated low (events at 0.4), class 1 clean, class 2 with two-frame events.

    References are the events of the clean masks, so a setting that recovers a mask exactly scores 100 %.
    """
    cfg = SedConfig()
    rng = np.random.default_rng(0)
    files = [f"c{i}.wav" for i in range(6)]
    probs, ref = [], {}
    for f in files:
        mask = np.zeros((T, 10), bool)
        p = np.zeros((T, 10))
        for _ in range(2):
            a = int(rng.integers(5, 60))
            mask[a : a + 20, 0] = True
            b = int(rng.integers(70, 130))
            mask[b : b + 15, 1] = True
        for a in (20, 80, 130):
            mask[a : a + 2, 2] = True
        p[:, 0] = np.where(mask[:, 0], 0.4, 0.05)
        p[:, 1] = np.where(mask[:, 1], 0.95, 0.02)
        p[:, 2] = np.where(mask[:, 2], 0.9, 0.0)
        probs.append(p)
        ref[f] = [Event(f, on, off, lab) for lab, on, off, _c in frames_to_events(mask.astype(float), cfg)]
    return cfg, files, probs, ref


def test_per_class_settings_recover_each_class():
    cfg, files, probs, ref = _case()
    tu = tune_post(probs, files, ref, cfg)
    c = cfg.classes
    # class 0: every event at 0.4 is missed by the default threshold; the nearest threshold to 0.5 below 0.4 wins
    s0 = tu.per_class[c[0]]
    assert s0.threshold == pytest.approx(0.35) and s0.val_f1 == 100.0 and s0.default_val_f1 == 0.0
    # class 1 is perfect at the default setting: the tie goes to the default
    s1 = tu.per_class[c[1]]
    assert (s1.threshold, s1.median_frames) == (0.5, 7) and s1.val_f1 == s1.default_val_f1 == 100.0
    # class 2: a 7-frame median erases two-frame events; 3 frames keeps them (and is nearer to 7 than 1)
    s2 = tu.per_class[c[2]]
    assert s2.median_frames == 3 and s2.median_s == pytest.approx(0.192) and s2.val_f1 == 100.0 and s2.default_val_f1 == 0.0
    # classes without validation events keep the default
    for k in c[3:]:
        assert (tu.per_class[k].threshold, tu.per_class[k].median_frames, tu.per_class[k].val_f1) == (0.5, 7, None)
    assert tu.val_macro_f1_default == pytest.approx(100 / 3, abs=0.01)
    assert tu.val_macro_f1_per_class == 100.0
    assert tu.val_macro_f1_default <= tu.val_macro_f1_global <= tu.val_macro_f1_per_class
    assert tu.thresholds()[:3] == [0.35, 0.5, 0.5] and tu.median_frames()[1:3] == [7, 3]


def test_tuned_events_score_what_the_tuning_reports():
    """Per-class F1 depends only on that class's events, so the chosen settings together give the reported macro F1."""
    cfg, files, probs, ref = _case()
    tu = tune_post(probs, files, ref, cfg, thresholds=(0.3, 0.5, 0.7), medians_s=(0.0, 0.45))
    for mode, want in (("per-class", tu.val_macro_f1_per_class), ("global", tu.val_macro_f1_global)):
        got = event_based(ref, tuned_events(probs, files, cfg, tu, mode=mode), classes=cfg.classes, files=files)
        assert 100 * got.macro_f1 == pytest.approx(want, abs=0.006), mode
    d = event_based(ref, events_for(probs, files, cfg, threshold=0.5, median=7), classes=cfg.classes, files=files)
    assert 100 * d.macro_f1 == pytest.approx(tu.val_macro_f1_default, abs=0.006)
    assert tu.grid == {"thresholds": [0.3, 0.5, 0.7], "median_frames": [1.0, 7.0]}
    assert tu.as_dict()["per_class"][cfg.classes[0]]["threshold"] == 0.3


def test_tuning_errors():
    cfg, files, probs, ref = _case()
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        tune_post(probs, files, ref, cfg, thresholds=(0.0, 0.5))
    with pytest.raises(ValueError, match="at least one"):
        tune_post(probs, files, ref, cfg, medians_s=())
    with pytest.raises(ValueError, match="5 probability arrays for 6 files"):
        events_for(probs[:5], files, cfg, threshold=0.5, median=7)
    tu = tune_post(probs, files, ref, cfg, thresholds=(0.5,), medians_s=(0.45,))
    with pytest.raises(ValueError, match="mode"):
        tuned_events(probs, files, cfg, tu, mode="best")
    other = SedConfig(n_classes=2, classes=("a", "b"))
    with pytest.raises(ValueError, match="the tuning is for classes"):
        tuned_events(probs, files, other, tu)


def test_clip_gates_remove_false_alarms_of_absent_classes():
    """A confident class-1 burst in clips without class 1, whose clip-level probability is low: no
    threshold or window removes it, the lowest clip gate above that probability does; the other
    classes keep no gate (ties go to the lower one)."""
    from streamkit.train.sed_tune import post_meta

    cfg, files, probs, ref = _case()
    clips = []
    for i, f in enumerate(files):
        c = np.full(10, 0.9)
        if i >= 4:  # clips 4, 5: drop their class-1 events from the reference, keep the burst
            ref[f] = [e for e in ref[f] if e.event_label != cfg.classes[1]]
            c[1] = 0.2
        clips.append(c)
    grid = {"thresholds": (0.3, 0.5, 0.7), "medians_s": (0.0, 0.45)}  # none removes a 0.95 burst
    tu = tune_post(probs, files, ref, cfg, clips=clips, gates=(0.1, 0.3, 0.5), **grid)
    s1 = tu.per_class[cfg.classes[1]]
    assert s1.clip_gate == 0.3 and s1.val_f1 == 100.0 and s1.ungated_val_f1 < 100.0
    assert [tu.per_class[k].clip_gate for k in cfg.classes[:1] + cfg.classes[2:]] == [0.0] * 9
    assert tu.val_macro_f1_per_class == 100.0 and tu.val_macro_f1_per_class_ungated < 100.0
    assert tu.grid["clip_gates"] == [0.0, 0.1, 0.3, 0.5]
    got = event_based(ref, tuned_events(probs, files, cfg, tu, clips=clips), classes=cfg.classes, files=files)
    assert 100 * got.macro_f1 == pytest.approx(tu.val_macro_f1_per_class, abs=0.006)
    meta = post_meta(tu, source="x.pt", corpus_command=None)
    assert meta["clip_gate"][cfg.classes[1]] == 0.3 and meta["val_macro_event_f1"]["per_class_ungated"] < 100.0
    plain = tune_post(probs, files, ref, cfg, **grid)
    assert plain.clip_gates() == [0.0] * 10 and plain.val_macro_f1_per_class_ungated is None
    assert "clip_gate" not in post_meta(plain, source="x.pt", corpus_command=None)
    with pytest.raises(ValueError, match="clip gates must lie"):
        tune_post(probs, files, ref, cfg, clips=clips, gates=(1.5,), **grid)
    with pytest.raises(ValueError, match="clip probability vectors"):
        tune_post(probs, files, ref, cfg, clips=clips[:2], **grid)


def test_clip_gate_function():
    from streamkit.models.sed_post import clip_gate, clip_gate_from_meta

    p = np.full((3, 2), 0.8)
    np.testing.assert_array_equal(clip_gate(p, [0.2, 0.9], 0.5), [[0.0, 0.8]] * 3)
    np.testing.assert_array_equal(clip_gate(p, [0.2, 0.9], [0.1, 0.95]), [[0.8, 0.0]] * 3)
    np.testing.assert_array_equal(clip_gate(p, [0.0, 0.0], 0.0), p)  # 0: no gating
    with pytest.raises(ValueError, match="shape"):
        clip_gate(p, [0.2], 0.5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        clip_gate(p, [0.2, 0.3], 1.2)
    assert clip_gate_from_meta({}, ("a", "b")) is None
    assert clip_gate_from_meta({"post_tuned": {"median_s": {}}}, ("a", "b")) is None
    assert clip_gate_from_meta({"post_tuned": {"clip_gate": {"a": 0.5, "b": 0}}}, ("a", "b")) == {"a": 0.5, "b": 0.0}
    for bad in ({"a": 0.5}, {"a": 0.5, "b": True}, {"a": 0.5, "b": 2.0}, [0.5, 0.5]):
        with pytest.raises(ValueError, match="clip_gate"):
            clip_gate_from_meta({"post_tuned": {"clip_gate": bad}}, ("a", "b"))
