"""``streamkit sad`` (run a SAD over audio files, write RTTM) and ``streamkit eval sad`` (score SADs on a corpus).

``streamkit sad PATH... --system NAME --out DIR [--scores] [--threshold T]``
    Runs one system of :mod:`streamkit.eval.sad_systems` over WAV/FLAC files (directories are
    searched recursively for ``*.wav`` / ``*.flac``). Any sample rate is resampled to 8 kHz and
    multi-channel audio is averaged; segment times are in seconds, so they refer to the original
    file. The systems that are blocks (stat, stat-c, dnn) stream the file through the graph
    ``io.file -> dsp.mono -> dsp.resample -> dsp.stat_sad | models.sad_dnn`` in bounded memory
    (:mod:`streamkit.eval.sad_stream`) and write the block's segments (hysteresis, vote, start-up
    re-scoring: what a graph gives); the others load the file and write speech where
    ``score > threshold``, frames OR-ed onto samples by :func:`~streamkit.eval.sad.frames_to_samples`.
    Writes ``DIR/<stem>.rttm``, and with ``--scores`` ``DIR/<stem>.scores.npy`` plus
    ``DIR/<stem>.scores.json`` (hop, win, rate, system, threshold).

``streamkit eval sad --system NAME[,NAME...] --corpus DIR [--out DIR] [--collar 0.5] [--mode fgnt|opensad]``
    The HF paper's protocol on a corpus written by ``streamkit corpus hf``: sweep thresholds on
    dev, apply the dev-EER and dev-best-F1 thresholds to eval, report R/P/F1/DCF and the RT factor
    (process time / audio duration, dev and eval pooled), beside the paper's Table 2. Writes
    ``sad_eval.json``, ``sad_eval.md`` and ``roc_dev.png`` under ``--out``.

Both print ``streamkit: error: ...`` and return 2 for user errors (missing path, unknown system).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.core.errors import StreamkitError
from streamkit.eval import sad_stream
from streamkit.eval import sad_systems as ss
from streamkit.eval.rttm import mask_to_intervals, read_rttm_masks, write_rttm
from streamkit.eval.sad import (
    DEFAULT_THRESHOLDS,
    ResultRow,
    RocCurve,
    frames_to_samples,
    operating_point_rows,
    results_json,
    results_table,
    roc_plot,
    sweep,
)
from streamkit.io.outputs import atomic_output, write_text

EXIT_USAGE = 2
EXIT_FAILED = 1
AUDIO_EXT = (".wav", ".flac")

#: Heitkaemper et al., "A Database for Research on Detection and Enhancement of Speech Transmitted
#: over HF links" (ITG 2021), Table 2: eval set, 0.5 s collar, threshold at the dev set's EER;
#: RT factor on a Xeon E3-1240 v6 @ 3.7 GHz (copied from shared/sad-spec.md §7). Percent.
PAPER_TABLE2: tuple[dict[str, Any], ...] = (
    {"system": "paper: statistical SAD (C)", "recall": 85.90, "precision": 93.24, "f1": 89.42, "rt_factor": 0.0047},
    {"system": "paper: DNN SAD (CNN+GRU)", "recall": 95.59, "precision": 95.65, "f1": 95.62, "rt_factor": 0.0119},
)


def _err(msg: str) -> None:
    print(f"streamkit: error: {msg}", file=sys.stderr)


# --------------------------------------------------------------------------------------------
# streamkit sad
# --------------------------------------------------------------------------------------------


def add_sad_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of ``streamkit sad``."""
    known = ", ".join([*ss.available(), "dnn", "silero"])
    parser.add_argument("paths", nargs="+", metavar="PATH", help="WAV/FLAC files or directories (searched recursively)")
    parser.add_argument("--system", default="stat", help=f"SAD system (default stat; one of {known})")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory for <stem>.rttm (and scores)")
    parser.add_argument("--scores", action="store_true", help="also write <stem>.scores.npy (float32 per frame) and <stem>.scores.json")
    parser.add_argument("--threshold", type=float, default=None, help="speech where score > T (default: the system's default threshold)")
    return parser


def _collect(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for s in paths:
        p = Path(s)
        if p.is_dir():
            files += sorted(q for q in p.rglob("*") if q.is_file() and q.suffix.lower() in AUDIO_EXT)
        elif p.is_file():
            files.append(p)
        else:
            raise FileNotFoundError(f"path not found: {p}")
    return files


def _file_id(stem: str, seen: set[str]) -> str:
    fid = re.sub(r"\s+", "_", stem) or "file"
    base, k = fid, 2
    while fid in seen:  # the same stem in two directories: keep both
        fid = f"{base}_{k}"
        k += 1
    seen.add(fid)
    return fid


def _score_file(path: Path, system: ss.SadSystem, thr: float) -> sad_stream.FileSad:
    """Speech intervals and frame scores of one file at 8 kHz.

    A system that is a block (stat, stat-c, dnn) runs as a stream over the file
    (:func:`streamkit.eval.sad_stream.sad_file`: bounded memory, the block's segments, so the
    RTTM is what a graph gives); the others score the whole loaded file and take
    ``score > thr`` per frame, OR-ed onto the samples.
    """
    if sad_stream.streamed(system.name):
        return sad_stream.sad_file(path, system.name, thr)
    audio = ss.load_audio(path)
    sc = ss.score_signal(system, audio.x)
    speech = frames_to_samples(sc.scores > thr, sc.hop, sc.win, sc.n_samples)
    return sad_stream.FileSad(mask_to_intervals(speech), sc.scores, sc.hop, sc.win, sc.n_samples, sc.seconds, audio.notes)


def run_sad(ns: argparse.Namespace) -> int:
    """Run ``streamkit sad`` from parsed arguments; 0 on success, 2 for usage errors, 1 if a file failed."""
    try:
        system = ss.get_system(ns.system)
        files = _collect(list(ns.paths))
    except (StreamkitError, FileNotFoundError) as exc:
        _err(str(exc))
        return EXIT_USAGE
    if not files:
        _err(f"no {'/'.join(AUDIO_EXT)} files under {' '.join(ns.paths)}")
        return EXIT_USAGE
    thr = system.threshold if ns.threshold is None else float(ns.threshold)
    if not math.isfinite(thr):
        _err(f"--threshold must be finite, got {ns.threshold}")
        return EXIT_USAGE
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    tot_s = tot_n = 0.0
    failed = 0
    for f in files:
        try:
            sc = _score_file(f, system, thr)
        except (StreamkitError, ValueError) as exc:
            _err(str(exc))
            failed += 1
            continue
        fid = _file_id(f.stem, seen)
        speech = sc.intervals
        write_rttm(out / f"{fid}.rttm", {fid: speech}, ss.RATE)
        if ns.scores:
            with atomic_output(out / f"{fid}.scores.npy", "wb") as fh:
                np.save(fh, sc.scores)
            meta = {"file": str(f), "system": system.name, "threshold": thr, "hop": sc.hop, "win": sc.win, "rate": ss.RATE,
                    "n_samples": sc.n_samples, "frame_t": "frame j covers samples [j*hop, j*hop + win) at rate"}  # fmt: skip
            write_text(out / f"{fid}.scores.json", json.dumps(meta, indent=1))
        tot_s += sc.seconds
        tot_n += sc.n_samples
        dur = sc.n_samples / ss.RATE
        note = f" ({'; '.join(sc.notes)})" if sc.notes else ""
        print(
            f"{f}: {dur:.2f} s, speech {sc.speech_fraction * 100:.1f} %, RT factor {ss.rt_factor(sc.seconds, sc.n_samples):.4f} -> {out / (fid + '.rttm')}{note}"
        )
    done = len(files) - failed
    print(
        f"{system.name}: {done} file(s), {tot_n / ss.RATE:.1f} s audio, {tot_s:.3f} s process time, RT factor {ss.rt_factor(tot_s, int(tot_n)):.4f}"
    )
    return EXIT_FAILED if failed else 0


# --------------------------------------------------------------------------------------------
# streamkit eval sad
# --------------------------------------------------------------------------------------------


def add_eval_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of ``streamkit eval sad``."""
    parser.add_argument("--system", required=True, help=f"comma-separated SAD systems ({', '.join(ss.available())})")
    parser.add_argument("--corpus", required=True, metavar="DIR", help="corpus written by `streamkit corpus hf` (uses dev/ and eval/)")
    parser.add_argument("--out", default="sad_eval", metavar="DIR", help="output directory (default ./sad_eval)")
    parser.add_argument("--collar", type=float, default=0.5, help="no-score collar around reference speech in s (default 0.5, the paper's)")
    parser.add_argument("--mode", choices=("fgnt", "opensad"), default="fgnt", help="collar semantics (default fgnt)")
    return parser


def split_files(corpus: Path, split: str) -> list[tuple[str, Path, Path]]:
    audio_dir = corpus / split / "audio"
    if not audio_dir.is_dir():
        raise FileNotFoundError(f"{corpus}: no {split}/audio directory (is it a corpus from `streamkit corpus hf`?)")
    out = []
    for a in sorted(q for q in audio_dir.iterdir() if q.suffix.lower() in AUDIO_EXT):
        r = corpus / split / "rttm" / f"{a.stem}.rttm"
        if not r.is_file():
            raise FileNotFoundError(f"{corpus}: reference {r} missing for {a}")
        out.append((a.stem, a, r))
    if not out:
        raise FileNotFoundError(f"{corpus}: no audio in {audio_dir}")
    return out


def score_split(
    systems: list[ss.SadSystem],
    files: list[tuple[str, Path, Path]],
    collar: float,
    mode: str,
    per_file: dict[str, dict[str, RocCurve]] | None = None,
) -> tuple[dict[str, RocCurve], dict[str, float], int]:
    """Sweep every system over one split; returns curves, process seconds per system, samples.

    ``per_file``, when given, is filled with ``{file_id: {system: curve}}`` (for breakdowns by
    channel condition).
    """
    secs = {s.name: 0.0 for s in systems}
    n_tot = 0
    curves: dict[str, RocCurve] = {}
    warm = np.random.default_rng(0).standard_normal(ss.RATE).astype(np.float32) * 0.01
    for s in systems:  # untimed warm-up: numba JIT, imports
        s.score_file(warm)
    for fid, apath, rpath in files:
        audio = ss.load_audio(apath)
        n = len(audio.x)
        n_tot += n
        refs = {fid: read_rttm_masks(rpath, ss.RATE, {fid: n})[fid]}
        for s in systems:
            sc = ss.score_signal(s, audio.x)
            secs[s.name] += sc.seconds
            hyp = frames_to_samples(sc.scores, sc.hop, sc.win, n)
            c = sweep(refs, {fid: hyp}, DEFAULT_THRESHOLDS, collar, rate=ss.RATE, mode=mode)  # type: ignore[arg-type]
            curves[s.name] = curves[s.name] + c if s.name in curves else c
            if per_file is not None:
                per_file.setdefault(fid, {})[s.name] = c
    return curves, secs, n_tot


def _reference_lines() -> list[str]:
    return [f"| {r['system']} | eval | dev-EER (paper Table 2) | n/a | {r['recall']:.2f} | {r['precision']:.2f} | {r['f1']:.2f} | n/a | n/a | n/a | "
            f"{r['rt_factor']:.4f} |" for r in PAPER_TABLE2]  # fmt: skip


def run_eval(ns: argparse.Namespace) -> int:
    """Run ``streamkit eval sad`` from parsed arguments: the table on stdout, files under ``--out``."""
    names = [s.strip() for s in str(ns.system).split(",") if s.strip()]
    try:
        if not names:
            raise ss.SystemUnavailable("--system is empty")
        systems = [ss.get_system(n) for n in dict.fromkeys(names)]
        corpus = Path(ns.corpus)
        if not corpus.is_dir():
            raise FileNotFoundError(f"corpus not found: {corpus}")
        if not (ns.collar >= 0 and math.isfinite(ns.collar)):
            raise ValueError(f"--collar must be >= 0, got {ns.collar}")
        dev_files = split_files(corpus, "dev")
        eval_files = split_files(corpus, "eval")
    except (StreamkitError, FileNotFoundError, ValueError) as exc:
        _err(str(exc))
        return EXIT_USAGE
    try:
        dev, dev_s, dev_n = score_split(systems, dev_files, ns.collar, ns.mode)
        ev, ev_s, ev_n = score_split(systems, eval_files, ns.collar, ns.mode)
    except (StreamkitError, ValueError) as exc:
        _err(str(exc))
        return EXIT_FAILED
    rows: list[ResultRow] = []
    rtf: dict[str, float] = {}
    for s in systems:
        rtf[s.name] = ss.rt_factor(dev_s[s.name] + ev_s[s.name], dev_n + ev_n)
        try:
            rows += operating_point_rows(s.name, dev[s.name], ev[s.name], rt_factor=rtf[s.name])
        except ValueError as exc:  # e.g. a dev set without scored non-speech
            _err(f"{s.name}: {exc}")
            return EXIT_FAILED
    main_rows = [r for r in rows if r.dataset == "eval" and r.operating_point in ("dev-EER", "dev-best-F1")]
    table = results_table(main_rows).rstrip("\n") + "\n" + "\n".join(_reference_lines()) + "\n"
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    hours = {"dev": dev_n / ss.RATE / 3600, "eval": ev_n / ss.RATE / 3600}
    md = [
        f"# SAD evaluation: {', '.join(rtf)} on {corpus}",
        "",
        f"Collar {ns.collar:g} s ({ns.mode}), thresholds picked on dev ({hours['dev'] * 60:.1f} min, {len(dev_files)} files), "
        f"applied to eval ({hours['eval'] * 60:.1f} min, {len(eval_files)} files). RT factor = process time / audio duration, "
        "dev and eval pooled, this machine. Paper rows: HF paper Table 2 (ham_radio eval set, not this corpus).",
        "",
        table,
        "## All operating points",
        "",
        results_table(rows),
    ]
    write_text(out / "sad_eval.md", "\n".join(md))
    js = results_json(
        rows,
        corpus=str(corpus),
        collar_s=ns.collar,
        mode=ns.mode,
        systems={s.name: {"description": s.description, "default_threshold": s.threshold, "rt_factor": rtf[s.name]} for s in systems},
        audio_hours=hours,
        paper_table2=list(PAPER_TABLE2),
        roc_dev={k: v.to_dict() for k, v in dev.items()},
        roc_eval={k: v.to_dict() for k, v in ev.items()},
    )
    write_text(out / "sad_eval.json", json.dumps(js, indent=1))
    roc_plot(dev, out / "roc_dev.png", title=f"SAD ROC, dev ({ns.collar:g} s collar)")
    print(table, end="")
    print(f"wrote {out / 'sad_eval.md'}, {out / 'sad_eval.json'}, {out / 'roc_dev.png'}")
    return 0


if __name__ == "__main__":  # python -m streamkit.eval.sad_cli PATH... --system stat --out DIR
    raise SystemExit(run_sad(add_sad_arguments(argparse.ArgumentParser(prog="streamkit sad")).parse_args()))
