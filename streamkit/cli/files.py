"""File commands: ``streamkit sad``, ``streamkit eval sad``, ``streamkit transcribe``, ``streamkit sed``.

``streamkit sad PATH... --system NAME --out DIR [--scores] [--threshold T]``
    Runs one system of :mod:`streamkit.eval.sad_systems` over WAV/FLAC files (directories are
    searched recursively). Any sample rate is resampled to 8 kHz and multi-channel audio is
    averaged; segment times are in seconds, so they refer to the original file
    (:func:`streamkit.eval.sad_files.score_file`). Writes ``DIR/<stem>.rttm``, and with
    ``--scores`` ``DIR/<stem>.scores.npy`` plus ``DIR/<stem>.scores.json`` (hop, win, rate,
    system, threshold).

``streamkit eval sad --system NAME[,NAME...] --corpus DIR [--out DIR] [--collar 0.5] [--mode fgnt|opensad]``
    The HF paper's protocol on a corpus written by ``streamkit corpus hf``: sweep thresholds on
    dev, apply the dev-EER and dev-best-F1 thresholds to eval, report R/P/F1/DCF and the RT factor
    (process time / audio duration, dev and eval pooled), beside the paper's Table 2. Writes
    ``sad_eval.json``, ``sad_eval.md`` and ``roc_dev.png`` under ``--out``.

``streamkit transcribe PATH...``
    Statistical SAD + multilingual streaming RNN-T per file (:func:`streamkit.models.transcribe.transcribe_file`).
    One line per utterance::

        talk.wav  12.35-15.02  en  0.97  the weather is fine today

    or, with ``--json``, one JSON object per utterance (file, start_s, end_s, lang, text,
    confidence, mean LID posteriors, the LID rule used (``lid_method``: ``lid`` mean posterior,
    ``lid-last`` last frame's, see ``--lid-select``; ``+prior`` with ``--lid-prior``), T_avg, words
    with their times). ``--sad none`` decodes each file as one stream (cut every
    ``--max-utterance-s``) without a SAD.

``streamkit sed PATH...``
    Sliding-window sound event detection (:class:`streamkit.models.sed_engine.SedEngine`) over
    files of any length, read in blocks; detections in the DCASE strong-label format (filename,
    onset, offset, event_label).

Each prints ``streamkit: error: ...`` and returns 2 for user errors (missing path, unknown
system, bad option), 1 when a file failed (the others are still done).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from streamkit.cli.common import EXIT_RUNTIME as EXIT_FAILED
from streamkit.cli.common import EXIT_USAGE, add_command, commands, error
from streamkit.core.errors import ConfigError, StreamkitError

#: what ``streamkit sed`` reads from a directory
SED_AUDIO_EXT = (".wav", ".flac", ".ogg", ".aif", ".aiff")


def add_parsers(sub: Any) -> None:
    add_command(sub, "sad", help="run a SAD over audio files or directories, write one RTTM per file",
                description="Run a SAD over WAV/FLAC files or directories (resampled to 8 kHz); write one RTTM per file.",
                arguments=add_sad_arguments, run=run_sad)  # fmt: skip
    add_command(sub, "eval", help="evaluate: `eval sad` scores SAD systems on a generated corpus",
                description="Evaluate. `streamkit eval sad --help` lists the options.", arguments=add_eval_parsers)  # fmt: skip
    add_command(sub, "transcribe", help="SAD + multilingual ASR over audio files: language, text and times per utterance",
                description="Run SAD + multilingual streaming RNN-T over audio files: per utterance the language, the text and the "
                            "times (--json for JSON Lines).",
                arguments=add_transcribe_arguments, run=run_transcribe)  # fmt: skip
    add_command(sub, "sed", help="sound event detection over audio files, DCASE-format detections",
                description="Sliding-window sound event detection over audio files of any length; detections in the DCASE format "
                            "(filename, onset, offset, event_label).",
                arguments=add_sed_arguments, run=run_sed)  # fmt: skip


def add_eval_parsers(ev: argparse.ArgumentParser) -> None:
    add_command(commands(ev, "what", metavar="WHAT", required=True), "sad",
                help="the paper's protocol (collar, dev-EER threshold on eval, ROC)",
                description="Score SAD systems on a `streamkit corpus hf` corpus: dev-EER threshold applied to eval, ROC plot, "
                            "Markdown/JSON table.",
                arguments=add_eval_arguments, run=run_eval)  # fmt: skip


# --------------------------------------------------------------------------- streamkit sad
def add_sad_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of ``streamkit sad``."""
    from streamkit.eval import sad_systems as ss

    known = ", ".join([*ss.available(), "dnn", "silero"])
    parser.add_argument("paths", nargs="+", metavar="PATH", help="WAV/FLAC files or directories (searched recursively)")
    parser.add_argument("--system", default="stat", help=f"SAD system (default stat; one of {known})")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory for <stem>.rttm (and scores)")
    parser.add_argument("--scores", action="store_true", help="also write <stem>.scores.npy (float32 per frame) and <stem>.scores.json")
    parser.add_argument("--threshold", type=float, default=None, help="speech where score > T (default: the system's default threshold)")
    return parser


def run_sad(ns: argparse.Namespace) -> int:
    """Run ``streamkit sad`` from parsed arguments; 0 on success, 2 for usage errors, 1 if a file failed."""
    import numpy as np

    from streamkit.eval import sad_systems as ss
    from streamkit.eval.rttm import write_rttm
    from streamkit.eval.sad_files import AUDIO_EXT, collect_audio, file_id, score_file
    from streamkit.io.outputs import atomic_output, write_text

    try:
        system = ss.get_system(ns.system)
        files = collect_audio(list(ns.paths))
    except (StreamkitError, FileNotFoundError) as exc:
        error(str(exc))
        return EXIT_USAGE
    if not files:
        error(f"no {'/'.join(AUDIO_EXT)} files under {' '.join(ns.paths)}")
        return EXIT_USAGE
    thr = system.threshold if ns.threshold is None else float(ns.threshold)
    if not math.isfinite(thr):
        error(f"--threshold must be finite, got {ns.threshold}")
        return EXIT_USAGE
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    tot_s = tot_n = 0.0
    failed = 0
    for f in files:
        try:
            sc = score_file(f, system, thr)
        except (StreamkitError, ValueError) as exc:
            error(str(exc))
            failed += 1
            continue
        fid = file_id(f.stem, seen)
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


# --------------------------------------------------------------------------- streamkit eval sad
def add_eval_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of ``streamkit eval sad``."""
    from streamkit.eval import sad_systems as ss

    parser.add_argument("--system", required=True, help=f"comma-separated SAD systems ({', '.join(ss.available())})")
    parser.add_argument("--corpus", required=True, metavar="DIR", help="corpus written by `streamkit corpus hf` (uses dev/ and eval/)")
    parser.add_argument("--out", default="sad_eval", metavar="DIR", help="output directory (default ./sad_eval)")
    parser.add_argument("--collar", type=float, default=0.5, help="no-score collar around reference speech in s (default 0.5, the paper's)")
    parser.add_argument("--mode", choices=("fgnt", "opensad"), default="fgnt", help="collar semantics (default fgnt)")
    return parser


def run_eval(ns: argparse.Namespace) -> int:
    """Run ``streamkit eval sad`` from parsed arguments: the table on stdout, files under ``--out``."""
    from streamkit.eval import sad_systems as ss
    from streamkit.eval.sad import ResultRow, operating_point_rows, results_json, results_table, roc_plot
    from streamkit.eval.sad_files import PAPER_TABLE2, reference_lines, score_split, split_files
    from streamkit.io.outputs import write_text

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
        error(str(exc))
        return EXIT_USAGE
    try:
        dev, dev_s, dev_n = score_split(systems, dev_files, ns.collar, ns.mode)
        ev, ev_s, ev_n = score_split(systems, eval_files, ns.collar, ns.mode)
    except (StreamkitError, ValueError) as exc:
        error(str(exc))
        return EXIT_FAILED
    rows: list[ResultRow] = []
    rtf: dict[str, float] = {}
    for s in systems:
        rtf[s.name] = ss.rt_factor(dev_s[s.name] + ev_s[s.name], dev_n + ev_n)
        try:
            rows += operating_point_rows(s.name, dev[s.name], ev[s.name], rt_factor=rtf[s.name])
        except ValueError as exc:  # e.g. a dev set without scored non-speech
            error(f"{s.name}: {exc}")
            return EXIT_FAILED
    main_rows = [r for r in rows if r.dataset == "eval" and r.operating_point in ("dev-EER", "dev-best-F1")]
    table = results_table(main_rows).rstrip("\n") + "\n" + "\n".join(reference_lines()) + "\n"
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


# --------------------------------------------------------------------------- streamkit transcribe
def add_transcribe_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of ``streamkit transcribe``; the defaults are the block's (models.rnnt_asr), one source of truth."""
    from streamkit.models.rnnt_stream import (
        DEFAULT_BEAM,
        DEFAULT_LEXICON_BEAM,
        DEFAULT_PRE_ROLL_S,
        DEFAULT_S_TH,
        DEFAULT_TAU_FRAMES,
        DEFAULT_WORD_PENALTY,
    )

    parser.add_argument("paths", nargs="+", metavar="PATH", help="audio files or directories (searched recursively; WAV/FLAC/OGG...)")
    parser.add_argument("--weights", default=None, metavar="PT", help="RNN-T weight file (default: the shipped multi-softmax LID model)")
    parser.add_argument("--json", action="store_true", help="JSON Lines: one object per utterance")
    parser.add_argument("--sad", choices=("stat", "none"), default="stat", help="utterances from the statistical SAD (default) or none")
    parser.add_argument("--beam", type=int, default=None,
                        help=f"beam width of each language's search (default {DEFAULT_BEAM}, with --lexicon {DEFAULT_LEXICON_BEAM}; 1 = greedy)")  # fmt: skip
    parser.add_argument(
        "--tau", type=float, default=DEFAULT_TAU_FRAMES, help=f"LID shutoff: frames (30 ms) before a decoder may be switched off (default {DEFAULT_TAU_FRAMES:g}; inf = never)"
    )
    parser.add_argument("--s-th", type=float, default=DEFAULT_S_TH, help=f"LID shutoff: margin of the LID log-posterior statistic (default {DEFAULT_S_TH:g}; inf = never)")
    parser.add_argument("--lid-score", choices=("auto", "sum", "last"), default="auto",
                        help="LID shutoff statistic: cumulative log posterior (sum, the paper's eq. 1) or the latest frame's (last); "
                             "auto (default): last for a recurrent LID head such as the shipped model's, else sum")  # fmt: skip
    parser.add_argument("--lid-select", choices=("auto", "mean", "last"), default="auto",
                        help="language of each utterance among the surviving decoders: highest mean LID posterior (the paper) or last-frame posterior; "
                             "auto (default): last for a recurrent LID head such as the shipped model's, else mean")  # fmt: skip
    parser.add_argument("--lid-prior", default="none", metavar="SPEC",
                        help="language prior (Bayes' rule) for the LID shutoff and each utterance's language choice: none (default, uniform as the paper), "
                             "train (the model's training hours per language) or LANG=WEIGHT,... for every model language, e.g. the expected mix")  # fmt: skip
    parser.add_argument("--languages", default=None, help="comma-separated languages to decode (default: all of the model's)")
    parser.add_argument("--pre-roll-s", type=float, default=DEFAULT_PRE_ROLL_S, help=f"start each utterance this much before the SAD's start (default {DEFAULT_PRE_ROLL_S:g} s)")
    parser.add_argument("--max-utterance-s", type=float, default=30.0, help="cut utterances longer than this (default 30 s)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--lexicon", default=None, metavar="SPEC",
                        help="decode only words of a word list: 'system' (the Debian dictionaries the training corpus was drawn from) "
                             "or a directory of <lang>.words.txt files (default: free spelling)")  # fmt: skip
    parser.add_argument("--word-penalty", type=float, default=None,
                        help=f"with --lexicon: log-probability subtracted per word (default {DEFAULT_WORD_PENALTY:g})")  # fmt: skip
    return parser


def _inf_none(v: float) -> float | None:
    return None if math.isinf(v) else float(v)


def run_transcribe(ns: argparse.Namespace) -> int:
    """Run ``streamkit transcribe``; 0 on success, 2 for usage errors, 1 if a file failed."""
    from streamkit.eval.sad_files import collect_audio
    from streamkit.models.rnnt_stream import DEFAULT_BEAM, DEFAULT_LEXICON_BEAM, DEFAULT_WORD_PENALTY
    from streamkit.models.transcribe import RATE, default_weights, transcribe_file

    weights = Path(ns.weights) if ns.weights else default_weights()
    if not weights.is_file():
        error(f"no RNN-T weights at {weights}" + ("" if ns.weights else
             " (this build ships none yet): train a model with `streamkit train rnnt --variant lid --corpus DIR --out rnnt_lid.pt` and pass --weights"))  # fmt: skip
        return EXIT_USAGE
    beam = (DEFAULT_LEXICON_BEAM if ns.lexicon is not None else DEFAULT_BEAM) if ns.beam is None else ns.beam
    if beam < 1 or ns.threads < 1 or ns.max_utterance_s <= 0 or ns.pre_roll_s < 0 or ns.tau < 0 or ns.s_th < 0:
        error("--beam and --threads must be >= 1, --max-utterance-s > 0, --pre-roll-s, --tau and --s-th >= 0")
        return EXIT_USAGE
    if ns.word_penalty is not None and ns.lexicon is None:
        error("--word-penalty needs --lexicon")
        return EXIT_USAGE
    penalty = (0.0 if ns.lexicon is None else DEFAULT_WORD_PENALTY) if ns.word_penalty is None else ns.word_penalty  # as the block's default
    if not (0 <= penalty < math.inf):
        error(f"--word-penalty must be finite and >= 0, got {penalty:g}")
        return EXIT_USAGE
    try:  # a corrupt or foreign weight file is a usage error, reported once
        from streamkit.models.rnnt import load_model

        model, meta = load_model(weights)
    except (StreamkitError, ValueError, OSError) as exc:
        error(str(exc).splitlines()[0])
        return EXIT_USAGE
    from streamkit.models.rnnt_stream import parse_lid_prior, resolve_lid_prior

    try:
        prior = parse_lid_prior(ns.lid_prior)
        resolve_lid_prior(prior, model.cfg, meta, Path(weights).name, "--lid-prior")
    except (StreamkitError, ValueError) as exc:
        error(str(exc) if str(exc).startswith("--lid-prior") else f"--lid-prior: {exc}")
        return EXIT_USAGE
    if ns.lexicon is not None:
        from streamkit.models.rnnt_lexicon import cached_model_lexicons
        from streamkit.models.rnnt_stream import symbol_tables

        try:  # a missing dictionary or directory is a usage error, reported before any file; the
            # tries built here are the ones every file's ASR block finds in the cache
            cached_model_lexicons(model.cfg, symbol_tables(model.cfg, meta), ns.lexicon, word_penalty=penalty)
        except (StreamkitError, ValueError) as exc:
            error(f"--lexicon: {exc}")
            return EXIT_USAGE
    try:
        files = collect_audio(list(ns.paths))
    except FileNotFoundError as exc:
        error(str(exc))
        return EXIT_USAGE
    if not files:
        error(f"no audio files under {' '.join(ns.paths)}")
        return EXIT_USAGE
    langs = [s.strip() for s in ns.languages.split(",") if s.strip()] if ns.languages else None
    failed = 0
    tot_audio = tot_cpu = 0.0
    for f in files:
        try:
            t0 = time.process_time()
            utts, st = transcribe_file(f, weights, sad=ns.sad, beam=beam, tau=_inf_none(ns.tau), s_th=_inf_none(ns.s_th), languages=langs, lid_select=ns.lid_select, lid_score=ns.lid_score, lid_prior=prior,
                                       pre_roll_s=ns.pre_roll_s, max_utterance_s=ns.max_utterance_s, threads=ns.threads,
                                       lexicon=ns.lexicon, word_penalty=penalty)  # fmt: skip
            cpu = time.process_time() - t0
        except (StreamkitError, ValueError, OSError) as exc:
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            error(msg if str(f) in msg else f"{f}: {msg}")
            failed += 1
            continue
        dur = st["samples_8k"] / RATE
        tot_audio += dur
        tot_cpu += cpu
        for u in utts:
            if ns.json:
                print(json.dumps({"file": str(f), **u}, ensure_ascii=False))
            else:
                print(f"{f}  {u['start_s']:.2f}-{u['end_s']:.2f}  {u['lang'] or '?'}  {u['confidence']:.2f}  {u['text']}")
        if not ns.json:
            print(f"# {f}: {dur:.1f} s, {len(utts)} utterance(s), RT factor {cpu / dur if dur else 0:.3f}", file=sys.stderr)
    if not ns.json and tot_audio:
        print(f"# {len(files) - failed} file(s), {tot_audio:.1f} s audio, RT factor {tot_cpu / tot_audio:.3f} (CPU time / audio)", file=sys.stderr)
    return EXIT_FAILED if failed else 0


# --------------------------------------------------------------------------- streamkit sed
def add_sed_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of ``streamkit sed``; the help ends with the known classes."""
    from streamkit.data.sed_sources import CLASSES
    from streamkit.models.sed_settings import DEFAULT_HOP_S, DEFAULT_WINDOW_S, POSTS

    parser.epilog = (f"Known classes (the shipped weights; the 10 of DCASE 2019 task 4): {', '.join(CLASSES)}. "
                     "Another --weights file detects the classes in its config.")  # fmt: skip

    parser.add_argument("paths", nargs="+", metavar="PATH", help=f"audio files ({'/'.join(SED_AUDIO_EXT)}) or directories (searched recursively)")
    parser.add_argument("--out", default="-", metavar="FILE.tsv", help="DCASE strong-label TSV to write (default: standard output)")
    parser.add_argument("--weights", default=None, metavar="PATH", help="SED CRNN weight file (default: the shipped weights)")
    parser.add_argument("--window", type=float, default=DEFAULT_WINDOW_S, metavar="S", help="window W in seconds (default 10)")
    parser.add_argument("--hop", type=float, default=DEFAULT_HOP_S, metavar="S", help="hop H in seconds (default 1)")
    parser.add_argument("--median", type=float, default=None, metavar="S", help="median filter length in seconds, all classes (default 0.45)")
    parser.add_argument("--high", type=float, default=None, help="a class switches on where its probability > this (default 0.5)")
    parser.add_argument("--low", type=float, default=None, help="hysteresis: ... and stays on while > this (default: = --high)")
    parser.add_argument(
        "--post",
        choices=POSTS,
        default="auto",
        help="tuned: the weight file's per-class median windows and thresholds, fitted on validation clips (`streamkit train sed-post`; "
        "the shipped weights have them); fixed: --median and --high (default 0.45 s, 0.5) for every class; auto (default): tuned when "
        "the file has them and neither --median nor --high is given",
    )
    parser.add_argument("--clip-gate", type=float, default=None, metavar="G",
                        help="no events of a class in a window whose clip-level probability of it is below G, all classes "
                        "(default: the tuned setting's per-class gates when --post tuned runs and has them, else none)")  # fmt: skip
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--no-cache", action="store_true", help="recompute the CNN for every window (slower; same detections)")
    parser.add_argument("--block-s", type=float, default=30.0, metavar="S", help="seconds of audio read at a time (memory bound; default 30)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no per-file progress on standard error")
    return parser


def _collect_sed(paths: list[str]) -> list[tuple[Path, str]]:
    """``(file, name in the TSV)``: a file's own name, or its path relative to the directory given."""
    out: list[tuple[Path, str]] = []
    for s in paths:
        p = Path(s)
        if p.is_dir():
            for q in sorted(q for q in p.rglob("*") if q.is_file() and q.suffix.lower() in SED_AUDIO_EXT):
                out.append((q, q.relative_to(p).as_posix()))
        elif p.is_file():
            out.append((p, p.name))
        else:
            raise FileNotFoundError(f"path not found: {p}")
    return out


def run_sed(args: argparse.Namespace) -> int:
    """Run ``streamkit sed``: 0 on success, 2 for usage errors, 1 if a file failed (the others are still written)."""
    from streamkit.core.params import number
    from streamkit.eval.sed import Event, strong_tsv_text
    from streamkit.io.outputs import check_output_path, write_text
    from streamkit.models.sed_engine import SedEngine
    from streamkit.models.sed_offline import sed_stream_file
    from streamkit.models.sed_settings import default_weights, load_meta, resolve_gate, resolve_post

    try:
        if args.out != "-":
            check_output_path(args.out)  # refused now, not after the whole run
        files = _collect_sed(list(args.paths))
        if not files:
            raise ConfigError(f"no {'/'.join(SED_AUDIO_EXT)} files under {' '.join(args.paths)}")
        if not 1 <= int(args.threads) <= 256:
            raise ConfigError(f"--threads must be in 1..256, got {args.threads}")
        number("--block-s", args.block_s, 0.1)
        import torch

        torch.set_num_threads(int(args.threads))
        wpath = default_weights() if args.weights is None else Path(args.weights)
        model, meta = load_meta(wpath)
        if args.post == "tuned" and (args.median is not None or args.high is not None):
            raise ConfigError("--post tuned takes the median windows and thresholds from the weight file; drop --median / --high")
        med, high, used = resolve_post(args.post, meta, model.cfg.classes, args.median, args.high, wpath.name)
        gate = resolve_gate(used, meta, model.cfg.classes, args.clip_gate, wpath.name)
        eng = SedEngine(model, window_s=args.window, hop_s=args.hop, median_s=med, threshold_high=high, threshold_low=args.low,
                        cache=not args.no_cache, clip_gate=gate)  # fmt: skip
    except (StreamkitError, FileNotFoundError) as exc:
        error(str(exc))
        return EXIT_USAGE
    events: dict[str, list[Event]] = {}
    failed = 0
    tot_n = 0
    tot_s = 0.0
    rate = eng.geo.rate
    for path, name in files:
        if name in events:
            error(f"{path}: the name {name!r} is already in the output; skipped")
            failed += 1
            continue
        try:
            steps, n, busy = sed_stream_file(path, eng, float(args.block_s))
        except StreamkitError as exc:
            eng.reset()
            error(str(exc))
            failed += 1
            continue
        dets = [d for s in steps for d in s.detections]
        events[name] = [Event(name, round(d.onset_s, 3), round(d.offset_s, 3), d.label) for d in dets if round(d.offset_s, 3) > round(d.onset_s, 3)]
        tot_n += n
        tot_s += busy
        if not args.quiet:
            print(f"{path}: {n / rate:.2f} s, {len(dets)} event(s), RT factor {busy / max(n / rate, 1e-9):.4f}", file=sys.stderr)
    text = strong_tsv_text(events, classes=None)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        try:
            write_text(args.out, text)
        except StreamkitError as exc:
            error(str(exc))
            return EXIT_USAGE
    if not args.quiet:
        print(f"sed: {len(events)} file(s), {tot_n / rate:.1f} s audio, RT factor {tot_s / max(tot_n / rate, 1e-9):.4f}"
              + ("" if args.out == "-" else f" -> {args.out}"), file=sys.stderr)  # fmt: skip
    return EXIT_FAILED if failed else 0
