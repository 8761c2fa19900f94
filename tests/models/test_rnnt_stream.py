"""Block models.rnnt_asr: chunking invariance, utterances from scripted speech tags, gaps, modes, offline equality."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from streamkit.core.errors import ConfigError
from streamkit.core.registry import lookup
from streamkit.core.tags import SPEECH, Gap, GapCause, SpeechBoundary
from streamkit.models.features import features
from streamkit.models.rnnt import BLANK, RnntConfig, RnntModel, save_model
from streamkit.models.rnnt_search import MultiDecoder
from streamkit.models.rnnt_stream import AsrResult, LidResult, RnntAsr, words_of
from streamkit.testing import assert_chunking_invariant, run_block

torch.set_num_threads(1)

RATE = 8000
SYMBOLS = {
    "en": ["<b>", "B_a", "b", "c", "B_d", "e"],
    "hi": ["<b>", "B_k", "l", "B_m", "n"],
    "ta": ["<b>", "B_p", "q", "r", "B_s", "t", "u"],
}


def signal(seconds: float = 2.4, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(seconds * RATE)
    t = np.arange(n) / RATE
    f = 300 + 400 * (np.sin(2 * np.pi * 0.7 * t) > 0) + 200 * np.floor(t * 3 % 3)
    x = 0.3 * np.sin(2 * np.pi * np.cumsum(f) / RATE) * (0.5 + 0.5 * np.sin(2 * np.pi * 1.3 * t) ** 2) + 0.02 * rng.standard_normal(n)
    return x.astype(np.float32)


def make_model(
    tmp_path, variant: str = "lid", seed: int = 0, name: str = "m.pt", symbols: bool = True, lid_hidden: int = 0, meta: dict | None = None
) -> str:
    torch.manual_seed(seed)
    cfg = RnntConfig(
        variant=variant,
        languages=("en", "hi", "ta"),
        vocab_sizes=(6, 5, 7),
        enc_layers=1,
        enc_hidden=16,
        pred_layers=1,
        pred_hidden=12,
        embed_dim=8,
        joint_dim=16,
        lid_hidden=lid_hidden,
    )
    m = RnntModel(cfg).eval()
    f = features(signal(3.0, seed=9))
    m.set_feature_stats(f.mean(0), f.std(0))
    with torch.no_grad():
        for j in m.joints:
            j.out.weight.mul_(4.0)
            j.out.bias[BLANK] += 0.5  # mostly blanks: a few tokens per second
        if m.lid_head is not None:
            m.lid_head.weight.mul_(3.0)
    path = tmp_path / name
    save_model(path, m, meta={**({"symbols": SYMBOLS} if symbols else {}), **(meta or {})})
    return str(path)


def asr_events(run):
    return [e for e in run.events if e.kind in ("asr.partial", "asr.final", "lid.result")]


def test_registered():
    assert lookup("models.rnnt_asr") is RnntAsr


def test_words_of():
    assert words_of(["B_a", "b", "B_c", "d", "e"], [0, 1, 1, 4, 6]) == [("ab", 0, 1), ("cde", 1, 6)]
    assert words_of(["x", "B_y"], [2, 3]) == [("x", 2, 2), ("y", 3, 3)]  # a leading continuation starts a word
    assert words_of([], []) == []


@pytest.mark.parametrize("lid_hidden", [0, 6])
def test_chunking_invariance_with_tags_and_gap(tmp_path, lid_hidden):
    path = make_model(tmp_path, lid_hidden=lid_hidden)
    x = signal(2.4)
    tags = [
        (400, SPEECH, SpeechBoundary(True, "test")),
        (9000, SPEECH, SpeechBoundary(False, "test")),
        (10000, SPEECH, SpeechBoundary(True, "test")),
    ]
    gaps = [(15500, Gap(lost=None, cause=GapCause.SEQ_GAP))]

    def factory():
        return RnntAsr(model=path, beam=3, max_symbols_per_frame=2, tau_frames=10, s_th=0.5, partial_interval_s=0.09, pre_roll_s=0.02)

    ref = assert_chunking_invariant(factory, x, rate=RATE, sizes=("all", 1, 37, 80, 1000), tags=tags, gaps=gaps, check_tags=False)
    ev = asr_events(ref)
    finals = [e for e in ev if e.kind == "asr.final"]
    assert [e.span for e in finals] == [(400 - 160, 9000), (10000 - 160, 15500)]  # pre-roll 20 ms; the gap ends the second
    assert all(e.payload.text for e in finals), [e.payload for e in finals]
    assert len([e for e in ev if e.kind == "asr.partial"]) >= 2
    assert [e.kind for e in ev if e.kind != "asr.partial"] == ["asr.final", "lid.result", "asr.final", "lid.result"]


def test_utterances_follow_the_speech_tags(tmp_path):
    path = make_model(tmp_path, seed=1)
    x = signal(3.0, seed=1)
    tags = [
        (800, SPEECH, SpeechBoundary(True, "t")),
        (8800, SPEECH, SpeechBoundary(False, "t")),
        (8800, SPEECH, SpeechBoundary(True, "t")),  # end and start at one offset: a new utterance
        (16000, SPEECH, SpeechBoundary(False, "t")),
        (17000, SPEECH, SpeechBoundary(True, "t")),
        (17500, SPEECH, SpeechBoundary(False, "t")),  # 500 samples: shorter than one frame, no events
    ]
    r = run_block(RnntAsr(model=path, tau_frames=20, s_th=0.5, pre_roll_s=0.0), x, rate=RATE, sizes=500, tags=tags)
    ev = asr_events(r)
    finals = [e for e in ev if e.kind == "asr.final"]
    lids = [e for e in ev if e.kind == "lid.result"]
    assert [e.span for e in finals] == [(800, 8800), (8800, 16000)]
    assert [e.payload.utterance_id for e in finals] == [0, 1]
    for e in ev:  # nothing decoded outside speech
        assert 800 <= e.span[0] < e.span[1] <= 16000
    for f, lid in zip(finals, lids):
        p: AsrResult = f.payload
        q: LidResult = lid.payload
        assert p.final and lid.span == f.span and q.utterance_id == p.utterance_id
        assert p.lang == q.lang in ("en", "hi", "ta") and q.method == "lid"
        assert set(q.posteriors) == {"en", "hi", "ta"} and abs(sum(q.posteriors.values()) - 1) < 1e-5
        assert q.confidence == pytest.approx(q.posteriors[q.lang])
        assert q.posteriors[q.lang] == max(v for k, v in q.posteriors.items() if q.switched_off[k] is None)
        assert p.frames == (f.span[1] - f.span[0] - 760) // 240 + 1
        assert 1.0 <= p.t_avg <= 3.0 and 0 < p.confidence <= 1
        assert p.text == " ".join(w.text for w in p.words)
        for w in p.words:
            assert f.span[0] <= w.start < w.end <= f.span[1]
        assert [w.start for w in p.words] == sorted(w.start for w in p.words)
        assert all(set(w.text) <= set("abcdeklmnpqrstu") for w in p.words)
        parts = [e.payload for e in ev if e.kind == "asr.partial" and e.payload.utterance_id == p.utterance_id]
        assert [q.revision for q in parts] == list(range(len(parts))) and p.revision == len(parts)
        assert len({q.text for q in parts}) == len(parts)  # a partial only when the text changed


def test_final_equals_offline_decoding(tmp_path):
    path = make_model(tmp_path, seed=2)
    x = signal(2.0, seed=2)
    a, b = 1200, 14000
    tags = [(a, SPEECH, SpeechBoundary(True, "t")), (b, SPEECH, SpeechBoundary(False, "t"))]
    r = run_block(RnntAsr(model=path, beam=3, tau_frames=5, s_th=1.0, pre_roll_s=0.0), x, rate=RATE, sizes=333, tags=tags)
    final = next(e for e in r.events if e.kind == "asr.final").payload
    from streamkit.models.rnnt import load_model

    model, _ = load_model(path)
    with torch.no_grad():
        enc = model.encode(features(x[a:b])[None])[0]
    md = MultiDecoder(model, beam=3, tau=5, s_th=1.0)
    md.advance_frames(enc)
    res = md.result()
    assert final.lang == model.cfg.languages[res.lang] and final.frames == enc.shape[0]
    syms = SYMBOLS[final.lang]
    assert final.text == " ".join(w for w, _, _ in words_of([syms[t] for t in res.tokens], res.frames))
    assert final.score == pytest.approx(res.score, abs=1e-4)


def test_no_speech_tags_no_decoding(tmp_path):
    path = make_model(tmp_path)
    r = run_block(RnntAsr(model=path), signal(1.0), rate=RATE, sizes=800)
    assert asr_events(r) == []


def test_start_runs_the_whole_path_once_without_events(tmp_path, monkeypatch):
    """Warm-up: start() runs features, encoder and search on a dummy utterance (torch's first calls,
    any JIT), so the first live utterance does not pay for them; nothing of it is emitted."""
    path = make_model(tmp_path)
    calls = {"encoder": 0, "result": 0}
    enc, res = RnntModel.encoder_step, MultiDecoder.result

    def encoder_step(self, *a, **k):
        calls["encoder"] += 1
        return enc(self, *a, **k)

    def result(self, *a, **k):
        calls["result"] += 1
        return res(self, *a, **k)

    monkeypatch.setattr(RnntModel, "encoder_step", encoder_step)
    monkeypatch.setattr(MultiDecoder, "result", result)
    r = run_block(RnntAsr(model=path), signal(0.5), rate=RATE, sizes=800)  # no speech tags: nothing to decode
    assert calls["encoder"] >= 1 and calls["result"] >= 1
    assert asr_events(r) == []


def test_always_mode_cuts_long_utterances_and_gaps(tmp_path):
    path = make_model(tmp_path, variant="multisoftmax", symbols=False)
    x = signal(2.0)
    tags = [(3000, SPEECH, SpeechBoundary(False, "t"))]  # ignored in "always" mode
    r = run_block(
        RnntAsr(model=path, utterance_mode="always", max_utterance_s=0.6, beam=2),
        x, rate=RATE, sizes=1000, tags=tags, gaps=[(9000, Gap(lost=80, cause=GapCause.XRUN))],
    )  # fmt: skip
    finals = [e for e in r.events if e.kind == "asr.final"]
    n = round(0.6 * RATE / 240)  # 20 frames = 560 + 20 * 240 samples pushed
    spans = [e.span for e in finals]
    assert spans[0] == (0, 760 - 240 + n * 240) and spans[1][0] == spans[0][1]
    assert any(s[1] == 9000 for s in spans) and any(s[0] == 9000 for s in spans) and spans[-1][1] == 16000
    assert all(e.payload.frames <= n for e in finals)
    lids = [e.payload for e in r.events if e.kind == "lid.result"]
    assert all(q.method == "score" and q.posteriors == {} for q in lids)
    for p in (e.payload for e in finals):  # no symbol tables: every token is a word "<lang>i"
        assert all(w.text.startswith(f"<{p.lang}>") for w in p.words)


@pytest.mark.parametrize("variant", ["vanilla", "onehot", "lsp"])
def test_other_variants_run(tmp_path, variant):
    path = make_model(tmp_path, variant=variant, seed=3)
    x = signal(1.2, seed=3)
    tags = [(0, SPEECH, SpeechBoundary(True, "t"))]
    run = assert_chunking_invariant(lambda: RnntAsr(model=path, beam=2), x, rate=RATE, sizes=("all", 37), tags=tags, check_tags=False)
    finals = [e.payload for e in run.events if e.kind == "asr.final"]
    lids = [e.payload for e in run.events if e.kind == "lid.result"]
    assert len(finals) == 1 and finals[0].frames == (9600 - 760) // 240 + 1
    assert lids[0].method == ("tokens" if variant == "vanilla" else "score")


def test_fixed_language(tmp_path):
    path = make_model(tmp_path)
    tags = [(0, SPEECH, SpeechBoundary(True, "t"))]
    r = run_block(RnntAsr(model=path, languages=["ta"]), signal(1.0), rate=RATE, tags=tags)
    lid = next(e.payload for e in r.events if e.kind == "lid.result")
    assert lid.lang == "ta" and lid.method == "fixed" and lid.t_avg == 1.0 and lid.switched_off == {"ta": None}


def test_lid_select_last(tmp_path):
    """lid_select="last": lid.result says lid-last, its confidence is the last frame's posterior; chunking invariance holds."""
    path = make_model(tmp_path, lid_hidden=4)
    tags = [(0, SPEECH, SpeechBoundary(True, "t")), (12000, SPEECH, SpeechBoundary(False, "t"))]
    x = signal(2.0)
    r = run_block(RnntAsr(model=path, lid_select="last"), x, rate=RATE, tags=tags)
    lid = next(e.payload for e in r.events if e.kind == "lid.result")
    assert lid.method == "lid-last" and 0.0 < lid.confidence <= 1.0
    fin = next(e.payload for e in r.events if e.kind == "asr.final")
    assert fin.lang == lid.lang
    mean = run_block(RnntAsr(model=path, lid_select="mean"), x, rate=RATE, tags=tags)
    assert next(e.payload for e in mean.events if e.kind == "lid.result").method == "lid"
    assert_chunking_invariant(lambda: RnntAsr(model=path, lid_select="last"), x, rate=RATE, sizes=("all", 240, 1111), tags=tags, check_tags=False)
    with pytest.raises(ConfigError, match="lid_select"):
        RnntAsr(model=path, lid_select="max")
    # auto: last for a recurrent LID head, mean for the paper's linear one
    lin = make_model(tmp_path, name="lin.pt")
    for p, want in ((path, "lid-last"), (lin, "lid")):
        r = run_block(RnntAsr(model=p, lid_select="auto"), x, rate=RATE, tags=tags)
        assert next(e.payload for e in r.events if e.kind == "lid.result").method == want


def test_lid_score_last(tmp_path):
    """lid_score="last": the block's shutoff follows the latest frame's LID posterior; auto picks it for a recurrent head; chunking invariance holds."""
    path = make_model(tmp_path, lid_hidden=4, seed=2)  # a seed whose head's posteriors turn round at frame 3
    tags = [(0, SPEECH, SpeechBoundary(True, "t")), (12000, SPEECH, SpeechBoundary(False, "t"))]
    x = signal(2.0)

    def offs(model=path, **kw):
        r = run_block(RnntAsr(model=model, tau_frames=2, s_th=0.01, **kw), x, rate=RATE, tags=tags)
        return next(e.payload for e in r.events if e.kind == "lid.result").switched_off

    s_sum, s_last = offs(lid_score="sum"), offs(lid_score="last")
    assert s_sum == {"en": 3, "hi": 3, "ta": None} and s_last == {"en": None, "hi": 3, "ta": 3}
    assert offs(lid_score="auto") == s_last
    assert offs() == s_last  # the default is auto
    lin = make_model(tmp_path, name="lin.pt")
    assert offs(lin, lid_score="auto") == offs(lin, lid_score="sum")  # a linear head: auto is the paper's sum
    assert_chunking_invariant(lambda: RnntAsr(model=path, tau_frames=2, s_th=0.01, lid_score="last"), x, rate=RATE, sizes=("all", 240, 1111),
                              tags=tags, check_tags=False)  # fmt: skip
    with pytest.raises(ConfigError, match="lid_score"):
        RnntAsr(model=path, lid_score="mean")


def test_lid_prior(tmp_path):
    """lid_prior: the final's language is the survivor with the highest posterior x prior; "train" reads meta["train_hours"]."""
    hours = {"en": 1.0, "hi": 1.0, "ta": 1.0}
    path = make_model(tmp_path, lid_hidden=4, seed=2, meta={"train_hours": hours})
    tags = [(0, SPEECH, SpeechBoundary(True, "t")), (12000, SPEECH, SpeechBoundary(False, "t"))]
    x = signal(2.0)

    def lid(**kw):
        r = run_block(RnntAsr(model=path, lid_select="last", **kw), x, rate=RATE, tags=tags)
        return next(e.payload for e in r.events if e.kind == "lid.result")

    base = lid()
    post = base.confidence
    assert base.method == "lid-last" and 0 < post < 1
    same = lid(lid_prior="train")  # a uniform training mix changes nothing but the method's name
    assert same.method == "lid-last+prior" and same.lang == base.lang and same.confidence == pytest.approx(post)
    other = next(lg for lg in ("en", "hi", "ta") if lg != base.lang)
    w = {lg: (1e6 if lg == other else 1.0) for lg in ("en", "hi", "ta")}  # a prior strong enough to overturn the head
    flipped = lid(lid_prior=w)
    assert flipped.lang == other and flipped.method == "lid-last+prior"
    assert flipped.posteriors == base.posteriors  # the prior weighs the choice, not the reported posteriors
    assert lid(lid_prior={**w, other: 1.0}).lang == base.lang
    # errors: at construction (malformed) or at start (does not fit the model)
    for bad in ("uniform", {}, {"en": 0.0, "hi": 1.0, "ta": 1.0}, {"en": float("inf"), "hi": 1, "ta": 1}, {"en": True, "hi": 1, "ta": 1}):
        with pytest.raises(ConfigError, match="lid_prior"):
            RnntAsr(model=path, lid_prior=bad)
    with pytest.raises(ConfigError, match=r"missing \['ta'\], unknown \['fr'\]"):
        run_block(RnntAsr(model=path, lid_prior={"en": 1, "hi": 1, "fr": 1}), x, rate=RATE, tags=tags)
    bare = make_model(tmp_path, name="bare.pt")
    with pytest.raises(ConfigError, match="records no training hours"):
        run_block(RnntAsr(model=bare, lid_prior="train"), x, rate=RATE, tags=tags)


def test_parse_lid_prior():
    from streamkit.models.rnnt_stream import parse_lid_prior

    assert parse_lid_prior(None) is None and parse_lid_prior("none") is None and parse_lid_prior("train") == "train"
    assert parse_lid_prior("en=10, hi=10,ta=1.5") == {"en": 10.0, "hi": 10.0, "ta": 1.5}
    for bad in ("en", "en=0", "en=-1", "en=x", "=1", "en=1,en=2", "en=inf"):
        with pytest.raises(ValueError, match="language prior"):
            parse_lid_prior(bad)


def test_config_errors(tmp_path):
    with pytest.raises(ConfigError):
        RnntAsr(model=str(tmp_path / "x.pt"), utterance_mode="sometimes")
    with pytest.raises(ConfigError):
        RnntAsr(model=str(tmp_path / "x.pt"), beam=0)
    with pytest.raises(ConfigError):
        RnntAsr(model=str(tmp_path / "x.pt"), s_th=-1)
    with pytest.raises(ConfigError):
        RnntAsr(model=str(tmp_path / "x.pt"), languages="en")
    path = make_model(tmp_path)
    with pytest.raises(ConfigError):
        run_block(RnntAsr(model=path), signal(0.2), rate=16000)
    with pytest.raises(Exception, match="not in the model"):
        run_block(RnntAsr(model=path, languages=["fr"]), signal(0.2), rate=RATE)
