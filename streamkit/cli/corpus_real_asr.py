"""``streamkit corpus real-asr``: the real-English adaptation set (:mod:`streamkit.data.real_asr`)."""

from __future__ import annotations

import argparse
import os
import sys


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of ``streamkit corpus real-asr``."""
    from streamkit.data.asr_corpus import DEFAULT_AUGMENT_PROB, DEFAULT_SEVERITY
    from streamkit.data.real_asr import DEFAULT_DEV_VOICES

    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (the unpacked packages go to DIR/sources)")
    parser.add_argument("--cache", default=None, metavar="DIR",
                        help="where the .deb files are downloaded (default DIR/debs); a file with the pinned SHA-256 is reused")  # fmt: skip
    parser.add_argument("--mix", default=None, metavar="C",
                        help="a `streamkit corpus asr` corpus whose utterances are listed too (linked, not copied): train on both")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="copies of each real training clip, each with its own level and channel draw (default 1)")  # fmt: skip
    parser.add_argument("--dev-voices", default=",".join(DEFAULT_DEV_VOICES), metavar="V[,V...]",
                        help=f"voice packs held out as the dev split (default {','.join(DEFAULT_DEV_VOICES)})")  # fmt: skip
    parser.add_argument("--augment", choices=["hf", "none"], default="hf", help="hf: HF channel on the training copies (default); none")
    parser.add_argument("--severity", type=float, default=DEFAULT_SEVERITY, help=f"HF channel severity (default {DEFAULT_SEVERITY})")
    parser.add_argument("--augment-prob", type=float, default=DEFAULT_AUGMENT_PROB,
                        help=f"share of training copies through the channel (default {DEFAULT_AUGMENT_PROB})")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    return parser


def run(ns: argparse.Namespace) -> int:
    """Run it: progress on stderr, a summary on stdout; errors print one line and return 2."""
    from streamkit.data.real_asr import RealAsrError, build, check_options, fetch_sources, summary
    from streamkit.data.real_packages import FetchError

    def progress(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        dev = tuple(v for v in ns.dev_voices.split(",") if v)
        check_options(repeat=ns.repeat, augment=ns.augment, augment_prob=ns.augment_prob, mix=ns.mix)
        roots = fetch_sources(ns.cache or os.path.join(ns.out, "debs"), os.path.join(ns.out, "sources"), progress)
        man = build(ns.out, roots, mix=ns.mix, repeat=ns.repeat, dev_voices=dev, augment=ns.augment, severity=ns.severity,
                    augment_prob=ns.augment_prob, seed=ns.seed, command=" ".join(["streamkit", *sys.argv[1:]]), progress=progress)  # fmt: skip
    except (RealAsrError, FetchError, OSError, ValueError) as e:
        print(f"error: {e}".replace("\n", " "), file=sys.stderr)
        return 2
    for line in summary(man):
        print(line)
    return 0
