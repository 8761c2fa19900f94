"""Lexicon-constrained RNN-T decoding: a word list as a token trie that masks the joint's output.

The RNN-T models spell words grapheme by grapheme, the first grapheme of a word as its ``B_``
symbol (``Vocab.encode("ab c") == [B_a, b, B_c]``). A :class:`Lexicon` holds the token sequences of
a word list as a trie (flat numpy arrays, so a 170 000-word list costs a few MB). A hypothesis
carries its trie node:

* node 0 (the root) is "before the first word"; the allowed symbols there are the root's children,
  i.e. the ``B_`` symbols that start a word of the list;
* inside a word, the allowed symbols are the node's children (the word's possible next
  graphemes) and, if the node ends a word of the list, also the root's children (the next word);
* blank is always allowed and keeps the node.

:meth:`Lexicon.mask` gives the additive mask (0 or ``-inf``) for the rows of a joint output, so
the beam search (``rnnt_search.py``) prunes among in-lexicon continuations only and every
hypothesis it keeps is a prefix of a word sequence of the list. A hypothesis is *complete* when
its node is the root or ends a word; at the end of an utterance the decoder reports its best
complete hypothesis (a hypothesis cut off inside a word is reported only when the beam holds no
complete one). The masked log-probabilities are not renormalised: a hypothesis' score stays the
model's log-probability of its alignments, restricted to the lexicon (as a lexicon-constrained
CTC/WFST decoder scores its paths).

This is the decoding-side fix for the corpus of ``streamkit corpus asr``, whose sentences are
random dictionary words: a small model spells most graphemes right and most words wrong (README
#6), and the word list tells it which spellings exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

__all__ = ["Lexicon", "union_lexicon", "model_lexicons", "cached_model_lexicons", "word_lists", "read_word_file", "SYSTEM"]

ROOT = 0
MASK_CACHE = 4096  #: mask rows kept (a beam revisits the root, word ends and common prefixes every frame)


@dataclass(frozen=True)
class Lexicon:
    """A token trie. Build it with :meth:`from_words` or :meth:`from_sequences`.

    Attributes:
        n_symbols: size of the output the masks are for (the joint's width; blank is symbol 0).
        child_start: (n_nodes + 1,) children of node ``n`` are ``child_tok/child_node[child_start[n]:child_start[n+1]]``,
            sorted by token.
        child_tok, child_node: the edges.
        terminal: (n_nodes,) node ends a word.
        n_words: distinct words stored.
        skipped: words left out (a grapheme outside the vocabulary, or empty).
        word_penalty: subtracted from the log-probability of every word start (a word insertion
            penalty: without one, a long word the model cannot spell tends to come out as several
            short words of the list).
    """

    n_symbols: int
    child_start: np.ndarray
    child_tok: np.ndarray
    child_node: np.ndarray
    terminal: np.ndarray
    n_words: int
    skipped: int = 0
    word_penalty: float = 0.0
    _root_toks: np.ndarray = field(init=False, repr=False, compare=False)
    _rows: dict[int, torch.Tensor] = field(init=False, repr=False, compare=False)  # float64 mask rows of recent nodes

    def __post_init__(self) -> None:
        if not np.isfinite(self.word_penalty):
            raise ValueError(f"word_penalty must be finite, got {self.word_penalty}")
        object.__setattr__(self, "_root_toks", self.child_tok[self.child_start[ROOT] : self.child_start[ROOT + 1]])
        object.__setattr__(self, "_rows", {})

    @property
    def n_nodes(self) -> int:
        return int(self.terminal.shape[0])

    @classmethod
    def from_sequences(cls, seqs: Iterable[Sequence[int]], n_symbols: int, *, skipped: int = 0, word_penalty: float = 0.0) -> Lexicon:
        """The trie of token sequences (each a word: its first symbol a word start, none blank)."""
        uniq = sorted({tuple(int(x) for x in s) for s in seqs if len(s)})
        if not uniq:
            raise ValueError("a lexicon needs at least one word")
        for s in uniq:
            if min(s) < 1 or max(s) >= n_symbols:
                raise ValueError(f"symbol ids must lie in [1, {n_symbols}), got {s}")
        starts = {s[0] for s in uniq}
        inner = starts.intersection(x for s in uniq for x in s[1:])
        if inner:  # B_ symbols start words and never continue one: a symbol sequence then has one parse
            raise ValueError(f"symbols {sorted(inner)} both start a word and continue one")
        # sorted sequences: a node's children appear in token order, and a prefix shared with the
        # previous sequence is a path already built
        parent: list[int] = [-1]
        tok: list[int] = [0]
        terminal = [False]
        path = [ROOT]  # path[d] = node at depth d of the previous sequence
        prev: tuple[int, ...] = ()
        for s in uniq:
            common = 0
            while common < min(len(prev), len(s)) and prev[common] == s[common]:
                common += 1
            del path[common + 1 :]
            for d in range(common, len(s)):
                parent.append(path[d])
                tok.append(s[d])
                terminal.append(False)
                path.append(len(parent) - 1)
            terminal[path[len(s)]] = True
            prev = s
        par = np.asarray(parent[1:], np.int64)
        nodes = np.arange(1, len(parent), dtype=np.int64)
        order = np.lexsort((np.asarray(tok[1:], np.int64), par))  # by parent, then token
        counts = np.bincount(par, minlength=len(parent))
        start = np.zeros(len(parent) + 1, np.int64)
        np.cumsum(counts, out=start[1:])
        return cls(
            n_symbols=int(n_symbols),
            child_start=start,
            child_tok=np.asarray(tok[1:], np.int64)[order],
            child_node=nodes[order],
            terminal=np.asarray(terminal, bool),
            n_words=len(uniq),
            skipped=int(skipped),
            word_penalty=float(word_penalty),
        )

    @classmethod
    def from_words(cls, words: Iterable[str], vocab: object, *, offset: int = 0, n_symbols: int | None = None, word_penalty: float = 0.0) -> Lexicon:
        """The trie of ``words`` spelled with ``vocab`` (a :class:`streamkit.data.asr_corpus.Vocab`).

        Words with a grapheme outside the vocabulary are skipped and counted (``skipped``).
        ``offset``/``n_symbols`` map language-local ids into a union vocabulary (see
        :func:`union_lexicon`).
        """
        seqs, skipped = _spell(words, vocab, offset)
        n = len(vocab) if n_symbols is None else n_symbols  # type: ignore[arg-type]
        return cls.from_sequences(seqs, n, skipped=skipped, word_penalty=word_penalty)

    # -- decoding ---------------------------------------------------------------------------------

    def complete(self, node: int) -> bool:
        """A hypothesis at ``node`` ends between words (at the root or on a word end)."""
        return node == ROOT or bool(self.terminal[node])

    def allowed(self, node: int) -> np.ndarray:
        """Non-blank symbols allowed after ``node`` (sorted unless both word continuations and starts)."""
        kids = self.child_tok[self.child_start[node] : self.child_start[node + 1]]
        if node != ROOT and self.terminal[node]:
            return np.concatenate([kids, self._root_toks])
        return kids

    def step(self, node: int, token: int) -> int:
        """The node after emitting ``token`` at ``node``; -1 when the lexicon does not allow it."""
        lo, hi = int(self.child_start[node]), int(self.child_start[node + 1])
        j = lo + int(np.searchsorted(self.child_tok[lo:hi], token))
        if j < hi and self.child_tok[j] == token:
            return int(self.child_node[j])
        if node != ROOT and self.terminal[node]:
            return self.step(ROOT, token)
        return -1

    def mask(self, nodes: Sequence[int], dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """(len(nodes), n_symbols) additive mask: 0 where allowed (always blank), ``-word_penalty`` on
        the allowed word starts, ``-inf`` elsewhere."""
        rows = []
        for nd in nodes:
            row = self._rows.get(int(nd))
            if row is None:
                if len(self._rows) >= MASK_CACHE:
                    self._rows.clear()
                row = self._rows[int(nd)] = torch.from_numpy(self._mask_row(int(nd)))
            rows.append(row)
        m = torch.stack(rows)
        return m if dtype == torch.float64 else m.to(dtype)

    def _mask_row(self, node: int) -> np.ndarray:
        m = np.full(self.n_symbols, -np.inf)
        m[0] = 0.0
        m[self.allowed(node)] = 0.0
        if self.word_penalty and (node == ROOT or self.terminal[node]):
            m[self._root_toks] = -self.word_penalty
        return m


def _spell(words: Iterable[str], vocab: object, offset: int) -> tuple[list[list[int]], int]:
    seqs: list[list[int]] = []
    skipped = 0
    for w in words:
        w = w.strip()
        if not w or " " in w:
            skipped += 1
            continue
        try:
            ids = vocab.encode(w)  # type: ignore[attr-defined]
        except ValueError:
            skipped += 1
            continue
        seqs.append([i - 1 + offset for i in ids] if offset else ids)
    return seqs, skipped


def union_lexicon(
    words: Mapping[int, Iterable[str]], vocabs: Mapping[int, object], offsets: Sequence[int], n_symbols: int, *, word_penalty: float = 0.0
) -> Lexicon:
    """One trie over the union vocabulary of ``vanilla``/``onehot`` models: each language's words
    spelled with its vocabulary and shifted to union ids (language ``l``'s symbol 1 is ``offsets[l]``)."""
    seqs: list[list[int]] = []
    skipped = 0
    for lg, ws in words.items():
        s, k = _spell(ws, vocabs[lg], int(offsets[lg]))
        seqs += s
        skipped += k
    return Lexicon.from_sequences(seqs, n_symbols, skipped=skipped, word_penalty=word_penalty)


def model_lexicons(
    cfg: object, symbols: Sequence[Sequence[str]], words: Mapping[str, Iterable[str]], *, word_penalty: float = 0.0
) -> dict[int | None, Lexicon]:
    """The tries a :class:`~streamkit.models.rnnt_search.MultiDecoder` of a model wants.

    ``cfg``: the model's :class:`~streamkit.models.rnnt.RnntConfig`; ``symbols``: its symbol table
    per language (``rnnt_stream.symbol_tables``); ``words``: word list per language name (languages
    left out decode unconstrained). Multi-softmax variants get one trie per language in its own
    ids; ``onehot`` (one search per language over the union) one per language in union ids;
    ``vanilla`` (one search) a single trie of every given language's words, keyed ``None``.
    """
    from streamkit.data.asr_corpus import BLANK, Vocab

    langs = list(cfg.languages)  # type: ignore[attr-defined]
    unknown = sorted(set(words) - set(langs))
    if unknown:
        raise ValueError(f"word lists for {unknown}: the model's languages are {langs}")
    vocabs = {i: Vocab(lg, (BLANK, *symbols[i][1:])) for i, lg in enumerate(langs) if lg in words}  # symbol 0 is blank, whatever its name
    lists = {i: list(words[lg]) for i, lg in enumerate(langs) if lg in words}
    variant = cfg.variant  # type: ignore[attr-defined]
    if variant == "vanilla":
        return {None: union_lexicon(lists, vocabs, cfg.union_offsets, cfg.union_size, word_penalty=word_penalty)} if lists else {}  # type: ignore[attr-defined]
    if variant == "onehot":
        return {i: union_lexicon({i: ws}, vocabs, cfg.union_offsets, cfg.union_size, word_penalty=word_penalty) for i, ws in lists.items()}  # type: ignore[attr-defined]
    return {i: Lexicon.from_words(ws, vocabs[i], word_penalty=word_penalty) for i, ws in lists.items()}


SYSTEM = "system"  #: ``lexicon="system"``: the Debian dictionaries the corpus draws from (streamkit.data.wordlists)


def read_word_file(path: str | Path) -> list[str]:
    """Words of a text file, one per line (blank lines and ``#`` comments skipped); ValueError if none."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"cannot read word list {p}: {e}") from e
    ws = [w.strip() for w in text.splitlines()]
    ws = [w for w in ws if w and not w.startswith("#")]
    if not ws:
        raise ValueError(f"word list {p} has no words")
    return ws


def word_lists(spec: str | Path | Mapping[str, str | Path], languages: Sequence[str]) -> dict[str, list[str]]:
    """Word list per language name for ``lexicon=`` options.

    ``spec``: ``"system"`` (every language's Debian dictionary, filtered as the corpus generator
    does: the lists ``streamkit corpus asr`` drew its sentences from); a directory holding
    ``<lang>.words.txt`` files (a ``--words N`` corpus's ``vocab/`` directory; languages without a
    file decode unconstrained, a directory with none is an error); or a mapping language name →
    file (one word per line). ValueError on anything missing or unreadable.
    """
    from streamkit.data import wordlists

    if isinstance(spec, Mapping):
        unknown = sorted(set(spec) - set(languages))
        if unknown:
            raise ValueError(f"word lists for {unknown}: the languages are {list(languages)}")
        return {lg: read_word_file(p) for lg, p in spec.items()}
    if str(spec) == SYSTEM:
        try:
            return {lg: list(wordlists.words(lg)) for lg in languages}
        except (ValueError, OSError) as e:  # WordListMissingError names the Debian package
            raise ValueError(f"lexicon 'system': {e}") from e
    d = Path(spec)
    if not d.is_dir():
        raise ValueError(f"lexicon must be 'system', a directory of <lang>.words.txt files or a mapping, got {str(spec)!r}")
    out = {lg: read_word_file(d / f"{lg}.words.txt") for lg in languages if (d / f"{lg}.words.txt").is_file()}
    if not out:
        raise ValueError(f"{d} has no <lang>.words.txt for any of {list(languages)}")
    return out


_CACHE: dict[tuple[object, ...], dict[int | None, Lexicon]] = {}
CACHE_SIZE = 4  #: built trie sets kept per process (a file-by-file ``transcribe`` builds them once)


def _files_key(spec: str | Path | Mapping[str, str | Path], languages: Sequence[str]) -> tuple[object, ...]:
    """What a word-list spec reads, with each file's size and mtime (an edited file is re-read)."""
    if isinstance(spec, Mapping):
        files = sorted((str(lg), Path(p)) for lg, p in spec.items())
    elif str(spec) == SYSTEM:
        return (SYSTEM,)
    else:
        files = [(lg, Path(spec) / f"{lg}.words.txt") for lg in languages]
    key: list[object] = []
    for lg, p in files:
        try:
            st = p.stat()
            key.append((lg, str(p.resolve()), st.st_size, st.st_mtime_ns))
        except OSError:
            key.append((lg, str(p), None, None))
    return tuple(key)


def cached_model_lexicons(
    cfg: object, symbols: Sequence[Sequence[str]], spec: str | Path | Mapping[str, str | Path], *, word_penalty: float = 0.0
) -> dict[int | None, Lexicon]:
    """:func:`model_lexicons` of :func:`word_lists` ``(spec)``, built once per process for the same
    model vocabulary, word files and penalty (the tries are read-only during decoding)."""
    langs = list(cfg.languages)  # type: ignore[attr-defined]
    key = (cfg.variant, tuple(langs), tuple(tuple(s) for s in symbols), _files_key(spec, langs), float(word_penalty))  # type: ignore[attr-defined]
    hit = _CACHE.get(key)
    if hit is None:
        hit = model_lexicons(cfg, symbols, word_lists(spec, langs), word_penalty=word_penalty)
        if len(_CACHE) >= CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = hit
    return hit
