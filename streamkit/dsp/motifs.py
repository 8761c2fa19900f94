"""Melodic motifs from an f0 contour: simplification into pitch levels, interval codes, closed
contiguous motif mining, and cutting motif occurrences out of the audio.

The input is the output of :mod:`streamkit.dsp.melody` (rows of cents above 55 Hz, voiced 0/1,
voiced probability, one per ``hop_s`` = 10 ms). The steps (docs/singers.md, "Motifs"):

1. **Phrases**: runs of voiced rows; unvoiced stretches shorter than ``bridge_s`` are bridged,
   longer ones end a phrase.
2. **Levels** (contour simplification), one of two variants:

   * ``band`` (fixed band): a level grows while all its rows stay within a band of ``band``
     cents (60 by default, max - min <= band); the row that would widen it starts a new level.
     The level's pitch is the median of its rows.
   * ``kmeans``: univariate k-means over the voiced cents (of the signal, or ``centroids`` given,
     e.g. fitted on a whole corpus); a level is a run of rows with the same nearest centroid and
     sits at that centroid.

   In both, a level shorter than ``min_level_s`` is absorbed into the level before it (the first
   one into the next), so vibrato and passing notes do not make levels of their own.
3. **Intervals**: between consecutive levels of a phrase, ``d = cents[j] - cents[j-1]`` is coded
   by its size and sign: ``0`` if ``|d| < 70``, ``+-1`` if ``70 <= |d| < 112``, ``+-2`` if
   ``|d| >= 112`` (``thresholds``, any ascending tuple). **Sign convention: ``+`` = the melody
   ascends** (the later level is higher), ``-`` = it descends.
4. **Motifs**: contiguous interval patterns present in at least ``min_support`` phrases (support
   counts phrases, not occurrences), of at least ``min_length`` codes, and *closed*: no longer
   contiguous pattern containing it has the same support.
5. **Cutting**: an occurrence of ``m`` codes spans ``m + 1`` levels; its clip runs from the start
   of the first level to the end of the last (level boundaries, in rows of ``hop_s``). Clips
   shorter than ``min_clip_s`` (0.15 s) are dropped and counted.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from streamkit.core.errors import ConfigError

HOP_S = 0.01  #: seconds per f0 row (dsp.melody)
BAND_CENTS = 60.0  #: the fixed band of a level
THRESHOLDS = (70.0, 112.0)  #: interval code boundaries in cents
MIN_SUPPORT = 3  #: phrases a motif must occur in
MIN_LENGTH = 5  #: codes of the shortest motif
MIN_CLIP_S = 0.15  #: shortest clip cut


@dataclass(frozen=True)
class Level:
    """A pitch level: rows ``[start, end)`` of the contour at ``cents`` above 55 Hz."""

    start: int
    end: int
    cents: float


@dataclass(frozen=True)
class Motif:
    """A closed contiguous interval pattern: its codes, support (phrases) and every occurrence
    ``(phrase, index of its first code)``."""

    pattern: tuple[int, ...]
    support: int
    occurrences: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Clip:
    """One motif occurrence cut at level boundaries: seconds from the contour's row 0."""

    phrase: int
    start_s: float
    end_s: float
    pattern: tuple[int, ...]


def _check_rows(cents: np.ndarray, voiced: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = np.asarray(cents, dtype=np.float64).reshape(-1)
    v = np.asarray(voiced).reshape(-1) > 0
    if c.shape != v.shape:
        raise ConfigError(f"cents and voiced differ in length: {c.shape[0]} vs {v.shape[0]}")
    if not np.all(np.isfinite(c[v])):
        raise ConfigError(f"{int(np.count_nonzero(~np.isfinite(c[v])))} voiced rows have a non-finite pitch")
    return c, v


def phrases(voiced: np.ndarray, *, bridge_s: float = 0.1, hop_s: float = HOP_S) -> list[tuple[int, int]]:
    """Rows ``[a, b)`` of the phrases: voiced runs joined across unvoiced gaps shorter than ``bridge_s``."""
    v = np.asarray(voiced).reshape(-1) > 0
    edges = np.flatnonzero(np.diff(np.concatenate([[0], v.astype(np.int8), [0]])))
    runs = list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))
    bridge = int(round(bridge_s / hop_s))
    out: list[tuple[int, int]] = []
    for a, b in runs:
        if out and a - out[-1][1] < bridge:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _absorb_short(levels: list[Level], min_rows: int) -> list[Level]:
    """Absorb levels shorter than ``min_rows`` into the previous level (the first into the next);
    adjacent levels at the same pitch are merged."""
    out: list[Level] = []
    carry: int | None = None  # start of short levels at the phrase head, waiting for a long one
    for lv in levels:
        if lv.end - lv.start < min_rows:
            if out:
                out[-1] = Level(out[-1].start, lv.end, out[-1].cents)
            elif carry is None:
                carry = lv.start
            continue
        if carry is not None:
            lv = Level(carry, lv.end, lv.cents)
            carry = None
        if out and out[-1].cents == lv.cents:
            out[-1] = Level(out[-1].start, lv.end, lv.cents)
        else:
            out.append(lv)
    return out


def simplify_band(cents: np.ndarray, voiced: np.ndarray, *, band: float = BAND_CENTS, min_level_s: float = 0.05,
                  bridge_s: float = 0.1, hop_s: float = HOP_S) -> list[list[Level]]:  # fmt: skip
    """Fixed-band contour simplification: the levels of each phrase."""
    if not band > 0:
        raise ConfigError(f"band must be > 0 cents, got {band!r}")
    c, v = _check_rows(cents, voiced)
    min_rows = max(1, int(round(min_level_s / hop_s)))
    out = []
    for a, b in phrases(v, bridge_s=bridge_s, hop_s=hop_s):
        levels: list[Level] = []
        rows: list[int] = []
        lo = hi = 0.0
        for i in range(a, b):
            if not v[i]:
                continue
            x = c[i]
            if rows and max(hi, x) - min(lo, x) <= band:
                rows.append(i)
                lo, hi = min(lo, x), max(hi, x)
                continue
            if rows:
                levels.append(Level(rows[0], rows[-1] + 1, float(np.median(c[rows]))))
            rows, lo, hi = [i], x, x
        if rows:
            levels.append(Level(rows[0], rows[-1] + 1, float(np.median(c[rows]))))
        levels = _absorb_short(levels, min_rows)
        if levels:
            out.append(levels)
    return out


def kmeans_1d(values: np.ndarray, k: int, *, resolution: float = 1.0, max_bins: int = 2000) -> np.ndarray:
    """Sorted centroids of optimal univariate k-means (the dynamic programme of Ckmeans.1d.dp:
    the least within-cluster sum of squares over all splits of the sorted values into ``k`` runs).

    The values are grouped into bins of ``resolution`` cents (wider if that makes more than
    ``max_bins``); clusters are runs of bins and each centroid is the exact mean of its values.
    Deterministic, and no local minima (Lloyd's iteration can split one note and merge two).
    """
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    if x.size == 0:
        raise ConfigError("k-means of no values (no voiced rows)")
    lo, hi = float(x.min()), float(x.max())
    width = max(resolution, (hi - lo) / max_bins, 1e-9)
    idx = np.minimum(((x - lo) / width).astype(np.int64), max_bins)
    used, inv = np.unique(idx, return_inverse=True)
    n = np.bincount(inv).astype(np.float64)
    s1 = np.bincount(inv, weights=x)
    s2 = np.bincount(inv, weights=x * x)
    m = used.size
    k = max(1, min(int(k), m))
    c_n, c_1, c_2 = (np.concatenate([[0.0], np.cumsum(a)]) for a in (n, s1, s2))
    i = np.arange(m)[:, None]  # first bin of the last cluster
    j = np.arange(m)[None, :]  # last bin
    with np.errstate(divide="ignore", invalid="ignore"):
        cnt = c_n[j + 1] - c_n[i]
        cost = (c_2[j + 1] - c_2[i]) - (c_1[j + 1] - c_1[i]) ** 2 / cnt
    cost = np.where(i <= j, np.maximum(cost, 0.0), np.inf)
    best = cost[0].copy()  # best[j]: one cluster over bins 0..j
    back = np.zeros((k, m), dtype=np.int64)
    for q in range(1, k):
        prev = np.concatenate([[np.inf], best[:-1]])  # clusters before bin i end at i - 1
        tot = prev[:, None] + cost
        back[q] = tot.argmin(axis=0)
        best = tot[back[q], np.arange(m)]
    cuts = []
    end = m - 1
    for q in range(k - 1, 0, -1):
        start = int(back[q, end])
        cuts.append((start, end))
        end = start - 1
    cuts.append((0, end))
    cen = [(c_1[b + 1] - c_1[a]) / (c_n[b + 1] - c_n[a]) for a, b in cuts if c_n[b + 1] > c_n[a]]
    return np.sort(np.array(cen))


def simplify_kmeans(cents: np.ndarray, voiced: np.ndarray, *, k: int | None = None, centroids: Sequence[float] | None = None,
                    min_level_s: float = 0.05, bridge_s: float = 0.1, hop_s: float = HOP_S) -> list[list[Level]]:  # fmt: skip
    """k-means-levels contour simplification: the levels of each phrase.

    ``centroids`` (e.g. fitted on a corpus) are used as given; else k-means with ``k`` clusters
    on the voiced cents, by default one per 100 cents of their 1-99 % range (at least 2).
    """
    c, v = _check_rows(cents, voiced)
    if centroids is not None:
        cen = np.sort(np.asarray(centroids, dtype=np.float64))
        if cen.size == 0 or not np.all(np.isfinite(cen)):
            raise ConfigError("centroids must be a non-empty list of finite cents")
    else:
        if not np.any(v):
            return []
        if k is None:
            lo, hi = np.quantile(c[v], [0.01, 0.99])
            k = max(2, int(math.ceil((hi - lo) / 100.0)) + 1)
        if k < 1:
            raise ConfigError(f"k must be >= 1, got {k}")
        cen = kmeans_1d(c[v], k)
    min_rows = max(1, int(round(min_level_s / hop_s)))
    out = []
    for a, b in phrases(v, bridge_s=bridge_s, hop_s=hop_s):
        levels: list[Level] = []
        for i in range(a, b):
            if not v[i]:
                continue
            lab = float(cen[int(np.abs(cen - c[i]).argmin())])
            if levels and levels[-1].cents == lab:
                levels[-1] = Level(levels[-1].start, i + 1, lab)
            else:
                levels.append(Level(i, i + 1, lab))
        levels = _absorb_short(levels, min_rows)
        if levels:
            out.append(levels)
    return out


def encode_intervals(levels: Sequence[Level], thresholds: Sequence[float] = THRESHOLDS) -> tuple[int, ...]:
    """Interval codes between consecutive levels: sign + = ascending; magnitude = how many of the
    ``thresholds`` (cents, ascending) ``|d|`` reaches (0, 1, 2 for (70, 112))."""
    th = np.asarray(thresholds, dtype=np.float64)
    if th.size == 0 or np.any(np.diff(th) <= 0) or th[0] <= 0:
        raise ConfigError(f"thresholds must be positive and ascending, got {tuple(thresholds)}")
    out = []
    for p, q in zip(levels[:-1], levels[1:], strict=True):
        d = q.cents - p.cents
        m = int(np.searchsorted(th, abs(d), side="right"))
        out.append(m if d > 0 else -m)
    return tuple(out)


def mine_closed_motifs(sequences: Sequence[Sequence[int]], *, min_support: int = MIN_SUPPORT,
                       min_length: int = MIN_LENGTH) -> list[Motif]:  # fmt: skip
    """Closed contiguous patterns (support = sequences containing them) of ``min_length`` or
    more codes in at least ``min_support`` sequences; sorted by support, then length (both
    descending), then pattern.

    Pattern growth to the right over occurrence lists, pruned at ``min_support`` (support only
    falls as a pattern grows). A pattern is closed iff no one-code extension to the left or right
    has the same support: a longer pattern with equal support would pass through such an extension.
    """
    if min_support < 1 or min_length < 1:
        raise ConfigError(f"min_support and min_length must be >= 1, got {min_support}, {min_length}")
    seqs = [tuple(int(c) for c in s) for s in sequences]

    def support(occ: list[tuple[int, int]]) -> int:
        return len({s for s, _ in occ})

    first: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for s, seq in enumerate(seqs):
        for i, c in enumerate(seq):
            first[c].append((s, i))
    stack = [((c,), occ) for c, occ in sorted(first.items()) if support(occ) >= min_support]
    found: list[Motif] = []
    while stack:
        pat, occ = stack.pop()
        sup = support(occ)
        n = len(pat)
        right: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for s, i in occ:
            if i + n < len(seqs[s]):
                right[seqs[s][i + n]].append((s, i))
        closed = True
        for c, eo in sorted(right.items()):
            es = support(eo)
            closed &= es != sup
            if es >= min_support:
                stack.append((pat + (c,), eo))
        if not closed or n < min_length:
            continue
        left: dict[int, set[int]] = defaultdict(set)
        for s, i in occ:
            if i > 0:
                left[seqs[s][i - 1]].add(s)
        if any(len(ss) == sup for ss in left.values()):
            continue
        found.append(Motif(pat, sup, tuple(sorted(occ))))
    found.sort(key=lambda m: (-m.support, -len(m.pattern), m.pattern))
    return found


def cut_occurrences(levels: Sequence[Sequence[Level]], motifs: Sequence[Motif], *, hop_s: float = HOP_S,
                    min_clip_s: float = MIN_CLIP_S) -> tuple[list[Clip], int]:  # fmt: skip
    """Clips of every occurrence of ``motifs`` in the phrases' ``levels`` (the phrases the codes
    were made from, same order); returns (clips sorted by time, clips dropped as shorter than
    ``min_clip_s``)."""
    clips: list[Clip] = []
    short = 0
    for m in motifs:
        n = len(m.pattern)
        for s, i in m.occurrences:
            lv = levels[s]
            if i + n >= len(lv):
                raise ConfigError(f"occurrence ({s}, {i}) of a {n}-code motif runs past phrase {s} ({len(lv)} levels)")
            a, b = lv[i].start * hop_s, lv[i + n].end * hop_s
            if b - a < min_clip_s:
                short += 1
                continue
            clips.append(Clip(s, a, b, m.pattern))
    clips.sort(key=lambda c: (c.start_s, c.end_s, c.pattern))
    return clips, short


def clip_audio(x: np.ndarray, rate: int, clip: Clip, *, origin_s: float = 0.0) -> np.ndarray:
    """The samples of ``clip`` in ``x`` (row 0 of the contour at ``origin_s`` of ``x``)."""
    a = max(0, int(round((clip.start_s + origin_s) * rate)))
    b = min(len(x), int(round((clip.end_s + origin_s) * rate)))
    return x[a:b]


def motifs_of_contour(rows: np.ndarray, *, method: str = "band", thresholds: Sequence[float] = THRESHOLDS,
                      min_support: int = MIN_SUPPORT, min_length: int = MIN_LENGTH, min_clip_s: float = MIN_CLIP_S,
                      hop_s: float = HOP_S, **simplify: object) -> tuple[list[Motif], list[Clip], int]:  # fmt: skip
    """The whole chain on melody rows (n, >= 2: cents, voiced): (motifs, clips, clips dropped)."""
    r = np.asarray(rows)
    if r.ndim != 2 or r.shape[1] < 2:
        raise ConfigError(f"rows must be (n, >= 2) cents and voiced, got shape {r.shape}")
    if method == "band":
        lv = simplify_band(r[:, 0], r[:, 1], hop_s=hop_s, **simplify)  # type: ignore[arg-type]
    elif method == "kmeans":
        lv = simplify_kmeans(r[:, 0], r[:, 1], hop_s=hop_s, **simplify)  # type: ignore[arg-type]
    else:
        raise ConfigError(f"method must be 'band' or 'kmeans', got {method!r}")
    codes = [encode_intervals(p, thresholds) for p in lv]
    motifs = mine_closed_motifs(codes, min_support=min_support, min_length=min_length)
    clips, short = cut_occurrences(lv, motifs, hop_s=hop_s, min_clip_s=min_clip_s)
    return motifs, clips, short
