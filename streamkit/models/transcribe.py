"""``streamkit transcribe PATH...``: statistical SAD + multilingual streaming RNN-T over audio files.

Per file the graph is the one the live monitor runs, streaming the file in bounded memory: the
audio (``io.file``; any rate and channel count, mixed to mono by ``dsp.mono`` and resampled to
8 kHz by ``dsp.resample``, soxr HQ, as ``streamkit sad``) -> ``dsp.speech_gate`` (the
statistical SAD; the audio passes with sample-exact speech tags) -> ``models.rnnt_asr`` (one beam
search per language in lockstep, LID shutoff). One line per utterance::

    talk.wav  12.35-15.02  en  0.97  the weather is fine today

or, with ``--json``, one JSON object per utterance (file, start_s, end_s, lang, text, confidence,
mean LID posteriors, the LID rule used (``lid_method``: ``lid`` mean posterior, ``lid-last`` last
frame's, see ``--lid-select``; ``+prior`` with ``--lid-prior``), T_avg, words with their times). ``--sad none`` decodes each file as one stream
(cut every ``--max-utterance-s``) without a SAD.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from streamkit.core.errors import StreamkitError

# the option defaults are the block's (models.rnnt_asr): one source of truth for the CLI and graph files
from streamkit.models.rnnt_stream import (
    DEFAULT_BEAM,
    DEFAULT_LEXICON_BEAM,
    DEFAULT_PRE_ROLL_S,
    DEFAULT_S_TH,
    DEFAULT_TAU_FRAMES,
    DEFAULT_WORD_PENALTY,
)

EXIT_USAGE = 2
EXIT_FAILED = 1
RATE = 8000


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of ``streamkit transcribe``."""
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


def _err(msg: str) -> None:
    print(f"streamkit: error: {msg}", file=sys.stderr)


def _inf_none(v: float) -> float | None:
    return None if math.isinf(v) else float(v)


def default_weights() -> Path:
    from streamkit.models import RNNT_WEIGHTS

    return RNNT_WEIGHTS


def transcribe_array(x: Any, weights: str | Path, *, rate: Any = RATE, **kw: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Transcribe float32 audio ``x`` (``(n,)`` or ``(n, channels)``) at ``rate`` Hz (default 8 kHz):
    (one dict per utterance, runner stats).

    The graph of :func:`transcribe_file` with the array in place of ``io.file`` (channels
    averaged, another rate resampled to 8 kHz). Keyword arguments as :func:`transcribe_file`'s.
    """
    import numpy as np

    from streamkit.io.collect import VectorSource

    a = np.asarray(x, np.float32)
    return _transcribe(VectorSource(samples=a, rate=rate, sizes=max(1, len(a))), weights, **kw)


def transcribe_file(path: str | Path, weights: str | Path, **kw: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Transcribe an audio file as a stream (bounded memory, whatever its length).

    The graph: ``io.file`` (``chunk_s`` of audio per read) -> ``dsp.mono`` (several channels:
    their mean) -> ``dsp.resample`` (soxr HQ to 8 kHz, when the file has another rate) -> the
    SAD gate and the ASR of :func:`transcribe_array`, which sees the samples
    :func:`streamkit.eval.sad_systems.load_audio` would give (the resampler streams bit-exactly).
    Returns (one dict per utterance, runner stats; ``stats["samples_8k"]`` the samples at 8 kHz).
    """
    from streamkit.io.file_source import FileSource

    return _transcribe(FileSource(path=str(path)), weights, **kw)


def _transcribe(src: Any, weights: str | Path, *, sad: str = "stat", beam: int = DEFAULT_BEAM, tau: float | None = DEFAULT_TAU_FRAMES, s_th: float | None = DEFAULT_S_TH,
                languages: list[str] | None = None, lid_select: str = "auto", lid_score: str = "auto", lid_prior: Any = None, pre_roll_s: float = DEFAULT_PRE_ROLL_S, max_utterance_s: float = 30.0,
                threads: int = 1, lexicon: str | None = None, word_penalty: float = 0.0, chunk_s: float = 0.2) -> tuple[list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
    from streamkit.core.errors import ConfigError
    from streamkit.core.graph import Graph
    from streamkit.core.runtime import Runner
    from streamkit.dsp.front import mono_at
    from streamkit.dsp.speech_gate import SpeechGate
    from streamkit.models.rnnt_stream import ASR_FINAL, LID_RESULT, RnntAsr

    g = Graph("transcribe")
    try:
        chain, _ = mono_at(g, src, RATE)
    except ConfigError as exc:  # io.file: an unreadable or missing file
        raise StreamkitError(str(exc)) from None
    asr = RnntAsr(model=str(weights), beam=beam, tau_frames=tau, s_th=s_th, languages=languages, threads=threads, lid_select=lid_select,
                  lid_score=lid_score, lid_prior=lid_prior, utterance_mode="tags" if sad == "stat" else "always", pre_roll_s=pre_roll_s if sad == "stat" else 0.0,
                  max_utterance_s=max_utterance_s, lexicon=lexicon, word_penalty=word_penalty, name="asr")  # fmt: skip
    gate = SpeechGate(events=False) if sad == "stat" else None
    if gate is not None:
        chain.append(g.add(gate, name="sad"))
    chain.append(g.add(asr, name="asr"))
    g.chain(*chain)
    r = Runner(g, keep_events=True, threaded_events=False, stats_interval_s=0, chunk_s=chunk_s)
    st = r.run()
    errors = [e for e in r.events if e.kind == "block.error"]
    if errors:
        raise StreamkitError(f"{getattr(errors[0].payload, 'message', errors[0].payload)}")
    if gate is not None and gate.nonfinite_samples:
        raise StreamkitError(f"{getattr(src, 'path', 'audio')}: audio contains NaN or inf samples ({gate.nonfinite_samples} at {RATE} Hz)")
    st["samples_8k"] = int(r.metrics("asr").items_in)
    lids = {e.payload.utterance_id: e.payload for e in r.events if e.kind == LID_RESULT}
    out: list[dict[str, Any]] = []
    for e in r.events:
        if e.kind != ASR_FINAL:
            continue
        res = e.payload
        lo, hi = e.span
        lid = lids.get(res.utterance_id)
        out.append({
            "start_s": round(lo / RATE, 3), "end_s": round(hi / RATE, 3), "lang": res.lang, "text": res.text,
            "confidence": round(float(res.confidence), 4), "t_avg": round(float(res.t_avg), 3),
            "lid": {k: round(float(v), 4) for k, v in (lid.posteriors.items() if lid else [])}, "lid_method": lid.method if lid else "",
            "words": [{"word": w.text, "start_s": round(w.start / RATE, 3), "end_s": round(w.end / RATE, 3)} for w in res.words],
        })  # fmt: skip
    return out, st


def run_from_args(ns: argparse.Namespace) -> int:
    """Run ``streamkit transcribe``; 0 on success, 2 for usage errors, 1 if a file failed."""
    from streamkit.eval.sad_cli import _collect

    weights = Path(ns.weights) if ns.weights else default_weights()
    if not weights.is_file():
        _err(f"no RNN-T weights at {weights}" + ("" if ns.weights else
             " (this build ships none yet): train a model with `streamkit train rnnt --variant lid --corpus DIR --out rnnt_lid.pt` and pass --weights"))  # fmt: skip
        return EXIT_USAGE
    beam = (DEFAULT_LEXICON_BEAM if ns.lexicon is not None else DEFAULT_BEAM) if ns.beam is None else ns.beam
    if beam < 1 or ns.threads < 1 or ns.max_utterance_s <= 0 or ns.pre_roll_s < 0 or ns.tau < 0 or ns.s_th < 0:
        _err("--beam and --threads must be >= 1, --max-utterance-s > 0, --pre-roll-s, --tau and --s-th >= 0")
        return EXIT_USAGE
    if ns.word_penalty is not None and ns.lexicon is None:
        _err("--word-penalty needs --lexicon")
        return EXIT_USAGE
    penalty = (0.0 if ns.lexicon is None else DEFAULT_WORD_PENALTY) if ns.word_penalty is None else ns.word_penalty  # as the block's default
    if not (0 <= penalty < math.inf):
        _err(f"--word-penalty must be finite and >= 0, got {penalty:g}")
        return EXIT_USAGE
    try:  # a corrupt or foreign weight file is a usage error, reported once
        from streamkit.models.rnnt import load_model

        model, meta = load_model(weights)
    except (StreamkitError, ValueError, OSError) as exc:
        _err(str(exc).splitlines()[0])
        return EXIT_USAGE
    from streamkit.models.rnnt_stream import parse_lid_prior, resolve_lid_prior

    try:
        prior = parse_lid_prior(ns.lid_prior)
        resolve_lid_prior(prior, model.cfg, meta, Path(weights).name, "--lid-prior")
    except (StreamkitError, ValueError) as exc:
        _err(str(exc) if str(exc).startswith("--lid-prior") else f"--lid-prior: {exc}")
        return EXIT_USAGE
    if ns.lexicon is not None:
        from streamkit.models.rnnt_lexicon import cached_model_lexicons
        from streamkit.models.rnnt_stream import symbol_tables

        try:  # a missing dictionary or directory is a usage error, reported before any file; the
            # tries built here are the ones every file's ASR block finds in the cache
            cached_model_lexicons(model.cfg, symbol_tables(model.cfg, meta), ns.lexicon, word_penalty=penalty)
        except (StreamkitError, ValueError) as exc:
            _err(f"--lexicon: {exc}")
            return EXIT_USAGE
    try:
        files = _collect(list(ns.paths))
    except FileNotFoundError as exc:
        _err(str(exc))
        return EXIT_USAGE
    if not files:
        _err(f"no audio files under {' '.join(ns.paths)}")
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
            _err(msg if str(f) in msg else f"{f}: {msg}")
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
