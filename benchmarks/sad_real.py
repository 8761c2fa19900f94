"""SAD on real recordings and on HF non-speech signals: every system in one run, one thread.

Usage::

    .venv/bin/python benchmarks/sad_real.py --real DIR [--systems stat,dnn,silero,...]
        [--dnn NAME=WEIGHTS ...] [--stat NAME=key=value,... ...] [--seconds 60] [--seed 7]

``DIR`` is a ``streamkit corpus real`` corpus; only its ``eval`` split is read (speech and
distractors from the evaluation-only Debian packages, never trained or tuned on). Sets:

* **mic**: the eval speech scenes (real read and prompt speech with real sounds between the
  utterances: animals, music, household, UI and game sounds), resampled to 8 kHz.
* **hf**: the same scenes through the HF channel simulator (``ChannelParams.random`` at severity
  0.5, one seeded draw per scene).
* **nonspeech**: audio without any speech: every HF distractor kind of
  :mod:`streamkit.data.hf_distractors` through the channel (``--seconds`` per kind, seeded with
  ``--seed``, a seed no training corpus uses), and the real off-air modem and carrier recordings
  of the corpus' ``eval/offair``. Measured: the false-alarm rate, the fraction of the duration
  called speech.

Per system and set: precision, recall and F1 at the system's own default threshold (the shipped
operating point; 0.5 s no-score collar around reference speech, fgnt mode, as every SAD figure of
streamkit), the best precision at recall >= 90 % over 201 thresholds (an oracle: it shows what the
scores could do, the default threshold is what a user gets), and the RT factor (process time over
audio duration, one thread, mic set). Peers in the same run: silero-vad and webrtcvad (the
``[sad]`` extra). ``--dnn NAME=WEIGHTS`` adds another DNN weight file (e.g. a candidate next to
the shipped one), ``--stat NAME=k=v,...`` a statistical SAD with other analysis parameters.

Targets (the real-audio issue): mic: DNN F1 >= silero's, DNN precision >= 90 % at recall >= 90 %,
statistical SAD precision >= 85 %; nonspeech: false alarms of the DNN <= 2 %, of the statistical
SAD <= 5 %. Writes ``benchmarks/results/sad_real.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from streamkit.eval import sad_systems as ss  # noqa: E402
from streamkit.eval.bench import machine_info, write_result  # noqa: E402
from streamkit.eval.rttm import read_rttm_masks  # noqa: E402
from streamkit.eval.sad import DEFAULT_THRESHOLDS, Counts, RocCurve, frames_to_samples, sweep  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_SYSTEMS = "stat,dnn,silero,webrtcvad0,webrtcvad3,energy"
COLLAR = 0.5
SEVERITY = 0.5
TARGETS = {"mic_precision_dnn": 0.90, "mic_recall_dnn": 0.90, "mic_precision_stat": 0.85, "fa_dnn": 0.02, "fa_stat": 0.05}


# --------------------------------------------------------------------------- systems
def dnn_system(name: str, weights: str) -> ss.SadSystem:
    """The CNN-GRU SAD with another weight file, at that file's own threshold."""
    from streamkit.models.sad_dnn import dnn_scores, load_weights

    w = load_weights(weights)
    return ss.SadSystem(name, lambda x: dnn_scores(x, weights=w), float(w.threshold), f"CNN-GRU SAD, weights {weights}")


def stat_system(name: str, spec: str) -> ss.SadSystem:
    """The statistical SAD with analysis parameters ``k=v,...`` (values parsed as JSON) and optional ``threshold=``."""
    from streamkit.dsp.stat_sad import DECISION_DEFAULTS, stat_sad_scores

    params: dict[str, Any] = {}
    for kv in filter(None, spec.split(",")):
        k, _, v = kv.partition("=")
        params[k.strip()] = json.loads(v)
    thr = float(params.pop("threshold", DECISION_DEFAULTS["threshold"]))
    p = {**ss.EVAL_STAT_PARAMS, **params}
    return ss.SadSystem(name, lambda x: stat_sad_scores(x, **p), thr, f"statistical SAD with {params}")


def pick_systems(names: str, dnn: list[str], stat: list[str]) -> list[ss.SadSystem]:
    out = []
    for n in filter(None, names.split(",")):
        try:
            out.append(ss.get_system(n))
        except ss.SystemUnavailable as e:
            print(f"skipping {n}: {e}")
    for spec in dnn:
        name, _, path = spec.partition("=")
        out.append(dnn_system(name, path))
    for spec in stat:
        name, _, params = spec.partition("=")
        out.append(stat_system(name, params))
    return out


# --------------------------------------------------------------------------- sets
def mic_set(real: Path, limit: int | None = None) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """The eval scenes at 8 kHz with their reference masks (the first ``limit`` ones)."""
    d = real / "eval" / "scenes"
    items = []
    for wav in sorted((d / "audio").glob("*.wav"))[:limit]:
        x = ss.load_audio(wav).x
        ref = read_rttm_masks(d / "rttm" / f"{wav.stem}.rttm", ss.RATE, {wav.stem: len(x)})[wav.stem]
        items.append((wav.stem, x, ref))
    if not items:
        raise SystemExit(f"{real}: no eval/scenes/audio/*.wav (make it with `streamkit corpus real --out {real}`)")
    return items


def hf_set(mic: list[tuple[str, np.ndarray, np.ndarray]], seed: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """The eval scenes through the HF channel simulator (time-aligned: the references stay valid)."""
    from streamkit.data.hf_channel import ChannelParams, simulate

    out = []
    for i, (fid, x, ref) in enumerate(mic):
        rng = np.random.default_rng(np.random.SeedSequence([seed, 11, i]))
        y = simulate(x, ChannelParams.random(rng, SEVERITY)).received.astype(np.float32)
        out.append((fid, y, ref))
    return out


def nonspeech_set(real: Path, seconds: float, seed: int) -> list[tuple[str, str, np.ndarray]]:
    """(id, kind, audio) without speech: synthetic HF distractors through the channel and real off-air recordings."""
    from streamkit.data.hf_distractors import KINDS, nonspeech_file

    out = []
    for k, kind in enumerate(KINDS):
        rng = np.random.default_rng(np.random.SeedSequence([seed, 12, k]))
        out.append((f"hf-{kind}", kind, np.asarray(nonspeech_file(kind, seconds, rng, SEVERITY), dtype=np.float32)))
    d = real / "eval" / "offair"
    for wav in sorted((d / "audio").glob("*.wav")):
        lab = json.loads((d / "labels" / f"{wav.stem}.json").read_text(encoding="utf-8"))
        if lab.get("intervals"):
            continue
        out.append((f"offair-{wav.stem}", f"off-air {lab.get('kind', 'recording')}", ss.load_audio(wav).x))
    return out


# --------------------------------------------------------------------------- scoring
def score_items(
    systems: list[ss.SadSystem], items: list[tuple[str, np.ndarray, np.ndarray]]
) -> tuple[dict[str, RocCurve], dict[str, Counts], dict[str, float], int]:
    """Per system: the ROC over 201 thresholds, the counts at its default threshold, process seconds; and the samples."""
    curves: dict[str, RocCurve] = {}
    at: dict[str, Counts] = {}
    secs = {s.name: 0.0 for s in systems}
    n_tot = 0
    for fid, x, ref in items:
        n_tot += len(x)
        for s in systems:
            sc = ss.score_signal(s, x)
            secs[s.name] += sc.seconds
            hyp = frames_to_samples(sc.scores, sc.hop, sc.win, len(x))
            c = sweep({fid: ref}, {fid: hyp}, DEFAULT_THRESHOLDS, COLLAR, rate=ss.RATE)
            d = sweep({fid: ref}, {fid: hyp}, [s.threshold], COLLAR, rate=ss.RATE).counts(0)
            curves[s.name] = curves[s.name] + c if s.name in curves else c
            at[s.name] = at[s.name] + d if s.name in at else d
    return curves, at, secs, n_tot


def precision_at_recall(curve: RocCurve, recall: float = 0.9) -> tuple[float, float]:
    """Best precision over thresholds whose recall is >= ``recall``, and that threshold (NaN if none)."""
    best, thr = float("nan"), float("nan")
    for i in range(len(curve)):
        c = curve.counts(i)
        if c.recall >= recall and (np.isnan(best) or c.precision > best):
            best, thr = c.precision, float(curve.thresholds[i])
    return best, thr


def speech_fraction(system: ss.SadSystem, x: np.ndarray) -> float:
    sc = ss.score_signal(system, x)
    hyp = frames_to_samples(sc.scores, sc.hop, sc.win, len(x))
    return float(np.mean(hyp > system.threshold)) if len(x) else float("nan")


def _pct(v: float) -> str:
    return "   n/a" if v is None or np.isnan(v) else f"{100 * v:6.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--real", required=True, type=Path, help="a `streamkit corpus real` corpus (its eval split is read)")
    ap.add_argument("--systems", default=DEFAULT_SYSTEMS, help=f"comma-separated systems (default {DEFAULT_SYSTEMS})")
    ap.add_argument("--dnn", action="append", default=[], metavar="NAME=WEIGHTS", help="another DNN weight file as system NAME")
    ap.add_argument("--stat", action="append", default=[], metavar="NAME=k=v,...", help="a statistical SAD with other parameters as system NAME")
    ap.add_argument("--seconds", type=float, default=60.0, help="seconds per synthetic HF distractor kind (default 60)")
    ap.add_argument("--seed", type=int, default=7, help="seed of the HF channel draws and distractors (default 7; the training corpora use 0-3)")
    ap.add_argument(
        "--limit", type=int, default=None, metavar="N", help="only the first N eval scenes (a quick check; the published figures use all)"
    )
    ap.add_argument("--out", type=Path, default=RESULTS / "sad_real.json")
    a = ap.parse_args()

    systems = pick_systems(a.systems, a.dnn, a.stat)
    warm = np.random.default_rng(0).standard_normal(ss.RATE).astype(np.float32) * 0.01
    for s in systems:  # untimed warm-up: numba JIT, imports
        s.score_file(warm)
    t0 = time.monotonic()
    mic = mic_set(a.real, a.limit)
    sets = {"mic": mic, "hf": hf_set(mic, a.seed)}
    rows: dict[str, dict[str, Any]] = {s.name: {"threshold": s.threshold, "description": s.description} for s in systems}
    for set_name, items in sets.items():
        curves, at, secs, n = score_items(systems, items)
        for s in systems:
            c = at[s.name]
            p90, thr90 = precision_at_recall(curves[s.name])
            rows[s.name][set_name] = {"precision": c.precision, "recall": c.recall, "f1": c.f1, "p_fa": c.p_fa,
                                      "precision_at_recall90": p90, "threshold_at_recall90": thr90, "rt_factor": secs[s.name] / (n / ss.RATE)}  # fmt: skip
        rows["_" + set_name] = {"files": len(items), "hours": n / ss.RATE / 3600, "speech_fraction": float(sum(r.sum() for _, _, r in items) / n)}
    ns = nonspeech_set(a.real, a.seconds, a.seed)
    for s in systems:
        fa = {fid: speech_fraction(s, x) for fid, _, x in ns}
        dur = np.array([len(x) for _, _, x in ns], dtype=np.float64)
        rows[s.name]["nonspeech"] = {"false_alarm": float(np.dot(list(fa.values()), dur) / dur.sum()), "per_item": fa}
    rows["_nonspeech"] = {"items": {fid: kind for fid, kind, _ in ns}, "hours": float(sum(len(x) for _, _, x in ns) / ss.RATE / 3600)}
    wall = time.monotonic() - t0

    names = [s.name for s in systems]
    print(f"\nmic: {rows['_mic']['files']} real eval scenes, {rows['_mic']['hours']:.2f} h, speech {100 * rows['_mic']['speech_fraction']:.0f} %; "
          f"hf: the same through the HF channel (severity {SEVERITY}); collar {COLLAR} s; default thresholds")  # fmt: skip
    print(
        f"{'system':14s} {'thr':>6s} | {'mic P':>6s} {'R':>6s} {'F1':>6s} {'P@R90':>6s} | {'hf P':>6s} {'R':>6s} {'F1':>6s} {'P@R90':>6s} | {'FA nonsp':>8s} | {'RT':>8s}"
    )
    for n in names:
        r = rows[n]
        m, h = r["mic"], r["hf"]
        print(f"{n:14s} {r['threshold']:6.3f} | {_pct(m['precision'])} {_pct(m['recall'])} {_pct(m['f1'])} {_pct(m['precision_at_recall90'])} | "
              f"{_pct(h['precision'])} {_pct(h['recall'])} {_pct(h['f1'])} {_pct(h['precision_at_recall90'])} | {_pct(r['nonspeech']['false_alarm']):>8s} | "
              f"{m['rt_factor']:8.5f}")  # fmt: skip
    print(f"\nfalse alarms (% of the duration called speech), {a.seconds:g} s per synthetic kind:")
    print(f"{'item':34s} " + " ".join(f"{n[:10]:>10s}" for n in names))
    for fid, _kind, _ in ns:
        print(f"{fid[:34]:34s} " + " ".join(f"{_pct(rows[n]['nonspeech']['per_item'][fid]):>10s}" for n in names))
    result = {
        "benchmark": "sad_real",
        "command": "python benchmarks/sad_real.py " + " ".join(sys.argv[1:]),
        "corpus": str(a.real),
        "corpus_manifest": _manifest_summary(a.real),
        "collar_s": COLLAR,
        "severity": SEVERITY,
        "seed": a.seed,
        "seconds_per_kind": a.seconds,
        "targets": TARGETS,
        "rows": rows,
        "wall_s": round(wall, 1),
        "machine": machine_info(),
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    print(f"\n{wall:.0f} s")
    write_result(a.out, _json_safe(result))


def _json_safe(v: Any) -> Any:
    """NaN (an undefined ratio) as null; numpy scalars as Python numbers."""
    if isinstance(v, dict):
        return {k: _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    if isinstance(v, (float, np.floating)):
        return None if np.isnan(v) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


def _manifest_summary(real: Path) -> Any:
    m = real / "manifest.json"
    if not m.is_file():
        return None
    man = json.loads(m.read_text(encoding="utf-8"))
    return {
        "command": man.get("command"),
        "packages": [{k: p.get(k) for k in ("package", "version", "role", "licence")} for p in man.get("packages", [])],
    }


if __name__ == "__main__":
    main()
