"""Text-to-audio retrieval scores as in DCASE task 6b: R@1, R@5, R@10 and mAP@10 with one relevant clip per query.

Ties count at their expected value under a random order: a query whose clip has ``g`` clips scored
strictly above it and ``t`` others scored equal ranks ``g + 1 + u`` with ``u`` uniform over ``0..t``
(so a model that gives every clip the same score gets chance figures, not a lucky order).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["retrieval_scores"]


def retrieval_scores(sim: np.ndarray, target: Sequence[int] | np.ndarray, ks: Sequence[int] = (1, 5, 10), map_k: int = 10) -> dict[str, float]:
    """Scores in % of a ``(queries, clips)`` similarity matrix; ``target[q]``: the index of query ``q``'s clip.

    Returns ``{"R@1": ..., "R@5": ..., "R@10": ..., "mAP@10": ..., "queries": n}``."""
    sim = np.asarray(sim, np.float64)
    target = np.asarray(target, np.int64)
    if sim.ndim != 2 or target.shape != (sim.shape[0],):
        raise ValueError(f"need a (queries, clips) matrix and one target per query, got {sim.shape} and {target.shape}")
    if sim.shape[0] == 0:
        raise ValueError("no queries")
    own = sim[np.arange(sim.shape[0]), target][:, None]
    greater = (sim > own).sum(1)
    ties = (sim == own).sum(1) - 1
    recall = {k: 0.0 for k in ks}
    ap = 0.0
    for g, t in zip(greater.tolist(), ties.tolist()):
        ranks = np.arange(g + 1, g + t + 2)  # equally likely
        for k in ks:
            recall[k] += float((ranks <= k).mean())
        ap += float(np.where(ranks <= map_k, 1.0 / ranks, 0.0).mean())
    n = sim.shape[0]
    out = {f"R@{k}": round(100.0 * v / n, 2) for k, v in recall.items()}
    out[f"mAP@{map_k}"] = round(100.0 * ap / n, 2)
    out["queries"] = n
    return out
