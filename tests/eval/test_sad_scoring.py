"""SAD scorer (streamkit.eval.sad) against independent brute-force references, hand-computed
cases, the threshold sweep, operating points, reporting, and pyannote.metrics where the
definitions coincide."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkit.eval import rttm
from streamkit.eval.sad import (
    DEFAULT_THRESHOLDS,
    Counts,
    ResultRow,
    RocCurve,
    _exceed_histogram,
    best_f1_point,
    best_f1_threshold,
    eer_point,
    eer_threshold,
    equal_error_rate,
    evaluate,
    frames_to_samples,
    majority_filter,
    no_score_mask,
    operating_point_rows,
    results_json,
    results_table,
    roc_plot,
    score_mask,
    sweep,
)

# ============================================================================ brute force
# Written from the description of the paper's scoring protocol, one sample at a time, sharing no
# code with the implementation.


def bf_collar(collar_s: float, rate: float) -> int:
    return int(round(collar_s * rate))


def bf_excluded_fgnt(ref: list[bool], c: int) -> list[bool]:
    """Reference non-speech sample i is not scored iff a reference speech sample j has |i-j| <= c."""
    n = len(ref)
    out = []
    for i in range(n):
        excluded = False
        if not ref[i]:
            for j in range(max(0, i - c), min(n, i + c + 1)):
                if ref[j]:
                    excluded = True
                    break
        out.append(excluded)
    return out


def bf_excluded_opensad(ref: list[bool], c: int, m: int) -> list[bool]:
    """fgnt rule plus: a non-speech run touching speech whose scorable rest is < m samples is dropped."""
    excluded = bf_excluded_fgnt(ref, c)
    if c == 0:
        return excluded
    n = len(ref)
    i = 0
    while i < n:
        if ref[i]:
            i += 1
            continue
        j = i
        while j < n and not ref[j]:
            j += 1
        touches_speech = i > 0 or j < n
        rest = sum(1 for k in range(i, j) if not excluded[k])
        if touches_speech and rest < m:
            for k in range(i, j):
                excluded[k] = True
        i = j
    return excluded


def bf_counts(ref: list[bool], hyp: list[bool], excluded: list[bool]) -> tuple[int, int, int, int, int]:
    tp = fp = fn = tn = ns = 0
    for r, h, x in zip(ref, hyp, excluded):
        if r and h:
            tp += 1
        elif r:
            fn += 1
        elif x:
            ns += 1
        elif h:
            fp += 1
        else:
            tn += 1
    return tp, fp, fn, tn, ns


def runs_to_mask(runs: list[tuple[bool, int]]) -> np.ndarray:
    return np.array([v for v, k in runs for _ in range(k)], dtype=bool)


label_runs = st.lists(st.tuples(st.booleans(), st.integers(1, 40)), max_size=12).map(runs_to_mask)
rates = st.sampled_from([4, 10, 16, 50, 100])
collars = st.sampled_from([0.0, 0.05, 0.1, 0.25, 0.5, 1.0])


@st.composite
def ref_hyp(draw):
    ref = draw(label_runs)
    kind = draw(st.sampled_from(["iid", "runs", "shifted"]))
    if kind == "iid":
        hyp = np.array(draw(st.lists(st.booleans(), min_size=len(ref), max_size=len(ref))), dtype=bool)
    elif kind == "runs":
        hyp = draw(label_runs)
        hyp = np.resize(hyp, len(ref)) if len(hyp) else np.zeros(len(ref), bool)
    else:  # reference moved by a few samples: exercises the collars
        hyp = np.roll(ref, draw(st.integers(-6, 6)))
    return ref, hyp


# ============================================================================ score_mask vs brute force


@settings(max_examples=300, deadline=None)
@given(ref_hyp(), rates, collars)
def test_score_mask_equals_bruteforce_fgnt(pair, rate: int, collar_s: float) -> None:
    ref, hyp = pair
    c = bf_collar(collar_s, rate)
    expect = bf_counts(ref.tolist(), hyp.tolist(), bf_excluded_fgnt(ref.tolist(), c))
    got = score_mask(ref, hyp, rate, collar_s)
    assert (got.tp, got.fp, got.fn, got.tn, got.no_score) == expect
    assert got.total == len(ref)


@settings(max_examples=300, deadline=None)
@given(ref_hyp(), rates, collars, st.sampled_from([0.1, 0.2, 0.5]))
def test_score_mask_equals_bruteforce_opensad(pair, rate: int, collar_s: float, min_scored_s: float) -> None:
    ref, hyp = pair
    c, m = bf_collar(collar_s, rate), bf_collar(min_scored_s, rate)
    expect = bf_counts(ref.tolist(), hyp.tolist(), bf_excluded_opensad(ref.tolist(), c, m))
    got = score_mask(ref, hyp, rate, collar_s, mode="opensad", min_scored_s=min_scored_s)
    assert (got.tp, got.fp, got.fn, got.tn, got.no_score) == expect


# ============================================================================ hand-computed cases


def mask(n: int, *ivs: tuple[int, int]) -> np.ndarray:
    m = np.zeros(n, bool)
    for a, b in ivs:
        m[a:b] = True
    return m


def test_collar_edges_exactly_at_boundaries() -> None:
    # rate 10 Hz, collar 0.3 s = 3 samples; speech [10, 15) in 30 samples
    ref = mask(30, (10, 15))
    assert np.flatnonzero(no_score_mask(ref, 10, 0.3)).tolist() == [7, 8, 9, 15, 16, 17]
    # hypothesis speech one sample beyond each collar is a false alarm, inside it is forgiven
    assert score_mask(ref, mask(30, (6, 7)), 10, 0.3) == Counts(tp=0, fp=1, fn=5, tn=18, no_score=6)
    assert score_mask(ref, mask(30, (7, 10)), 10, 0.3) == Counts(tp=0, fp=0, fn=5, tn=19, no_score=6)
    assert score_mask(ref, mask(30, (15, 18)), 10, 0.3) == Counts(tp=0, fp=0, fn=5, tn=19, no_score=6)
    assert score_mask(ref, mask(30, (18, 19)), 10, 0.3) == Counts(tp=0, fp=1, fn=5, tn=18, no_score=6)
    # the collar never removes reference speech: a missed onset is a miss
    assert score_mask(ref, mask(30, (12, 15)), 10, 0.3) == Counts(tp=3, fp=0, fn=2, tn=19, no_score=6)
    # the paper's setting: 0.5 s at 8 kHz = 4000 samples on each side
    ref8 = mask(80_000, (20_000, 30_000))
    ns = no_score_mask(ref8, 8000, 0.5)
    assert ns.sum() == 8000 and ns[16_000:20_000].all() and ns[30_000:34_000].all() and not ns[15_999] and not ns[34_000]


@pytest.mark.parametrize(
    ("gap", "fgnt_scored", "opensad_scored"),
    [
        (4, 0, 0),  # gap < 2c: the collars overlap, nothing of the gap is scored
        (6, 0, 0),  # gap = 2c
        (7, 1, 1),  # one sample left: fgnt scores it; OpenSAD too (1 >= min 1 sample)
        (8, 2, 2),
    ],
)
def test_segments_closer_than_two_collars(gap: int, fgnt_scored: int, opensad_scored: int) -> None:
    ref = mask(40, (10, 15), (15 + gap, 20 + gap))
    ns = no_score_mask(ref, 10, 0.3)
    assert int((~ref & ~ns)[15 : 15 + gap].sum()) == fgnt_scored
    ns_o = no_score_mask(ref, 10, 0.3, mode="opensad", min_scored_s=0.1)  # m = 1 sample
    assert int((~ref & ~ns_o)[15 : 15 + gap].sum()) == opensad_scored


def test_opensad_minimum_leftover_at_paper_values() -> None:
    rate = 100  # collar 0.5 s = 50 samples, min leftover 0.1 s = 10 samples
    # gap of 1.09 s between two segments: < 2*0.5 + 0.1 s, whole gap is no-score under OpenSAD
    ref = mask(600, (100, 200), (309, 400))
    ns_f = no_score_mask(ref, rate, 0.5)
    ns_o = no_score_mask(ref, rate, 0.5, mode="opensad")
    assert (~ns_f[200:309]).sum() == 9 and ns_o[200:309].all()
    # gap of 1.10 s keeps 0.1 s scored in both modes
    ref = mask(600, (100, 200), (310, 400))
    assert (~no_score_mask(ref, rate, 0.5, mode="opensad")[200:310]).sum() == 10
    # leading non-speech 0.59 s -> all no-score; 0.60 s -> 0.1 s scored; same for trailing
    assert no_score_mask(mask(300, (59, 300)), rate, 0.5, mode="opensad")[:59].all()
    assert (~no_score_mask(mask(300, (60, 300)), rate, 0.5, mode="opensad")[:60]).sum() == 10
    assert no_score_mask(mask(300, (0, 241)), rate, 0.5, mode="opensad")[241:].all()
    assert (~no_score_mask(mask(300, (0, 240)), rate, 0.5, mode="opensad")[240:]).sum() == 10
    # fgnt keeps the leading remainder whatever its length
    assert (~no_score_mask(mask(300, (59, 300)), rate, 0.5)[:59]).sum() == 9


def test_speech_at_file_start_and_end() -> None:
    ref = mask(20, (0, 5), (15, 20))
    assert np.flatnonzero(no_score_mask(ref, 10, 0.3)).tolist() == [5, 6, 7, 12, 13, 14]
    c = score_mask(ref, np.ones(20, bool), 10, 0.3)
    assert c == Counts(tp=10, fp=4, fn=0, tn=0, no_score=6)
    assert c.precision == pytest.approx(10 / 14) and c.recall == 1.0 and c.p_fa == 1.0


def test_empty_reference() -> None:
    ref = np.zeros(50, bool)
    assert not no_score_mask(ref, 10, 0.5).any()
    assert not no_score_mask(ref, 10, 0.5, mode="opensad").any()  # no speech -> no collars at all
    c = score_mask(ref, mask(50, (10, 15)), 10, 0.5)
    assert c == Counts(tp=0, fp=5, fn=0, tn=45, no_score=0)
    assert math.isnan(c.recall) and math.isnan(c.p_miss) and math.isnan(c.f1) and math.isnan(c.dcf)
    assert c.precision == 0.0 and c.p_fa == pytest.approx(0.1)
    c = score_mask(ref, ref, 10, 0.5)
    assert c == Counts(tn=50) and math.isnan(c.precision) and c.p_fa == 0.0
    assert score_mask(np.zeros(0, bool), np.zeros(0, bool), 10) == Counts()


def test_all_speech() -> None:
    ref = np.ones(50, bool)
    c = score_mask(ref, mask(50, (0, 40)), 10, 0.5, mode="opensad")
    assert c == Counts(tp=40, fp=0, fn=10, tn=0, no_score=0)
    assert c.recall == 0.8 and c.precision == 1.0 and math.isnan(c.p_fa) and math.isnan(c.dcf)


def test_collar_zero_scores_everything() -> None:
    ref = mask(30, (3, 5), (6, 20))
    for mode in ("fgnt", "opensad"):
        assert not no_score_mask(ref, 10, 0.0, mode=mode).any()


def test_score_mask_input_checks() -> None:
    with pytest.raises(ValueError, match="lengths differ"):
        score_mask(np.zeros(5, bool), np.zeros(6, bool), 10)
    with pytest.raises(ValueError, match="boolean"):
        score_mask(np.zeros(5), np.full(5, 0.5), 10)
    with pytest.raises(ValueError, match="mode"):
        score_mask(np.zeros(5, bool), np.zeros(5, bool), 10, mode="nist")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="collar_s"):
        score_mask(np.zeros(5, bool), np.zeros(5, bool), 10, -0.1)
    assert score_mask(np.array([0, 1, 1]), np.array([1, 1, 0]), 10, 0) == Counts(tp=1, fp=1, fn=1, tn=0)


# ============================================================================ Counts


def test_counts_metrics_and_sum() -> None:
    a, b = Counts(tp=5, fp=1, fn=1, tn=40, no_score=3), Counts(tp=3, fp=1, fn=1, tn=48, no_score=7)
    c = sum([a, b])
    assert c == a + b == Counts(tp=8, fp=2, fn=2, tn=88, no_score=10)
    assert (c.scored, c.total) == (100, 110)
    assert c.precision == pytest.approx(0.8) and c.recall == pytest.approx(0.8) and c.f1 == pytest.approx(0.8)
    assert c.p_miss == pytest.approx(0.2) and c.p_fa == pytest.approx(2 / 90)
    assert c.dcf == pytest.approx(0.75 * 0.2 + 0.25 * 2 / 90)
    assert c.accuracy == pytest.approx(0.96)
    assert Counts(tp=0, fp=3, fn=4, tn=1).f1 == 0.0
    d = c.to_dict()
    assert d["scored"] == 100 and d["f1"] == pytest.approx(0.8)
    assert Counts(tn=3).to_dict()["recall"] is None
    json.dumps(d)


# ============================================================================ frames -> samples


def bf_frames_to_samples(values: list, hop: int, win: int, n: int, fill) -> list:
    out = [fill] * n
    for t, v in enumerate(values):
        for i in range(hop * t, hop * t + win):
            if i < n:
                out[i] = v if out[i] is fill else max(out[i], v)
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 4), max_size=30),
    st.integers(1, 12),
    st.integers(1, 30),
    st.integers(0, 300),
)
def test_frames_to_samples_equals_bruteforce(levels: list[int], hop: int, win: int, n: int) -> None:
    scores = np.array(levels, dtype=np.float64) / 4
    got = frames_to_samples(scores, hop, win, n)
    expect = bf_frames_to_samples(scores.tolist(), hop, win, n, -math.inf)
    assert got.tolist() == expect
    # boolean decisions: OR of windows; thresholding commutes with the per-sample maximum
    for theta in (0.0, 0.25, 0.5, 0.75):
        dec = frames_to_samples(scores > theta, hop, win, n)
        assert dec.dtype == np.bool_
        np.testing.assert_array_equal(dec, got > theta)


def test_frames_to_samples_fgnt_geometry() -> None:
    # DNN SAD: hop 80, win 200 (fgnt/ham_radio's geometry); one speech frame t marks [80t, 80t + 200)
    n_frames = 50
    dec = np.zeros(n_frames, bool)
    dec[10] = True
    out = frames_to_samples(dec, 80, 200, 4000)
    assert np.flatnonzero(out).tolist() == list(range(800, 1000))
    # the output covers N_f*80 + 120 samples; beyond that it is padded with non-speech
    out = frames_to_samples(np.ones(n_frames, bool), 80, 200, 4200)
    assert out[: n_frames * 80 + 120].all() and not out[n_frames * 80 + 120 :].any()
    assert len(frames_to_samples(np.ones(3), 80, 200, 100)) == 100
    assert frames_to_samples(np.zeros(0), 80, 200, 5).tolist() == [-math.inf] * 5


def bf_majority(dec: list[bool], window: int, min_count: int) -> list[bool]:
    half = window // 2
    padded = [dec[0]] * half + dec + [dec[-1]] * half
    return [sum(padded[t : t + window]) >= min_count for t in range(len(dec))]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 8), min_size=1, max_size=80), st.sampled_from([(25, 12), (5, 2), (3, 2), (1, 1)]))
def test_majority_filter_commutes_with_threshold(levels: list[int], wk: tuple[int, int]) -> None:
    window, k = wk
    scores = np.array(levels, dtype=np.float64) / 8
    smoothed = majority_filter(scores, window, k)
    for theta in (0.0, 0.3, 0.5, 0.875):
        expect = bf_majority((scores > theta).tolist(), window, k)
        assert (smoothed > theta).tolist() == expect
        assert majority_filter(scores > theta, window, k).tolist() == expect


# ============================================================================ sweep


@st.composite
def file_set(draw):
    n_files = draw(st.integers(1, 4))
    refs, scores = [], []
    for _ in range(n_files):
        ref = draw(label_runs)
        # scores on a 0.05 grid so that many scores tie with thresholds exactly (tests "> θ")
        s = draw(st.lists(st.integers(0, 20), min_size=len(ref), max_size=len(ref)))
        refs.append(ref)
        scores.append(np.array(s, dtype=np.float64) / 20)
    return refs, scores


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(file_set(), rates, collars, st.sampled_from(["fgnt", "opensad"]))
def test_sweep_equals_score_mask_at_each_threshold(files, rate: int, collar_s: float, mode: str) -> None:
    refs, scores = files
    thresholds = np.array([0.5, 0.0, 0.05, 0.25, 0.33, 0.95, 1.0, -1.0, 0.25])  # unsorted, duplicated
    curve = sweep(refs, scores, thresholds, collar_s, rate=rate, mode=mode)
    assert curve.thresholds.tolist() == sorted(set(thresholds.tolist()))
    for i, theta in enumerate(curve.thresholds):
        expect = sum((score_mask(r, s > theta, rate, collar_s, mode=mode) for r, s in zip(refs, scores)), Counts())
        assert curve.counts(i) == expect
        assert evaluate(refs, scores, theta, collar_s, rate=rate, mode=mode) == expect


def test_sweep_accepts_mappings_single_arrays_and_float32() -> None:
    rng = np.random.default_rng(3)
    ref = mask(2000, (300, 900), (1200, 1500))
    s = rng.random(2000).astype(np.float32)
    a = sweep({"x": ref}, {"x": s}, rate=100)
    b = sweep(ref, s, rate=100)
    assert len(a) == len(DEFAULT_THRESHOLDS) == 201
    np.testing.assert_array_equal(a.tp, b.tp)
    for theta in (0.1, 0.5, float(np.float32(0.3))):
        i = a.index_of(theta) if theta in a.thresholds else None
        if i is not None:
            assert a.counts(i) == score_mask(ref, s > theta, 100)
    c = a + b
    np.testing.assert_array_equal(c.fp, 2 * a.fp)
    assert RocCurve.from_dict(json.loads(json.dumps(a.to_dict()))).counts(7) == a.counts(7)
    with pytest.raises(ValueError, match="file ids differ"):
        sweep({"x": ref}, {"y": s}, rate=100)
    with pytest.raises(ValueError, match="NaN"):
        sweep(ref, np.full(2000, np.nan), rate=100)
    with pytest.raises(ValueError, match="length"):
        sweep(ref, s[:-1], rate=100)
    with pytest.raises(KeyError):
        a.index_of(0.123456)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(-2, 2, allow_nan=False), min_size=1, max_size=30, unique=True),
    st.lists(st.one_of(st.floats(-3, 3, allow_nan=False), st.sampled_from([-np.inf, np.inf])), max_size=200),
)
def test_exceed_histogram_equals_searchsorted(thr: list[float], extra: list[float]) -> None:
    t = np.sort(np.array(thr))
    vals = np.concatenate([np.array(extra), t, np.nextafter(t, np.inf), np.nextafter(t, -np.inf)])
    expect = np.bincount(np.searchsorted(t, vals, side="left"), minlength=len(t) + 1)
    np.testing.assert_array_equal(_exceed_histogram(t, vals), expect)
    np.testing.assert_array_equal(
        _exceed_histogram(t, vals.astype(np.float32)),
        np.bincount(np.searchsorted(t, vals.astype(np.float32).astype(np.float64)), minlength=len(t) + 1),
    )


def test_sweep_on_a_long_file_matches_scoring_each_threshold() -> None:
    """200 thresholds over 30 min of 8 kHz audio (14.4 M samples): the one-pass sweep counts what scoring
    the thresholded mask does."""
    rng = np.random.default_rng(0)
    n = 57_600_000 // 4
    ref = np.repeat(rng.random(n // 4000) < 0.13, 4000)
    s = rng.random(n).astype(np.float32)
    curve = sweep(ref, s, np.linspace(0, 1, 200))
    i = 100
    assert curve.counts(i) == score_mask(ref, s > curve.thresholds[i], 8000)


# ============================================================================ operating points


def constructed_curve() -> RocCurve:
    thr = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
    # 100 reference speech, 1000 scored non-speech: P_miss = .05 .10 .20 .40 .60, P_fa = .50 .30 .22 .10 .01
    fn = np.array([5, 10, 20, 40, 60])
    fp = np.array([500, 300, 220, 100, 10])
    return RocCurve(thr, 100 - fn, fp, fn, 1000 - fp)


def test_eer_threshold_picks_crossing_point() -> None:
    curve = constructed_curve()
    op = eer_point(curve)
    # P_miss - P_fa = -.45 -.20 -.02 +.30 +.59: the sign changes between 0.3 and 0.4, 0.3 is closer
    assert (op.index, op.threshold, eer_threshold(curve)) == (2, 0.3, 0.3)
    assert op.counts == curve.counts(2) and op.rule == "dev-EER"
    # interpolated EER: d goes -0.02 -> +0.30 between indices 2 and 3, t = 1/16
    assert equal_error_rate(curve) == pytest.approx(0.20 + (0.40 - 0.20) / 16)
    # best F1: P = 95/595, 90/390, 80/300, 60/160, 40/50; F1 = 2TP/(2TP+FP+FN)
    f1 = [2 * tp / (2 * tp + fp + fn) for tp, fp, fn in zip(curve.tp, curve.fp, curve.fn)]
    assert best_f1_threshold(curve) == 0.5 == curve.thresholds[int(np.argmax(f1))]
    np.testing.assert_allclose(curve.f1, f1)
    assert best_f1_point(curve).rule == "dev-best-F1"


def test_eer_on_scored_data() -> None:
    # speech scores uniform on [0.3, 1), non-speech scores uniform on [0, 0.7): EER at 0.5, 2/7 each
    rng = np.random.default_rng(1)
    n = 70_000
    ref = np.zeros(n, bool)
    ref[::2] = True
    s = np.where(ref, 0.3 + 0.7 * rng.random(n), 0.7 * rng.random(n))
    curve = sweep(ref, s, np.linspace(0, 1, 101), 0.0, rate=8000)
    assert eer_threshold(curve) == pytest.approx(0.5)
    assert equal_error_rate(curve) == pytest.approx(2 / 7, abs=0.01)


def test_operating_points_undefined_raise() -> None:
    ref = np.zeros(100, bool)
    curve = sweep(ref, np.linspace(0, 1, 100), rate=100)
    with pytest.raises(ValueError, match="EER undefined"):
        eer_point(curve)
    with pytest.raises(ValueError, match="F1 undefined"):
        best_f1_point(curve)


# ============================================================================ reporting


def test_results_table_and_json(tmp_path) -> None:
    rows = [
        ResultRow("DNN", "eval", "dev-EER", 0.43, Counts(tp=9559, fp=435, fn=441, tn=90000), rt_factor=0.0119),
        ResultRow("stat", "eval", "dev-best-F1", 0.6, Counts(tn=10)),
    ]
    md = results_table(rows)
    lines = md.strip().splitlines()
    assert len(lines) == 4 and lines[0].startswith("| system |")
    assert "| DNN | eval | dev-EER | 0.43 | 95.59 | 95.65 | 95.62 |" in md  # paper-style percent
    assert "n/a" in lines[3] and "0.0119" in lines[2]
    js = results_json(rows, corpus="synthetic")
    assert js["corpus"] == "synthetic" and js["rows"][0]["recall"] == pytest.approx(0.9559)
    assert js["rows"][1]["recall"] is None
    json.dumps(js)


def test_operating_point_rows_apply_dev_thresholds_to_eval() -> None:
    dev = constructed_curve()
    ev = RocCurve(dev.thresholds, dev.tp[::-1].copy(), dev.fp, dev.fn[::-1].copy(), dev.tn)
    rows = operating_point_rows("DNN", dev, ev, rt_factor=0.01)
    assert [(r.dataset, r.operating_point, r.threshold) for r in rows] == [
        ("eval", "dev-EER", 0.3),
        ("dev", "dev-EER", 0.3),
        ("eval", "dev-best-F1", 0.5),
        ("dev", "dev-best-F1", 0.5),
        ("eval", "eval-oracle-best-F1", best_f1_threshold(ev)),
    ]
    assert rows[0].counts == ev.counts(2) and rows[2].counts == ev.counts(4) and rows[1].counts == dev.counts(2)
    with pytest.raises(ValueError, match="same thresholds"):
        operating_point_rows("x", dev, RocCurve(dev.thresholds + 1, dev.tp, dev.fp, dev.fn, dev.tn))


def test_roc_plot_writes_png(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    path = roc_plot({"A": constructed_curve(), "B": constructed_curve()}, tmp_path / "roc.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ============================================================================ pyannote.metrics


def _annotation(m: np.ndarray, rate: int):
    from pyannote.core import Annotation, Segment

    ann = Annotation(uri="f")
    for a, b in rttm.mask_to_intervals(m).tolist():
        ann[Segment(a / rate, b / rate)] = "speech"
    return ann


def bf_pyannote_miss(ref: list[bool], hyp: list[bool], c: int) -> int:
    """pyannote with collar 2c/rate also removes reference speech within c samples of a boundary."""
    n = len(ref)
    missed = 0
    for i in range(n):
        if not ref[i] or hyp[i]:
            continue
        near_boundary = False
        for j in range(max(0, i - c + 1), min(n, i + c) + 1):  # boundaries at sample edges j/rate
            left = ref[j - 1] if j > 0 else False
            right = ref[j] if j < n else False
            if left != right:
                near_boundary = True
                break
        missed += not near_boundary
    return missed


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ref_hyp(), st.sampled_from([10, 100, 1000]), st.sampled_from([0.0, 0.05, 0.2, 0.5]))
def test_against_pyannote_metrics(pair, rate: int, collar_s: float) -> None:
    """collar=0: all counts coincide; collar>0: false alarms coincide (pyannote collar = 2·collar_s),
    misses differ exactly by the reference speech that pyannote removes near boundaries."""
    pytest.importorskip("pyannote.metrics")
    import warnings

    from pyannote.core import Segment, Timeline
    from pyannote.metrics.detection import DetectionAccuracy, DetectionErrorRate, DetectionPrecisionRecallFMeasure

    ref, hyp = pair
    n = len(ref)
    if n == 0:
        return
    r_ann, h_ann = _annotation(ref, rate), _annotation(hyp, rate)
    uem = Timeline([Segment(0, n / rate)], uri="f")
    c = bf_collar(collar_s, rate)
    ours = score_mask(ref, hyp, rate, collar_s)
    py_collar = 2 * c / rate  # ours at the sample grid: c samples on each side
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        der = DetectionErrorRate(collar=py_collar)(r_ann, h_ann, uem=uem, detailed=True)
        prf = DetectionPrecisionRecallFMeasure(collar=py_collar)(r_ann, h_ann, uem=uem, detailed=True)
        acc = DetectionAccuracy(collar=py_collar)(r_ann, h_ann, uem=uem, detailed=True)

    def samples(seconds: float) -> int:
        k = round(seconds * rate)
        assert abs(seconds * rate - k) < 1e-6  # durations lie on the sample grid
        return k

    assert samples(der["false alarm"]) == ours.fp
    assert samples(acc["false positive"]) == ours.fp
    if c == 0:
        assert samples(der["miss"]) == ours.fn
        assert samples(der["total"]) == ours.tp + ours.fn
        assert samples(prf["relevant retrieved"]) == ours.tp
        assert samples(prf["retrieved"]) == ours.tp + ours.fp
        assert samples(prf["relevant"]) == ours.tp + ours.fn
        assert samples(acc["true negative"]) == ours.tn
        assert samples(acc["true positive"]) == ours.tp
    else:
        assert samples(der["miss"]) == bf_pyannote_miss(ref.tolist(), hyp.tolist(), c) <= ours.fn
