"""``--record DIR --index IDX [--index-embedder sed|contrastive]``: the live archive index of ``monitor`` and ``mic``.

Both commands take the same options and go through :func:`live_indexer` (checks, before anything
starts) and :func:`indexing` (the indexer's thread around the run). The embedder of an index that
already exists is the one it was built with; ``--index-embedder`` only chooses it for a new index,
and one that differs from the existing index's is refused.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from streamkit.cli.common import CliError

__all__ = ["add_index_arguments", "index_embedder_name", "indexing", "live_indexer"]

INDEX_EMBEDDERS = ("sed", "contrastive")
_NAMES = {"sed-posteriors": "sed", "sed": "sed", "contrastive": "contrastive"}


def add_index_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", default=None, metavar="IDX",
                   help="with --record: index the recordings as they are written, for `streamkit search --index IDX` (and the --web "
                        "page's search box); completed with the events when the run ends")  # fmt: skip
    p.add_argument("--index-embedder", choices=INDEX_EMBEDDERS, default=None,
                   help="with --index: the embedder of a new index: sed (default; the SED class posteriors) or contrastive (the "
                        "audio-text model, free-text queries; needs streamkit[retrieval]). An existing index keeps its own")  # fmt: skip


def index_embedder_name(index: str | Path) -> tuple[str | None, dict[str, Any]]:
    """``(sed|contrastive, description)`` of the embedder an existing index was built with, ``(None, {})`` for no index yet."""
    from streamkit.index.store import DB, IndexStore

    if not (Path(index) / DB).is_file():
        return None, {}
    store = IndexStore(index)
    try:
        desc = dict(store.meta.get("embedder") or {})
    finally:
        store.close()
    name = desc.get("name")
    if name is None:
        return None, {}
    if name not in _NAMES:
        raise CliError(f"{index}: built with embedder {name!r}, which this streamkit cannot extend")
    return _NAMES[name], desc


def live_indexer(a: argparse.Namespace, events_dir: str | None) -> Any:
    """The :class:`~streamkit.index.live.LiveIndexer` of ``a.index`` (``None`` without ``--index``), checked before the run starts.

    Raises ``CliError`` (exit 2, one line): ``--index`` without ``--record``, ``--index-embedder``
    without ``--index``, an ``--index-embedder`` other than the existing index's; ``ConfigError``
    (also one line) when the contrastive embedder lacks the ``streamkit[retrieval]`` extra or its weights.
    """
    want = getattr(a, "index_embedder", None)
    if a.index is None:
        if want is not None:
            raise CliError("--index-embedder needs --index IDX")
        return None
    if a.record is None:
        raise CliError("--index needs --record DIR: the index is built from the recordings")
    have, desc = index_embedder_name(a.index)
    if have is not None and want is not None and want != have:
        raise CliError(f"{a.index} was built with the {have} embedder, not {want}: drop --index-embedder or choose another --index")
    name = have or want or "sed"
    weights = None
    if name == "contrastive":  # fail here, before any station or device is opened, not on the indexer's thread
        from streamkit.index.contrastive import _weights
        from streamkit.models.retrieval_text import minilm_dir

        minilm_dir()
        recorded = Path(str(desc.get("weights") or ""))
        weights = _weights(recorded if desc.get("weights") and recorded.is_file() else None)
    from streamkit.index.live import LiveIndexer

    return LiveIndexer(a.index, a.record, events_dir=events_dir, embedder_name=name, embedder_weights=weights)


@contextmanager
def indexing(indexer: Any) -> Iterator[None]:
    """Run the indexer's thread around the block (nothing without an indexer); :meth:`finish` is the caller's, after the sinks closed."""
    if indexer is None:
        yield
        return
    indexer.start()
    try:
        yield
    finally:
        indexer.stop()
