"""Where the SED domain gap lies: tagging, detection or boundaries (issue #7 analysis).

``sed_table1.py`` scores event-based F1 (DCASE: onset within 200 ms, offset within max(200 ms,
20 %)). Its real-domain figure is well below the synthetic one (the domain gap), and the paper's
Table 1 also shows event F1 far below segment F1. This script takes each model of the table and
scores the same events under criteria that free one thing at a time, on the real eval clips and
the held-out synthetic clips (as ``sed_table1.py``, with each model card's post-processing):

==================  ===============================================================
level               an estimate counts when ...
==================  ===============================================================
event               DCASE event-based (the issue's metric)
event, onset only   its onset is within 200 ms (offsets free)
event, 1 s collars  onset and offset within max(1 s, 20 %)
segment             (1 s segments) the class is active in the same segment
tagging             the class is anywhere in the clip (one decision per clip and class)
==================  ===============================================================

(macro F1 %, :mod:`streamkit.eval.sed`, sed_eval underneath). The gap at each level says what the
real domain breaks: a gap that stays from tagging down to events is *what* sounds; one that opens
only at the event level is *where* events start and end. Each row also gets the anatomy of
:func:`streamkit.eval.sed.localisation_errors`: missed and split reference events, false alarms,
the signed onset / offset differences of each reference's best-overlapping estimate, and the
share of false alarms of a class the clip does not hold ("FA absent").

Usage::

    python benchmarks/sed_gap_anatomy.py --corpus SEDC --model LABEL=runs/baseline/sed.pt --model LABEL2=...

Writes ``benchmarks/results/sed_gap_anatomy.json`` (file names only, no machine paths).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import write_result  # noqa: E402

from streamkit.core.machine import machine_info  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "sed_gap_anatomy.json"
LEVELS = ("event", "event_onset", "event_1s", "segment", "tagging")
HEADS = {"event": "event", "event_onset": "onset only", "event_1s": "1 s collars", "segment": "segment", "tagging": "tagging"}
#: paper Table 1 (DCASE 2019 task 4 validation set, real recordings), macro F1 %: (event, segment)
PAPER = {"baseline": (24.15, 57.70), "adv-time+tri": (35.10, 60.67)}


def parse_models(ap: argparse.ArgumentParser, specs: list[str]) -> list[tuple[str, Path]]:
    out = []
    for s in specs:
        label, sep, path = s.partition("=")
        if not sep or not label or not path:
            ap.error(f"--model wants LABEL=PATH, got {s!r}")
        p = Path(path)
        if not p.is_file():
            ap.error(f"--model {label}: no such weight file: {p}")
        out.append((label, p))
    if not out:
        ap.error("give at least one --model LABEL=PATH")
    return out


def score_levels(probs: Any, files: list[str], reference: dict[str, list[Any]], cfg: Any, *, median_s: float, threshold: float,
                 clip_s: float) -> dict[str, Any]:  # fmt: skip
    """Macro F1 % at every level, the localisation anatomy and per-class event F1 of one model on one subset."""
    from streamkit.eval import sed
    from streamkit.models.sed_post import frames_to_events, median_frames

    med = median_frames(median_s, cfg.frame_seconds)
    est = {f: [sed.Event(f, on, off, lab) for lab, on, off, _c in frames_to_events(p, cfg, median=med, threshold=threshold)]
           for f, p in zip(files, probs)}  # fmt: skip
    ref = {f: list(reference.get(f, [])) for f in files}
    kw = {"classes": cfg.classes, "files": files}
    scores = {
        "event": sed.event_based(ref, est, **kw),
        "event_onset": sed.event_based(ref, est, evaluate_offset=False, **kw),
        "event_1s": sed.event_based(ref, est, onset_collar=1.0, offset_collar=1.0, **kw),
        "segment": sed.segment_based(ref, est, durations={f: clip_s for f in files}, **kw),
        "tagging": sed.tagging_based(ref, est, **kw),
    }
    loc = sed.localisation_errors(ref, est, **kw).as_dict()
    return {
        "files": len(files),
        "macro_f1": {k: round(100 * v.macro_f1, 2) for k, v in scores.items()},
        "micro_f1": {k: round(100 * v.micro_f1, 2) for k, v in scores.items()},
        "f1_per_class": {k: {c: round(100 * s.f1, 2) if s.f1 == s.f1 else None for c, s in v.per_class.items()} for k, v in scores.items()},
        "localisation": _round(loc),
    }


def _round(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _round(v) for k, v in x.items()}
    if isinstance(x, float):
        return round(x, 4) if x == x else None
    return x


def evaluate(label: str, path: Path, corpus: Any) -> dict[str, Any]:
    from sed_table1 import card_post, domain_probs

    from streamkit.models.sed_crnn import load_model
    from streamkit.train.sed import file_sha256

    model, meta = load_model(path)
    card_p = path.with_suffix(".json")
    card = json.loads(card_p.read_text(encoding="utf-8")) if card_p.is_file() else {}
    med, thr = card_post(card, meta)
    row: dict[str, Any] = {"label": label, "method": card.get("method"), "weights": path.name, "sha256": file_sha256(path),
                           "post": {"median_s": med, "threshold": thr}}  # fmt: skip
    t0 = time.monotonic()
    for dom, (sub, files, probs) in domain_probs(model, corpus, card).items():
        row[dom] = score_levels(probs, files, corpus.strong[sub], model.cfg, median_s=med, threshold=thr, clip_s=corpus.clip_s)
    row["gap"] = {k: round(row["synthetic"]["macro_f1"][k] - row["real"]["macro_f1"][k], 2) for k in LEVELS}
    row["score_s"] = round(time.monotonic() - t0, 1)
    return row


def _f(v: Any, w: int = 6) -> str:
    return f"{v:{w}.2f}" if isinstance(v, (int, float)) else " " * (w - 1) + "-"


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["Macro F1 % by level (real eval / synthetic held-out / gap):",
             f"{'model':44s} " + " ".join(f"{HEADS[k]:>22s}" for k in LEVELS)]  # fmt: skip
    for r in rows:
        cells = [f"{_f(r['real']['macro_f1'][k])} /{_f(r['synthetic']['macro_f1'][k])} /{_f(r['gap'][k], 5)}" for k in LEVELS]
        lines.append(f"{r['label'][:44]:44s} " + " ".join(f"{c:>22s}" for c in cells))
    lines += ["", "Localisation anatomy, real eval (synthetic) - fractions; onset / offset errors in s (estimate - reference):",
              f"{'model':44s} {'missed':>13s} {'split':>13s} {'false alarm':>13s} {'onset med':>15s} {'onset ok':>13s} "
              f"{'offset med':>15s} {'offset ok':>13s} {'length':>13s} {'FA absent':>13s}"]  # fmt: skip
    for r in rows:
        lr, ls = r["real"]["localisation"], r["synthetic"]["localisation"]

        def pair(a: Any, b: Any, w: int = 13) -> str:
            s = f"{_f(a, 5)} ({_f(b, 5).strip()})"
            return f"{s:>{w}s}"

        lines.append(f"{r['label'][:44]:44s} {pair(lr['missed'], ls['missed'])} {pair(lr['split'], ls['split'])} "
                     f"{pair(lr['false_alarm'], ls['false_alarm'])} {pair(lr['onset_error']['median'], ls['onset_error']['median'], 15)} "
                     f"{pair(lr['onset_error']['within_collar'], ls['onset_error']['within_collar'])} "
                     f"{pair(lr['offset_error']['median'], ls['offset_error']['median'], 15)} "
                     f"{pair(lr['offset_error']['within_collar'], ls['offset_error']['within_collar'])} "
                     f"{pair(lr['length_ratio'], ls['length_ratio'])} {pair(lr['false_alarm_absent'], ls['false_alarm_absent'])}")  # fmt: skip
    lines += ["", "Per class, real eval event F1 % (synthetic) and real tagging F1 % (synthetic):",
              f"{'class':28s} " + " ".join(f"{r['label'][:33]:>33s}" for r in rows)]  # fmt: skip
    for c in rows[0]["real"]["f1_per_class"]["event"] if rows else ():
        cells = []
        for r in rows:
            pr, ps = r["real"]["f1_per_class"], r["synthetic"]["f1_per_class"]
            cells.append(f"{_f(pr['event'][c], 5)} ({_f(ps['event'][c], 5).strip()}) {_f(pr['tagging'][c], 5)} ({_f(ps['tagging'][c], 5).strip()})")
        lines.append(f"{c[:28]:28s} " + " ".join(f"{x:>33s}" for x in cells))
    lines += ["", "Paper Table 1 (real recordings, DCASE 2019 validation), event / segment macro F1 %: "
              + "; ".join(f"{k} {e:.2f} / {s:.2f}" for k, (e, s) in PAPER.items())]  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, help="the `streamkit corpus sed` directory the models were trained on")
    ap.add_argument("--model", action="append", default=[], metavar="LABEL=PATH", help="a trained weight file (repeat)")
    ap.add_argument("--cache", default=None, help="log-mel cache directory (default <corpus>/features)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(OUT), help="result JSON (default benchmarks/results/sed_gap_anatomy.json)")
    a = ap.parse_args(argv)
    models = parse_models(ap, a.model)
    import torch

    from streamkit.train.sed import SedCorpus

    torch.set_num_threads(a.threads)
    corpus = SedCorpus(a.corpus, a.cache)
    corpus.require("synthetic", "eval")
    rows = []
    for label, path in models:
        print(f"scoring {label} ({path.name}) ...", file=sys.stderr, flush=True)
        rows.append(evaluate(label, path, corpus))
    print(table(rows))
    result = {"benchmark": "sed_gap_anatomy", "corpus": corpus.corpus_command(), "levels": {k: HEADS[k] for k in LEVELS},
              "rows": rows, "paper_table1_event_segment": PAPER, "machine": machine_info()}  # fmt: skip
    return write_result(a.out, result)


if __name__ == "__main__":
    raise SystemExit(main())
