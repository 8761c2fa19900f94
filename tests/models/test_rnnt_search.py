"""Frame-synchronous RNN-T decoding: beam search vs exhaustive enumeration, greedy, LID shutoff rule, chunked == one shot."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from streamkit.models.rnnt import BLANK, RnntConfig, RnntModel
from streamkit.models.rnnt_search import BeamSearch, LidShutoff, MultiDecoder, batched_predict, log_add

torch.set_num_threads(1)


def tiny_model(variant: str = "lid", vocab=(3, 4, 3), seed: int = 0, dtype=torch.float64, blank_bias: float = 0.0) -> RnntModel:
    torch.manual_seed(seed)
    cfg = RnntConfig(
        variant=variant,
        languages=("en", "hi", "ta")[: len(vocab)],
        vocab_sizes=vocab,
        feat_dim=6,
        enc_layers=1,
        enc_hidden=8,
        pred_layers=1,
        pred_hidden=6,
        embed_dim=4,
        joint_dim=8,
    )
    m = RnntModel(cfg).to(dtype).eval()
    with torch.no_grad():
        for j in m.joints:
            j.out.weight.mul_(3.0)  # peakier distributions: fewer ties, distinct decisions
            j.out.bias[BLANK] += blank_bias
    return m


def pred_of(model: RnntModel, tokens: tuple[int, ...], lang) -> torch.Tensor:
    """Prediction network output after ``tokens`` (blank start), step by step."""
    out, st = model.predictor_step(torch.tensor([BLANK]), None, lang)
    for t in tokens:
        out, st = model.predictor_step(torch.tensor([t]), st, lang)
    return out[0]


def exhaustive(model: RnntModel, enc: torch.Tensor, lang, S: int) -> dict[tuple[int, ...], float]:
    """log P(y) summed over every alignment with <= S labels per frame, each frame ending with blank."""
    V = model.cfg.output_size(lang if lang is not None else 0)
    rows: dict[tuple[int, ...], list[list[float]]] = {}  # prefix -> log-probabilities at every frame (revisited many times)
    preds: dict[tuple[int, ...], tuple[torch.Tensor, object]] = {}  # prefix -> predictor (output, state), as pred_of's steps

    def pred(y: tuple[int, ...]) -> tuple[torch.Tensor, object]:
        if y not in preds:
            preds[y] = model.predictor_step(torch.tensor([y[-1] if y else BLANK]), pred(y[:-1])[1] if y else None, lang)
        return preds[y]

    def lp(t: int, y: tuple[int, ...]) -> list[float]:
        if y not in rows:
            p = pred(y)[0][0]
            rows[y] = model.joint(enc, p[None].expand(enc.shape[0], -1), lang).log_softmax(-1).double().tolist()
        return rows[y][t]

    per_frame = [seq for n in range(S + 1) for seq in itertools.product(range(1, V), repeat=n)]
    total: dict[tuple[int, ...], float] = {}
    with torch.no_grad():
        for choice in itertools.product(per_frame, repeat=enc.shape[0]):
            y: tuple[int, ...] = ()
            score = 0.0
            for t, labels in enumerate(choice):
                for v in labels:
                    score += lp(t, y)[v]
                    y = y + (v,)
                score += lp(t, y)[BLANK]
            total[y] = log_add(total.get(y, -math.inf), score)
    return total


def reference_greedy(model: RnntModel, enc: torch.Tensor, lang, S: int) -> tuple[tuple[int, ...], float]:
    y: tuple[int, ...] = ()
    score = 0.0
    with torch.no_grad():
        out, st = model.predictor_step(torch.tensor([BLANK]), None, lang)
        for t in range(enc.shape[0]):
            for k in range(S + 1):
                row = model.joint(enc[t][None], out, lang).log_softmax(-1)[0].double()
                a = int(torch.argmax(row))
                if k == S or a == BLANK:
                    score += float(row[BLANK])
                    break
                score += float(row[a])
                y = y + (a,)
                out, st = model.predictor_step(torch.tensor([a]), st, lang)
    return y, score


def encode(model: RnntModel, T: int, seed: int, lang=None) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(1, T, model.cfg.feat_dim, generator=g, dtype=torch.float64)
    with torch.no_grad():
        return model.encode(feats, lang)[0]


@pytest.mark.parametrize(("variant", "lang", "T", "S", "seed"), [
    ("lid", 0, 3, 2, 0), ("lid", 2, 4, 1, 1), ("multisoftmax", 0, 2, 3, 2), ("lsp", 2, 3, 2, 3), ("onehot", 1, 2, 2, 4),
])  # fmt: skip
def test_beam_equals_exhaustive(variant, lang, T, S, seed):
    vocab = (2, 2, 2) if variant == "onehot" else (3, 4, 3)  # onehot: blank + a union of 3 symbols
    model = tiny_model(variant, vocab=vocab, seed=seed)
    enc = encode(model, T, seed, lang)
    ref = exhaustive(model, enc, lang, S)
    bs = BeamSearch(model, lang, beam=len(ref) + 1, max_symbols_per_frame=S)
    for t in range(T):
        bs.advance(enc[t])
    got = {h.tokens: h.score for h in bs.hyps}
    assert set(got) == set(ref)  # every reachable sequence, each once (duplicates merged)
    for y, s in ref.items():
        assert got[y] == pytest.approx(s, abs=1e-9), y
    best = max(ref, key=lambda y: ref[y])
    assert bs.best.tokens == best


def test_small_beam_keeps_the_top_of_the_distribution():
    model = tiny_model("lid", seed=5, blank_bias=1.0)
    enc = encode(model, 3, 5)
    ref = exhaustive(model, enc, 1, 2)
    bs = BeamSearch(model, 1, beam=4, max_symbols_per_frame=2)
    for t in range(3):
        bs.advance(enc[t])
    assert len(bs.hyps) == 4
    assert [h.score for h in bs.hyps] == sorted((h.score for h in bs.hyps), reverse=True)
    for h in bs.hyps:  # pruned sums never exceed the exact total
        assert h.score <= ref[h.tokens] + 1e-12
    assert bs.best.tokens == max(ref, key=lambda y: ref[y])


@pytest.mark.parametrize(("variant", "lang"), [("lid", 1), ("vanilla", None), ("lsp", 0), ("onehot", 2)])
@pytest.mark.parametrize("S", [1, 3])
def test_greedy_equals_reference(variant, lang, S):
    model = tiny_model(variant, seed=7)
    enc = encode(model, 12, 7, lang)
    y, score = reference_greedy(model, enc, lang, S)
    bs = BeamSearch(model, lang, beam=1, max_symbols_per_frame=S)
    for t in range(12):
        bs.advance(enc[t])
    assert bs.best.tokens == y
    assert bs.best.score == pytest.approx(score, abs=1e-9)
    assert len(y) > 0  # the test means something
    assert len(bs.best.frames) == len(y) and list(bs.best.frames) == sorted(bs.best.frames)


def test_max_symbols_per_frame_is_respected():
    model = tiny_model("lid", seed=3, blank_bias=-6.0)  # labels dominate: every frame is full
    enc = encode(model, 5, 3)
    for beam in (1, 3):
        bs = BeamSearch(model, 0, beam=beam, max_symbols_per_frame=2)
        for t in range(5):
            bs.advance(enc[t])
        for h in bs.hyps:
            assert max(np.bincount(h.frames, minlength=5)) <= 2
        if beam == 1:
            assert len(bs.best.tokens) == 10  # greedy: the arg-max is a label until the forced blank


@pytest.mark.parametrize("variant", ["lid", "multisoftmax", "lsp", "onehot", "vanilla"])
def test_batched_predict_equals_per_row(variant):
    model = tiny_model(variant, seed=2)
    langs = [0, 2, 1, 0, 2]
    tokens = [1, 0, 2, 1, 1]
    g = torch.Generator().manual_seed(0)
    h = torch.randn(1, 5, 6, generator=g, dtype=torch.float64)
    c = torch.randn(1, 5, 6, generator=g, dtype=torch.float64)
    with torch.no_grad():
        out, hh, cc = batched_predict(model, tokens, langs, h, c)
        for j in range(5):
            lg = None if variant == "vanilla" else langs[j]
            o, (h1, c1) = model.predictor_step(torch.tensor([tokens[j]]), (h[:, j : j + 1], c[:, j : j + 1]), lg)
            assert torch.allclose(out[j], o[0], atol=1e-12) and torch.allclose(hh[:, j], h1[:, 0], atol=1e-12)


@pytest.mark.parametrize("variant", ["lid", "lsp", "onehot", "vanilla"])
def test_chunked_equals_one_shot(variant):
    model = tiny_model(variant, seed=11, blank_bias=1.5)
    T = 20
    g = torch.Generator().manual_seed(1)
    feats = torch.randn(1, T, 6, generator=g, dtype=torch.float64)
    L = model.cfg.n_lang
    with torch.no_grad():
        if variant == "onehot":
            full = model.encode(feats.expand(L, T, 6), torch.arange(L))  # (L, T, H)
        else:
            full = model.encode(feats)[0]
    one = MultiDecoder(model, beam=3, max_symbols_per_frame=2, tau=5, s_th=0.5)
    one.advance_frames(full)
    r1 = one.result()

    step = MultiDecoder(model, beam=3, max_symbols_per_frame=2, tau=5, s_th=0.5)
    st = None
    for a, b in ((0, 1), (1, 8), (8, 9), (9, 20)):
        with torch.no_grad():
            if variant == "onehot":
                enc, st = model.encoder_step(feats[:, a:b].expand(L, b - a, 6), st, torch.arange(L))
            else:
                enc, st = model.encoder_step(feats[:, a:b], st)
                enc = enc[0]
        step.advance_frames(enc)
    r2 = step.result()
    assert (r1.lang, r1.tokens, r1.frames, r1.off_frame) == (r2.lang, r2.tokens, r2.frames, r2.off_frame)
    assert r1.score == pytest.approx(r2.score, abs=1e-9)
    assert r1.frames_total == T and r1.t_avg == pytest.approx(r2.t_avg)


# ------------------------------------------------------------------------------------------------
# shutoff rule on scripted LID scores
# ------------------------------------------------------------------------------------------------


def logp(*p: float) -> np.ndarray:
    return np.log(np.asarray(p, dtype=np.float64))


def test_shutoff_waits_strictly_more_than_tau():
    sh = LidShutoff(3, tau=2, s_th=0.5)
    frame = logp(0.8, 0.15, 0.05)
    for _ in range(3):  # t = 0, 1, 2 == tau: nobody switched off, however far behind
        assert sh.update(frame).tolist() == [True, True, True]
    assert sh.update(frame).tolist() == [True, False, False]  # t = 3 > tau
    assert sh.off_frame == [None, 3, 3]


def test_shutoff_margin_is_strict_and_ties_survive():
    # after one frame: s = log(0.5), log(0.5) (tie for the best), and log(0.5) - 0.5 exactly
    a = math.log(0.5)
    sh = LidShutoff(3, tau=0, s_th=0.5)
    sh.update([a, a, a])  # t = 0: not > tau
    active = sh.update([0.0, 0.0, -0.5])  # t = 1: scores a, a, a - 0.5 == s_max - s_th: stays on
    assert active.tolist() == [True, True, True]
    active = sh.update([0.0, 0.0, -1e-9])  # now strictly below
    assert active.tolist() == [True, True, False]
    assert sh.off_frame == [None, None, 2]
    # the two tied best languages are never switched off, whatever the margin
    sh2 = LidShutoff(2, tau=0, s_th=0.0)
    for _ in range(10):
        assert sh2.update([math.log(0.5), math.log(0.5)]).tolist() == [True, True]


def test_infinite_margin_or_wait_never_switches_off():
    rng = np.random.default_rng(0)
    for tau, s_th in ((0, math.inf), (math.inf, 0.0), (math.inf, math.inf)):
        sh = LidShutoff(4, tau=tau, s_th=s_th)
        for _ in range(50):
            p = rng.dirichlet([0.1] * 4)
            assert sh.update(np.log(np.maximum(p, 1e-300))).all()
        assert sh.t_avg == 4.0 and sh.off_frame == [None] * 4


def test_best_language_never_switched_off():
    rng = np.random.default_rng(1)
    for _trial in range(20):
        sh = LidShutoff(4, tau=int(rng.integers(0, 5)), s_th=float(rng.uniform(0, 1)))
        for _ in range(40):
            before = sh.active.copy()
            s_new = sh.scores + 0  # scores after this frame, among the decoders on
            lp = np.log(rng.dirichlet([1.0] * 4))
            s_new = s_new + lp
            act = sh.update(lp)
            on = np.flatnonzero(before)
            assert act[on[np.argmax(s_new[on])]]  # the best of those still on survives
            assert act.any() and not (act & ~before).any()  # never switched back on


def test_t_avg_arithmetic():
    # 4 languages, tau = 1, s_th = 1, 10 frames. l0 always best; l3 falls behind fast (off at t = 2),
    # l2 slowly (off at t = 5), l1 stays within the margin.
    sh = LidShutoff(4, tau=1, s_th=1.0)
    rows = [[0.0, -0.05, -0.3, -2.0]] * 10
    for r in rows:
        sh.update(r)
    # s_2(t) = -0.3 (t+1) < -1 first at t = 3 (-1.2); t = 3 > tau -> off at frame 3
    # s_1(t) = -0.05 (t+1) < -1 first at t = 20: survives; s_3 = -4 at t = 1 (= tau: stays), off at t = 2
    assert sh.off_frame == [None, None, 3, 2]
    assert sh.decoded.tolist() == [10, 10, 3, 2]
    assert sh.t_avg == pytest.approx((10 + 10 + 3 + 2) / 10)  # eq. 2: 2.5
    assert sh.select() == 0  # highest average posterior among survivors


def test_selection_by_average_posterior_among_survivors():
    # l1 wins on cumulative log score, l0 on average posterior: selection follows the average
    # posterior (paper §6.3)
    sh = LidShutoff(2)
    sh.update(logp(0.9, 0.1))
    sh.update(logp(0.9, 0.1))
    sh.update(logp(0.001, 0.999))
    assert sh.scores[1] > sh.scores[0]
    assert sh.avg_posterior()[0] == pytest.approx((0.9 + 0.9 + 0.001) / 3)
    assert sh.select() == 0
    # a switched-off language is never selected, however good its average
    sh = LidShutoff(2, tau=0, s_th=0.1)
    sh.update(logp(0.99, 0.01))
    sh.update(logp(0.01, 0.99))  # t = 1: s_0 = log .99 + log .01 = -4.6, s_1 = -4.6; tie-ish
    sh.update(logp(0.01, 0.99))  # l0 now far behind: off
    assert sh.active.tolist() == [False, True]
    sh.update(logp(0.99, 0.01))
    assert sh.select() == 1


def test_selection_by_last_frame_posterior():
    """lid_select="last": the survivor with the highest posterior of the latest frame, not the mean."""
    sh = LidShutoff(3)
    for p in ((0.8, 0.1, 0.1), (0.8, 0.1, 0.1), (0.2, 0.7, 0.1)):
        sh.update(logp(*p))
    assert sh.select() == sh.select("mean") == 0
    assert sh.select("last") == 1
    assert sh.last_posterior() == pytest.approx([0.2, 0.7, 0.1])
    with pytest.raises(ValueError, match="rule"):
        sh.select("median")
    # a switched-off language is never chosen, however high its last posterior
    sh = LidShutoff(2, tau=0, s_th=0.5)
    for p in ((0.9, 0.1), (0.9, 0.1), (0.1, 0.9)):
        sh.update(logp(*p))
    assert sh.active.tolist() == [True, False] and sh.select("last") == 0
    sh.reset()
    assert sh.last_posterior().tolist() == [0.0, 0.0]


def test_shutoff_on_latest_frame_score():
    """score="last": the rule compares the latest frame's log posteriors, not their sums (same tau, margin, strictness)."""
    frames = [logp(0.9, 0.05, 0.05)] * 3 + [logp(0.3, 0.6, 0.1)]
    paper, last = LidShutoff(3, tau=2, s_th=0.5), LidShutoff(3, tau=2, s_th=0.5, score="last")
    for f in frames:
        paper.update(f)
        last.update(f)
    # t = 3 > tau. sums: l0 3 log .9 + log .3 = -1.52 leads, l1 = 3 log .05 + log .6 = -9.5 is off;
    # latest frame: l1 log .6 leads, l0 log .3 = log .6 - 0.69 is off, l2 log .1 too
    assert paper.active.tolist() == [True, False, False] and paper.off_frame == [None, 3, 3]
    assert last.active.tolist() == [False, True, False] and last.off_frame == [3, None, 3]
    assert last.scores == pytest.approx(frames[-1])
    assert last.t_avg == pytest.approx((3 + 4 + 3) / 4)
    # strict margin on the frame's own log posteriors: exactly s_th below stays on
    sh = LidShutoff(2, tau=0, s_th=0.5, score="last")
    sh.update([0.0, -5.0])  # t = 0: not > tau
    assert sh.update([0.0, -0.5]).tolist() == [True, True]
    assert sh.update([0.0, -0.5 - 1e-9]).tolist() == [True, False]
    # once off, a later good frame does not bring a decoder back
    assert sh.update([-3.0, 0.0]).tolist() == [True, False]
    with pytest.raises(ValueError, match="score"):
        LidShutoff(2, score="mean")


def test_select_with_language_prior():
    """prior: the choice maximises log posterior + log prior among the survivors; shutoff and posteriors unchanged."""
    frames = [logp(0.5, 0.3, 0.2), logp(0.45, 0.4, 0.15)]
    plain, bayes = LidShutoff(3), LidShutoff(3, prior=[1, 4, 1])  # any scale: normalised
    for f in frames:
        plain.update(f)
        bayes.update(f)
    assert bayes.log_prior == pytest.approx(np.log([1 / 6, 4 / 6, 1 / 6]))
    assert plain.select("last") == 0 and plain.select("mean") == 0
    assert bayes.select("last") == 1 and bayes.select("mean") == 1  # .45 x 1 < .40 x 4 and (.475 x 1 < .35 x 4)
    assert bayes.last_posterior().tolist() == plain.last_posterior().tolist() and bayes.t_avg == plain.t_avg
    # the rule compares s_l(t) + log prior_l: a strong prior keeps its language on; the scores stay the head's
    frames2 = [[np.log(0.9), np.log(0.1)]] * 2
    sh, bare = LidShutoff(2, tau=0, s_th=0.1, score="last", prior=[1, 1000]), LidShutoff(2, tau=0, s_th=0.1, score="last")
    for f in frames2:
        sh.update(f)
        bare.update(f)
    assert sh.active.tolist() == [False, True] and bare.active.tolist() == [True, False]
    assert sh.scores == pytest.approx(bare.scores) and sh.select("last") == 1
    # the prior counts once, not once per frame, with the cumulative statistic too:
    # (.6, .4) twice: sums + log(.2, .8) = (-2.63, -2.06): language 0 off at t = 1
    # (.7, .3) twice: (-2.32, -2.63) keeps both (a prior counted per frame would switch 0 off); a third frame switches 1 off
    for p, off in ((0.6, [1, None]), (0.7, [None, 2])):
        sh = LidShutoff(2, tau=0, s_th=0.5, prior=[1, 4])
        for _ in range(3):
            sh.update(logp(p, 1 - p))
        assert sh.off_frame == off
    # a switched-off language is never chosen, whatever its posterior and prior
    sh = LidShutoff(2, tau=0, s_th=0.1, score="last", prior=[1, 2])
    sh.update([np.log(0.9), np.log(0.1)])
    sh.update([np.log(0.9), np.log(0.1)])  # t = 1: log .9 + log 1/3 leads log .1 + log 2/3 by 1.5: off
    sh.update([np.log(0.45), np.log(0.55)])
    assert sh.active.tolist() == [True, False] and sh.select("last") == 0  # .55 x 2/3 > .45 x 1/3, but 1 is off
    for bad in ([1, 1], [1, 0, 1], [1, -1, 1], [1, float("nan"), 1], [1, float("inf"), 1]):
        with pytest.raises(ValueError, match="prior"):
            LidShutoff(3, prior=bad)


def test_multidecoder_shutoff_on_latest_frame():
    """MultiDecoder(lid_score="last") switches off by the recurrent head's latest posterior, frame by frame."""
    model, enc, post = recurrent_lid_case(9, 5)
    lp = post.log().numpy()
    for score in ("sum", "last"):
        ref = LidShutoff(model.cfg.n_lang, tau=1, s_th=0.05, score=score)
        for row in lp:
            ref.update(row)
        md = MultiDecoder(model, beam=2, tau=1, s_th=0.05, lid_score=score)
        md.reset()
        md.advance_frames(enc)
        r = md.result()
        assert list(r.off_frame) == ref.off_frame
        assert r.t_avg == pytest.approx(ref.t_avg)
    with pytest.raises(ValueError, match="score"):
        MultiDecoder(model, lid_score="max")


def recurrent_lid_case(seed: int, enc_seed: int) -> tuple[RnntModel, torch.Tensor, torch.Tensor]:
    """A tiny lid model with a 5-unit GRU LID head, 12 encoder frames, and the head's posteriors over them."""
    torch.manual_seed(seed)
    base = tiny_model("lid", seed=seed)
    cfg = RnntConfig.from_dict({**base.cfg.to_dict(), "lid_hidden": 5})
    model = RnntModel(cfg).to(torch.float64).eval()
    enc = encode(model, 12, enc_seed)
    with torch.no_grad():
        post = model.lid_logits(enc[None])[0].softmax(-1)
    return model, enc, post


def test_multidecoder_lid_select_last():
    """The recurrent head's last-frame posterior decides with lid_select="last"; the result carries both posteriors."""
    model, enc, post = recurrent_lid_case(9, 5)
    for rule, want in (("mean", post.mean(0)), ("last", post[-1])):
        md = MultiDecoder(model, beam=2, lid_select=rule)
        md.reset()
        md.advance_frames(enc)
        r = md.result()
        assert r.lang == int(want.argmax())
        assert r.lid_last == pytest.approx(tuple(post[-1].tolist()), abs=1e-9)
        assert r.lid_posterior == pytest.approx(tuple(post.mean(0).tolist()), abs=1e-9)
    # scripted posteriors: mean and last disagree
    model = tiny_model("lid", seed=4)
    enc = encode(model, 3, 4)
    script = [logp(0.8, 0.1, 0.1), logp(0.8, 0.1, 0.1), logp(0.1, 0.1, 0.8)]
    langs = []
    for rule in ("mean", "last"):
        md = MultiDecoder(model, beam=2, lid_select=rule)
        md.reset()
        for t in range(3):
            md.advance(enc[t], script[t])
        langs.append(md.result().lang)
    assert langs == [0, 2]
    with pytest.raises(ValueError, match="lid_select"):
        MultiDecoder(model, lid_select="first")
    ms = tiny_model("multisoftmax", seed=4)
    md = MultiDecoder(ms, beam=2, lid_select="last")  # no LID head: the rule is unused, the hypothesis score decides
    md.reset()
    md.advance_frames(encode(ms, 3, 4))
    assert md.result().lid_last is None and md.result().lid_posterior is None


def test_multidecoder_switched_off_decoder_freezes():
    model = tiny_model("lid", seed=4, blank_bias=-1.0)
    enc = encode(model, 8, 4)
    md = MultiDecoder(model, beam=2, max_symbols_per_frame=2, tau=2, s_th=0.5)
    script = [logp(0.6, 0.3, 0.1)] * 8
    masks = [md.advance(enc[t], script[t]).tolist() for t in range(8)]
    assert masks[:3] == [[True] * 3] * 3
    assert masks[3] == [True, False, False]
    assert [s.t for s in md.searches] == [8, 3, 3]  # decoders 1 and 2 decoded frames 0..2 only
    r = md.result()
    assert r.lang == 0 and r.frames_total == 8
    assert r.t_avg == pytest.approx((8 + 3 + 3) / 8)
    assert r.off_frame == (None, 3, 3)
    # the same with one decoder from the start (LID oracle): equal hypothesis for language 0
    solo = MultiDecoder(model, beam=2, max_symbols_per_frame=2, languages=[0])
    for t in range(8):
        solo.advance(enc[t], script[t])
    assert solo.result().tokens == r.tokens and solo.result().score == pytest.approx(r.score)
    assert solo.result().t_avg == 1.0


def test_multidecoder_uses_the_lid_head():
    model = tiny_model("lid", seed=6)
    with torch.no_grad():
        model.lid_head.bias.copy_(torch.tensor([0.0, 8.0, 0.0], dtype=torch.float64))  # language 1 dominates
    enc = encode(model, 10, 6)
    md = MultiDecoder(model, beam=2, tau=3, s_th=0.5)
    md.advance_frames(enc)
    r = md.result()
    assert r.lang == 1 and r.off_frame[1] is None and r.off_frame[0] == 4 and r.off_frame[2] == 4
    assert r.lid_posterior is not None and r.lid_posterior[1] > 0.9
    assert 0.0 < r.confidence <= 1.0


def test_multidecoder_runs_a_recurrent_lid_head_frame_by_frame():
    """With lid_hidden > 0 the decoder's LID sums equal the head over the whole utterance, and reset() restarts its state."""
    model, enc, post = recurrent_lid_case(8, 3)
    md = MultiDecoder(model, beam=2)
    for _ in range(2):  # the second utterance starts from a fresh LID state: same result
        md.reset()
        md.advance_frames(enc)
        r = md.result()
        assert r.lid_posterior == pytest.approx(tuple(post.mean(0).tolist()), abs=1e-9)
        assert r.lang == int(post.mean(0).argmax())


def test_invalid_arguments():
    model = tiny_model("lid")
    with pytest.raises(ValueError):
        BeamSearch(model, 0, beam=0)
    with pytest.raises(ValueError):
        BeamSearch(model, 0, max_symbols_per_frame=0)
    with pytest.raises(ValueError):
        BeamSearch(model, None)
    with pytest.raises(ValueError):
        LidShutoff(3, s_th=-1)
    with pytest.raises(ValueError):
        MultiDecoder(model, languages=[5])
    with pytest.raises(ValueError):
        MultiDecoder(tiny_model("lsp"), use_lid=True)
