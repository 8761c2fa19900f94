"""``streamkit corpus hf|asr|sed|real|import|openset|transmission|singers``: generate the training and evaluation corpora.

The generators live in :mod:`streamkit.data` (``generate`` and ``corpus_table`` of
:mod:`~streamkit.data.hf_corpus`, :mod:`~streamkit.data.asr_corpus`,
:mod:`~streamkit.data.sed_corpus`); this module holds their options and prints their progress on
stderr and the corpus table on stdout. Bad options and a missing espeak-ng give one ``error:`` line
on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from streamkit.cli.common import add_command, commands


def add_parsers(sub: Any) -> None:
    add_command(sub, "corpus", help="generate a corpus: `corpus hf` is the parallel HF speech corpus, `corpus asr` the multilingual ASR corpus",
                description="Generate a corpus. `streamkit corpus hf --help` / `streamkit corpus asr --help` list the options.",
                arguments=add_corpus_parsers)  # fmt: skip


#: corpus -> (help, description)
DOCS = {
    "hf": ("espeak-ng speech through the HF channel simulator, with labels and RTTM", "Generate the parallel HF speech corpus: espeak-ng speech in the paper's layout, through the HF channel simulator, with sample-exact labels and RTTM, train/dev/eval splits."),
    "asr": ("multilingual (en, hi, ta, gu) espeak-ng sentences with transcripts and grapheme vocabularies", "Generate the multilingual ASR corpus (en, hi, ta, gu): espeak-ng sentences from offline word lists, speakers disjoint across train/dev/test, optional HF channel augmentation, grapheme vocabularies with B_ word-start symbols."),
    "real": ("real recordings from pinned Debian packages: speech among real distractors, event clips, off-air modems", "Build the real-recordings corpus: fetch pinned Debian packages of real recordings (apt-get download, SHA-256 checked, dpkg-deb -x), classify their audio, and write speech scenes among real distractors with RTTM labels (train/dev from training packages, eval from evaluation-only packages), real DCASE event clips and 10 s event scenes, and off-air modem recordings without speech. GPL/CC-BY-SA audio: used locally, never redistributed."),
    "real-asr": ("real English game voices with known text (training packages only), optionally mixed with a `corpus asr` corpus, for adapting the ASR", "Build the real-English adaptation set: fetch the pinned training packages hedgewars-data and pingus-data (SHA-256 checked, never the evaluation packages), take the English voice clips whose file name is the phrase spoken, and write them at 8 kHz in the layout of `streamkit corpus asr` (dev split: whole voice packs), each training copy with its own HF channel; --mix C also lists the utterances of the synthetic corpus C, so `streamkit train rnnt --corpus DIR --init-from` fine-tunes on both. GPL/GFDL/CC-BY-SA audio: used locally, never redistributed."),
    "import": ("a real corpus (LibriSpeech, Common Voice, Kaldi, MUCS 2021) in the `corpus asr` layout, for `train rnnt`", "Import a real speech corpus (LibriSpeech directories, Common Voice TSV + clips, a Kaldi data directory, MUCS 2021) into the layout of `streamkit corpus asr`: 8 kHz PCM_16 audio, normalised transcripts, language, speaker, grapheme vocabularies and speaker-disjoint splits, so `streamkit train rnnt --corpus DIR` trains on it."),
    "openset": ("espeak-ng speech of 28 languages the ASR model does not know (dev/test languages disjoint), for its `unknown` answer", "Generate speech of languages the multilingual ASR does not know, for calibrating and measuring its open-set LID (the `unknown` answer): espeak-ng voices of 12 dev and 16 different test languages reading words of the installed gettext catalogs, with the speakers, levels and HF channel augmentation of `corpus asr`."),
    "transmission": ("a transmission for a real parallel corpus: chirp markers around speech sequences, with its schedule and labels", "Build a transmission: 4 s chirp markers (Gold-coded, mutually near-orthogonal) around sequences of utterances, 5 s of silence after each marker and 1 s after each sequence; writes the audio, the schedule (<out>.json: every marker's and utterance's first sample) and the speech labels (<out>.rttm). Transmit it, record the reception, and `streamkit align` recovers the parallel corpus."),
    "singers": ("synthetic flamenco-like singers (timbre, vibrato, motifs) with f0 truth, split by recording, unknown singers in test", "Generate the singer-identification corpus: synthetic singers (formants scaled by vocal-tract length, Rosenberg glottal source, breathiness, jitter/shimmer, vibrato/slide/ornament habits, personal motifs in Phrygian/flamenco modes) sing 20-60 s recordings with their f0 truth and phrases; optional guitar and room/HF channel; train/dev/test split by recording, unknown singers only in test."),
    "sed": ("10 s soundscapes of 10 event classes with DCASE labels (synthetic/weak/unlabelled/validation/eval)", "Generate the SED soundscape corpus (DCASE 2019 task 4 layout, 10 classes, 10 s clips): strongly labelled synthetic clips, weak and unlabelled real-domain clips (rooms, backgrounds, microphones), validation and eval with strong labels."),
}  # fmt: skip


def add_corpus_parsers(co: argparse.ArgumentParser) -> None:
    sub = commands(co, "what", metavar="WHAT", required=True)
    for name, arguments, run in (
        ("hf", add_hf_arguments, run_hf),
        ("asr", add_asr_arguments, run_asr),
        ("sed", add_sed_arguments, run_sed),
        ("real", add_real_arguments, run_real),
        ("real-asr", "streamkit.cli.corpus_real_asr:add_arguments", "streamkit.cli.corpus_real_asr:run"),
        ("import", add_import_arguments, run_import),
        ("openset", add_openset_arguments, run_openset),
        ("singers", add_singers_arguments, run_singers),
        ("transmission", "streamkit.cli.align:add_transmission_arguments", "streamkit.cli.align:run_transmission"),
    ):
        add_command(sub, name, help=DOCS[name][0], description=DOCS[name][1], arguments=arguments, run=run)


# --------------------------------------------------------------------------- corpus hf
def add_hf_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of ``streamkit corpus hf``."""
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory")
    parser.add_argument("--hours", type=float, default=2.0, help="total duration over all splits (default 2, the benchmark size)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0); the corpus depends only on it, --severity and --hours")
    parser.add_argument("--severity", type=float, default=0.5, help="channel severity in [0, 1] for ChannelParams.random (default 0.5)")
    parser.add_argument(
        "--splits", type=float, nargs=3, default=(0.8, 0.1, 0.1), metavar=("TRAIN", "DEV", "EVAL"), help="split fractions (default 0.8 0.1 0.1)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1; the output does not depend on it)")
    parser.add_argument("--no-metrics", action="store_true", help="skip SDR/STOI (faster; the table then shows n/a)")
    parser.add_argument("--no-clean", action="store_true", help="do not write the clean tracks")
    parser.add_argument(
        "--interference", type=float, default=0.0, metavar="P",
        help="fraction of files with an unlabelled concurrent speaker on the adjacent channel (default 0)",
    )  # fmt: skip
    parser.add_argument(
        "--distractors", type=float, default=0.0, metavar="P",
        help="probability that each silence gets 2-20 s of a non-speech HF signal (CW, RTTY, PSK31, FT8/FT4, OFDM, SSTV, AM music, "
        "carriers, OTH radar, QRN), labelled non-speech and sent through the channel (default 0: the corpus is unchanged)",
    )  # fmt: skip
    return parser


def run_hf(ns: argparse.Namespace) -> int:
    """Run ``streamkit corpus hf`` from parsed arguments: progress on stderr, the table on stdout."""
    from streamkit.data.hf_corpus import corpus_table, generate
    from streamkit.data.tts import EspeakMissingError

    def progress(done: int, total: int, audio_s: float, wall_s: float) -> None:
        if done == total or done % 10 == 0:
            print(
                f"  {done}/{total} files, {audio_s / 3600:.3f} h audio in {wall_s:.1f} s ({audio_s / max(wall_s, 1e-9):.0f}x real time)",
                file=sys.stderr,
                flush=True,
            )

    for opt in ("interference", "distractors"):
        v = getattr(ns, opt)
        if not 0.0 <= v <= 1.0:
            print(f"error: --{opt} must be a fraction in [0, 1], got {v:g}", file=sys.stderr)
            return 2
    try:
        generate(
            ns.out,
            ns.hours,
            ns.seed,
            ns.severity,
            tuple(ns.splits),
            jobs=max(1, ns.jobs),
            metrics=not ns.no_metrics,
            write_clean=not ns.no_clean,
            interference=ns.interference,
            distractors=ns.distractors,
            progress=progress,
        )
    except EspeakMissingError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(corpus_table(ns.out))
    return 0


# --------------------------------------------------------------------------- corpus asr
def add_asr_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of ``streamkit corpus asr``."""
    from streamkit.data.asr_corpus import DEFAULT_AUGMENT_PROB, DEFAULT_HOURS, DEFAULT_SEVERITY

    parser.add_argument("--out", required=True, metavar="DIR", help="output directory")
    parser.add_argument("--hours-per-language", default=DEFAULT_HOURS, metavar="en=H,hi=H,ta=H,gu=H",
                        help=f"hours per language over all splits (default {DEFAULT_HOURS}: the paper's two large, two small)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0); the output does not depend on --jobs")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--augment", choices=["hf", "none"], default="hf", help="hf: the HF channel simulator (default); none: clean audio")
    parser.add_argument("--severity", type=float, default=DEFAULT_SEVERITY, help=f"channel severity in [0, 1] (default {DEFAULT_SEVERITY}, mild)")
    parser.add_argument("--augment-prob", type=float, default=DEFAULT_AUGMENT_PROB,
                        help=f"fraction of utterances through the channel with --augment hf (default {DEFAULT_AUGMENT_PROB})")  # fmt: skip
    parser.add_argument("--splits", type=float, nargs=3, default=(0.8, 0.1, 0.1), metavar=("TRAIN", "DEV", "TEST"),
                        help="split fractions of each language's hours and speakers (default 0.8 0.1 0.1)")  # fmt: skip
    parser.add_argument("--words", type=int, default=None, metavar="N",
                        help="closed vocabulary: draw every sentence from a fixed, seeded subset of N words per language, "
                             "the same for train/dev/test, so WER measures recognition of words seen in training "
                             "(default: the whole word list, nearly every test word unseen)")  # fmt: skip
    return parser


def run_asr(ns: argparse.Namespace) -> int:
    """Run ``streamkit corpus asr``: progress on stderr, the Table 1 analogue on stdout; user errors
    print one line and return 2."""
    from streamkit.data import wordlists
    from streamkit.data.asr_corpus import corpus_table, generate, parse_hours
    from streamkit.data.tts import EspeakMissingError

    def progress(done: int, audio_s: float, wall_s: float) -> None:
        print(f"  {done} utterances, {audio_s / 3600:.3f} h audio in {wall_s:.1f} s ({audio_s / max(wall_s, 1e-9):.0f}x real time)",
              file=sys.stderr, flush=True)  # fmt: skip

    try:
        parse_hours(ns.hours_per_language)
        if ns.jobs < 1:
            raise ValueError(f"--jobs must be >= 1, got {ns.jobs}")
        man = generate(ns.out, ns.hours_per_language, ns.seed, splits=tuple(ns.splits), augment=ns.augment, severity=ns.severity,
                       augment_prob=ns.augment_prob, jobs=ns.jobs, progress=progress, words=ns.words)  # fmt: skip
    except (ValueError, EspeakMissingError, wordlists.WordListMissingError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(corpus_table(ns.out))
    g = man["generation"]
    print(f"{g['audio_s'] / 3600:.3f} h of audio in {g['wall_s']:.1f} s with {g['jobs']} job(s): {g['x_real_time']:.0f}x real time")
    return 0


# --------------------------------------------------------------------------- corpus sed
def add_sed_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of ``streamkit corpus sed``."""
    from streamkit.data.sed_corpus import DEFAULT_COUNTS, DOMAIN_GAPS

    parser.add_argument("--out", required=True, metavar="DIR", help="output directory")
    for sub, n in DEFAULT_COUNTS.items():
        parser.add_argument(f"--clips-{sub}", type=int, default=n, metavar="N", help=f"clips in the {sub} subset (default {n}; 0 skips it)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0); the corpus depends only on it and --rate")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1; the output does not depend on it)")
    parser.add_argument("--rate", type=int, default=16000, help="sample rate in Hz (default 16000, as the DCASE 2020+ front ends)")
    parser.add_argument(
        "--domain-gap",
        choices=DOMAIN_GAPS,
        default="standard",
        help="standard (default): real = synthetic sources through rooms, backgrounds and microphones; "
        "wide: also shifted sources and unlabelled non-target sounds in the real clips",
    )
    parser.add_argument("--real-clips", default=None, metavar="DIR",
                        help="a `streamkit corpus real` root: its train/ clips (training subsets) and dev/ clips (validation, eval) "
                        "replace a fraction of the events of their classes, labelled by their energy envelope; its eval/ split is never read")  # fmt: skip
    parser.add_argument("--real-fraction", type=float, default=0.5, metavar="P",
                        help="with --real-clips: probability that an event of a class with real clips is a real one (default 0.5)")  # fmt: skip
    return parser


def run_sed(ns: argparse.Namespace) -> int:
    """Run ``streamkit corpus sed`` from parsed arguments: progress on stderr, the table on stdout."""
    from streamkit.data.sed_corpus import SUBSETS, corpus_table, generate
    from streamkit.data.tts import EspeakMissingError

    def progress(done: int, total: int, wall_s: float) -> None:
        if done == total or done % 50 == 0:
            print(f"  {done}/{total} clips in {wall_s:.1f} s ({done / max(wall_s, 1e-9):.1f} clips/s)", file=sys.stderr, flush=True)

    if ns.jobs < 1:
        print(f"error: --jobs must be >= 1, got {ns.jobs}", file=sys.stderr)
        return 2
    counts = {sub: getattr(ns, f"clips_{sub}") for sub in SUBSETS}
    try:
        man = generate(
            ns.out,
            counts,
            ns.seed,
            rate=ns.rate,
            jobs=ns.jobs,
            progress=progress,
            gap=ns.domain_gap,
            real_clips=ns.real_clips,
            real_fraction=ns.real_fraction,
        )
    except (ValueError, EspeakMissingError, OSError) as e:
        print(f"error: {e}".replace("\n", " "), file=sys.stderr)
        return 2
    print(corpus_table(man))
    return 0


# --------------------------------------------------------------------------- corpus real
def add_real_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of ``streamkit corpus real``."""
    from streamkit.data.real_scenes import DEFAULT_EVENT_SCENES, DEFAULT_SCENES

    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (the unpacked packages go to DIR/sources)")
    parser.add_argument("--cache", default=None, metavar="DIR",
                        help="where the .deb files are downloaded (default DIR/debs); a file with the pinned SHA-256 is reused")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0); the corpus depends only on it")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1; the output does not depend on it)")
    for split in DEFAULT_SCENES:
        parser.add_argument(f"--scenes-{split}", type=int, default=DEFAULT_SCENES[split], metavar="N",
                            help=f"~60 s speech scenes in {split} (default {DEFAULT_SCENES[split]})")  # fmt: skip
        parser.add_argument(f"--event-scenes-{split}", type=int, default=DEFAULT_EVENT_SCENES[split], metavar="N",
                            help=f"10 s event scenes in {split} (default {DEFAULT_EVENT_SCENES[split]})")  # fmt: skip
    return parser


def run_real(ns: argparse.Namespace) -> int:
    """Run ``streamkit corpus real``: progress on stderr, the table on stdout; errors print one line and return 2."""
    import os

    from streamkit.data.real_packages import FetchError
    from streamkit.data.real_scenes import DEFAULT_SCENES, corpus_table, generate

    def progress(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    scenes = {s: getattr(ns, f"scenes_{s}") for s in DEFAULT_SCENES}
    events = {s: getattr(ns, f"event_scenes_{s}") for s in DEFAULT_SCENES}
    try:
        if ns.jobs < 1:
            raise ValueError(f"--jobs must be >= 1, got {ns.jobs}")
        if min(*scenes.values(), *events.values()) < 0:
            raise ValueError("scene counts must be >= 0")
        man = generate(ns.out, cache=ns.cache or os.path.join(ns.out, "debs"), seed=ns.seed, jobs=ns.jobs, scenes=scenes,
                       event_scenes=events, progress=progress, command=" ".join(["streamkit", *sys.argv[1:]]))  # fmt: skip
    except (ValueError, FetchError, OSError) as e:
        print(f"error: {e}".replace("\n", " "), file=sys.stderr)
        return 2
    print(corpus_table(man))
    return 0


# --------------------------------------------------------------------------- corpus import
def add_import_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of ``streamkit corpus import``."""
    from streamkit.data.corpus_formats import FORMATS
    from streamkit.data.corpus_import import VOCABS

    parser.add_argument("--format", required=True, choices=FORMATS, help="layout of the source(s)")
    parser.add_argument("sources", nargs="+", metavar="[SPLIT=]SRC",
                        help="source directory; SPLIT=SRC (train/dev/test) puts all of it in that split, else the split is the "
                             "one the layout names or is assigned by speaker")  # fmt: skip
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (the layout of `streamkit corpus asr`)")
    parser.add_argument("--lang", default=None, metavar="CODE",
                        help="language code of the transcripts (required for kaldi; default en for librispeech; "
                             "commonvoice: its locale column; mucs: its language directories)")  # fmt: skip
    parser.add_argument("--vocab", choices=VOCABS, default="auto",
                        help="auto (default): en/hi/ta/gu get the vocabulary of the shipped model (so --init-from fits), "
                             "other languages their transcripts' graphemes; transcripts: every vocabulary from the transcripts")  # fmt: skip
    parser.add_argument("--splits", type=float, nargs=3, default=(0.8, 0.1, 0.1), metavar=("TRAIN", "DEV", "TEST"),
                        help="fractions for the speakers without a named split (default 0.8 0.1 0.1)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="seed of the speaker split (default 0)")
    return parser


def run_import(ns: argparse.Namespace) -> int:
    """Run ``streamkit corpus import``: progress on stderr, the corpus table and what was left out on
    stdout; user errors print one line and return 2."""
    from streamkit.data import wordlists
    from streamkit.data.asr_corpus import corpus_table
    from streamkit.data.corpus_formats import SPLIT_NAMES, FormatError
    from streamkit.data.corpus_import import import_corpus, summary

    def progress(done: int, total: int, audio_s: float) -> None:
        print(f"  {done}/{total} utterances, {audio_s / 3600:.3f} h", file=sys.stderr, flush=True)

    sources: list[tuple[str | None, str]] = []
    for s in ns.sources:
        head, sep, tail = s.partition("=")
        if sep and head in SPLIT_NAMES:
            sources.append((head, tail))
        elif sep and "/" not in head and head:
            print(f"error: {s}: unknown split {head!r} (want train=, dev= or test= before the directory)", file=sys.stderr)
            return 2
        else:
            sources.append((None, s))
    try:
        man = import_corpus(ns.format, sources, ns.out, lang=ns.lang, vocab=ns.vocab, splits=tuple(ns.splits), seed=ns.seed,
                            progress=progress, command=" ".join(["streamkit", *sys.argv[1:]]))  # fmt: skip
    except (FormatError, wordlists.WordListMissingError, OSError) as e:
        print(f"error: {e}".replace("\n", " "), file=sys.stderr)
        return 2
    print(corpus_table(ns.out))
    for line in summary(man):
        print(line)
    return 0


# --------------------------------------------------------------------------- corpus openset
def add_openset_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of ``streamkit corpus openset``."""
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory")
    parser.add_argument("--per-language", type=int, default=25, metavar="N", help="utterances per language (default 25)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--augment", choices=["hf", "none"], default="hf", help="hf: the mild HF channel of `corpus asr` (default); none: clean")
    return parser


def run_openset(ns: argparse.Namespace) -> int:
    """Run ``streamkit corpus openset``: progress on stderr, counts on stdout; errors one line, exit 2."""
    from streamkit.data.openset_corpus import generate
    from streamkit.data.tts import EspeakMissingError

    def progress(done: int, total: int) -> None:
        print(f"  {done}/{total} utterances", file=sys.stderr, flush=True)

    try:
        man = generate(ns.out, ns.per_language, ns.seed, augment=ns.augment, progress=progress)
    except (ValueError, EspeakMissingError, RuntimeError) as e:
        print(f"error: {e}".replace("\n", " "), file=sys.stderr)
        return 2
    for split, langs in man["languages"].items():
        c = man["counts"][split]
        print(f"{split}: {c['utterances']} utterances, {c['hours']:.3f} h, languages {' '.join(langs)}")
    return 0


# --------------------------------------------------------------------------- corpus singers
def add_singers_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of ``streamkit corpus singers``."""
    from streamkit.data.singing import CHANNELS

    parser.add_argument("--out", required=True, metavar="DIR", help="output directory")
    parser.add_argument("--singers", type=int, default=10, metavar="N", help="known singers (default 10)")
    parser.add_argument(
        "--hours",
        type=float,
        default=1.0,
        metavar="H",
        help="about this many hours over all splits (default 1; at least 3 recordings per known singer)",
    )
    parser.add_argument("--unknown", type=int, default=None, metavar="K", help="unknown singers, only in test (default N/4, at least 1)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0); the corpus does not depend on --jobs")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--accompaniment", type=float, default=0.3, metavar="P", help="fraction of recordings with a guitar (default 0.3)")
    parser.add_argument("--channel", choices=CHANNELS, default="none", help="none (default), room (reverberation) or hf (the HF SSB channel)")
    return parser


def run_singers(ns: argparse.Namespace) -> int:
    """Run ``streamkit corpus singers``: progress on stderr, the split table on stdout; errors one line, exit 2."""
    from streamkit.core.errors import ConfigError
    from streamkit.data.singers_corpus import corpus_table, generate

    def progress(done: int, total: int, audio_s: float, wall_s: float) -> None:
        if done == total or done % 10 == 0:
            print(f"  {done}/{total} recordings, {audio_s / 3600:.3f} h audio in {wall_s:.1f} s ({audio_s / max(wall_s, 1e-9):.0f}x real time)",
                  file=sys.stderr, flush=True)  # fmt: skip

    try:
        man = generate(ns.out, ns.singers, ns.hours, ns.seed, unknown=ns.unknown, accompaniment=ns.accompaniment, channel=ns.channel,
                       jobs=ns.jobs, progress=progress)  # fmt: skip
    except (ValueError, ConfigError, OSError) as e:
        print(f"error: {e}".replace("\n", " "), file=sys.stderr)
        return 2
    print(corpus_table(man))
    print(f"{man['audio_s'] / 3600:.3f} h of audio in {man['wall_s']:.1f} s with {man['jobs']} job(s); split by recording")
    return 0
