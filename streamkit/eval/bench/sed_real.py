"""SED on real recordings: the evaluation split of a ``streamkit corpus real`` tree, every model in one run.

The recordings come from evaluation-only Debian packages (``streamkit corpus real --out DIR``;
nothing here trains or tunes on them). Two views, both through the offline engine
(:func:`streamkit.models.sed_offline.sed_file`, W 10 s, H 1 s, the weight file's post-processing as
``streamkit sed`` applies it: ``--post auto``, its clip gates unless ``--clip-gate`` is given):

* **Scenes** (``DIR/eval/events/audio/*.wav`` with the strong labels ``DIR/eval/events/events.tsv``):
  DCASE event-based F1 (collars 200 ms / max(200 ms, 20 %)) and 1 s segment-based F1, macro and
  per class, with sed_eval through :mod:`streamkit.eval.sed` (as ``sed_table1.py``). A class's
  macro average runs over the classes present in the labels (sed_eval gives NaN elsewhere).
* **Isolated clips** (``DIR/eval/events/clips/<Class>/*.wav``): is the clip's class detected
  anywhere in it, and which other classes fire (clip-level check; counts per class).

Every model of ``--model NAME=WEIGHTS`` (repeatable) runs on the same files; the shipped weights run
first as the baseline peer (``shipped``) unless ``--no-shipped``. RT factor: engine seconds over audio
seconds, one torch thread by default. Targets: event F1 >= 40 % and segment F1 >= 70 %
per class; the result records for each model whether every class present meets them.

    python benchmarks/sed_real.py --real DIR [--model finetuned=sed_real.pt] [--clip-gate G] [--threads 1] [--out PATH]

Writes benchmarks/results/sed_real.json (the command with DIR and paths replaced by names, the machine).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.eval.bench import REPO, RESULTS, machine_info, write_result
from streamkit.eval.sed import CLASSES, Event, event_based, read_strong_tsv, segment_based

OUT = RESULTS / "sed_real.json"
TARGET_EVENT_F1, TARGET_SEGMENT_F1 = 40.0, 70.0
AUDIO_EXT = (".wav", ".flac", ".ogg")


def _pct(x: float) -> float | None:
    return None if x != x else round(100.0 * x, 2)


def score_scenes(ref: dict[str, list[Event]], est: dict[str, list[Event]], durations: dict[str, float]) -> dict[str, Any]:
    """Event and segment F1 (%), macro over the classes present in ``ref`` and per class (with counts)."""
    files = sorted(durations)
    present = sorted({e.event_label for evs in ref.values() for e in evs})
    ev = event_based(ref, est, files=files)
    seg = segment_based(ref, est, files=files, durations=durations)
    per = {c: {"n_ref": ev.per_class[c].n_ref, "n_sys": ev.per_class[c].n_sys, "event_f1": _pct(ev.per_class[c].f1),
               "segment_f1": _pct(seg.per_class[c].f1)} for c in CLASSES if c in present or ev.per_class[c].n_sys}  # fmt: skip

    def macro(key: str) -> float | None:
        v = [per[c][key] or 0.0 for c in present]  # a class with references and no hit scores 0
        return round(float(np.mean(v)), 2) if v else None

    meets = bool(present) and all((per[c]["event_f1"] or 0) >= TARGET_EVENT_F1 and (per[c]["segment_f1"] or 0) >= TARGET_SEGMENT_F1 for c in present)
    return {"files": len(files), "events": sum(len(v) for v in ref.values()), "classes_present": present,
            "event_f1": macro("event_f1"), "segment_f1": macro("segment_f1"), "per_class": per, "meets_targets_per_class": meets}  # fmt: skip


def clip_check(found: dict[str, list[set[str]]]) -> dict[str, Any]:
    """``found``: class -> the sets of classes detected in each of its clips. Per class: clips, detected
    (count, %), clips where another class fired, and which others fired how often; overall detected %."""
    per: dict[str, Any] = {}
    for cls, sets in sorted(found.items()):
        others = Counter(o for s in sets for o in s if o != cls)
        hit = sum(cls in s for s in sets)
        per[cls] = {"clips": len(sets), "detected": hit, "detected_pct": round(100.0 * hit / max(len(sets), 1), 1),
                    "clips_with_other_classes": sum(bool(s - {cls}) for s in sets), "others": dict(others.most_common())}  # fmt: skip
    n = sum(p["clips"] for p in per.values())
    return {"clips": n, "detected_pct": round(100.0 * sum(p["detected"] for p in per.values()) / max(n, 1), 1), "per_class": per}


def _read(path: Path) -> tuple[np.ndarray, int]:
    import soundfile as sf

    x, sr = sf.read(str(path), dtype="float32", always_2d=True)
    return x.mean(axis=1), int(sr)


def run_model(weights: str, scenes: list[Path], clips: dict[str, list[Path]], labels: dict[str, list[Event]], gate: float | None) -> dict[str, Any]:
    """One model over the scenes and the clips: scores, clip check, RT factor."""
    from streamkit.models.sed_offline import sed_file

    busy = audio_s = 0.0
    est: dict[str, list[Event]] = {}
    durations: dict[str, float] = {}
    for p in scenes:
        x, sr = _read(p)
        r = sed_file(x, weights, rate=sr, clip_gate=gate)
        est[p.name] = [Event(p.name, d.onset_s, d.offset_s, d.label) for d in r.detections]
        durations[p.name] = x.shape[0] / sr
        busy, audio_s = busy + r.seconds, audio_s + x.shape[0] / sr
    found: dict[str, list[set[str]]] = {}
    for cls, paths in clips.items():
        for p in paths:
            x, sr = _read(p)
            r = sed_file(x, weights, rate=sr, clip_gate=gate)
            found.setdefault(cls, []).append({d.label for d in r.detections})
            busy, audio_s = busy + r.seconds, audio_s + x.shape[0] / sr
    return {"scenes": score_scenes(labels, est, durations) if scenes else None, "clips": clip_check(found) if clips else None,
            "audio_s": round(audio_s, 1), "rtf": round(busy / max(audio_s, 1e-9), 4)}  # fmt: skip


def eval_files(root: Path) -> tuple[list[Path], dict[str, list[Path]], dict[str, list[Event]]]:
    """The eval split's scenes, isolated clips by class, and the scenes' labels."""
    ev = root / "eval" / "events"
    if not ev.is_dir():
        raise SystemExit(f"{root}: no eval/events (make it with `streamkit corpus real --out DIR`)")
    scenes = sorted(p for p in (ev / "audio").glob("*") if p.suffix.lower() in AUDIO_EXT) if (ev / "audio").is_dir() else []
    clips: dict[str, list[Path]] = {}
    if (ev / "clips").is_dir():
        for d in sorted(p for p in (ev / "clips").iterdir() if p.is_dir() and p.name in CLASSES):
            files = sorted(p for p in d.iterdir() if p.suffix.lower() in AUDIO_EXT)
            if files:
                clips[d.name] = files
    labels = read_strong_tsv(ev / "events.tsv") if scenes else {}
    if not scenes and not clips:
        raise SystemExit(f"{root}: no scenes or clips under eval/events")
    return scenes, clips, {p.name: list(labels.get(p.name, [])) for p in scenes}


def _name(weights: str) -> str:
    w = Path(weights).resolve()
    return w.relative_to(REPO).as_posix() if w.is_relative_to(REPO) else w.name


def _table(models: dict[str, dict[str, Any]]) -> str:
    lines = ["| model | scene event F1 % | scene segment F1 % | meets per-class targets | clips detected % | RT factor |",
             "| --- | ---: | ---: | --- | ---: | ---: |"]  # fmt: skip
    for name, m in models.items():
        s, c = m["scenes"] or {}, m["clips"] or {}
        lines.append(
            f"| {name} | {s.get('event_f1')} | {s.get('segment_f1')} | {s.get('meets_targets_per_class')} | {c.get('detected_pct')} | {m['rtf']:.4f} |"
        )
    classes = sorted({c for m in models.values() for c in ((m["scenes"] or {}).get("per_class") or {}) | ((m["clips"] or {}).get("per_class") or {})})
    lines += ["", "| class | " + " | ".join(f"{n}: event / segment F1 %, clips detected (others firing)" for n in models) + " |",
              "| --- | " + " | ".join("---" for _ in models) + " |"]  # fmt: skip
    for cls in classes:
        cells = []
        for m in models.values():
            s = ((m["scenes"] or {}).get("per_class") or {}).get(cls) or {}
            c = ((m["clips"] or {}).get("per_class") or {}).get(cls)
            clip = f"{c['detected']}/{c['clips']} ({', '.join(f'{k} {v}' for k, v in c['others'].items()) or '-'})" if c else "-"
            cells.append(f"{s.get('event_f1', '-')} / {s.get('segment_f1', '-')}, {clip}")
        lines.append(f"| {cls} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import torch

    from streamkit.models.sed_settings import default_weights

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", required=True, metavar="DIR", help="a `streamkit corpus real` root (only its eval/events is read)")
    ap.add_argument("--model", action="append", default=[], metavar="NAME=WEIGHTS", help="a model to score (repeatable)")
    ap.add_argument("--no-shipped", action="store_true", help="do not add the shipped weights as the baseline peer")
    ap.add_argument("--clip-gate", type=float, default=None, metavar="G", help="clip gate for all classes (default: each file's tuned gates)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    models = {} if a.no_shipped else {"shipped": str(default_weights())}
    for spec in a.model:
        name, sep, path = spec.partition("=")
        if not sep or not name or not Path(path).is_file():
            ap.error(f"--model {spec!r}: expected NAME=WEIGHTS with an existing file")
        models[name] = path
    if not models:
        ap.error("no model to score")
    scenes, clips, labels = eval_files(Path(a.real))
    t0 = time.perf_counter()
    results = {}
    for name, w in models.items():
        print(f"{name}: {len(scenes)} scenes, {sum(map(len, clips.values()))} clips ...", file=sys.stderr, flush=True)
        results[name] = {"weights": _name(w), **run_model(w, scenes, clips, labels, a.clip_gate)}
    print(_table(results))
    args = " ".join(sys.argv[1:] if argv is None else argv)
    args = re.sub(r"--real\s+\S+", "--real DIR", args)
    args = re.sub(r"--out\s+\S+", "--out OUT", args)
    for w in models.values():
        args = args.replace(w, _name(w))
    result = {
        "benchmark": "sed_real",
        "command": "python benchmarks/sed_real.py " + args,
        "machine": machine_info(),
        "targets": {"event_f1_per_class": TARGET_EVENT_F1, "segment_f1_per_class": TARGET_SEGMENT_F1},
        "post": "auto (each weight file's tuned post-processing)" + ("" if a.clip_gate is None else f", clip gate {a.clip_gate:g}"),
        "threads": a.threads,
        "models": results,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    return write_result(Path(a.out), result)


if __name__ == "__main__":
    raise SystemExit(main())
