"""``streamkit index build`` and ``streamkit search``: the archive index (:mod:`streamkit.index`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from streamkit.cli.common import EXIT_USAGE, CliError, add_command, commands

DEFAULT_INDEX = "index"


def add_parsers(sub: Any) -> None:
    add_command(sub, "index", help="build an archive index of recordings, for `streamkit search`",
                description="The archive index: `streamkit index build DIR` embeds the recordings of DIR (monitor --record WAVs with "
                            "their sidecars and event files, or plain audio files) for `streamkit search`.",
                arguments=add_index_commands)  # fmt: skip
    add_command(sub, "search", help="search an archive index by what it sounds like or what was said",
                description="Rank the windows and events of an archive index for a free-text query: sound classes named in it "
                            "(SED posteriors) or the query's embedding (an index built with --embedder contrastive), plus a text match "
                            "on ASR transcripts.",
                arguments=add_search_arguments, run=cmd_search)  # fmt: skip


def add_index_commands(p: argparse.ArgumentParser) -> None:
    sub = commands(p, "what", metavar="WHAT", required=True)
    add_command(sub, "build", help="add the recordings of DIR to an index (incremental)",
                description="Embed every recording under DIR in 10 s windows every 5 s and per recorded event (SED detection, speech "
                            "segment, ASR final) into the index; files already indexed unchanged are skipped.",
                arguments=add_build_arguments, run=cmd_build)  # fmt: skip


def add_build_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("archive", metavar="DIR", help="directory of recordings (searched recursively) or one audio file")
    p.add_argument("--index", default=DEFAULT_INDEX, metavar="IDX", help=f"index directory (created if missing; default ./{DEFAULT_INDEX})")
    p.add_argument("--events", action="append", default=None, metavar="DIR",
                   help="where <station>.jsonl event files are (repeatable; default DIR, DIR/events and DIR/../events)")  # fmt: skip
    p.add_argument("--window", type=float, default=10.0, metavar="S", help="window length in seconds (default 10)")
    p.add_argument("--hop", type=float, default=5.0, metavar="S", help="window hop in seconds (default 5)")
    p.add_argument("--embedder", choices=("sed", "contrastive"), default="sed",
                   help="sed (default): the SED model's class posteriors, queries parsed to its classes; contrastive: the audio-text model of "
                        "`streamkit train retrieval` (free-text queries; needs streamkit[retrieval]). An index keeps the embedder it was built with")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def cmd_build(a: argparse.Namespace) -> int:
    from streamkit.index import build_index
    from streamkit.io.textsafe import printable

    def progress(msg: str) -> None:
        print(printable(msg), file=sys.stderr, flush=True)

    embedder = None
    if a.embedder != "sed":
        from streamkit.index.embed import make_embedder

        embedder = make_embedder(a.embedder)
    rep = build_index(a.archive, a.index, events_dirs=a.events, embedder=embedder, window_s=a.window, hop_s=a.hop,
                      progress=None if a.quiet or a.json else progress)  # fmt: skip
    if a.json:
        print(json.dumps(rep.to_dict(), indent=1))
    else:
        rtf = f", RT factor {rep.rtf:.4f}" if rep.rtf is not None else ""
        print(f"index {printable(str(rep.index))}: {len(rep.added)} file(s) added ({rep.windows} windows, {rep.segments} event segments, "
              f"{rep.audio_s:.1f} s of audio in {rep.seconds:.2f} s{rtf}), {len(rep.skipped)} unchanged, {len(rep.failed)} failed")  # fmt: skip
        for note in rep.notes:
            print(f"  note: {printable(note)}")
    for path, why in rep.failed:
        print(f"streamkit: skipped {printable(path)}: {printable(why)}", file=sys.stderr)
    return EXIT_USAGE if rep.failed else 0


def add_search_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", help='what to find, e.g. "a dog barks while water runs" or words said on air')
    p.add_argument("--index", default=DEFAULT_INDEX, metavar="IDX", help=f"index directory (default ./{DEFAULT_INDEX})")
    p.add_argument("--station", default=None, metavar="S", help="only stations whose name contains S (e.g. 7100lsb)")
    p.add_argument("--since", default=None, metavar="T", help="only audio after T: ISO 8601 UTC (2025-03-01T10:00) or a time ago (30m, 12h, 2d)")
    p.add_argument("--until", default=None, metavar="T", help="only audio before T (same forms)")
    p.add_argument("--top", type=int, default=10, metavar="N", help="hits to show (default 10)")
    p.add_argument("--kinds", choices=("all", "windows", "segments"), default="all", help="windows, event segments or both (default)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--export", default=None, metavar="DIR", help="also write each hit's audio as a WAV file in DIR")


def cmd_search(a: argparse.Namespace) -> int:
    from streamkit.index import export_hits, parse_since, search
    from streamkit.io.textsafe import printable

    try:
        since = None if a.since is None else parse_since(a.since)
        until = None if a.until is None else parse_since(a.until)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if a.top < 1:
        raise CliError(f"--top must be >= 1, got {a.top}")
    res = search(a.query, a.index, station=a.station, since=since, until=until, top=a.top, kinds=a.kinds)
    written = export_hits(res.hits, a.export) if a.export else []
    if a.json:
        d = res.to_dict()
        if a.export:
            d["exported"] = [str(p) for p in written]
        print(json.dumps(d, indent=1))
        return 0
    understood = ", ".join(res.classes) or ("embedded by the contrastive model" if res.embedder == "contrastive" else "no sound class")
    print(f"{printable(a.query)!s}: {understood}; words {', '.join(res.words) or '-'}; {len(res.hits)} hit(s) of {res.candidates} "
          f"entries in {res.seconds * 1000:.1f} ms")  # fmt: skip
    for h in res.hits:
        where = f"{h.station or '-'}"
        when = h.utc_start or "no UTC time"
        what = h.kind if h.label is None else f"{h.kind} {h.label}"
        line = f"{h.rank:3d}. {h.score:.3f}  {where}  {when}  {h.file} +{h.start_s:.2f}-{h.end_s:.2f} s  [{what}]"
        if h.transcript:
            line += f'  "{h.transcript}"'
        print(printable(line))
    for p in written:
        print(f"exported {printable(str(p))}")
    return 0
