"""Beam width x word penalty grid for lexicon-constrained RNN-T decoding (the language known).

Usage::

    .venv/bin/python benchmarks/rnnt_lexicon_grid.py --corpus DIR [--model PT] [--split dev] [--limit 20]
        [--grid 4:none,4:0,4:1,...] [--lexicon system]

For each ``BEAM:PENALTY`` (``none``: free spelling, no lexicon) every utterance (``--limit`` per
language, the same evenly spread choice as ``rnnt_multilingual.py``) is decoded by its own
language's beam search over the encoder output computed once, and scored with jiwer against the
corpus transcript. This is how the defaults of ``streamkit transcribe --lexicon`` (beam 16, word
penalty 3) were chosen, on the dev split; the test split is for ``rnnt_multilingual.py``.

Writes ``benchmarks/results/rnnt_lexicon_grid.json`` (``--out``): WER/CER per language and on
average, the decoders' CPU seconds per grid point, the machine; no absolute paths.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import jiwer
import torch

from streamkit.eval.bench import RESULTS, machine_info
from streamkit.eval.bench.rnnt_multilingual import pick
from streamkit.io.outputs import write_text
from streamkit.models import RNNT_WEIGHTS
from streamkit.models.rnnt import load_model
from streamkit.models.rnnt_lexicon import model_lexicons, word_lists
from streamkit.models.rnnt_search import MultiDecoder
from streamkit.models.rnnt_stream import symbol_tables
from streamkit.train.rnnt_corpus import AsrCorpus, compute_logmel, stacked

DEFAULT_GRID = "4:none,4:0,4:1,4:2,4:3,4:4,4:6,8:none,8:1,8:2,8:3,16:none,16:1,16:2,16:3,32:2"


def parse_grid(spec: str) -> list[tuple[int, float | None]]:
    out = []
    for item in spec.split(","):
        b, sep, p = item.strip().partition(":")
        if not sep:
            raise ValueError(f"grid points are BEAM:PENALTY or BEAM:none, got {item!r}")
        beam = int(b)
        if beam < 1:
            raise ValueError(f"beam must be >= 1, got {beam}")
        out.append((beam, None if p == "none" else float(p)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="a `streamkit corpus asr` corpus")
    ap.add_argument(
        "--model", default=str(RNNT_WEIGHTS), help="RNN-T weights (default: the shipped file)"
    )
    ap.add_argument("--split", default="dev")
    ap.add_argument("--limit", type=int, default=20, help="utterances per language (default 20)")
    ap.add_argument("--grid", default=DEFAULT_GRID, help=f"comma-separated BEAM:PENALTY points, PENALTY 'none' = no lexicon (default {DEFAULT_GRID})")
    ap.add_argument("--lexicon", default="system", help="'system' or a directory of <lang>.words.txt (default system)")
    ap.add_argument("--out", default=str(RESULTS / "rnnt_lexicon_grid.json"))
    a = ap.parse_args(argv)
    try:
        grid = parse_grid(a.grid)
    except ValueError as e:
        ap.error(str(e))
    torch.set_num_threads(1)
    model, meta = load_model(a.model)
    model = model.float().eval()
    langs = list(model.cfg.languages)
    corpus = AsrCorpus(a.corpus)
    if list(corpus.langs) != langs:
        ap.error(f"model languages {langs} differ from the corpus's {list(corpus.langs)}")
    words = word_lists(a.lexicon, langs)
    symbols = symbol_tables(model.cfg, meta)
    utts = pick(corpus.split(a.split), langs, a.limit)
    with torch.inference_mode():
        encs = [model.encode(stacked(lm)[None])[0] for lm in compute_logmel(utts)]
    vocab = dict(zip(corpus.langs, corpus.vocabs))
    rows: list[dict[str, Any]] = []
    print(f"{'beam':>4} {'penalty':>7}  " + " ".join(f"{lg:>6}" for lg in langs) + f" {'WER avg':>8} {'CER avg':>8} {'dec cpu s':>9}", flush=True)
    lex_cache: dict[float, Any] = {}
    for beam, pen in grid:
        lex = None
        if pen is not None:
            lex = lex_cache.get(pen) or lex_cache.setdefault(pen, model_lexicons(model.cfg, symbols, words, word_penalty=pen))
        refs: dict[str, list[str]] = {lg: [] for lg in langs}
        hyps: dict[str, list[str]] = {lg: [] for lg in langs}
        t0 = time.process_time()
        with torch.inference_mode():
            for u, enc in zip(utts, encs):
                d = MultiDecoder(model, beam=beam, languages=[u.lang], lexicons=lex)
                d.reset()
                d.advance_frames(enc)
                lg = langs[u.lang]
                refs[lg].append(u.text)
                hyps[lg].append(vocab[lg].decode(d.result().tokens))
        cpu = time.process_time() - t0
        wer = {lg: round(100 * jiwer.wer(refs[lg], hyps[lg]), 2) for lg in langs if refs[lg]}
        cer = {lg: round(100 * jiwer.cer(refs[lg], hyps[lg]), 2) for lg in langs if refs[lg]}
        row = {"beam": beam, "word_penalty": pen, "lexicon": pen is not None, "wer": wer, "cer": cer,
               "wer_avg": round(sum(wer.values()) / len(wer), 2), "cer_avg": round(sum(cer.values()) / len(cer), 2), "decoder_cpu_s": round(cpu, 1)}  # fmt: skip
        rows.append(row)
        print(f"{beam:>4} {'none' if pen is None else f'{pen:g}':>7}  " + " ".join(f"{wer[lg]:>6.1f}" for lg in wer)
              + f" {row['wer_avg']:>8.2f} {row['cer_avg']:>8.2f} {cpu:>9.1f}", flush=True)  # fmt: skip
    best = min((r for r in rows if r["lexicon"]), key=lambda r: r["wer_avg"], default=None)
    result = {
        "benchmark": "benchmarks/rnnt_lexicon_grid.py",
        "corpus_command": corpus.command,
        "model": Path(a.model).name,
        "split": a.split,
        "limit_per_language": a.limit,
        "utterances": len(utts),
        "lexicon": a.lexicon if a.lexicon == "system" else Path(a.lexicon).name,
        "lexicon_words": {lg: len(ws) for lg, ws in words.items()},
        "mode": "language known (one beam search per utterance, its own language), encoder run once per utterance",
        "units": "WER/CER in %, decoder_cpu_s: process CPU seconds for all utterances of the grid point (one thread)",
        "rows": rows,
        "best_lexicon_point": None if best is None else {"beam": best["beam"], "word_penalty": best["word_penalty"], "wer_avg": best["wer_avg"]},
        "machine": machine_info(),
        "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text(out, json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out.name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
