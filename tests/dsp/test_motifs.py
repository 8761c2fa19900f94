"""Motifs: contour simplification (fixed band, k-means levels), interval codes and their sign,
the closed contiguous motif miner against brute force, cutting at level boundaries."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit.core.errors import ConfigError
from streamkit.dsp.motifs import (
    Level,
    Motif,
    clip_audio,
    cut_occurrences,
    encode_intervals,
    kmeans_1d,
    mine_closed_motifs,
    motifs_of_contour,
    phrases,
    simplify_band,
    simplify_kmeans,
)


def brute_force(seqs, min_support=3, min_length=5):
    """Every contiguous substring, its support, closedness by comparing with every longer one."""
    sup: dict[tuple[int, ...], set[int]] = {}
    for s, q in enumerate(seqs):
        for i in range(len(q)):
            for j in range(i + 1, len(q) + 1):
                sup.setdefault(tuple(q[i:j]), set()).add(s)
    freq = {p: len(v) for p, v in sup.items() if len(v) >= min_support}

    def inside(p, q):
        return any(q[k : k + len(p)] == p for k in range(len(q) - len(p) + 1))

    out = {}
    for p, n in freq.items():
        if len(p) < min_length:
            continue
        if any(len(q) > len(p) and m == n and inside(p, q) for q, m in freq.items()):
            continue
        out[p] = n
    return out


@st.composite
def planted(draw):
    """Random code sequences over a small alphabet, some with a planted motif copied in."""
    alphabet = draw(st.sampled_from([(-1, 0, 1), (-2, -1, 0, 1, 2)]))
    sym = st.sampled_from(alphabet)
    motif = draw(st.lists(sym, min_size=5, max_size=8))
    n = draw(st.integers(3, 9))
    seqs = []
    for _ in range(n):
        q = draw(st.lists(sym, min_size=0, max_size=14))
        if draw(st.booleans()):
            k = draw(st.integers(0, len(q)))
            q = q[:k] + motif + q[k:]
        seqs.append(q)
    return seqs, tuple(motif)


@settings(max_examples=150, deadline=None)
@given(planted(), st.integers(2, 4), st.integers(3, 6))
def test_miner_equals_brute_force(case, min_support, min_length):
    seqs, _ = case
    got = mine_closed_motifs(seqs, min_support=min_support, min_length=min_length)
    assert {m.pattern: m.support for m in got} == brute_force(seqs, min_support, min_length)
    for m in got:  # occurrences are exactly where the pattern is
        where = {(s, i) for s, q in enumerate(seqs) for i in range(len(q)) if tuple(q[i : i + len(m.pattern)]) == m.pattern}
        assert set(m.occurrences) == where
        assert len({s for s, _ in m.occurrences}) == m.support


def test_planted_motif_found_and_closedness():
    motif = (1, 1, -2, 0, 2, -1)
    seqs = [(0,) + motif + (2,), (-1, -1) + motif, motif + (0, 0), (2, 2, 2)]
    got = mine_closed_motifs(seqs)
    assert [m.pattern for m in got] == [motif]
    assert got[0].support == 3
    assert got[0].occurrences == ((0, 1), (1, 2), (2, 0))
    # its sub-patterns of length 5 have the same support, so they are not closed
    assert all(len(m.pattern) == 6 for m in got)
    # a longer version in only two phrases does not absorb the motif (support differs), and is
    # itself not frequent
    seqs2 = [motif + (2,), motif + (2,), motif + (-2,)]
    got2 = mine_closed_motifs(seqs2)
    assert [(m.pattern, m.support) for m in got2] == [(motif, 3)]
    got3 = mine_closed_motifs(seqs2, min_support=2)
    assert {(m.pattern, m.support) for m in got3} == {(motif, 3), (motif + (2,), 2)}


def test_support_counts_phrases_not_occurrences():
    m = (1, 0, -1, 0, 1)
    assert mine_closed_motifs([m + m + m, (2,), (2,)]) == []
    assert mine_closed_motifs([m, m, m])[0] == Motif(m, 3, ((0, 0), (1, 0), (2, 0)))


def test_interval_codes_and_sign_convention():
    lv = [Level(0, 10, c) for c in (1000.0, 1050.0, 1140.0, 1400.0, 1330.0, 1330.0 - 111.9, 1000.0)]
    # +50 -> 0; +90 -> +1 (ascending); +260 -> +2; -70 -> -1 (descending, 70 reaches the
    # first threshold); -111.9 -> -1; -218.1 -> -2
    assert encode_intervals(lv) == (0, 1, 2, -1, -1, -2)
    assert encode_intervals(lv, thresholds=(50.0,)) == (1, 1, 1, -1, -1, -1)
    with pytest.raises(ConfigError, match="ascending"):
        encode_intervals(lv, thresholds=(112.0, 70.0))
    assert encode_intervals(lv[:1]) == ()


def steps_contour(notes, rows_per_note=20, vibrato=0.0, gap_after=()):
    """Rows (cents, voiced) of held notes, optional vibrato (+- cents) and silent gaps of 30 rows."""
    c, v = [], []
    for k, n in enumerate(notes):
        t = np.arange(rows_per_note)
        c.extend(n + vibrato * np.sin(2 * np.pi * t / 18.0))
        v.extend([1] * rows_per_note)
        if k in gap_after:
            c.extend([0.0] * 30)
            v.extend([0] * 30)
    return np.array(c), np.array(v)


def test_band_levels_of_held_notes_with_vibrato():
    notes = [2400, 2500, 2600, 2400, 2700]
    c, v = steps_contour(notes, vibrato=25.0, gap_after=(2,))  # +-25 cents fits the 60-cent band
    lv = simplify_band(c, v)
    assert len(lv) == 2  # the gap of 0.3 s ends the first phrase
    assert [[round(x.cents, -1) for x in p] for p in lv] == [[2400, 2500, 2600], [2400, 2700]]
    assert [(x.start, x.end) for x in lv[0]] == [(0, 20), (20, 40), (40, 60)]
    assert [encode_intervals(p) for p in lv] == [(1, 1), (2,)]
    # a short unvoiced break (< bridge_s) is bridged
    v2 = v.copy()
    v2[25:29] = 0
    assert phrases(v2) == phrases(v)


def test_short_levels_absorbed():
    c, v = steps_contour([2400, 2500, 2400], rows_per_note=20)
    c[30:33] = 2900  # a 30 ms blip: shorter than min_level_s (50 ms)
    lv = simplify_band(c, v)[0]
    assert [round(x.cents) for x in lv] == [2400, 2500, 2400]
    assert lv[1] == Level(20, 40, 2500.0)


def test_kmeans_levels():
    notes = [2400, 2500, 2600, 2400, 2700]
    c, v = steps_contour(notes, vibrato=15.0)
    cen = kmeans_1d(c[v > 0], 4)
    np.testing.assert_allclose(cen, [2400, 2500, 2600, 2700], atol=3)
    lv = simplify_kmeans(c, v, k=4)[0]
    assert [round(x.cents, -1) for x in lv] == notes
    assert encode_intervals(lv) == (1, 1, -2, 2)
    # given centroids are used as they are
    lv2 = simplify_kmeans(c, v, centroids=[2450.0, 2650.0])[0]
    assert [x.cents for x in lv2] == [2450.0, 2650.0, 2450.0, 2650.0]
    with pytest.raises(ConfigError, match="centroids"):
        simplify_kmeans(c, v, centroids=[])


def test_cutting_at_level_boundaries_with_floor():
    levels = [[Level(0, 10, 0), Level(10, 12, 100), Level(12, 14, 0), Level(14, 16, 100), Level(16, 30, 300), Level(30, 40, 0)]]
    m_long = Motif((1, -1, 1, 2, -2), 1, ((0, 0),))
    m_short = Motif((1, -1), 1, ((0, 1),))  # levels 1..3: rows 10..16 = 0.06 s < 0.15 s
    clips, short = cut_occurrences(levels, [m_long, m_short])
    assert short == 1
    assert [(c.start_s, c.end_s) for c in clips] == [(0.0, 0.4)]
    clips, short = cut_occurrences(levels, [m_short], min_clip_s=0.05)
    assert short == 0 and clips[0].start_s == pytest.approx(0.10) and clips[0].end_s == pytest.approx(0.16)
    x = np.arange(16000)
    assert clip_audio(x, 16000, clips[0]).tolist() == list(range(1600, 2560))
    with pytest.raises(ConfigError, match="runs past"):
        cut_occurrences(levels, [Motif((1, 1, 1, 1, 1, 1), 1, ((0, 0),))])


def test_whole_chain_on_repeated_phrases():
    """Three phrases singing the same figure (with vibrato and different starting pitch) give the
    figure as a motif; every clip spans its notes."""
    fig = [0, 100, 200, 100, 400, 300, 0]
    rows = []
    for base in (2300, 2400, 2350):
        c, v = steps_contour([base + f for f in fig], rows_per_note=15, vibrato=20.0)
        rows.append(np.stack([np.r_[c, np.zeros(40)], np.r_[v, np.zeros(40)]], axis=1))
    r = np.concatenate(rows)
    motifs, clips, short = motifs_of_contour(r)
    assert [m.pattern for m in motifs] == [(1, 1, -1, 2, -1, -2)]
    assert short == 0 and len(clips) == 3
    assert [round(c.end_s - c.start_s, 2) for c in clips] == [1.05] * 3
    # k-means levels are shared by the phrases: transpositions on the same 100-cent grid
    r2 = np.concatenate([np.stack([np.r_[c, np.zeros(40)], np.r_[v, np.zeros(40)]], axis=1)
                         for c, v in (steps_contour([b + f for f in fig], rows_per_note=15, vibrato=20.0) for b in (2300, 2400, 2500))])
    motifs_k, clips_k, _ = motifs_of_contour(r2, method="kmeans", k=7)
    assert [(m.pattern, m.support) for m in motifs_k] == [((1, 1, -1, 2, -1, -2), 3)]
    assert len(clips_k) == 3
    with pytest.raises(ConfigError, match="method"):
        motifs_of_contour(r, method="dtw")


def test_bad_input():
    with pytest.raises(ConfigError, match="differ in length"):
        simplify_band(np.zeros(5), np.ones(4))
    with pytest.raises(ConfigError, match="non-finite"):
        simplify_band(np.array([1.0, np.nan]), np.array([1, 1]))
    with pytest.raises(ConfigError, match="band"):
        simplify_band(np.zeros(3), np.ones(3), band=0)
    with pytest.raises(ConfigError, match="min_support"):
        mine_closed_motifs([[1]], min_support=0)
    assert simplify_kmeans(np.zeros(5), np.zeros(5)) == []


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=9), st.integers(1, 4))
def test_kmeans_is_optimal(vals, k):
    """The dynamic programme reaches the least sum of squares of every split into k runs."""
    import itertools

    x = np.sort(np.array(vals, dtype=np.float64) * 3.0)
    cen = kmeans_1d(x, k)
    sse = float(((x[:, None] - cen[None, :]) ** 2).min(axis=1).sum())
    u = np.unique(x)
    kk = min(k, u.size)
    best = np.inf
    for cuts in itertools.combinations(range(1, u.size), kk - 1):
        groups = np.split(u, cuts)
        best = min(best, sum(((x[np.isin(x, g)] - x[np.isin(x, g)].mean()) ** 2).sum() for g in groups))
    assert sse == pytest.approx(best, abs=1e-6)
