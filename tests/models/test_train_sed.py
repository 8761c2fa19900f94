"""SED training recipe (streamkit.train.sed) and post-processing (streamkit.models.sed_post)."""

from __future__ import annotations

import argparse
import json
import shutil

import numpy as np
import pytest
import torch

from streamkit.models.sed_crnn import SedConfig, frame_span
from streamkit.models.sed_post import binarize, frame_times, frames_to_events, hysteresis, median_filter, median_frames, runs
from tests.models.sed_tiny_corpus import tiny_sed_corpus

torch.set_num_threads(1)

# --------------------------------------------------------------------------------------------
# post-processing, hand-computed
# --------------------------------------------------------------------------------------------


def test_median_filter_hand_cases():
    p = np.array([[0.1, 0.9], [0.9, 0.8], [0.2, 0.1], [0.8, 0.7], [0.3, 0.6]])
    # class 0, window 3, edges repeated: [0.1 0.1 0.9] [0.1 0.9 0.2] [0.9 0.2 0.8] [0.2 0.8 0.3] [0.8 0.3 0.3]
    got = median_filter(p, [3, 1])
    np.testing.assert_allclose(got[:, 0], [0.1, 0.2, 0.8, 0.3, 0.3])
    np.testing.assert_allclose(got[:, 1], p[:, 1])  # length 1: unchanged
    # window 5 on class 1: padded 0.9 0.9 | 0.9 0.8 0.1 0.7 0.6 | 0.6 0.6
    np.testing.assert_allclose(median_filter(p, 5)[:, 1], [0.9, 0.8, 0.7, 0.6, 0.6])
    with pytest.raises(ValueError, match="odd"):
        median_filter(p, 4)
    with pytest.raises(ValueError, match="2 classes"):
        median_filter(p, [3, 3, 3])
    assert median_frames(0.45, 0.064) == 7
    assert median_frames(0.0, 0.064) == 1
    assert median_frames(0.128, 0.064) == 3  # 2 frames -> next odd


def test_binarize_and_hysteresis():
    p = np.array([[0.4], [0.6], [0.45], [0.35], [0.5], [0.7], [0.2]])
    assert binarize(p, 0.5)[:, 0].tolist() == [False, True, False, False, False, True, False]  # strictly above
    # on above 0.55, stay on while above 0.4
    assert hysteresis(p, 0.55, 0.4)[:, 0].tolist() == [False, True, True, False, False, True, False]
    assert hysteresis(p, 0.55, 0.4, initial=[True])[:, 0].tolist() == [False, True, True, False, False, True, False]
    assert hysteresis(p[:1], 0.55, 0.3, initial=[True])[:, 0].tolist() == [True]
    with pytest.raises(ValueError, match="off <= on"):
        hysteresis(p, 0.4, 0.5)
    assert runs(np.array([[1, 0], [1, 1], [0, 1], [1, 1]], bool)) == [(0, 0, 2), (0, 3, 4), (1, 1, 4)]


def test_frames_to_events_exact_times():
    cfg = SedConfig()  # hop 256, n_fft 2048, 16 kHz, time pool 4: frame k centre 0.088 + 0.064 k, span +- 0.032
    assert frame_times(np.arange(5), cfg)[0] == pytest.approx(frame_span(np.arange(5), cfg)[0])
    p = np.zeros((10, 10))
    p[2:5, 0] = 0.8  # frames 2..4: [0.088+0.128-0.032, 0.088+0.256+0.032) = [0.184, 0.376)
    p[0:2, 3] = [0.9, 0.7]  # frames 0..1: [0.056, 0.184)
    p[9, 3] = 0.6  # last frame: [0.632, 0.696)
    ev = frames_to_events(p, cfg)
    c = cfg.classes
    assert ev == [(c[3], 0.056, 0.184, pytest.approx(0.8)), (c[0], 0.184, 0.376, pytest.approx(0.8)), (c[3], 0.632, 0.696, pytest.approx(0.6))]
    # frame_offset: the same run 100 frames later in a stream
    ev2 = frames_to_events(p[:, :1], cfg, classes=["x"], frame_offset=100)
    assert ev2 == [("x", pytest.approx(0.184 + 6.4), pytest.approx(0.376 + 6.4), pytest.approx(0.8))]
    # a median filter of 3 removes a one-frame blip (frame 1), fills a one-frame dip (frame 5) and
    # trims the run's first frame (frame 4: median of 0, 0.9, 0.2): active frames 5..7
    q = np.array([[0.0], [0.9], [0.0], [0.0], [0.9], [0.2], [0.9], [0.9], [0.0], [0.0]])
    np.testing.assert_allclose(median_filter(q, 3)[:, 0], [0, 0, 0, 0, 0.2, 0.9, 0.9, 0.9, 0, 0])
    assert frames_to_events(q, cfg, classes=["x"], median=3) == [("x", 0.376, 0.568, pytest.approx(0.9))]
    # hysteresis through frames_to_events
    h = np.array([[0.2], [0.6], [0.45], [0.3]])
    assert [e[1:3] for e in frames_to_events(h, cfg, classes=["x"], threshold=0.55, off_threshold=0.4)] == [(0.12, 0.248)]


# --------------------------------------------------------------------------------------------
# training on a tiny corpus
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return tiny_sed_corpus(tmp_path_factory, {"synthetic": 10, "weak": 6, "unlabelled": 6, "validation": 4, "eval": 3}, 3)


def _tiny():
    from streamkit.train.sed import PRESETS

    return SedConfig(**PRESETS["tiny"])


def _bench(name, tag=None):
    """The module of a SED benchmark (``streamkit.eval.bench.<name>``, run by ``benchmarks/<name>.py``)."""
    import importlib

    return importlib.import_module(f"streamkit.eval.bench.{name}")


def _opts(**kw):
    from streamkit.train.sed import TrainOptions

    base = dict(epochs=2, batch=2, synthetic_holdout=2, lr=3e-3, psds=False, ckpt_minutes=100.0)
    base.update(kw)
    return TrainOptions(**base)


@pytest.mark.parametrize("method", ["baseline", "adv-time+tri"])
def test_training_lowers_the_loss(corpus, tmp_path, method):
    from streamkit.train.sed import train

    losses: list[float] = []
    kw = dict(epochs=4, tri_epochs=4) if "tri" in method else dict(epochs=8)
    res = train(corpus, tmp_path / "m.pt", _opts(method=method, **kw), cfg=_tiny(), quiet=True,
                on_step=lambda s, parts: losses.append(parts["y_ft"]))  # fmt: skip
    assert res["finished"] and len(losses) == 8 * 4
    assert np.mean(losses[-6:]) < np.mean(losses[:6]) - 0.05, losses
    card = json.loads((tmp_path / "m.json").read_text())
    assert card["method"] == method and card["training"]["steps"] == 32
    assert set(card["metrics"]) == {"validation", "eval", "synthetic_holdout"}
    if method == "adv-time+tri":
        assert card["training"]["pseudo_stats"]["u_frame_labelled"] > 0
        assert all(h["stage"] == "final" for h in card["training"]["history"] if h["epoch"] == card["training"]["best_epoch"])


def test_extend_equals_a_run_started_longer(corpus, tmp_path):
    """--extend: a finished run's checkpoint trained on to more epochs equals a run started with them (weights, the
    moving average, the history); schedules that follow the total steps, and fewer epochs, are refused."""
    from streamkit.models.sed_crnn import load_model
    from streamkit.train.sed import train
    from streamkit.train.sed_augment import MelAugment

    kw = dict(method="baseline", ema=0.99, augment=MelAugment(2, 3.0, 3.0))
    a = train(corpus, tmp_path / "a" / "m.pt", _opts(**kw, epochs=3), cfg=_tiny(), quiet=True)
    short = train(corpus, tmp_path / "b" / "m.pt", _opts(**kw, epochs=2), cfg=_tiny(), quiet=True)
    assert short["finished"] and short["state"]["step"] == 8
    with pytest.raises(ValueError, match="another run"):  # (without --extend: the epochs differ)
        train(corpus, tmp_path / "b" / "m.pt", _opts(**kw, epochs=3), cfg=_tiny(), quiet=True, resume=True)
    b = train(corpus, tmp_path / "b" / "m.pt", _opts(**kw, epochs=3, extend=True), cfg=_tiny(), quiet=True)
    assert b["finished"] and b["state"]["step"] == 12 and b["state"]["extended_from_epochs"] == [2]
    for name in ("m.pt", "m.weights.pt"):  # the selected moving average and the weights' own best
        ma, _ = load_model(tmp_path / "a" / name)
        mb, _ = load_model(tmp_path / "b" / name)
        for (ka, va), (kb, vb) in zip(ma.state_dict().items(), mb.state_dict().items()):
            assert ka == kb and torch.equal(va, vb), (name, ka)
    hist = [[(h["step"], h["val_event_f1"], h.get("ema_val_event_f1"), h["loss"]) for h in r["state"]["history"]] for r in (a, b)]
    assert hist[0] == hist[1] and len(hist[0]) == 3
    card = json.loads((tmp_path / "b" / "m.json").read_text())
    assert card["training"]["epochs"] == 3 and card["training"]["extended_from_epochs"] == [2] and card["training"]["steps"] == 12
    assert json.loads((tmp_path / "a" / "m.json").read_text())["training"]["extended_from_epochs"] is None
    # the extended checkpoint resumes as a 3-epoch run; fewer epochs, a missing checkpoint and total-step schedules are refused
    again = train(corpus, tmp_path / "b" / "m.pt", _opts(**kw, epochs=3), cfg=_tiny(), quiet=True, resume=True)
    assert again["state"]["step"] == 12 and again["state"]["runs"] == 3
    with pytest.raises(ValueError, match="checkpoint's run has 3"):
        train(corpus, tmp_path / "b" / "m.pt", _opts(**kw, epochs=2, extend=True), cfg=_tiny(), quiet=True)
    with pytest.raises(ValueError, match="no checkpoint"):
        train(corpus, tmp_path / "c" / "m.pt", _opts(**kw, epochs=3, extend=True), cfg=_tiny(), quiet=True)
    for bad in (dict(method="adv-time+tri", grl_schedule="ganin"), dict(method="adv-time")):
        with pytest.raises(ValueError, match="depends on the total"):
            train(corpus, tmp_path / "b" / "m.pt", _opts(**bad, epochs=3, extend=True), cfg=_tiny(), quiet=True)
    with pytest.raises(ValueError, match="another run"):  # (adversarial with a constant GRL factor may extend: its own checkpoint)
        train(corpus, tmp_path / "b" / "m.pt", _opts(method="adv-time", grl_schedule="const", epochs=3, extend=True), cfg=_tiny(), quiet=True)


def test_extend_a_tri_run_from_its_labeler_stage(corpus, tmp_path):
    """--extend on tri-training: the labeler-stage copy of a 2 + 1 epoch run, extended to 3 + 2 epochs, gives the run
    started with 3 + 2 (the recipe's options: EMA labels remade every epoch, clip level, augmentation); a checkpoint
    past the switch is refused, and nothing is lost by the refusal."""
    import shutil

    from streamkit.models.sed_crnn import load_model
    from streamkit.train.sed import labelers_ckpt_path, train
    from streamkit.train.sed_augment import MelAugment

    kw = dict(method="adv-time+tri", grl_schedule="const", ema=0.99, pseudo_from="ema", relabel_every=1, detach_labelers=True,
              pseudo_level="clip", pseudo_negative=0.05, augment=MelAugment(2, 3.0, 3.0))  # fmt: skip
    a = train(corpus, tmp_path / "a" / "m.pt", _opts(**kw, epochs=3, tri_epochs=2), cfg=_tiny(), quiet=True)
    short = train(corpus, tmp_path / "b" / "m.pt", _opts(**kw, epochs=2, tri_epochs=1), cfg=_tiny(), quiet=True)
    assert a["finished"] and short["finished"] and short["state"]["step"] == 12
    before = (tmp_path / "b" / "m.ckpt").read_bytes()
    with pytest.raises(ValueError, match=r"only in its labeler stage.*step 12, in its final stage \(the switch is at step 8\)"):
        train(corpus, tmp_path / "b" / "m.pt", _opts(**kw, epochs=3, tri_epochs=2, extend=True), cfg=_tiny(), quiet=True)
    assert (tmp_path / "b" / "m.ckpt").read_bytes() == before
    (tmp_path / "c").mkdir()
    shutil.copyfile(labelers_ckpt_path(tmp_path / "b" / "m.ckpt"), tmp_path / "c" / "m.ckpt")
    c = train(corpus, tmp_path / "c" / "m.pt", _opts(**kw, epochs=3, tri_epochs=2, extend=True), cfg=_tiny(), quiet=True)
    assert c["finished"] and c["state"]["step"] == 20 and c["state"]["extended_from_epochs"] == [2]
    for name in ("m.pt", "m.weights.pt"):
        ma, _ = load_model(tmp_path / "a" / name)
        mc, _ = load_model(tmp_path / "c" / name)
        for (ka, va), (kc, vc) in zip(ma.state_dict().items(), mc.state_dict().items()):
            assert ka == kc and torch.equal(va, vc), (name, ka)
    hist = [[(h["step"], h["stage"], h["val_event_f1"], h.get("ema_val_event_f1"), h["loss"]) for h in r["state"]["history"]] for r in (a, c)]
    assert hist[0] == hist[1] and [h[1] for h in hist[0]] == ["labelers"] * 3 + ["final"] * 2
    ph = [[(p["step"], p["u_clip_positive"]) for p in r["state"]["pseudo_history"]] for r in (a, c)]
    assert ph[0] == ph[1] and [p[0] for p in ph[0]] == [12, 16]
    card = json.loads((tmp_path / "c" / "m.json").read_text())
    assert card["training"]["extended_from_epochs"] == [2] and card["training"]["tri_epochs"] == 2


def test_resume_equals_uninterrupted(corpus, tmp_path):
    from streamkit.models.sed_crnn import load_model
    from streamkit.train.sed import train

    opts = dict(method="adv-time+tri", epochs=2)  # 4 steps an epoch, pseudo-labels at step 8, 16 steps
    a = train(corpus, tmp_path / "a" / "m.pt", _opts(**opts), cfg=_tiny(), quiet=True)
    b1 = train(corpus, tmp_path / "b" / "m.pt", _opts(**opts, max_steps=10), cfg=_tiny(), quiet=True)
    assert not b1["finished"] and not (tmp_path / "b" / "m.pt").exists()
    b = train(corpus, tmp_path / "b" / "m.pt", _opts(**opts), cfg=_tiny(), quiet=True, resume=True)
    assert b["finished"] and b["state"]["runs"] == 2
    ma, _ = load_model(tmp_path / "a" / "m.pt")
    mb, _ = load_model(tmp_path / "b" / "m.pt")
    for (ka, va), (kb, vb) in zip(ma.state_dict().items(), mb.state_dict().items()):
        assert ka == kb and torch.equal(va, vb), ka
    ha = [(h["step"], h["val_event_f1"], h["loss"]) for h in a["state"]["history"]]
    hb = [(h["step"], h["val_event_f1"], h["loss"]) for h in b["state"]["history"]]
    assert ha == hb
    # a checkpoint of another run is refused
    with pytest.raises(ValueError, match="another run"):
        train(corpus, tmp_path / "b" / "m.pt", _opts(method="adv-time+tri", epochs=5), cfg=_tiny(), quiet=True, resume=True)


def test_pseudo_thresholds_branch_from_a_labeler_checkpoint(corpus, tmp_path):
    """--pseudo-threshold/--pseudo-negative enter the checkpoint only when the labels are made."""
    import shutil

    from streamkit.train.sed import train

    opts = dict(method="tri", epochs=2, tri_epochs=1)  # 4 steps an epoch, pseudo-labels at step 8
    stop = train(corpus, tmp_path / "s" / "m.pt", _opts(**opts, max_steps=8), cfg=_tiny(), quiet=True)
    assert not stop["finished"] and stop["state"]["pseudo_stats"] is None
    (tmp_path / "p").mkdir()
    shutil.copy(tmp_path / "s" / "m.ckpt", tmp_path / "p" / "m.ckpt")
    a = train(corpus, tmp_path / "s" / "m.pt", _opts(**opts), cfg=_tiny(), quiet=True, resume=True)
    b = train(corpus, tmp_path / "p" / "m.pt", _opts(**opts, pseudo_threshold=0.2, pseudo_negative=0.05), cfg=_tiny(), quiet=True, resume=True)
    sa, sb = a["state"]["pseudo_stats"], b["state"]["pseudo_stats"]
    assert sb["u_frame_positive"] >= sa["u_frame_positive"] and sb["u_clip_positive"] >= sa["u_clip_positive"]
    assert sb["u_frame_positive"] > sa["u_frame_positive"]  # the tiny model's frame probabilities lie between 0.2 and 0.5
    card = json.loads((tmp_path / "p" / "m.json").read_text())
    assert card["training"]["pseudo_threshold"] == 0.2 and card["training"]["pseudo_negative"] == 0.05
    assert json.loads((tmp_path / "s" / "m.json").read_text())["training"]["pseudo_negative"] == 0.5
    # once made, the labels' thresholds are part of the run
    with pytest.raises(ValueError, match="pseudo-labels were made with thresholds"):
        train(corpus, tmp_path / "p" / "m.pt", _opts(**opts), cfg=_tiny(), quiet=True, resume=True)
    for bad in (dict(pseudo_threshold=0.3), dict(pseudo_threshold=0.5, pseudo_negative=0.6), dict(pseudo_threshold=1.0)):
        with pytest.raises(ValueError, match="--pseudo-"):
            train(corpus, tmp_path / "x.pt", _opts(**opts, **bad), cfg=_tiny(), quiet=True)
    # an uninterrupted run keeps its checkpoint at the switch (<stem>.labelers.ckpt); a branch from it equals the run
    from streamkit.train.sed import labelers_ckpt_path

    assert labelers_ckpt_path(tmp_path / "s" / "m.ckpt").exists() and not labelers_ckpt_path(tmp_path / "p" / "m.ckpt").exists()
    full = train(corpus, tmp_path / "f" / "m.pt", _opts(**opts), cfg=_tiny(), quiet=True)
    lab = torch.load(labelers_ckpt_path(tmp_path / "f" / "m.ckpt"), weights_only=False)
    assert lab["state"]["step"] == 8 and lab["state"]["pseudo"] is None
    (tmp_path / "b").mkdir()
    shutil.copy(labelers_ckpt_path(tmp_path / "f" / "m.ckpt"), tmp_path / "b" / "m.ckpt")
    branch = train(corpus, tmp_path / "b" / "m.pt", _opts(**opts), cfg=_tiny(), quiet=True, resume=True)
    assert branch["state"]["pseudo_stats"] == {**full["state"]["pseudo_stats"], "seconds": branch["state"]["pseudo_stats"]["seconds"]}
    assert [h["val_event_f1"] for h in branch["state"]["history"]] == [h["val_event_f1"] for h in full["state"]["history"]]


def test_tri_training_runs_both_stages_of_algorithm_1(corpus, tmp_path):
    """Labeler stage for --epochs, then --tri-epochs (default: as many) of the final stage."""
    from streamkit.train.sed import TrainOptions, train

    assert TrainOptions(method="tri", epochs=3).final_epochs() == 3
    assert TrainOptions(method="tri", epochs=3, tri_epochs=1).final_epochs() == 1
    assert TrainOptions(method="adv-time", epochs=3, tri_epochs=5).final_epochs() == 0  # no second stage
    res = train(corpus, tmp_path / "m.pt", _opts(method="tri", epochs=2, tri_epochs=1), cfg=_tiny(), quiet=True)
    hist = res["state"]["history"]
    assert [(h["epoch"], h["step"], h["stage"]) for h in hist] == [(1, 4, "labelers"), (2, 8, "labelers"), (3, 12, "final")]
    card = json.loads((tmp_path / "m.json").read_text())
    assert card["training"]["steps"] == 12 and card["training"]["tri_epochs"] == 1 and card["training"]["best_epoch"] == 3
    d = train(corpus, tmp_path / "d.pt", _opts(method="tri", epochs=2), cfg=_tiny(), quiet=True)
    assert [h["stage"] for h in d["state"]["history"]] == ["labelers", "labelers", "final", "final"]
    with pytest.raises(ValueError, match="--tri-epochs must be >= 1"):
        train(corpus, tmp_path / "e.pt", _opts(method="tri", epochs=2, tri_epochs=0), cfg=_tiny(), quiet=True)


def test_relabel_every_remakes_pseudo_labels_and_trains_the_labelers(corpus, tmp_path):
    """--relabel-every N: labels at the switch and every N final-stage epochs; F1/F2 go on learning; resumable."""
    import shutil

    from streamkit.models.sed_crnn import load_model
    from streamkit.train.sed import train

    opts = dict(method="tri", epochs=2, tri_epochs=3)  # 4 steps an epoch: switch at step 8, 20 steps
    once = train(corpus, tmp_path / "o" / "m.pt", _opts(**opts, max_steps=8), cfg=_tiny(), quiet=True)
    assert not once["finished"]
    (tmp_path / "r").mkdir()
    shutil.copy(tmp_path / "o" / "m.ckpt", tmp_path / "r" / "m.ckpt")  # one labeler stage, two final stages
    once = train(corpus, tmp_path / "o" / "m.pt", _opts(**opts), cfg=_tiny(), quiet=True, resume=True)
    parts: list[dict[str, float]] = []
    rel = train(corpus, tmp_path / "r" / "m.pt", _opts(**opts, relabel_every=1, max_steps=13), cfg=_tiny(), quiet=True, resume=True,
                on_step=lambda s, p: parts.append(p))  # fmt: skip
    assert not rel["finished"] and [h["step"] for h in rel["state"]["pseudo_history"]] == [8, 12]
    rel = train(corpus, tmp_path / "r" / "m.pt", _opts(**opts, relabel_every=1), cfg=_tiny(), quiet=True, resume=True,
                on_step=lambda s, p: parts.append(p))  # fmt: skip
    assert rel["finished"] and [h["step"] for h in rel["state"]["pseudo_history"]] == [8, 12, 16]  # not remade on resume at 12
    assert [h["step"] for h in once["state"]["pseudo_history"]] == [8]
    assert all({"y_f1", "y_f2", "orth", "y_ft"} <= set(p) for p in parts)  # the labelers are trained in the final stage
    # the labelers changed after the switch with --relabel-every, not without
    ck_o = torch.load(tmp_path / "o" / "m.ckpt", weights_only=False)["model"]
    ck_r = torch.load(tmp_path / "r" / "m.ckpt", weights_only=False)["model"]
    f1 = [k for k in ck_o if k.startswith("f1.")]
    assert f1 and any(not torch.equal(ck_o[k], ck_r[k]) for k in f1)
    card = json.loads((tmp_path / "r" / "m.json").read_text())
    assert card["training"]["relabel_every"] == 1 and len(card["training"]["pseudo_history"]) == 3
    assert json.loads((tmp_path / "o" / "m.json").read_text())["training"]["relabel_every"] == 0
    mo, _ = load_model(tmp_path / "o" / "m.pt")
    mr, _ = load_model(tmp_path / "r" / "m.pt")
    assert any(not torch.equal(a, b) for a, b in zip(mo.state_dict().values(), mr.state_dict().values()))
    # once the final stage has begun, --relabel-every is part of the run
    with pytest.raises(ValueError, match="--relabel-every 1, this run asks for 0"):
        train(corpus, tmp_path / "r" / "m.pt", _opts(**opts), cfg=_tiny(), quiet=True, resume=True)
    with pytest.raises(ValueError, match="--relabel-every must be >= 0"):
        train(corpus, tmp_path / "x.pt", _opts(**opts, relabel_every=-1), cfg=_tiny(), quiet=True)
    with pytest.raises(ValueError, match="needs a tri-training method"):
        train(corpus, tmp_path / "x.pt", _opts(method="adv-time", epochs=1, relabel_every=1), cfg=_tiny(), quiet=True)


def test_detached_labelers_keep_F_and_Ft_on_the_adv_time_path(corpus, tmp_path):
    """--detach-labelers: up to the switch F, Ft and D are exactly those of adv-time run as many total steps."""
    from streamkit.train.sed import train

    tri = train(corpus, tmp_path / "t" / "m.pt", _opts(method="adv-time+tri", epochs=2, tri_epochs=1, detach_labelers=True, max_steps=8),
                cfg=_tiny(), quiet=True)  # fmt: skip
    adv = train(corpus, tmp_path / "a" / "m.pt", _opts(method="adv-time", epochs=3, max_steps=8), cfg=_tiny(), quiet=True)
    assert not tri["finished"] and not adv["finished"]
    mt = torch.load(tmp_path / "t" / "m.ckpt", weights_only=False)["model"]
    ma = torch.load(tmp_path / "a" / "m.ckpt", weights_only=False)["model"]
    shared = [k for k in mt if k.split(".")[0] in ("F", "ft", "D")]
    assert shared and all(torch.equal(mt[k], ma[k]) for k in shared)
    assert any(not torch.equal(mt[k], ma[k]) for k in mt if k.startswith("f1."))  # the labelers did learn
    assert [h["val_event_f1"] for h in tri["state"]["history"]] == [h["val_event_f1"] for h in adv["state"]["history"]]
    # without the stop-gradient the labelers shape F
    att = train(corpus, tmp_path / "u" / "m.pt", _opts(method="adv-time+tri", epochs=2, tri_epochs=1, max_steps=8), cfg=_tiny(), quiet=True)
    mu = torch.load(tmp_path / "u" / "m.ckpt", weights_only=False)["model"]
    assert any(not torch.equal(mu[k], ma[k]) for k in mu if k.startswith("F."))
    assert att["state"]["step"] == 8
    # part of the run: a checkpoint of the other kind is refused
    with pytest.raises(ValueError, match="another run"):
        train(corpus, tmp_path / "u" / "m.pt", _opts(method="adv-time+tri", epochs=2, tri_epochs=1, detach_labelers=True), cfg=_tiny(),
              quiet=True, resume=True)  # fmt: skip
    res = train(corpus, tmp_path / "t" / "m.pt", _opts(method="adv-time+tri", epochs=2, tri_epochs=1, detach_labelers=True), cfg=_tiny(),
                quiet=True, resume=True)  # fmt: skip
    assert res["finished"] and json.loads((tmp_path / "t" / "m.json").read_text())["training"]["detach_labelers"] is True
    with pytest.raises(ValueError, match="need a tri-training method"):
        train(corpus, tmp_path / "x.pt", _opts(method="adv-time", epochs=1, detach_labelers=True), cfg=_tiny(), quiet=True)


def _frame_and_branch(corpus, tmp_path, opts, name, **branch):
    """Train ``opts`` to step 8 (before the switch) in ``s/``, copy its checkpoint to ``name/``; finish both, the copy
    with ``branch`` options: the two runs' results (same labelers, different final stages)."""
    import shutil

    from streamkit.train.sed import train

    stop = train(corpus, tmp_path / "s" / "m.pt", _opts(**opts, max_steps=8), cfg=_tiny(), quiet=True)
    assert not stop["finished"]
    (tmp_path / name).mkdir()
    shutil.copy(tmp_path / "s" / "m.ckpt", tmp_path / name / "m.ckpt")
    fr = train(corpus, tmp_path / "s" / "m.pt", _opts(**opts), cfg=_tiny(), quiet=True, resume=True)
    br = train(corpus, tmp_path / name / "m.pt", _opts(**opts, **branch), cfg=_tiny(), quiet=True, resume=True)
    return fr, br


def test_positive_frames_hand_case():
    from streamkit.train.sed import positive_frames

    frame = np.array([[[1, 1, 1], [0, 0, 1], [-1, 1, 0]]], np.int8)  # (1 clip, 3 frames, 3 classes)
    clip = np.array([[1, 0, -1]], np.int8)  # holds class 0, lacks class 1, unsure of class 2
    out = positive_frames(frame, clip)
    assert out.dtype == np.int8 and out.tolist() == [[[1, 0, -1], [-1, 0, -1], [-1, 0, -1]]]
    with pytest.raises(ValueError, match="do not match"):
        positive_frames(frame, clip[:, :2])


def test_positive_frame_pseudo_labels_branch(corpus, tmp_path):
    """--pseudo-level positive: the frame-level labels of the same labelers, kept only as positives inside held classes."""

    from streamkit.train.sed import SedCorpus, positive_frames, train

    opts = dict(method="tri", epochs=2, tri_epochs=1, pseudo_negative=0.2)
    fr, po = _frame_and_branch(corpus, tmp_path, opts, "p", pseudo_level="positive")
    a = torch.load(tmp_path / "s" / "m.ckpt", weights_only=False)["state"]["pseudo"]
    b = torch.load(tmp_path / "p" / "m.ckpt", weights_only=False)["state"]["pseudo"]
    sc = SedCorpus(corpus)
    w_tags = np.asarray([[1 if c in set(sc.weak.get(f, ())) else 0 for c in _tiny().classes] for f in sc.files["weak"]], np.int8)
    assert w_tags.any()
    assert np.array_equal(b["w_frame"], positive_frames(a["w_frame"], w_tags))
    assert np.array_equal(b["u_frame"], positive_frames(a["u_frame"], a["u_clip"])) and np.array_equal(b["u_clip"], a["u_clip"])
    assert not (b["u_frame"] == 0)[np.broadcast_to((a["u_clip"] == 1)[:, None, :], a["u_frame"].shape)].any()  # no negative in held classes
    sf, sp = fr["state"]["pseudo_stats"], po["state"]["pseudo_stats"]
    assert sp["u_frame_positive"] <= sf["u_frame_positive"] and sp["w_frame_positive"] <= sf["w_frame_positive"]
    assert json.loads((tmp_path / "p" / "m.json").read_text())["training"]["pseudo_level"] == "positive"
    with pytest.raises(ValueError, match="positive-level, this run asks for --pseudo-level frame"):
        train(corpus, tmp_path / "p" / "m.pt", _opts(**opts), cfg=_tiny(), quiet=True, resume=True)


def test_clip_level_pseudo_labels(corpus, tmp_path):
    """--pseudo-level clip: U gets only clip pseudo-labels, W only its tags: no frame targets on the real clips."""

    from streamkit.train.sed import train

    opts = dict(method="tri", epochs=2, tri_epochs=1)
    fr, cl = _frame_and_branch(corpus, tmp_path, opts, "c", pseudo_level="clip")
    sf, sc = fr["state"]["pseudo_stats"], cl["state"]["pseudo_stats"]
    assert sf["u_frame_labelled"] > 0 and sf["w_frame_labelled"] > 0
    assert sc["u_frame_labelled"] == 0 and sc["w_frame_labelled"] == 0
    assert sc["u_clip_labelled"] == sf["u_clip_labelled"] > 0 and sc["u_clip_positive"] == sf["u_clip_positive"]  # the same labelers
    assert json.loads((tmp_path / "c" / "m.json").read_text())["training"]["pseudo_level"] == "clip"
    assert json.loads((tmp_path / "s" / "m.json").read_text())["training"]["pseudo_level"] == "frame"
    with pytest.raises(ValueError, match="clip-level, this run asks for --pseudo-level frame"):
        train(corpus, tmp_path / "c" / "m.pt", _opts(**opts), cfg=_tiny(), quiet=True, resume=True)
    with pytest.raises(ValueError, match="--pseudo-level must be one of frame, clip, positive"):
        train(corpus, tmp_path / "x.pt", _opts(**opts, pseudo_level="segment"), cfg=_tiny(), quiet=True)
    with pytest.raises(ValueError, match="need a tri-training method"):
        train(corpus, tmp_path / "x.pt", _opts(method="baseline", epochs=1, pseudo_level="clip"), cfg=_tiny(), quiet=True)


def test_cli_writes_card_without_machine_paths(corpus, tmp_path, capsys):
    from streamkit.train.sed import add_arguments, run_from_args

    out = tmp_path / "w" / "sed.pt"
    a = add_arguments(argparse.ArgumentParser()).parse_args(
        ["--corpus", str(corpus), "--method", "adv-whole", "--out", str(out), "--preset", "tiny", "--epochs", "1", "--batch-size", "2",
         "--synthetic-holdout", "2", "--quiet"]  # fmt: skip
    )
    assert run_from_args(a) == 0
    text = out.with_suffix(".json").read_text()
    card = json.loads(text)
    assert str(tmp_path) not in text and str(corpus) not in text
    assert card["training"]["corpus_command"].startswith("streamkit corpus sed --out DIR ")
    assert card["parameters"] > 0 and "psds1" in card["metrics"]["eval"]
    b = add_arguments(argparse.ArgumentParser()).parse_args(["--corpus", "C", "--out", "o.pt", "--detach-labelers", "--pseudo-level", "clip"])
    assert b.detach_labelers and b.pseudo_level == "clip"
    # the switches of removed experiments are gone from the command line
    for gone in ("--oracle-labels", "--fast-dropout", "--domain-bn", "--pseudo-mix", "--consistency", "--labeler-hidden"):
        with pytest.raises(SystemExit):
            add_arguments(argparse.ArgumentParser()).parse_args(["--corpus", "C", "--out", "o.pt", gone, *(["1"] if gone in ("--pseudo-mix", "--consistency", "--labeler-hidden") else [])])


def test_missing_or_corrupt_corpus(corpus, tmp_path, capsys):
    from streamkit.train.sed import CorpusError, SedCorpus, add_arguments, run_from_args

    def run(path):
        a = add_arguments(argparse.ArgumentParser()).parse_args(["--corpus", str(path), "--out", str(tmp_path / "x.pt"), "--preset", "tiny", "--quiet"])
        return run_from_args(a)

    assert run(tmp_path / "nope") == 2
    assert "corpus directory not found" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert run(tmp_path / "empty") == 2
    assert "no manifest.json" in capsys.readouterr().err
    bad = tmp_path / "bad"
    shutil.copytree(corpus, bad, ignore=shutil.ignore_patterns("features"))
    victim = sorted((bad / "weak" / "audio").glob("*.wav"))[0]
    victim.write_bytes(b"RIFF\x00\x00not a wav")
    with pytest.raises(CorpusError, match=victim.name):
        SedCorpus(bad).features("weak", _tiny(), progress=False)
    (bad / "validation" / "audio" / sorted(p.name for p in (bad / "validation" / "audio").glob("*.wav"))[0]).unlink()
    assert run(bad) == 2
    assert "missing from" in capsys.readouterr().err


def test_post_tune_benchmark(corpus, tmp_path, capsys):
    """benchmarks/sed_post_tune.py: per-model tuning on validation, eval scored three ways, seed means and the target."""
    from streamkit.train.sed import train

    m = tmp_path / "m.pt"
    train(corpus, m, _opts(method="baseline", epochs=1), cfg=_tiny(), quiet=True)
    bench = _bench("sed_post_tune", "bench")
    out = tmp_path / "r.json"
    assert bench.main(["--corpus", str(corpus), "--model", f"baseline={m}", "--model", f"adv-time+tri@copy={m}", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert str(tmp_path) not in out.read_text()
    r0, r1 = res["rows"]
    assert r0["label"] == "baseline" and r1["label"] == "adv-time+tri (copy)"
    assert r0["eval"] == r1["eval"] and r0["tuning"] == r1["tuning"]  # the same weights twice
    v = r0["validation"]
    assert v["default"] <= v["global"] <= v["per-class"] <= v["per-class+gate"]
    assert set(r0["eval"]) == {"default", "global", "per-class", "per-class+gate"}
    assert set(r0["tuning"]["per_class"][c]["clip_gate"] for c in r0["tuning"]["classes"]) <= set(r0["tuning"]["grid"]["clip_gates"])
    assert res["summary"]["target"]["per-class"] == {"gain": 0.0, "met": False}
    assert "val ev: default" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        bench.main(["--corpus", str(corpus), "--model", f"nomethod={m}"])


def _strong(corpus, subset, row):
    """The strong labels of the clips a gap-anatomy row scored (the eval subset, or the synthetic held-out tail)."""
    from streamkit.train.sed import SedCorpus

    c = SedCorpus(corpus)
    files = c.files[subset][-row[("real" if subset == "eval" else "synthetic")]["files"] :]
    return {f: c.strong[subset].get(f, []) for f in files}


def test_long_stream_benchmark(corpus, tmp_path, capsys):
    """benchmarks/sed_long_stream.py: joined clips carry their labels shifted by the clips' starts,
    the truth scores 100 against itself, and each row's detections are the engine's on that audio
    with the row's gates."""
    from streamkit.eval.sed import read_strong_tsv
    from streamkit.models.sed_offline import sed_file
    from streamkit.train.sed import train

    bench = _bench("sed_long_stream", "bench")
    from streamkit.train.sed import SedCorpus

    names, audio, labels, rate = bench.read_clips(SedCorpus(corpus), None)
    assert names == sorted(names) and len(names) == 3 and rate == 16000
    truth = read_strong_tsv(corpus / "eval" / "labels.tsv")
    joined = bench.join(names, audio, labels, rate, 2)
    assert [n for n, _, _ in joined] == ["joined_000.wav", "joined_001.wav"]
    assert [x.shape[0] for _, x, _ in joined] == [audio[0].shape[0] + audio[1].shape[0], audio[2].shape[0]]
    np.testing.assert_array_equal(joined[0][1][audio[0].shape[0] :], audio[1])
    t1 = audio[0].shape[0] / rate
    want = [(e.onset, e.offset, e.event_label) for e in truth.get(names[0], [])]
    want += [(round(e.onset + t1, 3), round(e.offset + t1, 3), e.event_label) for e in truth.get(names[1], [])]
    assert [(e.onset, e.offset, e.event_label) for e in joined[0][2]] == want and want
    assert {e.filename for _, _, evs in joined for e in evs} <= {"joined_000.wav", "joined_001.wav"}
    assert bench.score(joined, [e for _, _, evs in joined for e in evs], rate) == {"event_f1": 100.0, "segment_f1": 100.0}

    m = tmp_path / "m.pt"
    train(corpus, m, _opts(method="baseline", epochs=1), cfg=_tiny(), quiet=True)
    out = tmp_path / "l.json"
    assert bench.main(["--corpus", str(corpus), "--weights", str(m), "--join", "2", "--hop", "2", "--out", str(out)]) == 0
    text = out.read_text()
    assert str(tmp_path) not in text and str(corpus) not in text
    res = json.loads(text)
    assert res["command"].startswith("python benchmarks/sed_long_stream.py --corpus DIR --weights m.pt")
    assert res["corpus"].startswith("streamkit corpus sed --out DIR ")
    rows = {(r["layout"], r["gates"]): r for r in res["rows"]}
    assert [r["recordings"] for r in res["rows"]] == [3, 3, 2, 2]
    off = rows[("2 clips joined", "gates off")]
    assert off["audio_s"] == round(sum(x.shape[0] for x in audio) / rate, 1)
    assert off["detections"] == sum(len(sed_file(x, m, hop_s=2.0, clip_gate=0.0).detections) for _, x, _ in joined)
    assert "gates' event-F1 gain" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        bench.main(["--corpus", str(corpus), "--weights", str(m), "--join", "1"])
    with pytest.raises(SystemExit):
        bench.main(["--corpus", str(tmp_path), "--weights", str(m)])


def test_benchmarks_keep_oracle_rows_apart(corpus, tmp_path, capsys):
    """A model trained with the generator's true labels of the real clips (the trainer's former --oracle-labels; its card
    says ``training.oracle_labels``) is reported as a ceiling, never averaged into its method's seeds."""
    from streamkit.train.sed import train

    mods = {name: _bench(name, "oracle_bench") for name in ("sed_table1", "sed_post_tune")}
    m, o = tmp_path / "m" / "m.pt", tmp_path / "o" / "m.pt"
    train(corpus, m, _opts(method="baseline", epochs=1), cfg=_tiny(), quiet=True)
    train(corpus, o, _opts(method="baseline", epochs=1, seed=1), cfg=_tiny(), quiet=True)
    card = json.loads(o.with_suffix(".json").read_text())
    card["training"]["oracle_labels"] = True  # (the card of such a run, kept in git history)
    o.with_suffix(".json").write_text(json.dumps(card))
    out = tmp_path / "t.json"
    assert mods["sed_table1"].main(["--corpus", str(corpus), "--model", f"baseline={m}", "--model", f"baseline@oracle={o}", "--no-psds", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    (row,), (orc,) = res["rows"], res["extra_rows"]
    assert orc["training"]["oracle_labels"] is True and not row["training"]["oracle_labels"]
    ceil = res["summary"]["oracle_ceiling"]["baseline with oracle labels, 4 steps"]
    assert ceil["oracle_mean"] == orc["real"]["event_f1"] and ceil["baseline_mean"] == row["real"]["event_f1"]
    assert ceil["gain"] == round(orc["real"]["event_f1"] - row["real"]["event_f1"], 2)
    out = tmp_path / "p.json"
    assert mods["sed_post_tune"].main(["--corpus", str(corpus), "--model", f"baseline={m}", "--model", f"baseline@oracle={o}", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    means = res["summary"]["means"]
    assert means["baseline"]["models"] == ["baseline"] and means["baseline [oracle labels]"]["models"] == ["baseline (oracle)"]
    g = res["summary"]["oracle_ceiling_gain_over_baseline"]["baseline [oracle labels]"]
    assert g["per-class"] == round(means["baseline [oracle labels]"]["per-class"] - means["baseline"]["per-class"], 2)
    capsys.readouterr()


def test_table1_main_baseline_is_its_own_equal_steps_peer(corpus, tmp_path, capsys):
    """A main baseline row trained as many steps as adv-time+tri (15 vs 10 + 5 epochs) is the equal-steps peer,
    and with a second seed of each the seed means count it."""
    from streamkit.train.sed import train

    mod = _bench("sed_table1", "peer_bench")
    paths = {}
    for name, kw in {
        "b0": dict(method="baseline", epochs=2),
        "b1": dict(method="baseline", epochs=2, seed=1),
        "t0": dict(method="adv-time+tri", epochs=1, tri_epochs=1),
        "t1": dict(method="adv-time+tri", epochs=1, tri_epochs=1, seed=1),
    }.items():
        paths[name] = tmp_path / name / "m.pt"
        train(corpus, paths[name], _opts(**kw), cfg=_tiny(), quiet=True)
    out = tmp_path / "t.json"
    argv = ["--corpus", str(corpus), "--model", f"baseline={paths['b0']}", "--model", f"adv-time+tri={paths['t0']}", "--no-psds", "--out", str(out)]
    assert mod.main(argv) == 0
    res = json.loads(out.read_text())
    ev = {r["method"]: r["real"]["event_f1"] for r in res["rows"]}
    assert res["summary"]["target_equal_steps"]["gain"] == round(ev["adv-time+tri"] - ev["baseline"], 2)
    assert "target_equal_steps_seed_mean" not in res["summary"]  # one seed each
    argv[-3:-3] = ["--model", f"baseline@seed 1={paths['b1']}", "--model", f"adv-time+tri@seed 1={paths['t1']}"]
    assert mod.main(argv) == 0
    res = json.loads(out.read_text())
    sm = res["summary"]["target_equal_steps_seed_mean"]
    assert sm["baseline"]["seeds"] == [0, 1] and sm["adv_time_tri"]["seeds"] == [0, 1]
    assert sm["gain"] == round(sm["adv_time_tri"]["mean"] - sm["baseline"]["mean"], 2)
    capsys.readouterr()


def test_table1_card_rows_equal_rescored_weights(corpus, tmp_path, capsys):
    """--card METHOD=CARD: a row from a model card's recorded scores (a run whose weights are gone) holds the figures
    that scoring its weights gives, pairs like a scored row, and refuses a card of another method, another corpus, a
    broken card and a rescoring option."""
    from streamkit.train.sed import train

    mod = _bench("sed_table1", "card_bench")
    b, t = tmp_path / "b" / "m.pt", tmp_path / "t" / "m.pt"
    train(corpus, b, _opts(method="baseline", epochs=2), cfg=_tiny(), quiet=True)
    train(corpus, t, _opts(method="adv-time+tri", epochs=1, tri_epochs=1), cfg=_tiny(), quiet=True)
    out = tmp_path / "t.json"
    assert mod.main(["--corpus", str(corpus), "--model", f"baseline={b}", "--model", f"adv-time+tri={t}", "--no-psds", "--out", str(out)]) == 0
    scored = {r["method"]: r for r in json.loads(out.read_text())["rows"]}
    bc, tc = b.with_suffix(".json"), t.with_suffix(".json")
    assert mod.main(["--corpus", str(corpus), "--card", f"baseline={bc}", "--card", f"adv-time+tri={tc}", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    carded = {r["method"]: r for r in res["rows"]}
    for m in ("baseline", "adv-time+tri"):
        c, s = carded[m], scored[m]
        assert c["card"] == "m.json" and c["weights"] is None and c["score_s"] is None
        for dom in ("real", "synthetic"):
            for k in ("event_f1", "segment_f1", "event_er", "event_f1_per_class", "post"):
                assert c[dom][k] == s[dom][k], (m, dom, k)
        assert c["training"] == s["training"] and c["validation"]["event_f1"] == s["validation"]["event_f1"]
        assert c["gap_event_f1"] == s["gap_event_f1"]
    g = res["summary"]["gain_over_baseline_event_f1"]["adv-time+tri"]
    assert g == round(scored["adv-time+tri"]["real"]["event_f1"] - scored["baseline"]["real"]["event_f1"], 2)
    # a scored row and a card row mix (the card as a labelled extra row)
    assert mod.main(["--corpus", str(corpus), "--model", f"baseline={b}", "--card", f"baseline@card={bc}", "--no-psds", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["extra_rows"][0]["card"] == "m.json" and res["extra_rows"][0]["real"]["event_f1"] == res["rows"][0]["real"]["event_f1"]
    with pytest.raises(SystemExit, match="card of a --method baseline model"):
        mod.main(["--corpus", str(corpus), "--card", f"adv-time={bc}", "--out", str(out)])
    other = tmp_path / "other.json"
    card = json.loads(bc.read_text())
    card["training"]["corpus_command"] = card["training"]["corpus_command"].replace("--seed", "--seed 9 --x")
    other.write_text(json.dumps(card))
    with pytest.raises(SystemExit, match="trained on another corpus"):
        mod.main(["--corpus", str(corpus), "--card", f"baseline={other}", "--out", str(out)])
    del card["metrics"]["eval"]
    other.write_text(json.dumps(card))
    with pytest.raises(SystemExit, match="not a `streamkit train sed` model card"):
        mod.main(["--corpus", str(corpus), "--card", f"baseline={other}", "--out", str(out)])
    other.write_text("{broken")
    with pytest.raises(SystemExit, match="not a `streamkit train sed` model card"):
        mod.main(["--corpus", str(corpus), "--card", f"baseline={other}", "--out", str(out)])
    with pytest.raises(SystemExit):
        mod.main(["--corpus", str(corpus), "--card", f"baseline={bc}", "--threshold", "0.3", "--out", str(out)])
    assert "a --card row keeps its card's post-processing" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        mod.main(["--corpus", str(corpus), "--out", str(out)])
    assert "give at least one --model" in capsys.readouterr().err


def test_train_sed_post_writes_the_tuned_setting(corpus, tmp_path, capsys):
    """`streamkit train sed-post`: the same weights, meta['post_tuned'] per class, usable by sed_file(post='tuned'); errors exit 2."""
    from streamkit.cli import main
    from streamkit.models.sed_crnn import load_model
    from streamkit.models.sed_offline import sed_file
    from streamkit.train.sed import train
    from streamkit.train.sed_tune import post_from_meta

    m = tmp_path / "m.pt"
    train(corpus, m, _opts(method="baseline", epochs=1), cfg=_tiny(), quiet=True)
    out = tmp_path / "tuned.pt"
    assert main(["train", "sed-post", "--model", str(m), "--corpus", str(corpus), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "threshold" in printed and '"out": "tuned.pt"' in printed
    a, meta_a = load_model(m)
    b, meta_b = load_model(out)
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and torch.equal(va, vb), ka
    assert "post_tuned" not in meta_a
    post = meta_b["post_tuned"]
    assert post["source"] == "m.pt" and post["corpus_command"].startswith("streamkit corpus sed --out DIR ")
    med, thr = post_from_meta(meta_b, b.cfg.classes)
    assert set(med) == set(thr) == set(b.cfg.classes)
    v = post["val_macro_event_f1"]
    assert v["default"] <= v["global"] <= v["per_class_ungated"] <= v["per_class"]  # gates can only keep or raise each class's F1
    from streamkit.models.sed_post import clip_gate_from_meta

    gates = clip_gate_from_meta(meta_b, b.cfg.classes)
    assert set(gates) == set(b.cfg.classes) and all(g in post["grid"]["clip_gates"] for g in gates.values())
    x = np.random.default_rng(0).standard_normal(16000 * 3).astype(np.float32) * 0.1
    r = sed_file(x, str(out), post="tuned")
    assert r.probs.shape[1] == len(b.cfg.classes)
    plain = tmp_path / "plain.pt"
    assert main(["train", "sed-post", "--model", str(m), "--corpus", str(corpus), "--out", str(plain), "--no-clip-gate", "--quiet"]) == 0
    p2 = load_model(plain)[1]["post_tuned"]
    assert "clip_gate" not in p2 and p2["val_macro_event_f1"]["per_class"] == v["per_class_ungated"]
    assert main(["train", "sed-post", "--model", str(m), "--corpus", str(tmp_path / "nope"), "--out", str(out), "--quiet"]) == 2
    assert "corpus directory not found" in capsys.readouterr().err
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a model")
    assert main(["train", "sed-post", "--model", str(bad), "--corpus", str(corpus), "--out", str(out), "--quiet"]) == 2
    assert "error:" in capsys.readouterr().err


def test_table1_seed_means_are_paired_by_seed():
    """sed_table1's seed means: each recipe against the baselines of its own seeds; variants and oracle rows apart."""
    mod = _bench("sed_table1", "paired")

    def row(method, seed, f1, steps=4500, **tr):
        return {"method": method, "real": {"event_f1": f1}, "training": {"seed": seed, "steps": steps, **tr}}

    tri = dict(detach_labelers=True, pseudo_level="clip", pseudo_negative=0.05, relabel_every=1)
    rows = [row("baseline", 0, 40.0), row("baseline", 1, 50.0), row("baseline", 2, 44.0), row("baseline", 0, 60.0, oracle_labels=True),
            row("adv-time", 0, 46.0), row("adv-time", 1, 51.0),
            row("adv-time+tri", 0, 47.0, **tri), row("adv-time+tri", 1, 52.0, **tri), row("adv-time+tri", 2, 49.0, **tri),
            row("adv-time+tri", 0, 30.0),  # the paper's rule: another recipe
            row("tri", 3, 55.0, **tri),  # no baseline of seed 3: left out
            row("adv-whole", 0, 41.0, steps=3000),  # no baseline of 3000 steps: left out
            row("baseline", 0, 43.0, ema=0.999), row("baseline", 1, 49.0, ema=0.999),  # weight averages: their own recipes
            row("adv-time+tri", 0, 50.0, ema=0.999, **tri), row("adv-time+tri", 1, 53.0, ema=0.999, **tri),
            row("adv-time", 2, 50.0, ema=0.999),  # no EMA baseline of seed 2: left out
            row("adv-time+tri", 0, 54.0, ema=0.999, ema_decay=0.999, pseudo_from="ema", **tri),  # mean teacher: its own recipe
            row("adv-time+tri", 1, 51.0, ema=None, ema_decay=0.999, pseudo_from="ema", **tri),  # its weights: plain baselines
            row("adv-time+tri", 2, 58.0, pseudo_mix={"probability": 0.5, "gain_db": 6.0}, **tri)]  # pseudo-mix: its own recipe  # fmt: skip
    out = mod.seed_means_paired(rows)
    (mix,) = [k for k in out if "pseudo-mix 0.5 (+-6 dB)" in k]
    assert out[mix]["event_f1"] == [58.0] and out[mix]["baseline_event_f1"] == [44.0] and out[mix]["gain"] == 14.0
    assert out["adv-time, 4500 steps"] == {"seeds": [0, 1], "event_f1": [46.0, 51.0], "mean": 48.5, "baseline_event_f1": [40.0, 50.0],
                                           "baseline_mean": 45.0, "gain": 3.5}  # fmt: skip
    (key,) = [k for k in out if k.startswith("adv-time+tri") and "'detach_labelers': True" in k and "EMA" not in k
              and "'pseudo_from': 'weights'" in k and "pseudo-mix" not in k]  # fmt: skip
    assert out[key]["seeds"] == [0, 1, 2] and out[key]["mean"] == 49.33 and out[key]["baseline_mean"] == 44.67 and out[key]["gain"] == 4.67
    (paper,) = [k for k in out if k.startswith("adv-time+tri") and "'detach_labelers': False" in k]
    assert out[paper]["event_f1"] == [30.0] and out[paper]["gain"] == -10.0
    assert not any(k.startswith(("tri ", "adv-whole", "baseline")) for k in out)
    (avg,) = [k for k in out if "EMA 0.999" in k and "'pseudo_from': 'weights'" in k]
    (mt,) = [k for k in out if "EMA 0.999" in k and "'pseudo_from': 'ema 0.999'" in k]
    assert out[mt]["event_f1"] == [54.0] and out[mt]["baseline_event_f1"] == [43.0] and out[mt]["gain"] == 11.0
    (mtw,) = [k for k in out if "EMA" not in k and "'pseudo_from': 'ema 0.999'" in k]
    assert out[mtw]["event_f1"] == [51.0] and out[mtw]["baseline_event_f1"] == [50.0]
    assert avg.startswith("adv-time+tri") and avg.endswith(", EMA 0.999, 4500 steps")
    assert out[avg]["baseline_event_f1"] == [43.0, 49.0] and out[avg]["mean"] == 51.5 and out[avg]["gain"] == 5.5
    ceil = mod.oracle_ceiling(rows)
    assert list(ceil) == ["baseline with oracle labels, 4500 steps"]
    mixed = mod.oracle_ceiling([*rows, row("baseline", 1, 70.0, oracle_labels=True, pseudo_mix={"probability": 1.0, "gain_db": 3.0})])
    assert mixed["baseline with oracle labels, pseudo-mix 1 (+-3 dB), 4500 steps"]["oracle_event_f1"] == [70.0]
    assert mixed["baseline with oracle labels, 4500 steps"]["oracle_event_f1"] == [60.0]  # (not pooled with the mixed one)
    c = ceil["baseline with oracle labels, 4500 steps"]
    assert c["baseline_event_f1"] == [40.0, 50.0, 44.0] and c["gain"] == round(60.0 - 134.0 / 3, 2)  # not the EMA baselines
    assert c["seeds"] == [0] and c["paired_baseline_event_f1"] == [40.0] and c["paired_gain"] == 20.0  # the same seed's baseline
    # a consistency loss: its own recipe, against the plain baselines and against the baselines with the same loss
    cons = {"consistency": {"weight": 2.0}}
    crows = rows + [row("baseline", 0, 45.0, ema=0.999, **cons), row("baseline", 1, 52.0, ema=0.999, **cons),
                    row("adv-time+tri", 0, 55.0, ema=0.999, ema_decay=0.999, pseudo_from="ema", **tri, **cons),
                    row("adv-time+tri", 1, 56.0, ema=0.999, ema_decay=0.999, pseudo_from="ema", **tri, **cons),
                    row("baseline", 2, 47.0, ema_decay=0.999, **cons)]  # (the weights of a consistency run: not a plain baseline)  # fmt: skip
    cout = mod.seed_means_paired(crows)
    assert cout[avg] == out[avg] and cout[mt] == out[mt]  # the plain recipes keep their plain baselines
    (cb,) = [k for k in cout if k.startswith("baseline") and "EMA" in k]
    assert cb == "baseline, EMA 0.999, consistency 2, 4500 steps" and cout[cb]["baseline_event_f1"] == [43.0, 49.0] and cout[cb]["gain"] == 2.5
    assert "gain_over_consistency_baseline" not in cout[cb]
    (ct,) = [k for k in cout if k.startswith("adv-time+tri") and k.endswith("consistency 2, 4500 steps")]
    assert cout[ct]["mean"] == 55.5 and cout[ct]["gain"] == 9.5 and cout[ct]["consistency_baseline_mean"] == 48.5
    assert cout[ct]["gain_over_consistency_baseline"] == 7.0
    assert mod.oracle_ceiling(crows)["baseline with oracle labels, 4500 steps"]["baseline_event_f1"] == [40.0, 50.0, 44.0]
    # log-mel augmentation: the recipe meets the baselines given the same augmentation, and also the plain ones
    aug = {"augment": {"shift": 8, "filter_db": 6.0, "gain_db": 6.0}}
    arows = rows + [row("baseline", 0, 46.0, ema=0.999, **aug), row("baseline", 1, 50.0, ema=0.999, **aug),
                    row("adv-time+tri", 0, 52.0, ema=0.999, ema_decay=0.999, pseudo_from="ema", **tri, **aug),
                    row("adv-time+tri", 1, 57.0, ema=0.999, ema_decay=0.999, pseudo_from="ema", **tri, **aug),
                    row("baseline", 2, 48.0, ema=0.999, augment={"shift": 4, "filter_db": 6.0, "gain_db": 6.0})]  # fmt: skip
    aout = mod.seed_means_paired(arows)
    assert aout[avg] == out[avg] and aout[mt] == out[mt]  # the plain recipes keep their plain baselines
    ab = aout["baseline, EMA 0.999, augment 8/6/6, 4500 steps"]
    assert ab["baseline_event_f1"] == [43.0, 49.0] and ab["gain"] == 2.0 and "gain_over_unaugmented_baseline" not in ab
    (at,) = [k for k in aout if k.startswith("adv-time+tri") and k.endswith("augment 8/6/6, 4500 steps")]
    assert aout[at]["baseline_event_f1"] == [46.0, 50.0] and aout[at]["gain"] == 6.5
    assert aout[at]["unaugmented_baseline_mean"] == 46.0 and aout[at]["gain_over_unaugmented_baseline"] == 8.5
    assert "baseline, EMA 0.999, augment 4/6/6, 4500 steps" not in aout  # no plain EMA baseline of seed 2
    # a student of a teacher (--teacher): its own recipe, per teacher, against the baselines of its seeds and augmentation
    teach = {"pseudo_level": "positive", "pseudo_threshold": 0.5, "pseudo_negative": 0.05,
             "teacher": {"sha256": "ab" * 32, "card": {"method": "adv-time+tri", "seed": 0}}}  # fmt: skip
    trows = arows + [row("adv-time", 0, 53.0, ema=0.999, **aug, **teach), row("adv-time", 1, 56.0, ema=0.999, **aug, **teach),
                     row("adv-time", 0, 49.0, ema=0.999, **aug, **{**teach, "teacher": {"sha256": "cd" * 32, "card": None}})]  # fmt: skip
    tout = mod.seed_means_paired(trows)
    (st,) = [k for k in tout if "student of adv-time+tri seed 0" in k]
    assert st == "adv-time, student of adv-time+tri seed 0 (positive labels, P 0.5, N 0.05, abababababab), EMA 0.999, augment 8/6/6, 4500 steps"
    assert tout[st]["event_f1"] == [53.0, 56.0] and tout[st]["baseline_event_f1"] == [46.0, 50.0] and tout[st]["gain"] == 6.5
    assert tout[st]["gain_over_unaugmented_baseline"] == 8.5
    (other,) = [k for k in tout if "student of a model without its card" in k and "cdcdcdcdcdcd" in k]
    assert tout[other]["event_f1"] == [49.0] and not any(k.startswith("adv-time, EMA") for k in tout)
    assert "equal_compute" not in tout[st]  # (its teacher is not a row of the table: its steps are unknown)
    # equal compute: the teacher a row of the table (by its file's digest), a third round counting both earlier ones
    t0 = {**arows[-3], "sha256": "ab" * 32}  # the augmented adv-time+tri row of seed 0 (52.0)
    assert t0["method"] == "adv-time+tri" and t0["training"]["seed"] == 0 and t0["real"]["event_f1"] == 52.0
    s1 = {**trows[-2], "sha256": "ef" * 32}  # the seed-1 student (56.0)
    assert s1["training"]["seed"] == 1 and s1["real"]["event_f1"] == 56.0
    r3 = {**teach, "teacher": {"sha256": "ef" * 32, "card": {"method": "adv-time", "seed": 1}}}
    erows = [*arows[:-3], t0, *arows[-2:], trows[-3], s1, trows[-1],
             row("baseline", 0, 51.5, steps=9000, ema=0.999, **aug), row("baseline", 0, 52.5, steps=13500, ema=0.999, **aug),
             row("baseline", 1, 70.0, steps=9000, ema=0.999),  # (no augmentation: not the peer)
             row("adv-time", 0, 57.0, ema=0.999, **aug, **r3), row("adv-time", 1, 58.0, ema=0.999, **aug, **r3)]  # fmt: skip
    eout = mod.seed_means_paired(erows)
    assert {k: v for k, v in eout[st].items() if k != "equal_compute"} == tout[st]
    assert eout[st]["equal_compute"] == {"steps": 9000, "seeds": [0], "event_f1": [53.0], "mean": 53.0, "baseline_event_f1": [51.5],
                                         "baseline_mean": 51.5, "gain": 1.5}  # only seed 0 has a 9000-step baseline  # fmt: skip
    (third,) = [k for k in eout if "student of adv-time seed 1" in k]
    assert eout[third]["gain"] == 9.5  # (against the 4500-step baselines: 57.5 - 48)
    assert eout[third]["equal_compute"] == {"steps": 13500, "seeds": [0], "event_f1": [57.0], "mean": 57.0, "baseline_event_f1": [52.5],
                                            "baseline_mean": 52.5, "gain": 4.5}  # fmt: skip
    bare = [{**r, "sha256": None} if r is s1 else r for r in erows]  # the second round's file not in the table: no figure
    assert "equal_compute" not in mod.seed_means_paired(bare)[third]
    assert mod.compute_steps(s1, {"ab" * 32: t0}) == 9000 and mod.compute_steps(s1, {}) is None and mod.compute_steps(t0, {}) == 4500
    loop = {**s1, "training": {**s1["training"], "teacher": {"sha256": "ef" * 32}}}  # (a file its own teacher: no endless count)
    assert mod.compute_steps(loop, {"ef" * 32: loop}) is None
    rows.append(row("baseline", 5, 61.0, oracle_labels=True))  # no plain baseline of seed 5: no paired figure
    c = mod.oracle_ceiling(rows)["baseline with oracle labels, 4500 steps"]
    assert c["oracle_mean"] == 60.5 and c["gain"] == round(60.5 - 134.0 / 3, 2) and "paired_gain" not in c
    rows += [row("adv-time+tri", 2, 55.0, oracle_labels=True, pseudo_level="clip"), row("adv-time+tri", 2, 58.0, oracle_labels=True)]
    ceil = mod.oracle_ceiling(rows)  # a tri final stage's true labels: frame- and clip-level ones kept apart
    assert ceil["adv-time+tri with clip-level oracle labels, 4500 steps"]["paired_gain"] == 11.0
    assert ceil["adv-time+tri with frame-level oracle labels, 4500 steps"]["oracle_mean"] == 58.0
    # an augmented final stage's true labels meet the baselines given the same augmentation, not the plain ones
    aug = {"augment": {"shift": 8, "filter_db": 6.0, "gain_db": 6.0}}
    rows += [row("adv-time+tri", 2, 61.0, oracle_labels=True, **aug), row("baseline", 2, 52.0, **aug), row("baseline", 3, 48.0, **aug)]
    ceil = mod.oracle_ceiling(rows)
    assert ceil["adv-time+tri with frame-level oracle labels, 4500 steps"]["oracle_mean"] == 58.0  # (not pooled with it)
    a = ceil["adv-time+tri with frame-level oracle labels, augment 8/6/6, 4500 steps"]
    assert a["oracle_event_f1"] == [61.0] and a["baseline_event_f1"] == [52.0, 48.0] and a["gain"] == 11.0
    assert a["seeds"] == [2] and a["paired_baseline_event_f1"] == [52.0] and a["paired_gain"] == 9.0


def test_ema_update_hand_case():
    from streamkit.train.sed_steps import ema_update

    avg = {"w": torch.tensor([0.0, 4.0]), "n": torch.tensor(1)}
    ema_update(avg, {"w": torch.tensor([1.0, 0.0]), "n": torch.tensor(5)}, 0.75)
    assert torch.allclose(avg["w"], torch.tensor([0.25, 3.0])) and int(avg["n"]) == 5


def test_ema_selects_the_average_and_leaves_training_alone(corpus, tmp_path):
    """--ema: the same run (weights, scores of the weights), plus the average, which is scored, selected and shipped."""
    import shutil

    from streamkit.models.sed_crnn import load_model
    from streamkit.train.sed import train

    kw = dict(method="adv-time+tri", epochs=2, tri_epochs=1, detach_labelers=True, pseudo_level="clip")
    plain = train(corpus, tmp_path / "p" / "m.pt", _opts(**kw), cfg=_tiny(), quiet=True)
    ema = train(corpus, tmp_path / "e" / "m.pt", _opts(**kw, ema=0.9), cfg=_tiny(), quiet=True)
    cp = torch.load(tmp_path / "p" / "m.ckpt", weights_only=False)
    ce = torch.load(tmp_path / "e" / "m.ckpt", weights_only=False)
    assert all(torch.equal(cp["model"][k], ce["model"][k]) for k in cp["model"])
    hp, he = plain["state"]["history"], ema["state"]["history"]
    assert [(h["step"], h["val_event_f1"], h["loss"]) for h in hp] == [(h["step"], h["val_event_f1"], h["loss"]) for h in he]
    assert all("ema_val_event_f1" in h for h in he) and not any("ema_val_event_f1" in h for h in hp)
    card = json.loads((tmp_path / "e" / "m.json").read_text())["training"]
    assert card["ema"] == 0.9 and "moving average" in card["selection"]
    best = [h for h in he if h["epoch"] == card["best_epoch"]][0]
    assert best["stage"] == "final" and card["best_val_event_f1"] == best["ema_val_event_f1"]
    shipped, _ = load_model(tmp_path / "e" / "m.pt")
    assert all(torch.equal(v, ce["state"]["best_state"][k]) for k, v in shipped.state_dict().items())
    assert any(not torch.equal(ce["state"]["ema"][k], ce["model"][k]) for k in ce["model"] if k.startswith("ft."))
    # one step by hand, across a resume: avg2 = d * avg1 + (1 - d) * w2 with the warm-up d = min(0.9, 3 / 12)
    train(corpus, tmp_path / "r" / "m.pt", _opts(**kw, ema=0.9, max_steps=1), cfg=_tiny(), quiet=True)
    c1 = torch.load(tmp_path / "r" / "m.ckpt", weights_only=False)
    shutil.copy(tmp_path / "r" / "m.ckpt", tmp_path / "r" / "m1.ckpt")
    train(corpus, tmp_path / "r" / "m.pt", _opts(**kw, ema=0.9, max_steps=2), cfg=_tiny(), quiet=True, resume=True)
    c2 = torch.load(tmp_path / "r" / "m.ckpt", weights_only=False)
    assert c2["state"]["step"] == 2
    for k, w2 in c2["model"].items():
        if w2.is_floating_point():
            assert torch.allclose(c2["state"]["ema"][k], 0.25 * c1["state"]["ema"][k] + 0.75 * w2, atol=1e-6), k
    # part of the run; bad decays are refused
    with pytest.raises(ValueError, match="another run"):
        train(corpus, tmp_path / "r" / "m.pt", _opts(**kw), cfg=_tiny(), quiet=True, resume=True)
    for bad in (0.0, 1.0, -0.5):
        with pytest.raises(ValueError, match="--ema must be in"):
            train(corpus, tmp_path / "x.pt", _opts(**kw, ema=bad), cfg=_tiny(), quiet=True)


def test_ema_run_writes_the_weights_best_beside_the_average(corpus, tmp_path):
    """A --ema run also writes the weights' own best (same validation, same eligible epochs) as <stem>.weights.pt; its
    card is the plain run's selection (ema None), so it scores as the plain run's file."""
    from streamkit.models.sed_crnn import load_model
    from streamkit.train.sed import train, weights_path

    kw = dict(method="adv-time+tri", epochs=2, tri_epochs=2, detach_labelers=True, pseudo_level="clip")
    train(corpus, tmp_path / "p" / "m.pt", _opts(**kw), cfg=_tiny(), quiet=True)
    ema = train(corpus, tmp_path / "e" / "m.pt", _opts(**kw, ema=0.9), cfg=_tiny(), quiet=True)
    assert weights_path(tmp_path / "e" / "m.pt") == tmp_path / "e" / "m.weights.pt"
    assert not weights_path(tmp_path / "p" / "m.pt").exists()  # (only runs with an average have a second file)
    plain_w, _ = load_model(tmp_path / "p" / "m.pt")
    ema_w, _ = load_model(tmp_path / "e" / "m.weights.pt")
    assert all(torch.equal(v, ema_w.state_dict()[k]) for k, v in plain_w.state_dict().items())
    pc = json.loads((tmp_path / "p" / "m.json").read_text())
    wc = json.loads((tmp_path / "e" / "m.weights.json").read_text())
    assert wc["training"]["ema"] is None and wc["training"]["ema_decay"] == 0.9 and "weights" in wc["training"]["selection"]
    assert (wc["training"]["best_epoch"], wc["training"]["best_val_event_f1"]) == (pc["training"]["best_epoch"], pc["training"]["best_val_event_f1"])
    assert wc["metrics"]["eval"] == pc["metrics"]["eval"]
    ec = json.loads((tmp_path / "e" / "m.json").read_text())["training"]
    assert ec["ema"] == 0.9 and ec["pseudo_from"] == "weights"
    assert "weights_best" not in ema["state"]


def test_pseudo_labels_from_the_average(corpus, tmp_path):
    """--pseudo-from ema: the same labeler stage, then pseudo-labels from the average's F1/F2 (checked by hand against
    pseudo_label_all on the checkpointed average); a checkpoint's labels of the other source are refused on resume."""
    import numpy as np

    from streamkit.models.sed_crnn import SedModel
    from streamkit.train.sed import SedCorpus, train
    from streamkit.train.sed_labels import pseudo_label_all
    from streamkit.train.sed_steps import TrainData

    kw = dict(method="adv-time+tri", epochs=2, tri_epochs=1, detach_labelers=True, ema=0.9)
    w = train(corpus, tmp_path / "w" / "m.pt", _opts(**kw), cfg=_tiny(), quiet=True)
    spe = w["state"]["history"][0]["step"]
    # stop right after the switch: the labels are made from the average as it is at the switch
    e = train(corpus, tmp_path / "e" / "m.pt", _opts(**kw, pseudo_from="ema", max_steps=2 * spe + 1), cfg=_tiny(), quiet=True)
    assert e["state"]["pseudo_source"] == "averaged labelers"
    assert [h["val_event_f1"] for h in e["state"]["history"]] == [h["val_event_f1"] for h in w["state"]["history"]][: len(e["state"]["history"])]
    # the labels by hand, from the average of a run stopped at the switch (labels are made before the first final step)
    train(corpus, tmp_path / "s" / "m.pt", _opts(**kw, pseudo_from="ema", max_steps=2 * spe), cfg=_tiny(), quiet=True)
    cs = torch.load(tmp_path / "s" / "m.ckpt", weights_only=False)
    ce = torch.load(tmp_path / "e" / "m.ckpt", weights_only=False)
    avg = SedModel(_tiny())
    avg.load_state_dict(cs["state"]["ema"])
    c = SedCorpus(corpus)
    data = TrainData(c, _tiny(), _opts(**kw), True)
    wf, _ = pseudo_label_all(avg, data.W, data.w_clip, rule=ce["state"]["pseudo_rule"])
    assert np.array_equal(wf, ce["state"]["pseudo"]["w_frame"])
    live = SedModel(_tiny())
    live.load_state_dict(cs["model"])
    wl, _ = pseudo_label_all(live, data.W, data.w_clip, rule=ce["state"]["pseudo_rule"])
    assert not np.array_equal(wl, wf)  # (the weights' labelers label otherwise: the option changes something)
    card_run = train(corpus, tmp_path / "e" / "m.pt", _opts(**kw, pseudo_from="ema"), cfg=_tiny(), quiet=True, resume=True)
    assert card_run["card"]["training"]["pseudo_from"] == "ema"
    with pytest.raises(ValueError, match="averaged labelers"):
        train(corpus, tmp_path / "e" / "m.pt", _opts(**kw), cfg=_tiny(), quiet=True, resume=True)
    for bad, msg in ((dict(kw, ema=None), "--pseudo-from ema needs"), (dict(kw, method="adv-time", detach_labelers=False), "--pseudo-from ema needs")):
        with pytest.raises(ValueError, match=msg):
            train(corpus, tmp_path / "x.pt", _opts(**{**bad, "pseudo_from": "ema"}), cfg=_tiny(), quiet=True)
    with pytest.raises(ValueError, match="--pseudo-from must be one of"):
        train(corpus, tmp_path / "x.pt", _opts(**kw, pseudo_from="teacher"), cfg=_tiny(), quiet=True)


def test_mel_augment_hand_cases():
    """--augment's perturbation: a shift moves the spectrum by whole bins with the edge repeated, the filter and level
    gains are dB on natural-log energies, draws are a function of (seed, step), and the input is left alone."""
    from streamkit.train.sed_augment import MelAugment, batch_rng

    x = np.tile(np.arange(8, dtype=np.float16), (2, 3, 1))  # (B 2, T 3, 8 bins), bin j holds j
    shift_only = MelAugment(shift=3, filter_db=0.0, gain_db=0.0)
    y = shift_only(x, batch_rng(0, 5))
    assert y.dtype == np.float32 and y.shape == x.shape and np.array_equal(x[0, 0], np.arange(8))  # input unchanged
    for i in range(2):
        k = int(4 - y[i, 0, 4])  # the shift of clip i (up by k: bin j holds j - k)
        assert -3 <= k <= 3
        assert np.array_equal(y[i, 0], np.clip(np.arange(8) - k, 0, 7)) and np.array_equal(y[i, 0], y[i, 2])  # all frames alike
    assert np.array_equal(y, shift_only(x, batch_rng(0, 5))) and not all(  # same (seed, step): same draw
        np.array_equal(y, shift_only(x, batch_rng(s, t))) for s, t in ((1, 5), (0, 6), (2, 7)))  # fmt: skip
    gain_only = MelAugment(shift=0, filter_db=0.0, gain_db=6.0)
    d = gain_only(x, batch_rng(3, 0)) - x.astype(np.float32)
    for i in range(2):  # one level per clip, within +-6 dB of power: |d| <= 0.6 ln 10
        assert np.allclose(d[i], d[i, 0, 0]) and abs(d[i, 0, 0]) <= 0.6 * np.log(10) + 1e-6
    filt = MelAugment(shift=0, filter_db=6.0, gain_db=0.0)
    d = filt(x, batch_rng(3, 0)) - x.astype(np.float32)
    assert np.allclose(d[:, 0], d[:, 1]) and np.abs(d).max() <= 0.6 * np.log(10) + 1e-6  # the same curve on every frame
    assert np.abs(np.diff(d[0, 0], 2)).max() > 1e-6 or np.ptp(d[0, 0]) > 0  # a curve across bins, not a constant
    assert np.array_equal(MelAugment(0, 0.0, 0.0)(x, batch_rng(0, 0)), x.astype(np.float32))  # all off: identity
    with pytest.raises(ValueError, match=">= 0"):
        MelAugment(shift=-1)
    with pytest.raises(ValueError, match="batch, frames"):
        shift_only(x[0], batch_rng(0, 0))
    from streamkit.train.sed_augment import mel_shift

    v = np.arange(5.0)  # the shift alone, on any leading axes: up by 2, down by 1, none
    assert mel_shift(v, 2).tolist() == [0, 0, 0, 1, 2] and mel_shift(v[None, None], -1).tolist() == [[[1, 2, 3, 4, 4]]]
    z = mel_shift(v, 0)
    assert z.tolist() == v.tolist() and z is not v


def test_augment_is_part_of_the_run(corpus, tmp_path):
    """--augment perturbs training from the first step (another loss curve, the card and fingerprint say so), resumes
    exactly, and leaves the pseudo-labels to the clean clips."""
    from streamkit.models.sed_crnn import load_model
    from streamkit.train import sed_labels
    from streamkit.train.sed import SedCorpus, train
    from streamkit.train.sed_augment import MelAugment
    from streamkit.train.sed_steps import TrainData

    aug = MelAugment(shift=4, filter_db=6.0, gain_db=6.0)
    kw = dict(method="adv-time+tri", epochs=2, tri_epochs=1, detach_labelers=True)
    plain = train(corpus, tmp_path / "p" / "m.pt", _opts(**kw), cfg=_tiny(), quiet=True)
    a = train(corpus, tmp_path / "a" / "m.pt", _opts(**kw, augment=aug), cfg=_tiny(), quiet=True)
    assert [h["loss"] for h in plain["state"]["history"]][0] != [h["loss"] for h in a["state"]["history"]][0]
    card = json.loads((tmp_path / "a" / "m.json").read_text())["training"]
    assert card["augment"]["shift"] == 4 and card["augment"]["filter_db"] == 6.0
    assert json.loads((tmp_path / "p" / "m.json").read_text())["training"]["augment"] is None
    b1 = train(corpus, tmp_path / "b" / "m.pt", _opts(**kw, augment=aug, max_steps=5), cfg=_tiny(), quiet=True)
    assert not b1["finished"]
    with pytest.raises(ValueError, match="another run"):  # the augmentation is part of the fingerprint
        train(corpus, tmp_path / "b" / "m.pt", _opts(**kw), cfg=_tiny(), quiet=True, resume=True)
    seen: list[np.ndarray] = []
    real = sed_labels.pseudo_label_all

    def spy(model, feats, *args, **kwargs):
        seen.append(np.asarray(feats))
        return real(model, feats, *args, **kwargs)

    sed_labels.pseudo_label_all = spy
    try:
        b = train(corpus, tmp_path / "b" / "m.pt", _opts(**kw, augment=aug), cfg=_tiny(), quiet=True, resume=True)
    finally:
        sed_labels.pseudo_label_all = real
    data = TrainData(SedCorpus(corpus), _tiny(), _opts(**kw), True)
    assert len(seen) == 2 and np.array_equal(seen[0], data.W) and np.array_equal(seen[1], data.U)  # clean W and U
    ma, _ = load_model(tmp_path / "a" / "m.pt")
    mb, _ = load_model(tmp_path / "b" / "m.pt")
    assert all(torch.equal(va, vb) for va, vb in zip(ma.state_dict().values(), mb.state_dict().values()))
    assert [h["loss"] for h in a["state"]["history"]] == [h["loss"] for h in b["state"]["history"]]


def test_teacher_labels_from_a_trained_model(corpus, tmp_path):
    """--teacher: a trained model's Ft labels W and U once (the rule, W gated by its tags) and a method without
    tri-training learns from them from step 0; the teacher is part of the run; wrong uses and files are refused."""
    from streamkit.models.sed_crnn import load_model
    from streamkit.train import sed as sedmod
    from streamkit.train.sed import teacher_label_all, train
    from streamkit.train.sed_steps import TrainData

    train(corpus, tmp_path / "t" / "m.pt", _opts(method="baseline", epochs=1), cfg=_tiny(), quiet=True)
    teacher = tmp_path / "t" / "m.pt"
    model, _ = load_model(teacher)
    data = TrainData(sedmod.SedCorpus(corpus), _tiny(), _opts(method="adv-time", teacher=str(teacher)), True)
    rule = {"positive": 0.5, "negative": 0.3}
    with torch.no_grad():
        out = model(torch.from_numpy(np.asarray(data.U, dtype=np.float32)), heads=("ft",))["ft"]
    fr, cl = out["frame"].numpy(), out["clip"].numpy()
    uf, uc = teacher_label_all(model, data.U, None, rule, batch=4)
    assert np.array_equal(uf == 1, fr > 0.5) and np.array_equal(uf == 0, fr < 0.3) and np.array_equal(uf == -1, (fr >= 0.3) & (fr <= 0.5))
    assert np.array_equal(uc == 1, cl > 0.5) and np.array_equal(uc == 0, cl < 0.3)
    wf, wc = teacher_label_all(model, data.W, data.w_clip, rule)
    absent = data.w_clip < 0.5
    assert np.array_equal(wc, data.w_clip.astype(np.int8)) and (wf.transpose(0, 2, 1)[absent] == 0).all()
    # a student learns from them from the first step, the card names the teacher
    kw = dict(method="adv-time", epochs=1, pseudo_negative=0.3, pseudo_level="positive")
    parts: list[dict[str, float]] = []
    st = train(corpus, tmp_path / "s" / "m.pt", _opts(**kw, teacher=str(teacher)), cfg=_tiny(), quiet=True,
               on_step=lambda s_, p: parts.append(p))  # fmt: skip
    assert [h["step"] for h in st["state"]["pseudo_history"]] == [0] and len(parts) == 4 and "domain" in parts[0]
    pf = sedmod.positive_frames(uf, uc)
    assert st["state"]["pseudo_stats"]["u_frame_positive"] == pytest.approx(float((pf == 1).mean()))
    card = json.loads((tmp_path / "s" / "m.json").read_text())["training"]
    assert card["teacher"]["file"] == "m.pt" and card["teacher"]["card"]["method"] == "baseline"
    assert card["teacher"]["sha256"] == sedmod.file_sha256(teacher) and card["pseudo_level"] == "positive"
    assert card["pseudo_negative"] == 0.3 and "oracle_labels" not in card
    # the teacher is part of the run: another teacher does not resume the checkpoint
    stop = train(corpus, tmp_path / "r" / "m.pt", _opts(**kw, teacher=str(teacher), max_steps=2), cfg=_tiny(), quiet=True)
    assert not stop["finished"]
    other = tmp_path / "t2.pt"
    train(corpus, other, _opts(method="baseline", epochs=1, seed=5), cfg=_tiny(), quiet=True)
    with pytest.raises(ValueError, match="checkpoint of another run"):
        train(corpus, tmp_path / "r" / "m.pt", _opts(**kw, teacher=str(other)), cfg=_tiny(), quiet=True, resume=True)
    # refusals: tri-training beside it, a missing, corrupt or foreign teacher
    with pytest.raises(ValueError, match="without tri-training"):
        train(corpus, tmp_path / "x.pt", _opts(method="adv-time+tri", teacher=str(teacher)), cfg=_tiny(), quiet=True)
    with pytest.raises(ValueError, match="no such file"):
        train(corpus, tmp_path / "x.pt", _opts(method="baseline", teacher=str(tmp_path / "none.pt")), cfg=_tiny(), quiet=True)
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a model")
    with pytest.raises(ValueError, match="corrupt"):
        train(corpus, tmp_path / "x.pt", _opts(method="baseline", teacher=str(bad)), cfg=_tiny(), quiet=True)
    wide = SedConfig(**{**_tiny().to_dict(), "n_mels": 64})
    with pytest.raises(ValueError, match="another front end"):
        train(corpus, tmp_path / "x.pt", _opts(method="baseline", teacher=str(teacher)), cfg=wide, quiet=True)
    with pytest.raises(ValueError, match="--pseudo-level need"):
        train(corpus, tmp_path / "x.pt", _opts(method="baseline", pseudo_level="positive"), cfg=_tiny(), quiet=True)

