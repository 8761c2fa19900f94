"""Frame-synchronous RNN-T decoding for the multilingual models of :mod:`streamkit.models.rnnt`.

Pure decoding: no block plumbing, no features. The streaming block (``rnnt_stream.py``) runs the
encoder and hands each 30 ms encoder frame to a :class:`MultiDecoder`.

Beam search (one per language, :class:`BeamSearch`), advanced one encoder frame at a time
--------------------------------------------------------------------------------------------
A hypothesis is a label sequence ``y`` with ``score = log P(y | frames so far)`` summed over all
alignments that emit at most ``max_symbols_per_frame`` (S) labels per frame, every frame ending
with one blank (the alignments the RNN-T loss sums over, with the per-frame bound). One frame:

* level 0 = the current beam; for ``k = 0..S`` the joint of every hypothesis of level ``k`` gives
  ``log P(blank)`` and ``log P(v)``:
  - ``y`` with ``score + log P(blank)`` goes to the frame's output set ``B``; a sequence reached
    at several levels (different numbers of labels in this frame) is **merged by log-add**;
  - if ``k < S``: the ``beam`` best extensions ``y + v`` (over all hypotheses of the level and all
    labels ``v``) form level ``k + 1`` (extensions of distinct sequences are distinct, so a level
    never holds duplicates); an extension scoring below the ``beam``-th best entry of ``B`` is
    dropped (it cannot enter the beam on its own; this is the only approximation besides the beam
    itself);
* the new beam is the ``beam`` best of ``B``.

With ``beam`` at least the number of label sequences reachable, nothing is pruned and the scores
are the exact total probabilities (tested against exhaustive enumeration). ``beam == 1`` is plain
greedy decoding instead: at most S times per frame take the arg-max symbol, stop at blank (at the
S-th symbol the blank is forced); the score is that single path's log-probability.

With a lexicon (:class:`~streamkit.models.rnnt_lexicon.Lexicon`, one per search) the joint's
log-probabilities of each hypothesis get the trie's additive mask first (labels that leave the word
list are ``-inf``; a word penalty on word starts), each hypothesis carries its trie node, and
:attr:`BeamSearch.best` is the best hypothesis that ends between words. The scores are not
renormalised, so with a wide beam they are the exact scores above, restricted to the sequences the
lexicon allows (tested against exhaustive enumeration).

Batching
--------
:class:`MultiDecoder` runs one search per decoded language in lockstep and does **one** prediction
network call per level for all hypotheses of all active languages (at most S calls per frame;
level 0 reuses the cached outputs): ``vanilla`` and ``onehot`` rows go through
``predictor_step`` in one call; ``multisoftmax``/``lid`` embed each row with its language's
embedding and run the shared prediction LSTM once over all rows; ``lsp`` (a prediction LSTM per
language) goes through ``predictor_step`` with one language per row, which groups rows by
language. The joint is language-specific for the multi-softmax variants, so it runs once per
active language per level (all of that language's hypotheses in one call).

LID-driven decoder shutoff (paper §6.3)
---------------------------------------
:class:`LidShutoff`: with ``P_t(l)`` the LID posterior of frame ``t`` (0-based, as eq. 1),
``s_l(t) = sum_{t' <= t} log P_t'(l)``. Before frame ``t`` is decoded, decoder ``l`` is switched
off (for the rest of the utterance) when ``t > tau`` **and** ``s_l(t) < s_max(t) - s_th``, where
``s_max(t)`` is the highest score among the decoders still on (so the best surviving language is
never switched off and at least one decoder always survives). ``t == tau`` is not enough (strictly
greater), the comparison is strict (a decoder exactly ``s_th`` below the best stays on), and
``s_th = inf`` or ``tau = inf`` never switches anything off. All decoders therefore decode frames
``0..tau``. ``T_avg`` (eq. 2) = ``sum_l t_l^off / T`` over the decoders started, with ``t_l^off``
the number of frames decoder ``l`` decoded (``T`` for a survivor). The final hypothesis is the
surviving decoder's with the highest average LID posterior ``mean_t P_t(l)`` (ties: the lower
language index; ``lid_select="mean"``, the paper's rule). ``lid_select="last"`` uses the last
frame's posterior ``P_T(l)`` instead: a recurrent LID head (``lid_hidden > 0``) has then seen the
whole utterance, while the mean gives the early, still uninformed frames the same weight (on our
dev and test sets the last-frame rule identifies 1-2 points more utterances; docs/asr.md).

The shutoff statistic has the same choice (``lid_score``): ``"sum"`` is the paper's eq. 1 above;
``"last"`` uses ``s_l(t) = log P_t(l)``, the latest frame's log posterior. Eq. 1 treats the
frames as independent evidence, which is right for a frame-wise head; a recurrent head's
``P_t(l)`` is already ``P(l | x_0..t)``, so summing it counts the early frames' evidence again at
every later frame and lets the uninformed first frames (at chance for the first 0.3 s on our dev set)
weigh as much as the informed ones at the decision time ``tau``. Everything else (``tau``,
``s_th``, strictness, the best survivor never switched off, T_avg) is the same.
Without an LID head (``vanilla``, ``onehot``, ``multisoftmax``, ``lsp``) nothing is switched off
and the language whose best hypothesis has the highest log-probability is chosen.

State is explicit: the hypotheses (tokens, emission frames, score, prediction output and LSTM
state), the LID sums and the frame counter live in the decoder objects, so frames may arrive in
any grouping (tested: frame by frame equals one shot).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from streamkit.models.rnnt import BLANK, RnntModel
from streamkit.models.rnnt_lexicon import Lexicon

__all__ = [
    "Hyp",
    "BeamSearch",
    "LidShutoff",
    "MultiDecoder",
    "DecodeResult",
    "advance_searches",
    "batched_predict",
    "log_add",
    "LID_SELECTS",
    "LID_SCORES",
]

INF = math.inf
LID_SELECTS = ("mean", "last")  #: end-of-utterance language choice: mean posterior (paper) or last frame's
LID_SCORES = ("sum", "last")  #: shutoff statistic: cumulative log posterior (paper eq. 1) or the latest frame's


def log_add(a: float, b: float) -> float:
    """``log(exp(a) + exp(b))`` for Python floats (``-inf`` aware)."""
    if a == -INF:
        return b
    if b == -INF:
        return a
    m = a if a > b else b
    return m + math.log1p(math.exp(-abs(a - b)))


@dataclass
class Hyp:
    """One hypothesis of one language.

    Attributes:
        tokens: emitted symbols (language-local ids; union ids for vanilla/onehot).
        frames: the frame (decoder time, 0-based since reset) at which each token was emitted; of
            the best-scoring alignment when merged.
        score: log-probability summed over the merged alignments.
        pred: the joint's projection of the prediction network output after the last token,
            ``joint.pred_proj(out)`` (joint_dim,): computed once per hypothesis, not once per frame.
        h, c: prediction LSTM state, each (pred_layers, pred_hidden).
        best: log-probability of the best single alignment merged into this hypothesis (decides
            whose ``frames`` are kept).
        node: its node in the search's :class:`~streamkit.models.rnnt_lexicon.Lexicon` (0 without one).
    """

    tokens: tuple[int, ...]
    frames: tuple[int, ...]
    score: float
    pred: torch.Tensor
    h: torch.Tensor
    c: torch.Tensor
    best: float = field(default=-INF)
    node: int = 0


def _sort_key(h: Hyp) -> tuple[float, tuple[int, ...]]:
    return (-h.score, h.tokens)


def batched_predict(
    model: RnntModel, tokens: Sequence[int], langs: Sequence[int | None], h: torch.Tensor | None, c: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One prediction-network step for rows of possibly different languages, in as few calls as the variant allows.

    ``h``/``c`` (pred_layers, B, pred_hidden) or None (zero state). Returns ``(out (B, H), h, c)``.
    """
    cfg = model.cfg
    dev = model.feat_mean.device
    tok = torch.as_tensor(list(tokens), dtype=torch.long, device=dev)
    state = None if h is None or c is None else (h, c)
    if cfg.variant == "vanilla":
        out, st = model.predictor_step(tok, state, None)
        return out, st[0], st[1]
    lv = torch.as_tensor([int(x) for x in langs], dtype=torch.long, device=dev)  # type: ignore[arg-type]
    if cfg.variant in ("onehot", "lsp"):
        out, st = model.predictor_step(tok, state, lv)
        return out, st[0], st[1]
    # multisoftmax / lid: language-specific embeddings, one shared LSTM call for all rows
    x = torch.empty((tok.shape[0], cfg.embed_dim), dtype=model.embed[0].weight.dtype, device=dev)
    for lg in sorted(set(lv.tolist())):
        idx = (lv == lg).nonzero().squeeze(1)
        x[idx] = model.embed[int(lg)](tok[idx])
    o, (hh, cc) = model.run_predictor(model.predictors[0], x[:, None, :], state)
    return o[:, 0], hh, cc


class BeamSearch:
    """Frame-synchronous beam search of one language (see the module docstring).

    Args:
        model: the RNN-T model (eval mode).
        lang: language index (None for ``vanilla``: the union vocabulary).
        beam: beam width (1: greedy).
        max_symbols_per_frame: at most this many labels per encoder frame (>= 1).
        lexicon: restrict the hypotheses to word sequences of this trie (``rnnt_lexicon.py``; its
            ``n_symbols`` must be the joint's width for ``lang``).
    """

    def __init__(self, model: RnntModel, lang: int | None, *, beam: int = 4, max_symbols_per_frame: int = 3, lexicon: Lexicon | None = None) -> None:
        if int(beam) < 1:
            raise ValueError(f"beam must be >= 1, got {beam}")
        if int(max_symbols_per_frame) < 1:
            raise ValueError(f"max_symbols_per_frame must be >= 1, got {max_symbols_per_frame}")
        if lang is None and model.cfg.variant != "vanilla":
            raise ValueError(f"variant {model.cfg.variant!r} needs a language per search")
        self.model = model
        self.lang = None if lang is None else int(lang)
        self.beam = int(beam)
        self.max_symbols = int(max_symbols_per_frame)
        if lexicon is not None:
            width = model.cfg.output_size(0 if self.lang is None else self.lang)
            if lexicon.n_symbols != width:
                raise ValueError(f"lexicon has {lexicon.n_symbols} symbols, the joint of language {self.lang} {width}")
        self.lexicon = lexicon
        self.hyps: list[Hyp] = []
        self.t = 0
        self.reset()

    def reset(self) -> None:
        """Start a new utterance: one empty hypothesis (blank as the start symbol), frame 0."""
        with torch.no_grad():
            out, h, c = batched_predict(self.model, [BLANK], [self.lang], None, None)
            pp = self.model.joint_net(self.lang).pred_proj(out)
        self.hyps = [Hyp((), (), 0.0, pp[0], h[:, 0], c[:, 0], 0.0)]
        self.t = 0

    def advance(self, enc_t: torch.Tensor) -> None:
        """Decode one encoder frame ``enc_t`` (enc_hidden,)."""
        advance_searches(self.model, [self], [enc_t])

    @property
    def best(self) -> Hyp:
        """The best hypothesis; with a lexicon the best *complete* one (ending between words), if the
        beam holds one."""
        if self.lexicon is not None:
            for h in self.hyps:
                if self.lexicon.complete(h.node):
                    return h
        return self.hyps[0]


def advance_searches(model: RnntModel, searches: Sequence[BeamSearch], encs: Sequence[torch.Tensor]) -> None:
    """Advance every search by one frame (its own encoder row), batching the prediction network."""
    if not searches:
        return
    with torch.no_grad():
        _advance(model, searches, encs)


def _advance(model: RnntModel, searches: Sequence[BeamSearch], encs: Sequence[torch.Tensor]) -> None:
    S = max(s.max_symbols for s in searches)
    joints = [model.joint_net(s.lang) for s in searches]
    encs_p = [j.enc_proj(e.reshape(1, -1)) for j, e in zip(joints, encs)]  # each frame projected once, for every symbol level
    level: list[list[Hyp]] = [list(s.hyps) for s in searches]
    outs: list[dict[tuple[int, ...], Hyp]] = [{} for _ in searches]
    for k in range(S + 1):
        new_rows: list[tuple[int, Hyp, int, float, float]] = []  # (search, parent, token, score, best)
        for i, s in enumerate(searches):
            hyps = level[i]
            if not hyps:
                continue
            preds = torch.stack([hy.pred for hy in hyps])
            lp = joints[i].combine(encs_p[i], preds).log_softmax(-1).to(torch.float64)  # (n, V)
            if s.lexicon is not None:
                lp = lp + s.lexicon.mask([hy.node for hy in hyps])
            B = outs[i]
            last = k >= s.max_symbols
            if s.beam == 1:  # greedy: the single path's arg-max
                hy = hyps[0]
                row = lp[0]
                a = int(torch.argmax(row))
                if last or a == BLANK:
                    sc = hy.score + float(row[BLANK])
                    B[hy.tokens] = Hyp(hy.tokens, hy.frames, sc, hy.pred, hy.h, hy.c, sc, hy.node)
                else:
                    new_rows.append((i, hy, a, hy.score + float(row[a]), hy.best + float(row[a])))
                continue
            blank = lp[:, BLANK].tolist()
            for hy, lb in zip(hyps, blank):
                sc = hy.score + lb
                bs = hy.best + lb
                old = B.get(hy.tokens)
                if old is None:
                    B[hy.tokens] = Hyp(hy.tokens, hy.frames, sc, hy.pred, hy.h, hy.c, bs, hy.node)
                else:
                    keep = old if old.best >= bs else hy
                    B[hy.tokens] = Hyp(hy.tokens, keep.frames, log_add(old.score, sc), keep.pred, keep.h, keep.c, max(old.best, bs), hy.node)
            if last:
                continue
            V = lp.shape[1]
            if V < 2:
                continue
            base = torch.tensor([hy.score for hy in hyps], dtype=torch.float64)
            cand = (base[:, None] + lp[:, 1:]).reshape(-1)
            n = min(s.beam, cand.shape[0])
            vals, idx = torch.topk(cand, n)
            floor = -INF
            if len(B) >= s.beam:
                floor = sorted((h.score for h in B.values()), reverse=True)[s.beam - 1]
            for v, j in zip(vals.tolist(), idx.tolist()):
                if v < floor or v == -INF:
                    continue
                hy = hyps[j // (V - 1)]
                tok = j % (V - 1) + 1
                new_rows.append((i, hy, tok, v, hy.best + float(lp[j // (V - 1), tok])))
        if not new_rows:
            break
        h = torch.stack([r[1].h for r in new_rows], dim=1)
        c = torch.stack([r[1].c for r in new_rows], dim=1)
        out, hh, cc = batched_predict(model, [r[2] for r in new_rows], [searches[r[0]].lang for r in new_rows], h, c)
        # project each search's new rows through its joint (the rows come grouped by search)
        pp = torch.empty((out.shape[0], model.cfg.joint_dim), dtype=out.dtype, device=out.device)
        a = 0
        while a < len(new_rows):
            i = new_rows[a][0]
            b = a + 1
            while b < len(new_rows) and new_rows[b][0] == i:
                b += 1
            pp[a:b] = joints[i].pred_proj(out[a:b])
            a = b
        level = [[] for _ in searches]
        for j, (i, parent, tok, sc, bs) in enumerate(new_rows):
            s = searches[i]
            node = 0 if s.lexicon is None else s.lexicon.step(parent.node, tok)
            level[i].append(Hyp(parent.tokens + (tok,), parent.frames + (s.t,), sc, pp[j], hh[:, j], cc[:, j], bs, node))
    for i, s in enumerate(searches):
        s.hyps = sorted(outs[i].values(), key=_sort_key)[: s.beam]
        s.t += 1


# ------------------------------------------------------------------------------------------------
# LID shutoff
# ------------------------------------------------------------------------------------------------


class LidShutoff:
    """Cumulative LID scores, the paper's §6.3 switch-off rule and the T_avg bookkeeping of eq. 2.

    Args:
        n_lang: number of languages of the LID posteriors.
        tau: minimum wait in frames (``inf``: never switch off).
        s_th: score margin, >= 0 (``inf``: never switch off).
        started: the languages whose decoders run (default all); the others never count.
        score: the statistic compared, ``"sum"`` (cumulative log posterior, paper eq. 1) or
            ``"last"`` (the latest frame's log posterior, for a recurrent LID head).
        prior: language prior probabilities (any positive scale; None: uniform): Bayes' rule for
            a head trained language-balanced and deployed where the languages are not. The rule
            compares ``s_l(t) + log prior_l`` (the prior counted once, whatever the statistic), and
            :meth:`select` multiplies the posteriors by ``prior / prior.sum()``; ``scores`` and the
            posteriors stay the head's own.
    """

    def __init__(
        self, n_lang: int, *, tau: float = INF, s_th: float = INF, started: Sequence[int] | None = None, score: str = "sum",
        prior: Sequence[float] | None = None,
    ) -> None:  # fmt: skip
        if n_lang < 1:
            raise ValueError(f"n_lang must be >= 1, got {n_lang}")
        if not (tau >= 0):
            raise ValueError(f"tau must be >= 0 (frames) or inf, got {tau}")
        if not (s_th >= 0):
            raise ValueError(f"s_th must be >= 0 or inf, got {s_th}")
        if score not in LID_SCORES:
            raise ValueError(f"score must be one of {LID_SCORES}, got {score!r}")
        self.score = score
        self.n_lang = int(n_lang)
        self.tau = float(tau)
        self.s_th = float(s_th)
        st = list(range(n_lang)) if started is None else sorted({int(x) for x in started})
        if not st or st[0] < 0 or st[-1] >= n_lang:
            raise ValueError(f"started languages must be a non-empty subset of 0..{n_lang - 1}, got {started}")
        self.started = st
        self.log_prior: np.ndarray | None = None
        if prior is not None:
            pr = np.asarray(prior, dtype=np.float64).reshape(-1)
            if pr.shape[0] != self.n_lang or not np.all(np.isfinite(pr)) or not np.all(pr > 0):
                raise ValueError(f"prior must hold {self.n_lang} positive finite numbers, got {list(prior)}")
            self.log_prior = np.log(pr / pr.sum())
        self.reset()

    def reset(self) -> None:
        self.t = 0  # frames seen (the next frame's 0-based index)
        self.scores = np.zeros(self.n_lang)  # s_l(t-1) (score="last": log P_{t-1}(l))
        self.post_sum = np.zeros(self.n_lang)  # sum_t P_t(l)
        self.post_last = np.zeros(self.n_lang)  # P_t(l) of the latest frame
        self.active = np.zeros(self.n_lang, dtype=bool)
        self.active[self.started] = True
        self.off_frame: list[int | None] = [None] * self.n_lang  # frame at which switched off
        self.decoded = np.zeros(self.n_lang, dtype=np.int64)  # frames decoded per language

    def update(self, log_post: Sequence[float] | np.ndarray | torch.Tensor) -> np.ndarray:
        """Frame ``t``: add its log posteriors (eq. 1), apply the rule, count the frame; returns the mask of decoders that decode it."""
        lp = np.asarray(torch.as_tensor(log_post, dtype=torch.float64).cpu(), dtype=np.float64).reshape(-1)
        if lp.shape[0] != self.n_lang:
            raise ValueError(f"expected {self.n_lang} LID log-posteriors, got {lp.shape[0]}")
        t = self.t
        self.scores = self.scores + lp if self.score == "sum" else lp
        self.post_last = np.exp(lp)
        self.post_sum = self.post_sum + self.post_last
        if t > self.tau and self.s_th < INF and self.active.any():
            on = np.flatnonzero(self.active)
            sc = self.scores if self.log_prior is None else self.scores + self.log_prior
            s_max = float(np.max(sc[on]))
            for l in on:  # noqa: E741
                if sc[l] < s_max - self.s_th:
                    self.active[l] = False
                    self.off_frame[l] = t
        self.decoded += self.active
        self.t = t + 1
        return self.active.copy()

    def switch_off_all(self) -> None:
        """Stop every decoder still running from the next frame on (the open-set ``unknown``
        answer); their ``off_frame`` is the next frame's index."""
        for l in np.flatnonzero(self.active):  # noqa: E741
            self.active[l] = False
            self.off_frame[l] = self.t

    def count_frame(self) -> np.ndarray:
        """A frame without LID (no head): every started decoder decodes it."""
        self.decoded += self.active
        self.t += 1
        return self.active.copy()

    @property
    def t_avg(self) -> float:
        """Eq. 2: ``sum_l t_l^off / T`` (0 before any frame)."""
        return float(self.decoded.sum()) / self.t if self.t else 0.0

    def avg_posterior(self) -> np.ndarray:
        """``mean_t P_t(l)`` per language (zeros before any frame)."""
        return self.post_sum / self.t if self.t else np.zeros(self.n_lang)

    def last_posterior(self) -> np.ndarray:
        """``P_t(l)`` of the latest frame (zeros before any frame)."""
        return self.post_last.copy()

    def select(self, rule: str = "mean") -> int:
        """The surviving language with the highest average (``rule="mean"``) or last-frame (``"last"``) LID posterior (ties: lowest index),
        times the prior when there is one."""
        if rule not in LID_SELECTS:
            raise ValueError(f"rule must be one of {LID_SELECTS}, got {rule!r}")
        on = np.flatnonzero(self.active)
        if on.size == 0:  # every decoder switched off (the open-set rule): the best started language
            on = np.asarray(self.started)
        post = self.avg_posterior() if rule == "mean" else self.post_last
        if self.log_prior is None:
            return int(on[int(np.argmax(post[on]))])
        with np.errstate(divide="ignore"):
            return int(on[int(np.argmax(np.log(post[on]) + self.log_prior[on]))])


# ------------------------------------------------------------------------------------------------
# several languages in lockstep
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecodeResult:
    """The chosen hypothesis of a :class:`MultiDecoder`.

    Attributes:
        lang: language index (for ``vanilla``: the language most of the tokens belong to, -1 if
            none).
        tokens: language-local symbols (union ids for ``vanilla``/``onehot``).
        frames: emission frame of each token.
        score: its log-probability.
        confidence: its posterior within its beam ``exp(score - logsumexp(beam scores))`` (with a
            lexicon: among the beam's hypotheses that end between words).
        frames_total: frames decoded (T).
        t_avg: eq. 2.
        lid_posterior: average LID posterior per language (None without an LID head).
        off_frame: per language the frame at which its decoder was switched off (None: survived
            or never started).
        lang_scores: per decoded language the best hypothesis' log-probability.
        lid_last: the last frame's LID posterior per language (None without an LID head).
    """

    lang: int
    tokens: tuple[int, ...]
    frames: tuple[int, ...]
    score: float
    confidence: float
    frames_total: int
    t_avg: float
    lid_posterior: tuple[float, ...] | None
    off_frame: tuple[int | None, ...]
    lang_scores: dict[int, float]
    lid_last: tuple[float, ...] | None = None


class MultiDecoder:
    """One :class:`BeamSearch` per decoded language, in lockstep, with LID-driven shutoff.

    Args:
        model: the RNN-T model (eval mode).
        beam, max_symbols_per_frame: of every search.
        tau, s_th: the paper's §6.3 shutoff parameters (frames; log-probability margin).
        languages: language indices to decode (default: all; ignored by ``vanilla``, which has one
            language-free search). One language = the LID-oracle / known-language mode.
        use_lid: use the model's LID head (default: when it has one).
        lid_select: the end-of-utterance language choice among the survivors, ``"mean"`` (highest
            average LID posterior, the paper) or ``"last"`` (highest posterior of the last frame).
        lexicons: word-list tries (:func:`streamkit.models.rnnt_lexicon.model_lexicons`) keyed by
            language index (``None`` for ``vanilla``'s single search); a language without one
            decodes unconstrained.
        lid_score: the shutoff statistic, ``"sum"`` (paper eq. 1) or ``"last"`` (see the module
            docstring).
        lid_prior: language prior probabilities, one per model language, for the shutoff and the final choice
            (see :class:`LidShutoff`); None: uniform (the paper).
    """

    def __init__(
        self,
        model: RnntModel,
        *,
        beam: int = 4,
        max_symbols_per_frame: int = 3,
        tau: float = INF,
        s_th: float = INF,
        languages: Sequence[int] | None = None,
        use_lid: bool | None = None,
        lid_select: str = "mean",
        lexicons: Mapping[int | None, Lexicon] | None = None,
        lid_score: str = "sum",
        lid_prior: Sequence[float] | None = None,
    ) -> None:
        cfg = model.cfg
        if lid_select not in LID_SELECTS:
            raise ValueError(f"lid_select must be one of {LID_SELECTS}, got {lid_select!r}")
        self.lid_select = lid_select
        self.model = model
        self.use_lid = cfg.has_lid if use_lid is None else bool(use_lid)
        if self.use_lid and not cfg.has_lid:
            raise ValueError(f"variant {cfg.variant!r} has no LID head")
        if cfg.variant == "vanilla":
            self.langs: list[int | None] = [None]
        else:
            ls = list(range(cfg.n_lang)) if languages is None else sorted({int(x) for x in languages})
            if not ls or ls[0] < 0 or ls[-1] >= cfg.n_lang:
                raise ValueError(f"languages must be a non-empty subset of 0..{cfg.n_lang - 1}, got {languages}")
            self.langs = list(ls)
        lex = dict(lexicons or {})
        self.searches = [BeamSearch(model, lg, beam=beam, max_symbols_per_frame=max_symbols_per_frame, lexicon=lex.get(lg)) for lg in self.langs]
        started = [0] if cfg.variant == "vanilla" else [int(x) for x in self.langs]  # type: ignore[arg-type]
        self.lid = LidShutoff(1 if cfg.variant == "vanilla" else cfg.n_lang, tau=tau, s_th=s_th, started=started, score=lid_score,
                              prior=lid_prior if cfg.variant != "vanilla" else None)  # fmt: skip
        self.beam = int(beam)
        self.max_symbols = int(max_symbols_per_frame)
        self.lid_state: torch.Tensor | None = None  # the recurrent LID head's state (lid_hidden > 0)

    def reset(self) -> None:
        """New utterance: fresh hypotheses and LID sums (one batched predictor call)."""
        with torch.no_grad():
            out, h, c = batched_predict(self.model, [BLANK] * len(self.searches), self.langs, None, None)
            pp = [self.model.joint_net(s.lang).pred_proj(out[j]) for j, s in enumerate(self.searches)]
        for j, s in enumerate(self.searches):
            s.hyps = [Hyp((), (), 0.0, pp[j], h[:, j], c[:, j], 0.0)]
            s.t = 0
        self.lid.reset()
        self.lid_state = None

    @property
    def t(self) -> int:
        return self.lid.t

    def _slot(self, s: BeamSearch) -> int:
        return 0 if s.lang is None else s.lang

    def advance(self, enc_t: torch.Tensor, lid_log_post: Sequence[float] | torch.Tensor | None = None) -> np.ndarray:
        """Decode one frame. ``enc_t``: (enc_hidden,) shared, or (n_lang, enc_hidden) one row per language (``onehot``).

        ``lid_log_post`` overrides the LID head's log-posteriors (scripted tests). Returns the mask of
        decoders that decoded the frame.
        """
        enc_t = torch.as_tensor(enc_t)
        per_lang = enc_t.dim() == 2 and enc_t.shape[0] > 1
        if lid_log_post is not None:
            active = self.lid.update(lid_log_post)
        elif self.use_lid:
            with torch.no_grad():
                shared = enc_t.reshape(-1) if not per_lang else enc_t[0]
                logits, self.lid_state = self.model.lid_step(shared[None, None], self.lid_state)
                active = self.lid.update(logits[0, 0].log_softmax(-1))
        else:
            active = self.lid.count_frame()
        run = [s for s in self.searches if active[self._slot(s)]]
        encs = [(enc_t[s.lang] if per_lang and s.lang is not None else enc_t.reshape(-1)) for s in run]
        advance_searches(self.model, run, encs)
        return active

    def advance_frames(self, enc: torch.Tensor) -> None:
        """Decode several frames: ``enc`` (T, enc_hidden) shared or (n_lang, T, enc_hidden)."""
        if enc.dim() == 3:
            for t in range(enc.shape[1]):
                self.advance(enc[:, t])
        else:
            for t in range(enc.shape[0]):
                self.advance(enc[t])

    def choose(self) -> int:
        """Index into ``self.searches`` of the current winner."""
        if len(self.searches) == 1:
            return 0
        if self.use_lid and self.lid.t:
            lg = self.lid.select(self.lid_select)
            return next(i for i, s in enumerate(self.searches) if s.lang == lg)
        on = [i for i, s in enumerate(self.searches) if self.lid.active[self._slot(s)]]
        return max(on, key=lambda i: (self.searches[i].best.score, -i))

    def result(self) -> DecodeResult:
        """The current best hypothesis (partial during an utterance, final at its end)."""
        i = self.choose()
        s = self.searches[i]
        hy = s.best
        tot = -INF
        pool = s.hyps
        if s.lexicon is not None and s.lexicon.complete(hy.node):  # the posterior among the complete hypotheses
            pool = [h for h in s.hyps if s.lexicon.complete(h.node)]
        for h in pool:
            tot = log_add(tot, h.score)
        conf = math.exp(hy.score - tot) if tot > -INF else 0.0
        cfg = self.model.cfg
        if s.lang is None:
            lang = -1
            if hy.tokens:
                lg, _ = self.model.from_union(torch.tensor(hy.tokens))
                counts = np.bincount(lg.clamp(min=0).numpy(), minlength=cfg.n_lang)
                lang = int(np.argmax(counts))
        else:
            lang = s.lang
        lid_post = tuple(float(x) for x in self.lid.avg_posterior()) if self.use_lid else None
        lid_last = tuple(float(x) for x in self.lid.last_posterior()) if self.use_lid else None
        return DecodeResult(
            lang=lang,
            tokens=hy.tokens,
            frames=hy.frames,
            score=hy.score,
            confidence=conf,
            frames_total=self.lid.t,
            t_avg=self.lid.t_avg,
            lid_posterior=lid_post,
            off_frame=tuple(self.lid.off_frame),
            lang_scores={self._slot(x): x.best.score for x in self.searches},
            lid_last=lid_last,
        )
