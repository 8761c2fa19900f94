"""``streamkit singers enroll|identify``: a gallery of singers from example recordings, and who sings.

The embedder is picked by :func:`streamkit.models.singer_nets.load_embedder`: by default the shipped
singer net on motif clips (:mod:`streamkit.models.singer_nets`), with ``--mode clip`` the
whole-clip pooled statistics (:mod:`streamkit.models.singer_embed`), or the ``--weights`` given; the
gallery is :mod:`streamkit.models.singer_gallery`. A missing gallery,
an unreadable audio file or a file with no voiced audio gives one ``streamkit: error:`` line and
exit status 2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from streamkit.cli.common import add_command, commands


def add_parsers(sub: Any) -> None:
    add_command(sub, "singers", help="enroll singers from example recordings, identify who sings",
                description="Singer identification from melodic-motif clips: `singers enroll NAME FILES... --gallery G` adds a singer, "
                "`singers identify FILES... --gallery G` names the singer of each file (or `unknown`).",
                arguments=add_singer_commands)  # fmt: skip


def add_singer_commands(p: argparse.ArgumentParser) -> None:
    sub = commands(p, "what", metavar="WHAT", required=True)
    add_command(sub, "enroll", help="add a singer to a gallery from example recordings", description="Embed each FILE and add it to "
                "singer NAME in the gallery (created when missing).", arguments=_enroll_args, run=run_enroll)  # fmt: skip
    add_command(sub, "identify", help="name the singer of each file", description="Embed each FILE and score it against the gallery: "
                "the best singer when its cosine score reaches the threshold, else `unknown`.", arguments=_identify_args, run=run_identify)  # fmt: skip


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gallery", required=True, metavar="JSON", help="the gallery file")
    p.add_argument("--weights", default=None, metavar="FILE", help="the embedding: a singer net (.pt, from `streamkit train singer-id "
                   "--model crnn|blstm`; motif mode; default: the shipped CRNN on MFCC) or a pooled-statistics transform (.npz; "
                   "default in clip mode: the shipped one)")  # fmt: skip


def _enroll_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", metavar="NAME", help="the singer's name")
    p.add_argument("files", nargs="+", metavar="FILE", help="recordings of the singer (any rate; mixed to mono, resampled to 16 kHz)")
    _common(p)
    p.add_argument("--mode", choices=("motif", "clip"), default="motif", help="embedding of a new gallery (default motif)")


def _identify_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="recordings to identify")
    _common(p)
    p.add_argument("--threshold", type=float, default=None, help="open-set threshold on the cosine score (default: the gallery's)")
    p.add_argument("--json", action="store_true", help="one JSON object per file")


def _embedder(mode: str, weights: str | None) -> Any:
    from streamkit.models.singer_nets import load_embedder

    return load_embedder(mode, weights)


def _embed(emb: Any, file: str) -> Any:
    from streamkit.io.textsafe import printable
    from streamkit.models.singer_embed import read_audio

    e = emb.embed(read_audio(file))
    if e.vector is None:
        raise ValueError(f"{printable(file)}: no voiced audio to embed (needs 0.1 s of singing)")
    return e


def run_enroll(ns: argparse.Namespace) -> int:
    from streamkit.models.singer_gallery import Gallery

    path = Path(ns.gallery)
    g = Gallery.load(path) if path.exists() else None
    emb = _embedder(g.mode if g else ns.mode, ns.weights)
    if g is None:
        g = Gallery(emb.mode, emb.dim, float(emb.transform.meta.get("thresholds", {}).get(emb.mode, 0.5)), embedder=emb.identity)
    g.check_embedder(emb.identity)
    vecs = [(f, _embed(emb, f)) for f in ns.files]  # all files checked before the gallery changes
    for f, e in vecs:
        g.enroll(ns.name, str(f), e.vector)
    g.save(path)
    print(f"{ns.name}: {len(vecs)} file(s) enrolled ({sum(e.voiced_s for _, e in vecs):.1f} s voiced); gallery {path.name}: "
          f"{len(g.singers)} singer(s), mode {g.mode}, threshold {g.threshold:.3f}")  # fmt: skip
    return 0


def run_identify(ns: argparse.Namespace) -> int:
    from streamkit.io.textsafe import printable
    from streamkit.models.singer_gallery import Gallery

    g = Gallery.load(ns.gallery)
    if not g.singers:
        raise ValueError(f"gallery {ns.gallery} has no singers; enroll some first")
    emb = _embedder(g.mode, ns.weights)
    if emb.dim != g.dim:
        raise ValueError(f"gallery {ns.gallery} holds {g.dim}-dim embeddings, the embedder makes {emb.dim}: re-enroll with these weights")
    g.check_embedder(emb.identity)
    for f in ns.files:
        e = _embed(emb, f)
        d = g.score(e.vector, ns.threshold)
        if ns.json:
            print(json.dumps({"file": str(f), "singer": d.name, "score": round(d.score, 4), "best": d.best,
                              "motifs": [list(m) for m in e.motifs], "voiced_s": round(e.voiced_s, 2)}))  # fmt: skip
        else:
            print(f"{printable(f)}: {printable(d.name)} (score {d.score:.3f}, best {printable(d.best)}; {len(e.motifs)} motif(s), {e.voiced_s:.1f} s voiced)")
    return 0
