"""Search an archive of recordings by what it sounds like (and by what was said in it).

* :func:`build_index` (``streamkit index build DIR``): embed every recording of an archive, in
  windows and per recorded event, into an index directory (:mod:`streamkit.index.store`: SQLite
  metadata, a flat float32 vector file); incremental.
* :func:`search` (``streamkit search "QUERY" --index IDX``): ranked :class:`Hit` s for a free-text
  query, hybrid over sound (the embedding) and ASR transcripts (text match); :func:`export_hits`
  writes their audio.

The embedding is pluggable (:mod:`streamkit.index.embed`): the default is the shipped SED model's
class posteriors with queries parsed to its classes (:mod:`streamkit.index.query`); the
``contrastive`` pair (:mod:`streamkit.index.contrastive`) embeds audio and free text in one space.
"""

from streamkit.index.build import BuildReport, build_index
from streamkit.index.search import Hit, SearchResult, export_hits, parse_since, search
from streamkit.index.store import ArchiveIndexError

__all__ = ["ArchiveIndexError", "BuildReport", "Hit", "SearchResult", "build_index", "export_hits", "parse_since", "search"]
