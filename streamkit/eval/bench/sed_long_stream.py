"""The SED block on long recordings: eval clips joined into continuous streams, with and without clip gates.

``streamkit sed`` and the ``models.sed`` block run 10 s windows every second over a stream of any
length. The corpus's strongly labelled eval clips are 10 s each, so a clip is one window (plus the
partial windows at its end) and every figure in ``sed_table1.py`` / ``sed_post_tune.py`` is of
window-aligned clips. A live stream is not aligned: most windows straddle the sounds of two
stretches, and every window is full. This benchmark joins ``--join`` consecutive eval clips
(their audio end to end, their labels shifted by the clips' start times) into one recording, runs
the same engine over it (:func:`streamkit.models.sed_offline.sed_file`, window ``--window``, hop
``--hop``), and scores the detections against the joined labels with the DCASE event-based macro F1
(collars 200 ms / max(200 ms, 20 %)) and the 1 s segment-based macro F1 (sed_eval, through
:mod:`streamkit.eval.sed`). Clip gates (``clip_gate``: a class's frames in a window set to 0 when
the window's clip probability of it is below the gate) were fitted on whole clips; in the joined
stream a window's clip probability pools ten seconds that may hold two clips' sounds, so their
effect there is measured, not assumed.

Rows: each clip alone (as ``streamkit sed DIR/eval/audio`` does), and the joined streams; each with
the weight file's post-processing as users get it (``post="auto"``: its tuned thresholds, windows
and gates when it has them) and with the gates off (``clip_gate=0``, the same thresholds and
windows). Every label event of a joined stream keeps its clip's times plus the clip's offset, so
an event at a clip's boundary stays two events, as the truth of two recordings would be.

The recordings are those of the standard corpus (``streamkit corpus sed --out DIR --seed 1``; only
its eval subset is read: ``--clips-synthetic 0 --clips-weak 0 --clips-unlabelled 0
--clips-validation 0`` makes the same 500 eval clips in seconds), the domain the shipped weights
were trained and tuned on.

    python benchmarks/sed_long_stream.py --corpus DIR [--weights PATH] [--join 10] [--clips 500] [--hop 1] [--threads 1]

Writes benchmarks/results/sed_long_stream.json.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from streamkit.eval.bench import REPO, RESULTS, machine_info, write_result
from streamkit.eval.sed import Event, event_based, segment_based
from streamkit.models.sed_crnn import load_model
from streamkit.models.sed_offline import sed_file
from streamkit.models.sed_settings import default_weights
from streamkit.train.sed import CorpusError, SedCorpus

OUT = RESULTS / "sed_long_stream.json"


def _no_paths(weights: str, argv: list[str]) -> tuple[str, str]:
    """The weights (repository-relative when shipped, else their file name) and this run's command
    with ``--corpus DIR``: no machine paths."""
    w = Path(weights).resolve()
    wname = w.relative_to(REPO).as_posix() if w.is_relative_to(REPO) else w.name
    args = " ".join(argv)
    args = re.sub(r"--corpus\s+\S+", "--corpus DIR", args)
    args = re.sub(r"--weights\s+\S+", f"--weights {wname}", args)
    args = re.sub(r"--out\s+\S+", "--out OUT", args)
    return wname, "python benchmarks/sed_long_stream.py " + args


def read_clips(corpus: SedCorpus, limit: int | None) -> tuple[list[str], list[np.ndarray], dict[str, list[Event]], int]:
    """The eval clips in name order (at most ``limit``), their samples and labels, and the rate."""
    import soundfile as sf

    files = corpus.files.get("eval", [])[:limit]
    if not files:
        raise SystemExit(f"no eval clips in {corpus.root / 'eval' / 'audio'}")
    audio = []
    for name in files:
        x, sr = sf.read(str(corpus.root / "eval" / "audio" / name), dtype="float32", always_2d=True)
        if int(sr) != corpus.rate:
            raise SystemExit(f"{name}: rate {sr} Hz, the corpus's {corpus.rate} Hz")
        audio.append(x.mean(axis=1) if x.shape[1] > 1 else x[:, 0])
    return list(files), audio, {n: corpus.strong["eval"][n] for n in files}, corpus.rate


def join(names: list[str], audio: list[np.ndarray], labels: dict[str, list[Event]], rate: int, k: int) -> list[tuple[str, np.ndarray, list[Event]]]:
    """Groups of ``k`` consecutive clips as ``(name, samples, events)``; the last group may be shorter."""
    out = []
    for g in range(0, len(names), k):
        name = f"joined_{g // k:03d}.wav"
        start, xs, evs = 0, [], []
        for n, x in zip(names[g : g + k], audio[g : g + k]):
            t0 = start / rate
            evs += [Event(name, round(e.onset + t0, 3), round(e.offset + t0, 3), e.event_label) for e in labels[n]]
            xs.append(x)
            start += x.shape[0]
        out.append((name, np.concatenate(xs), evs))
    return out


def detect(
    items: list[tuple[str, np.ndarray, list[Event]]], weights: str, window: float, hop: float, gate: float | None, rate: int
) -> tuple[list[Event], float, float]:
    """Detections of every item (audio at ``rate``, resampled to the model's when it differs), busy seconds and audio seconds."""
    est: list[Event] = []
    busy = audio_s = 0.0
    for name, x, _ in items:
        r = sed_file(x, weights, window_s=window, hop_s=hop, clip_gate=gate, rate=rate)
        est += [Event(name, d.onset_s, d.offset_s, d.label) for d in r.detections]
        busy += r.seconds
        audio_s += x.shape[0] / rate
    return est, busy, audio_s


def score(items: list[tuple[str, np.ndarray, list[Event]]], est: list[Event], rate: int) -> dict[str, float]:
    ref = {name: evs for name, _, evs in items}
    files = [name for name, _, _ in items]
    est_by: dict[str, list[Event]] = {n: [] for n in files}
    for e in est:
        est_by[e.filename].append(e)
    ev = event_based(ref, est_by, files=files)
    seg = segment_based(ref, est_by, files=files, durations={name: x.shape[0] / rate for name, x, _ in items})
    return {"event_f1": round(100 * ev.macro_f1, 2), "segment_f1": round(100 * seg.macro_f1, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True, help="a corpus written by `streamkit corpus sed` (its eval subset is read)")
    ap.add_argument("--weights", default=None, help="SED weight file (default: the shipped one)")
    ap.add_argument("--join", type=int, default=10, help="clips per joined recording (default 10: 100 s)")
    ap.add_argument("--clips", type=int, default=None, help="use the first N eval clips (default all)")
    ap.add_argument("--window", type=float, default=10.0, help="window W in s (default 10)")
    ap.add_argument("--hop", type=float, default=1.0, help="hop H in s (default 1)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    if a.join < 2:
        ap.error("--join must be at least 2")
    torch.set_num_threads(a.threads)
    weights = str(a.weights or default_weights())
    _, meta = load_model(weights)
    tuned = meta.get("post_tuned") or {}
    try:
        corpus = SedCorpus(a.corpus)
    except CorpusError as exc:
        raise SystemExit(str(exc)) from None
    names, audio, labels, rate = read_clips(corpus, a.clips)
    clips = [(n, x, labels[n]) for n, x in zip(names, audio)]
    joined = join(names, audio, labels, rate, a.join)
    rows: list[dict[str, Any]] = []
    t_all = time.perf_counter()
    for layout, items in (("each clip alone", clips), (f"{a.join} clips joined", joined)):
        for gates, gate in (("file's gates" if tuned.get("clip_gate") is not None else "file's post (no gates)", None), ("gates off", 0.0)):
            est, busy, audio_s = detect(items, weights, a.window, a.hop, gate, rate)
            row = {"layout": layout, "gates": gates, "recordings": len(items), "audio_s": round(audio_s, 1), "detections": len(est),
                   **score(items, est, rate), "rtf": round(busy / audio_s, 4)}  # fmt: skip
            rows.append(row)
            print(f"  {layout:>18} | {gates:>22} | event F1 {row['event_f1']:6.2f} | segment F1 {row['segment_f1']:6.2f} | RT {row['rtf']:.4f}", flush=True)
    by = {(r["layout"], r["gates"] == "gates off"): r for r in rows}
    gain = {layout: round(by[(layout, False)]["event_f1"] - by[(layout, True)]["event_f1"], 2) for layout in ("each clip alone", f"{a.join} clips joined")}
    print("\n| recordings | post-processing | event F1 % | segment F1 % | detections | RT factor |\n| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['layout']} ({r['recordings']} x {r['audio_s'] / r['recordings']:.0f} s) | {r['gates']} | {r['event_f1']:.2f} | {r['segment_f1']:.2f} | {r['detections']} | {r['rtf']:.4f} |")
    print(f"\ngates' event-F1 gain: {gain}")
    wname, command = _no_paths(weights, list(sys.argv[1:] if argv is None else argv))
    result = {
        "benchmark": "sed_long_stream",
        "command": command,
        "machine": machine_info(),
        "weights": wname,
        "corpus": corpus.corpus_command(),
        "window_s": a.window,
        "hop_s": a.hop,
        "join": a.join,
        "threads": a.threads,
        "rows": rows,
        "gate_gain_event_f1": gain,
        "seconds": round(time.perf_counter() - t_all, 1),
    }
    return write_result(Path(a.out), result)


if __name__ == "__main__":
    raise SystemExit(main())
