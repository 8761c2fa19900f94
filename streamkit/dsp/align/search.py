"""Schedule-guided marker search: two markers anywhere, the others where the schedule puts them.

Scoring one marker's mask against the whole reception (:func:`~streamkit.dsp.align.detect.score_curve`)
costs transforms of the whole spectrogram, so searching every marker everywhere grows with
(markers x length), and a marker that a fade pushed under the global threshold is lost even when
it is plainly where the schedule says. :func:`find_markers` therefore:

1. searches markers globally, in schedule order, until two of them agree with the schedule (their
   spacing gives a clock ratio within ``max_ppm`` of the nominal one): the *anchors* (when no two
   agree, the best-scoring marker alone, at the nominal ratio). A marker counts when its mask
   scores at least ``threshold``, or at least ``guided_threshold`` with the matched filter of
   step 3 confirming it there (a weak candidate is kept only as one of the two anchors);
2. predicts every other marker's start from the anchors' line and searches only a window around it
   (the schedule distance to the nearer anchor times ``max_ppm``, plus ``tol`` and a frame each
   side), refitting the line as markers are added. A windowed hit is kept at the lower
   ``guided_threshold`` when no other scheduled marker's mask scores higher at the same start (a
   wrong marker on air, e.g. swapped markers, scores ~1 with its own mask and ~0.3 with this one);
3. when the mask fails in the window (a fade, deep noise), a matched filter decides: each of the
   marker's chirp symbols is correlated with the waveform over the whole window and the magnitudes
   are summed at the symbols' offsets (:func:`~streamkit.dsp.align.detect.refine`: coherent within a
   symbol, incoherent across symbols, so fading and a frequency error cost little). The marker is
   kept when its normalised peak (``quality``) reaches ``matched_threshold`` and no other scheduled
   marker's symbols correlate as well at that place (noise peaks at ~0.05, speech ~0.07, another
   marker up to ~0.2 with this one's symbols and ~1 with its own; the marker itself ~0.5 at -5 dB);
4. a marker found neither way is searched globally at ``threshold`` (a marker displaced by
   lost samples is then found, and judged off schedule by the caller).

The caller's sanity checks (order, distance from the robust clock line) still judge every marker.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamkit.dsp.align.detect import FineMarker, ScoreBank, SpecGrid, marker_mask, refine, score_curve

__all__ = ["MarkerHit", "find_markers"]


@dataclass(frozen=True, slots=True)
class MarkerHit:
    """One marker's search result: best start frame, its score, how it was searched, and the fine position (or None)."""

    frame: int | None
    score: float | None
    search: str
    fine: FineMarker | None


def _score_at(pn: NDArray[np.float64], mask: NDArray[np.bool_], s: int) -> float:
    t = mask.shape[1]
    if s < 0 or s + t > pn.shape[1]:
        return 0.0
    return float(np.sum(pn[:, s : s + t][mask]) / t)


def _matched(x: NDArray[np.float64], ids: list[int], i: int, center: int, search: int, rate: float, threshold: float) -> FineMarker | None:
    """Marker ``ids[i]`` by the symbol matched filter within ``center +- search``, or None when its
    quality is under ``threshold`` or another scheduled marker's symbols match as well there."""
    fine = refine(x, center, ids[i], rate, search)
    if fine is None or fine.quality < threshold:
        return None
    at = int(round(fine.position))
    for m in sorted(set(ids) - {ids[i]}):
        other = refine(x, at, m, rate, 8)
        if other is not None and other.quality >= fine.quality:
            return None
    return fine


def find_markers(x: NDArray[np.float64], pn: NDArray[np.float64], grid: SpecGrid, ids: list[int], starts: list[int], *,
                 ratio: float, threshold: float, guided_threshold: float, matched_threshold: float, max_ppm: float,
                 tol: float) -> list[MarkerHit]:  # fmt: skip
    """Find the scheduled markers (``ids`` at reference samples ``starts``) in ``x`` (at the reference rate, nominally).

    ``pn`` is ``x``'s normalised spectrogram on ``grid``; ``ratio`` the nominal samples of ``x`` per
    reference sample; ``tol`` (samples of ``x``) the allowed distance from the line.
    """
    n = len(ids)
    masks = [marker_mask(i, grid) for i in ids]
    hits: list[MarkerHit | None] = [None] * n
    pos: dict[int, float] = {}  # marker index -> fine position in x
    bank: list[ScoreBank] = []  # the reception's spectra, computed at the first global search

    def take(i: int, s: int, v: float, how: str) -> None:
        fine = refine(x, s * grid.hop, ids[i], grid.rate, 2 * grid.hop)
        hits[i] = MarkerHit(s, v, how, fine)
        if fine is not None:
            pos[i] = fine.position

    def _global(i: int, how: str) -> MarkerHit:
        if not bank:
            bank.append(ScoreBank(pn))
        sc = bank[0].score(masks[i])
        if not sc.size:
            return MarkerHit(None, None, how, None)
        s = int(np.argmax(sc))
        v = float(sc[s])
        if v < threshold:
            return MarkerHit(s, v, how, None)
        take(i, s, v, how)
        return hits[i]  # type: ignore[return-value]

    anchors: tuple[int, int] | None = None
    weak: dict[int, FineMarker] = {}  # under threshold globally, confirmed by the matched filter
    for i in range(n):
        h = hits[i] = _global(i, "global")
        if i not in pos and h.frame is not None and h.score is not None and h.score >= guided_threshold:
            fine = _matched(x, ids, i, h.frame * grid.hop, 4 * grid.hop, grid.rate, matched_threshold)
            if fine is not None:
                weak[i] = fine
        cand = pos | {a: f.position for a, f in weak.items()}
        for a in cand:
            if a != i and i in cand and abs((cand[i] - cand[a]) / (starts[i] - starts[a]) / ratio - 1.0) * 1e6 <= max_ppm:
                anchors = (a, i)
                break
        if anchors:
            break
    for a in anchors or ():
        if a in weak:
            h = hits[a]
            hits[a] = MarkerHit(h.frame, h.score, "global, matched filter", weak[a])  # type: ignore[union-attr]
            pos[a] = weak[a].position
    if anchors is None:
        if not pos:
            return [h or MarkerHit(None, None, "global", None) for h in hits]
        best = max(pos, key=lambda a: hits[a].score or 0.0)  # type: ignore[union-attr]
        used = {best}
    else:
        used = {anchors[0], anchors[1]}
    rest = [i for i in range(n) if i not in used]
    rest.sort(key=lambda i: min(abs(starts[i] - starts[a]) for a in used))
    for i in rest:
        kk = np.array([starts[a] for a in sorted(used)], dtype=np.float64)
        jj = np.array([pos[a] for a in sorted(used)])
        slope, icpt = np.polyfit(kk, jj, 1) if kk.size > 1 else (ratio, jj[0] - ratio * kk[0])
        pred = icpt + slope * starts[i]
        dist = min(abs(starts[i] - starts[a]) for a in used) * ratio
        half = int(np.ceil((dist * max_ppm * 1e-6 + tol) / grid.hop)) + 1
        c = int(round(pred / grid.hop))
        t = masks[i].shape[1]
        lo, hi = max(c - half, 0), min(c + half, pn.shape[1] - t)
        if hi < lo:
            hits[i] = _global(i, "guided, then global")
            continue
        sc = score_curve(pn[:, lo : hi + t], masks[i])
        s = lo + int(np.argmax(sc))
        v = float(sc[s - lo])
        others = max((_score_at(pn, masks[m], s) for m in range(n) if ids[m] != ids[i]), default=0.0)
        if v >= guided_threshold and others < v:
            take(i, s, v, "guided")
        else:
            fine = _matched(x, ids, i, c * grid.hop, half * grid.hop, grid.rate, matched_threshold)
            if fine is None:
                hits[i] = _global(i, "guided, then global")
                continue
            f = int(round(fine.position / grid.hop))
            hits[i] = MarkerHit(f, _score_at(pn, masks[i], f), "guided, matched filter", fine)
            pos[i] = fine.position
        if i in pos and abs(pos[i] - pred) <= tol:
            used.add(i)
    return [h or MarkerHit(None, None, "global", None) for h in hits]
