"""Dev evaluation of ``streamkit train rnnt``: batched greedy RNN-T decoding, word and character error
counts, and the dev metrics of a validation (:func:`evaluate`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from streamkit.models.features import n_stacked
from streamkit.models.rnnt import RnntModel
from streamkit.train.rnnt_corpus import Utt, collate, make_batches

__all__ = ["MAX_SYMBOLS", "char_errors", "evaluate", "greedy_decode", "tokens_to_text", "word_errors"]

MAX_SYMBOLS = 3  #: per frame, greedy dev decoding


@torch.no_grad()
def greedy_decode(model: RnntModel, enc: torch.Tensor, lens: torch.Tensor, lang: int, max_symbols: int = MAX_SYMBOLS) -> list[list[int]]:
    """Batched greedy RNN-T search of encoder outputs ``enc`` (B, T, H) of one language.

    Per frame at most ``max_symbols`` arg-max symbols, stopping at blank (the rule of
    :class:`streamkit.models.rnnt_search.BeamSearch` with beam 1). Returns the symbols per row:
    language-local for the multi-softmax variants, union ids for vanilla/onehot.
    """
    cfg = model.cfg
    B, T, _ = enc.shape
    dev = enc.device
    lens = lens.to(dev)
    lv = None if cfg.variant == "vanilla" else torch.full((B,), int(lang), dtype=torch.long, device=dev)
    tok = torch.zeros(B, dtype=torch.long, device=dev)
    pred, (h, c) = model.predictor_step(tok, None, lv)
    out: list[list[int]] = [[] for _ in range(B)]
    for t in range(T):
        ok = lens > t
        if not bool(ok.any()):
            break
        e = enc[:, t]
        for _ in range(max_symbols):
            k = model.joint(e, pred, int(lang) if cfg.multi else None).argmax(-1)
            emit = ok & (k != 0)
            if not bool(emit.any()):
                break
            for b in emit.nonzero().squeeze(1).tolist():
                out[b].append(int(k[b]))
            p2, (h2, c2) = model.predictor_step(k, (h, c), lv)
            pred = torch.where(emit[:, None], p2, pred)
            h = torch.where(emit[None, :, None], h2, h)
            c = torch.where(emit[None, :, None], c2, c)
            ok = emit
    return out


def tokens_to_text(model: RnntModel, tokens: Sequence[int], lang: int, symbols: Sequence[Sequence[str]]) -> str:
    """Text of decoded symbols (``B_`` symbols start words); union ids are mapped to their languages."""
    if model.cfg.multi:
        syms = [symbols[lang][t] for t in tokens]
    else:
        if not tokens:
            return ""
        lg, loc = model.from_union(torch.tensor(list(tokens), dtype=torch.long))
        syms = [symbols[int(a)][int(b)] for a, b in zip(lg.tolist(), loc.tolist())]
    words: list[str] = []
    for s in syms:
        if s.startswith("B_") or not words:
            words.append(s[2:] if s.startswith("B_") else s)
        else:
            words[-1] += s
    return " ".join(w for w in words if w)


def word_errors(ref: str, hyp: str) -> tuple[int, int]:
    """(word edit distance, reference words)."""
    return _edits(ref.split(), hyp.split())


def char_errors(ref: str, hyp: str) -> tuple[int, int]:
    """(character edit distance, reference characters; spaces included)."""
    return _edits(list(ref), list(hyp))


def _edits(r: Sequence[str], h: Sequence[str]) -> tuple[int, int]:
    prev = list(range(len(h) + 1))
    for i in range(1, len(r) + 1):
        cur = [i] + [0] * len(h)
        for j in range(1, len(h) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r[i - 1] != h[j - 1]))
        prev = cur
    return prev[len(h)], len(r)


def evaluate(
    model: RnntModel,
    utts: Sequence[Utt],
    logmels: Sequence[torch.Tensor],
    wer_ids: set[str],
    symbols: Sequence[Sequence[str]],
    batch_frames: int,
    max_utts: int,
) -> dict[str, Any]:
    """Dev metrics (see :mod:`streamkit.train.rnnt`, *Validation*); ``model`` is left in eval mode. Runs on the model's device."""
    model.eval()
    cfg = model.cfg
    dev = model.feat_mean.device
    L = cfg.n_lang
    captured: dict[str, torch.Tensor] = {}
    hooks = [model.encoder.register_forward_hook(lambda m, i, o: captured.__setitem__("enc", o[0]))]
    if model.lid_head is not None:
        hooks.append(model.lid_head.register_forward_hook(lambda m, i, o: captured.__setitem__("lid", o)))
    rnnt_sum = np.zeros(L)
    n_utt = np.zeros(L, np.int64)
    lid_sum, lid_frames = 0.0, 0
    lid_ok = np.zeros(L, np.int64)
    err = np.zeros(L, np.int64)
    words = np.zeros(L, np.int64)
    cerr = np.zeros(L, np.int64)
    chars = np.zeros(L, np.int64)
    n_wer = np.zeros(L, np.int64)
    examples: dict[str, list[dict[str, str]]] = {}
    try:
        with torch.inference_mode():
            for lg in range(L):
                idx = [i for i, u in enumerate(utts) if u.lang == lg]
                if not idx:
                    continue
                lens = np.array([n_stacked(logmels[i].shape[0]) for i in idx])
                for bt in make_batches(lens, batch_frames, max_utts, None):
                    sel = [idx[j] for j in bt]
                    x, fl, y, tl = collate([utts[i] for i in sel], [logmels[i] for i in sel])
                    x, y, fl = x.to(dev), y.to(dev), fl.to(dev)
                    out = model(x, fl, y, tl, lg)
                    B = len(sel)
                    rnnt_sum[lg] += float(out["rnnt_loss"]) * B
                    n_utt[lg] += B
                    if "lid" in captured:
                        lid = captured["lid"]
                        mask = torch.arange(lid.shape[1], device=dev)[None, :] < fl[:, None]
                        lid_sum += float(out["lid_loss"]) * int(mask.sum())
                        lid_frames += int(mask.sum())
                        post = (lid.softmax(-1) * mask[..., None]).sum(1) / fl[:, None]
                        lid_ok[lg] += int((post.argmax(-1) == lg).sum())
                    w = [b for b, i in enumerate(sel) if utts[i].id in wer_ids]
                    if w:
                        enc = captured["enc"][w]
                        hyps = greedy_decode(model, enc, fl[w], lg)
                        for b, toks in zip(w, hyps):
                            u = utts[sel[b]]
                            text = tokens_to_text(model, toks, lg, symbols)
                            e, n = word_errors(u.text, text)
                            err[lg] += e
                            words[lg] += n
                            e, n = char_errors(u.text, text)
                            cerr[lg] += e
                            chars[lg] += n
                            n_wer[lg] += 1
                            ex = examples.setdefault(cfg.languages[lg], [])
                            if len(ex) < 2:
                                ex.append({"ref": u.text, "hyp": text})
    finally:
        for hk in hooks:
            hk.remove()
        captured.clear()
    names = cfg.languages
    have = [lg for lg in range(L) if n_utt[lg]]
    res: dict[str, Any] = {
        "rnnt_loss": float(rnnt_sum.sum() / max(n_utt.sum(), 1)),
        "rnnt_loss_per_lang": {names[lg]: round(float(rnnt_sum[lg] / n_utt[lg]), 4) for lg in have},
        "utterances": {names[lg]: int(n_utt[lg]) for lg in have},
    }
    if model.lid_head is not None:
        res["lid_loss"] = lid_sum / max(lid_frames, 1)
        res["lid_acc"] = float(lid_ok.sum() / max(n_utt.sum(), 1))
        res["lid_acc_per_lang"] = {names[lg]: round(float(lid_ok[lg] / n_utt[lg]), 4) for lg in have}
    res["loss"] = res["rnnt_loss"] + (cfg.lid_weight * res["lid_loss"] if "lid_loss" in res else 0.0)
    if n_wer.sum():
        res["wer_per_lang"] = {names[lg]: round(float(err[lg] / max(words[lg], 1)), 4) for lg in range(L) if n_wer[lg]}
        res["wer_avg"] = round(float(np.mean(list(res["wer_per_lang"].values()))), 4)
        res["wer_word_weighted"] = round(float(err.sum() / max(words.sum(), 1)), 4)
        res["cer_per_lang"] = {names[lg]: round(float(cerr[lg] / max(chars[lg], 1)), 4) for lg in range(L) if n_wer[lg]}
        res["cer_char_weighted"] = round(float(cerr.sum() / max(chars.sum(), 1)), 4)
        res["wer_utterances"] = {names[lg]: int(n_wer[lg]) for lg in range(L) if n_wer[lg]}
        res["examples"] = examples
    return res


# --------------------------------------------------------------------------------------------
# training
# --------------------------------------------------------------------------------------------
