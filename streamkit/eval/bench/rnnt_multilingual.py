"""Streaming multilingual RNN-T on our espeak-ng corpus: the paper's Tables 2/4/5/7, one thread.

Usage::

    .venv/bin/python benchmarks/rnnt_multilingual.py --corpus DIR --model lid=PATH [--model vanilla=PATH ...]
        [--split test] [--limit N] [--sweep] [--sweep-limit N] [--beam 4]

Every figure comes from the streaming block ``models.rnnt_asr`` (:mod:`streamkit.models.rnnt_stream`)
as the monitor runs it: the split's utterances (``--limit`` per language, evenly spread over its
list) are concatenated into one 8 kHz stream with ``sk:speech`` start/end tags at the reference
utterance boundaries (an oracle SAD) and pushed through the streamkit runtime in 100 ms chunks;
the ``asr.final`` of each utterance gives its text and language. One thread (torch, BLAS).

Rows, per model (``--model VARIANT=PATH``, the variant names the row; the file's config decides
what it can do):

* ``known`` (Table 2: language known a priori): one decoder, the utterance's language
  (``languages=[lang]``); every variant but ``vanilla``, whose one search over the union of all
  symbols is LID-free by construction (it is reported as ``lid-free``, as in the paper's Tables 2
  and 4).
* ``lid-free`` (Table 4): all four decoders in lockstep, the final chosen by the LID head
  (``lid``: survivor with the highest mean LID posterior) or by the hypothesis score
  (``multisoftmax``/``lsp``, not in the paper), no shutoff. ``lid`` also gives ``oracle`` (Table 4
  "LID Oracle"): the same run's decoder of the reference language, here the ``known`` row (with
  decoders independent of each other, choosing the reference language's decoder is the same as
  decoding only that language). With ``--lid-last`` a ``lid`` model gets a second LID-free row
  with ``lid_select="last"`` (the language of the survivor with the highest LID posterior at the
  utterance's last frame instead of the highest mean posterior; not in the paper).
* ``monolingual`` (Table 2 first row, ``--mono LANG=PATH`` per language): each language's
  utterances decoded by its own one-language model (``streamkit train rnnt --languages LANG``),
  one row over the languages given.
* Table 7 (``--sweep``, ``lid`` models): tau in {inf, 1000, 100, 30, 10} frames (30 ms) x
  s_th in {0.2, 0.5, inf} (``tau_frames``/``s_th`` of the block; tau = inf or s_th = inf is the
  no-shutoff run, measured once), on ``--sweep-limit`` utterances per language; ``--sweep-points``
  keeps some of them. ``--sweep-lid-score last`` switches decoders off on the latest frame's log
  LID posterior instead of the paper's cumulative sum (``lid_score="last"`` of the block);
  ``--sweep-lid-prior train`` weighs the final's language choice by the model's training hours
  per language (``lid_prior`` of the block).

Columns: WER (jiwer, per language over its utterances; ``avg`` word-weighted over languages as
the paper's Avg., ``macro`` the plain mean), CER (jiwer, characters with spaces, weighted over
languages; not in the paper, but it still moves where a small, short-trained model's WER of random
dictionary words saturates near 100 %), LID accuracy (the final's language, i.e. its script,
equals the reference's, as the paper's Table 5; ``lid_acc_avg`` the mean over languages,
``lid_acc_utt`` over utterances as the paper's Avg.), ``T_avg`` (paper eq. 2, mean over utterances),
**decoder CPU** (``time.thread_time`` around the block's ``MultiDecoder.advance``/``reset`` only,
per second of audio), and the block's **RT factor** (CPU and wall time inside the block's
``consume``/``flush``: features, encoder, decoders, events; model loading excluded) per second of
audio. The paper's numbers (Hindi/English/Tamil/Gujarati Indian-English ASR on 7-hour-per-language
in-house data, 69 M-parameter models) are printed as reference rows; they are not comparable
figures, only the shape of the comparison is.

Writes ``benchmarks/results/rnnt_multilingual.json`` (``--out``): rows, the models' training
steps, the corpus command, the machine; no absolute paths.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from streamkit.core.tags import SPEECH, SpeechBoundary
from streamkit.eval.bench import REPO, RESULTS, machine_info
from streamkit.io.outputs import write_text
from streamkit.models import rnnt as rnnt_mod
from streamkit.models.rnnt_stream import RnntAsr, parse_lid_prior
from streamkit.testing import run_block
from streamkit.train.rnnt_corpus import AsrCorpus, Utt, read_audio

RATE = 8000
CHUNK = 800  #: 100 ms
TAUS = (math.inf, 1000, 100, 30, 10)
STHS = (0.2, 0.5, math.inf)
LANGS = ("en", "hi", "ta", "gu")

#: the paper's figures (Joshi et al. 2021, "Multiple Softmax Architecture for Streaming Multilingual
#: End-to-End ASR Systems"), WER/LID in %
PAPER = {
    "table2_known_language_wer": {
        "monolingual": {"en": 24.67, "hi": 16.2, "ta": 32.92, "gu": 27.33, "avg": 23.97},
        "vanilla": {"en": 35.21, "hi": 22.94, "ta": 48.56, "gu": 28.83, "avg": 32.45},
        "onehot": {"en": 25.88, "hi": 18.88, "ta": 41.92, "gu": 27.9, "avg": 26.7},
        "multisoftmax": {"en": 23.35, "hi": 17.2, "ta": 31.18, "gu": 23.86, "avg": 22.86},
        "lsp": {"en": 23.46, "hi": 16.84, "ta": 30.3, "gu": 24.28, "avg": 22.73},
    },
    "table4_lid_free_wer": {
        "vanilla": {"en": 35.21, "hi": 22.94, "ta": 48.56, "gu": 28.83, "avg": 32.45},
        "lid": {"en": 28.92, "hi": 20.26, "ta": 35.83, "gu": 31.55, "avg": 27.95},
        "lid oracle": {"en": 25.0, "hi": 18.71, "ta": 33.0, "gu": 25.30, "avg": 24.45},
    },
    "table5_lid_accuracy": {
        "vanilla": {"en": 88.7, "hi": 86.2, "ta": 90.4, "gu": 85.5, "avg": 87.7},
        "lid": {"en": 94.0, "hi": 90.2, "ta": 95.8, "gu": 83.1, "avg": 90.09},
    },
    "table7_shutoff_hi_subset": [  # tau (the paper's header says ms, its text frames), s_th, WER, T_avg, LID acc
        {"tau": "inf", "s_th": "inf", "wer": 21.84, "t_avg": 4.0, "lid_acc": 92.4},
        {"tau": 1000, "s_th": 0.2, "wer": 21.97, "t_avg": 3.96, "lid_acc": 92.1},
        {"tau": 100, "s_th": 0.2, "wer": 22.59, "t_avg": 2.92, "lid_acc": 91.3},
        {"tau": 30, "s_th": 0.2, "wer": 25.73, "t_avg": 1.52, "lid_acc": 86.0},
        {"tau": 30, "s_th": 0.5, "wer": 23.14, "t_avg": 1.72, "lid_acc": 90.0},
        {"tau": 10, "s_th": 0.2, "wer": 25.83, "t_avg": 1.04, "lid_acc": 85.7},
    ],
}


class TimedAsr(RnntAsr):
    """``models.rnnt_asr`` with CPU/wall time accounting of its own work and of its decoder."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.dec_cpu = 0.0
        self.blk_cpu = 0.0
        self.blk_wall = 0.0

    def start(self, ctx: Any) -> None:
        super().start(ctx)
        dec = self._dec
        for name in ("advance", "reset"):
            fn = getattr(dec, name)

            def timed(*a: Any, _fn: Any = fn, **k: Any) -> Any:
                t = time.thread_time()
                try:
                    return _fn(*a, **k)
                finally:
                    self.dec_cpu += time.thread_time() - t

            setattr(dec, name, timed)

    def _timed(self, fn: Any, *a: Any) -> Any:
        t, w = time.thread_time(), time.perf_counter()
        try:
            return fn(*a)
        finally:
            self.blk_cpu += time.thread_time() - t
            self.blk_wall += time.perf_counter() - w

    def consume(self, chunk: Any, ctx: Any) -> None:
        self._timed(super().consume, chunk, ctx)

    def flush(self, ctx: Any) -> Any:
        return self._timed(super().flush, ctx)


_MODEL_CACHE: dict[str, Any] = {}
_load_model = rnnt_mod.load_model


def _cached_load(path: Any, **kw: Any) -> Any:
    """The block loads its model in ``start``; load each file once per run (not timed anyway)."""
    p = Path(path)
    key = f"{p.resolve()}:{p.stat().st_mtime_ns if p.is_file() else 0}"
    if key not in _MODEL_CACHE or kw:
        _MODEL_CACHE[key] = _load_model(path, **kw)
    return _MODEL_CACHE[key]


def pick(utts: list[Utt], langs: list[str], limit: int | None) -> list[Utt]:
    out: list[Utt] = []
    for lg in range(len(langs)):
        ix = [u for u in utts if u.lang == lg]
        if limit is not None and limit < len(ix):
            pos = np.unique(np.round(np.linspace(0, len(ix) - 1, limit)).astype(int))
            ix = [ix[i] for i in pos.tolist()]
        out += ix
    return out


def trim_to_speech(corpus: AsrCorpus, split: str, audio: dict[str, np.ndarray], margin_s: float) -> dict[str, np.ndarray]:
    """Cut every utterance to its speech (the corpus records' ``speech_start``/``speech_stop``) +- ``margin_s``.

    The corpus files carry up to about 1 s of silence around the speech; with tags at the file
    boundaries the LID shutoff's wait time tau is partly spent on that silence, while behind a SAD
    (``streamkit transcribe``, the monitor) an utterance starts 0.1 s before the speech.
    """
    if margin_s < 0:
        raise SystemExit(f"--trim must be >= 0, got {margin_s}")
    span: dict[str, tuple[int, int]] = {}
    with open(corpus.root / f"{split}.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                if r["id"] in audio:
                    if "speech_start" not in r or "speech_stop" not in r:
                        raise SystemExit(f"{corpus.root / (split + '.jsonl')}: {r['id']} has no speech_start/speech_stop (needed by --trim)")
                    span[r["id"]] = (int(r["speech_start"]), int(r["speech_stop"]))
    m = int(round(margin_s * RATE))
    out = {}
    for uid, x in audio.items():
        a0, a1 = span[uid]
        out[uid] = x[max(0, a0 - m) : min(len(x), a1 + m)]
    return out


#: the paper's protocol, under every row unless the row says otherwise: no shutoff, the mean LID
#: posterior, the cumulative shutoff statistic, utterances from the reference tags without pre-roll
#: (the block's own defaults are the CLI's: shutoff at tau 30 / s_th 0.5, "auto" rules, 0.1 s pre-roll)
PAPER_PROTOCOL: dict[str, Any] = {"tau_frames": None, "s_th": None, "lid_select": "mean", "lid_score": "sum", "pre_roll_s": 0.0}


def run_stream(path: str, utts: list[Utt], audio: dict[str, np.ndarray], **params: Any) -> tuple[list[Any], TimedAsr, float]:
    """One stream of the utterances with reference speech tags; (asr.final payloads in order, block, audio s)."""
    xs, tags, pos = [], [], 0
    for u in utts:
        x = audio[u.id]
        tags += [(pos, SPEECH, SpeechBoundary(True, "ref")), (pos + len(x), SPEECH, SpeechBoundary(False, "ref"))]
        xs.append(x)
        pos += len(x)
    blk = TimedAsr(model=path, threads=1, **{**PAPER_PROTOCOL, **params})
    r = run_block(blk, np.concatenate(xs).astype(np.float32), rate=RATE, sizes=CHUNK, chunk=CHUNK, tags=tags)
    finals = [e for e in r.events if e.kind == "asr.final"]
    starts = {t[0]: i for i, t in enumerate(tags[0::2])}
    by_utt: list[Any] = [None] * len(utts)
    for e in finals:
        i = starts.get(e.span[0])
        if i is not None:
            by_utt[i] = e.payload
    return by_utt, blk, pos / RATE


def score(utts: list[Utt], finals: list[Any], langs: list[str]) -> dict[str, Any]:
    import jiwer

    wer: dict[str, float] = {}
    cer: dict[str, float] = {}
    lid: dict[str, float] = {}
    words_err = words_ref = chars_err = chars_ref = 0
    for lg, name in enumerate(langs):
        pairs = [(u, f) for u, f in zip(utts, finals) if u.lang == lg]
        if not pairs:
            continue
        refs = [u.text for u, _ in pairs]
        hyps = [(f.text if f is not None else "") for _, f in pairs]
        o = jiwer.process_words(refs, hyps)
        n = sum(len(r.split()) for r in refs)
        wer[name] = round(100 * o.wer, 2)
        words_err += o.substitutions + o.deletions + o.insertions
        words_ref += n
        c = jiwer.process_characters(refs, hyps)  # CER: characters, spaces included
        cer[name] = round(100 * c.cer, 2)
        chars_err += c.substitutions + c.deletions + c.insertions
        chars_ref += sum(len(r) for r in refs)
        lid[name] = round(100 * float(np.mean([f is not None and f.lang == name for _, f in pairs])), 2)
    t_avg = [f.t_avg for f in finals if f is not None]
    return {
        "wer": wer,
        "wer_avg": round(100 * words_err / max(words_ref, 1), 2),
        "wer_macro": round(float(np.mean(list(wer.values()))), 2) if wer else None,
        "cer": cer,
        "cer_avg": round(100 * chars_err / max(chars_ref, 1), 2),
        "lid_acc": lid,
        "lid_acc_avg": round(float(np.mean(list(lid.values()))), 2) if lid else None,
        "lid_acc_utt": round(100 * float(np.mean([f is not None and f.lang == langs[u.lang] for u, f in zip(utts, finals)])), 2) if lid else None,
        "t_avg": round(float(np.mean(t_avg)), 3) if t_avg else None,
        "utterances": len(utts),
        "missing_finals": sum(f is None for f in finals),
    }


def measure(name: str, mode: str, path: str | dict[str, str], utts: list[Utt], audio: dict[str, np.ndarray], langs: list[str], *,
            per_lang: bool = False, **params: Any) -> dict[str, Any]:  # fmt: skip
    """Decode ``utts`` with the block; ``per_lang``: one run per language with ``languages=[lang]``.

    ``path``: one model file, or one per language name (monolingual models; needs ``per_lang``).
    """
    finals: list[Any] = [None] * len(utts)
    dec = cpu = wall = audio_s = 0.0
    groups = [[i for i, u in enumerate(utts) if u.lang == lg] for lg in range(len(langs))] if per_lang else [list(range(len(utts)))]
    for lg, ix in enumerate(groups):
        if not ix:
            continue
        sub = [utts[i] for i in ix]
        p = {**params, "languages": [langs[lg]]} if per_lang else params
        fin, blk, a = run_stream(path[langs[lg]] if isinstance(path, dict) else path, sub, audio, **p)
        for i, f in zip(ix, fin):
            finals[i] = f
        dec += blk.dec_cpu
        cpu += blk.blk_cpu
        wall += blk.blk_wall
        audio_s += a
    row = {"model": name, "mode": mode, **{k: (None if isinstance(v, float) and math.isinf(v) else v) for k, v in params.items()}}
    if row.get("lexicon") not in (None, "system"):  # a directory: no machine paths in the results
        row["lexicon"] = Path(str(row["lexicon"])).name
    row.update(score(utts, finals, langs))
    if per_lang:  # one decoder, the reference language: LID accuracy is 100 % by construction
        row["lid_acc"], row["lid_acc_avg"], row["lid_acc_utt"] = None, None, None
    row.update({"audio_s": round(audio_s, 1), "decoder_cpu_per_audio_s": round(dec / audio_s, 4), "rt_cpu": round(cpu / audio_s, 4),
                "rt_wall": round(wall / audio_s, 4)})  # fmt: skip
    return row


def fmt_rows(rows: list[dict[str, Any]], langs: list[str]) -> str:
    head = ["model", "mode", "tau", "s_th", *langs, "avg", "CER avg", "LID%", "T_avg", "dec cpu/s", "RT cpu", "RT wall"]
    lines = []
    for r in rows:
        tau = r.get("tau_frames", "")
        sth = r.get("s_th", "")
        lines.append([str(r["model"]), str(r["mode"]) + (" (last-frame LID)" if r.get("lid_select") == "last" else "") + (" (last-frame shutoff)" if r.get("lid_score") == "last" else "") + (" (prior)" if r.get("lid_prior") is not None else ""), "inf" if tau is None else str(tau), "inf" if sth is None else str(sth),
                      *[f"{r['wer'].get(lg, float('nan')):.2f}" if isinstance(r.get("wer"), dict) else "" for lg in langs],
                      f"{r['wer_avg']:.2f}" if r.get("wer_avg") is not None else "",
                      f"{r['cer_avg']:.2f}" if r.get("cer_avg") is not None else "",
                      f"{r['lid_acc_avg']:.1f}" if r.get("lid_acc_avg") is not None else "",
                      f"{r['t_avg']:.2f}" if r.get("t_avg") is not None else "",
                      f"{r['decoder_cpu_per_audio_s']:.3f}" if "decoder_cpu_per_audio_s" in r else "",
                      f"{r['rt_cpu']:.3f}" if "rt_cpu" in r else "", f"{r['rt_wall']:.3f}" if "rt_wall" in r else ""])  # fmt: skip
    w = [max(len(h), *(len(x[i]) for x in lines)) if lines else len(h) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w[i]) for i, h in enumerate(head)), "  ".join("-" * x for x in w)]
    out += ["  ".join(c.ljust(w[i]) for i, c in enumerate(x)) for x in lines]
    return "\n".join(out)


def paper_tables() -> str:
    out = []
    for key in ("table2_known_language_wer", "table4_lid_free_wer", "table5_lid_accuracy"):
        out.append(f"paper {key} (%):")
        for name, row in PAPER[key].items():
            out.append(f"  {name:14s} " + "  ".join(f"{k} {v:6.2f}" for k, v in row.items()))
    out.append("paper table7 (Hi subset): " + "; ".join(f"tau {r['tau']} s_th {r['s_th']}: WER {r['wer']} T_avg {r['t_avg']} LID {r['lid_acc']}"
                                                     for r in PAPER["table7_shutoff_hi_subset"]))  # fmt: skip
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--corpus", required=True, type=Path, help="a `streamkit corpus asr` corpus")
    ap.add_argument("--model", action="append", default=[], metavar="VARIANT=PATH", help="a trained model (repeatable)")
    ap.add_argument("--mono", action="append", default=[], metavar="LANG=PATH",
                    help="a monolingual model (`streamkit train rnnt --languages LANG`) for one language; repeatable: "
                    "together one 'monolingual' row over the languages given")  # fmt: skip
    ap.add_argument("--split", default="test")
    ap.add_argument("--limit", type=int, default=None, help="utterances per language (default: all)")
    ap.add_argument("--sweep", action="store_true", help="Table 7 sweep for lid models")
    ap.add_argument("--sweep-limit", type=int, default=None, help="utterances per language in the sweep (default --limit)")
    ap.add_argument("--sweep-lid-select", choices=("mean", "last"), default="mean",
                    help="the sweep's end-of-utterance language rule among the surviving decoders: mean LID posterior (the paper, default) "
                    "or last frame (what transcribe/monitor/mic use for the shipped model)")  # fmt: skip
    ap.add_argument("--sweep-lid-score", choices=("sum", "last"), default="sum",
                    help="the sweep's shutoff statistic: cumulative log LID posterior (the paper's eq. 1, default) or the latest frame's "
                    "log posterior (for a recurrent LID head)")  # fmt: skip
    ap.add_argument("--sweep-points", default=None, metavar="TAU:S_TH,...",
                    help="only these (tau, s_th) points of the sweep, e.g. 'inf:inf,30:0.5' (default: the paper's whole grid)")  # fmt: skip
    ap.add_argument("--sweep-lid-prior", default="none", metavar="SPEC",
                    help="language prior of the sweep rows' final choice (the block's lid_prior): none (default), train, or LANG=W,...")  # fmt: skip
    ap.add_argument("--lid-last", action="store_true",
                    help="lid models: one more LID-free row choosing the language by the last frame's LID posterior (lid_select=last) instead of the mean")  # fmt: skip
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--max-symbols", type=int, default=3)
    ap.add_argument("--lexicon", default=None, metavar="SPEC",
                    help="lexicon-constrained decoding: 'system' (the Debian word lists the corpus draws from), 'corpus' "
                    "(the corpus's vocab/<lang>.words.txt of a --words N corpus, else 'system'), or a directory of <lang>.words.txt")  # fmt: skip
    ap.add_argument("--word-penalty", type=float, default=0.0, help="with --lexicon: log-probability subtracted per word")
    ap.add_argument("--trim", type=float, default=None, metavar="SECONDS",
                    help="cut each utterance to its speech (corpus speech_start/stop) +- SECONDS before tagging "
                    "(default: whole files, with their silence)")  # fmt: skip
    ap.add_argument("--note", default="", help="free text stored with the results (e.g. 'undertrained: step 1000 of 5000')")
    ap.add_argument("--out", type=Path, default=RESULTS / "rnnt_multilingual.json")
    a = ap.parse_args(argv)
    a.points = None
    if a.sweep_points is not None:
        try:
            a.points = {tuple(float(v) for v in p.split(":")) for p in a.sweep_points.split(",")}
            if any(len(p) != 2 for p in a.points):
                raise ValueError
        except ValueError:
            ap.error(f"--sweep-points wants TAU:S_TH pairs separated by commas (inf allowed), got {a.sweep_points!r}")
    try:
        a.lid_prior = parse_lid_prior(a.sweep_lid_prior)
    except ValueError as e:
        ap.error(f"--sweep-lid-prior: {e}")
    if not a.model and not a.mono:
        ap.error("give at least one --model or --mono")
    torch.set_num_threads(1)
    rnnt_mod.load_model = _cached_load  # type: ignore[assignment]
    try:
        return _run(a, ap)
    finally:
        rnnt_mod.load_model = _load_model  # type: ignore[assignment]
        _MODEL_CACHE.clear()


def _model_info(path: str, model: Any, meta: dict[str, Any]) -> dict[str, Any]:
    card_p = Path(path).with_suffix(".json")
    card = json.loads(card_p.read_text(encoding="utf-8")) if card_p.is_file() else {}
    return {"file": Path(path).name, "variant": model.cfg.variant, "n_params": rnnt_mod.n_params(model), "step": meta.get("step"),
            "budget_steps": card.get("training", {}).get("budget", {}).get("steps"), "config": model.cfg.to_dict()}  # fmt: skip


def _mono_row(a: argparse.Namespace, ap: argparse.ArgumentParser, corpus: AsrCorpus, utts: list[Utt], audio: dict[str, np.ndarray],
              base: dict[str, Any], models: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """The ``monolingual`` row: each ``--mono LANG=PATH`` model decodes its language's utterances."""
    langs = corpus.langs
    paths: dict[str, str] = {}
    for spec in a.mono:
        lg, sep, path = spec.partition("=")
        if not sep or lg not in langs:
            ap.error(f"--mono wants LANG=PATH with LANG one of {langs}, got {spec!r}")
        if lg in paths:
            ap.error(f"--mono: two models for {lg}")
        model, meta = rnnt_mod.load_model(path)
        if list(model.cfg.languages) != [lg]:
            ap.error(f"--mono {spec}: the model's languages are {list(model.cfg.languages)}, not [{lg!r}] (train it with --languages {lg})")
        paths[lg] = path
        models[f"monolingual {lg}"] = _model_info(path, model, meta)
    sub = [u for u in utts if langs[u.lang] in paths]
    print(f"monolingual: {', '.join(paths)}, {len(sub)} utterances", flush=True)
    return measure("monolingual", "known", paths, sub, audio, langs, per_lang=True, **base)


def _run(a: argparse.Namespace, ap: argparse.ArgumentParser) -> int:

    corpus = AsrCorpus(a.corpus)
    langs = corpus.langs
    all_utts = corpus.split(a.split)
    utts = pick(all_utts, langs, a.limit)
    sweep_utts = pick(all_utts, langs, a.sweep_limit if a.sweep_limit is not None else a.limit)
    audio = {u.id: read_audio(u) for u in {u.id: u for u in utts + sweep_utts}.values()}
    if a.trim is not None:
        audio = trim_to_speech(corpus, a.split, audio, a.trim)
    base: dict[str, Any] = {"beam": a.beam, "max_symbols_per_frame": a.max_symbols, "utterance_mode": "tags"}
    lexicon = a.lexicon
    if lexicon == "corpus":
        lexicon = str(a.corpus / "vocab") if any((a.corpus / "vocab").glob("*.words.txt")) else "system"
    if lexicon is not None:
        base.update(lexicon=lexicon, word_penalty=a.word_penalty)
    rows: list[dict[str, Any]] = []
    models: dict[str, Any] = {}
    if a.mono:
        rows.append(_mono_row(a, ap, corpus, utts, audio, base, models))
        print(fmt_rows(rows[-1:], langs), flush=True)
    for spec in a.model:
        if "=" not in spec:
            ap.error(f"--model wants VARIANT=PATH, got {spec!r}")
        name, path = spec.split("=", 1)
        model, meta = rnnt_mod.load_model(path)
        cfg = model.cfg
        if list(cfg.languages) != langs:
            ap.error(f"{path}: model languages {list(cfg.languages)} differ from the corpus's {langs}")
        models[name] = _model_info(path, model, meta)
        print(f"{name}: {cfg.variant}, step {meta.get('step')}, {len(utts)} utterances", flush=True)
        if cfg.variant == "vanilla":
            rows.append(measure(name, "lid-free", path, utts, audio, langs, **base))
        else:
            rows.append(measure(name, "known", path, utts, audio, langs, per_lang=True, **base))
            if cfg.variant != "onehot":
                rows.append(measure(name, "lid-free", path, utts, audio, langs, **base, tau_frames=None, s_th=None))
            if a.lid_last and cfg.has_lid:
                rows.append(measure(name, "lid-free", path, utts, audio, langs, **base, tau_frames=None, s_th=None, lid_select="last"))
        print(fmt_rows(rows[-(3 if a.lid_last and cfg.has_lid else 2) :], langs), flush=True)
        if a.sweep and cfg.has_lid:
            done: dict[tuple[float, float], dict[str, Any]] = {}
            for tau in TAUS:
                for sth in STHS:
                    key = (math.inf, math.inf) if math.isinf(tau) or math.isinf(sth) else (tau, sth)
                    if a.points is not None and (tau, sth) not in a.points:
                        continue
                    if key not in done:
                        sel: dict[str, Any] = {} if a.sweep_lid_select == "mean" else {"lid_select": a.sweep_lid_select}
                        if a.sweep_lid_score != "sum":
                            sel["lid_score"] = a.sweep_lid_score
                        if a.lid_prior is not None:
                            sel["lid_prior"] = a.lid_prior
                        done[key] = measure(name, "sweep", path, sweep_utts, audio, langs, **base, **sel,
                                            tau_frames=None if math.isinf(key[0]) else key[0], s_th=None if math.isinf(key[1]) else key[1])  # fmt: skip
                        print(fmt_rows([done[key]], langs).splitlines()[-1], flush=True)
                    rows.append({**done[key], "tau_frames": None if math.isinf(tau) else tau, "s_th": None if math.isinf(sth) else sth})
    print()
    print(fmt_rows(rows, langs))
    print()
    print(paper_tables())
    out = {
        "benchmark": "benchmarks/rnnt_multilingual.py",
        "note": a.note,
        "corpus_command": corpus.command,
        "split": a.split,
        "limit_per_language": a.limit,
        "sweep_limit_per_language": a.sweep_limit if a.sweep_limit is not None else a.limit,
        "decoding": {
            "beam": a.beam,
            "max_symbols_per_frame": a.max_symbols,
            "chunk_ms": CHUNK * 1000 // RATE,
            "lexicon": None if lexicon is None else ("system word lists" if lexicon == "system" else f"<lang>.words.txt in {Path(lexicon).name}/"),
            "word_penalty": a.word_penalty if lexicon is not None else None,
            "threads": 1,
            "utterances": "reference boundaries as sk:speech tags (oracle SAD), one stream per run",
            "boundaries": "whole corpus files (with their leading/trailing silence)"
            if a.trim is None
            else f"speech only: the corpus records' speech_start/speech_stop +- {a.trim:g} s",
        },  # fmt: skip
        "units": "WER and LID accuracy in %; decoder_cpu_per_audio_s and rt_* in seconds per second of audio; tau in 30 ms frames",
        "models": models,
        "rows": rows,
        "paper": PAPER,
        "machine": machine_info(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    write_text(a.out, json.dumps(out, indent=1, default=float) + "\n")
    print(f"\nwrote {a.out.resolve().relative_to(REPO) if a.out.resolve().is_relative_to(REPO) else a.out.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
