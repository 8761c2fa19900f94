"""RTTM read/write, sample intervals <-> masks, interval merging (streamkit.eval.rttm)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit.eval.rttm import (
    intervals_to_mask,
    mask_to_intervals,
    merge_intervals,
    parse_rttm,
    read_rttm,
    read_rttm_intervals,
    read_rttm_masks,
    rttm_lines,
    seconds_to_samples,
    write_rttm,
)

masks = st.lists(st.booleans(), max_size=200).map(lambda bits: np.array(bits, dtype=bool))
raw_intervals = st.lists(st.tuples(st.integers(0, 100), st.integers(0, 30)).map(lambda t: (t[0], t[0] + t[1])), max_size=12)


# ------------------------------------------------------------------------------ masks <-> intervals


def test_mask_to_intervals_small() -> None:
    m = np.array([1, 1, 0, 0, 1, 0, 1, 1, 1], dtype=bool)
    assert mask_to_intervals(m).tolist() == [[0, 2], [4, 5], [6, 9]]
    assert mask_to_intervals(np.zeros(5, bool)).shape == (0, 2)
    assert mask_to_intervals(np.ones(3, bool)).tolist() == [[0, 3]]
    assert mask_to_intervals(np.zeros(0, bool)).shape == (0, 2)


@given(masks)
def test_mask_interval_round_trip(m: np.ndarray) -> None:
    iv = mask_to_intervals(m)
    assert iv.dtype == np.int64
    np.testing.assert_array_equal(intervals_to_mask(iv, len(m)), m)
    # runs are maximal: sorted, non-empty, separated by at least one sample
    assert np.all(iv[:, 1] > iv[:, 0])
    assert np.all(iv[1:, 0] > iv[:-1, 1])


def test_merge_intervals_small() -> None:
    assert merge_intervals([[7, 9], [0, 5], [5, 8], [12, 12], [20, 25], [21, 22]]).tolist() == [[0, 9], [20, 25]]
    assert merge_intervals([]).shape == (0, 2)
    assert merge_intervals([[3, 4], [5, 6]]).tolist() == [[3, 4], [5, 6]]  # a 1-sample gap stays


@given(raw_intervals)
def test_merge_intervals_equals_union(ivs: list[tuple[int, int]]) -> None:
    n = 140
    union = np.zeros(n, bool)
    for a, b in ivs:
        union[a:b] = True
    merged = merge_intervals(np.array(ivs, dtype=np.int64).reshape(-1, 2))
    np.testing.assert_array_equal(intervals_to_mask(merged, n), union)
    np.testing.assert_array_equal(merged, mask_to_intervals(union))  # merged = maximal runs


def test_intervals_to_mask_checks_range() -> None:
    with pytest.raises(ValueError, match="outside"):
        intervals_to_mask([[5, 12]], 10)
    with pytest.raises(ValueError, match="outside"):
        intervals_to_mask([[-1, 3]], 10)
    assert intervals_to_mask([[-4, 3], [8, 15]], 10, clip=True).tolist() == [1, 1, 1, 0, 0, 0, 0, 0, 1, 1]
    with pytest.raises(ValueError, match="stop < start"):
        intervals_to_mask([[5, 3]], 10)
    with pytest.raises(ValueError, match="shape"):
        intervals_to_mask([1, 2, 3], 10)
    with pytest.raises(ValueError, match="integers"):
        intervals_to_mask([[0.5, 3]], 10)


# ------------------------------------------------------------------------------ RTTM


@settings(max_examples=60)
@given(
    rate=st.sampled_from([8000, 16000, 22050, 44100, 48000, 192000]),
    ivs=st.lists(st.tuples(st.integers(0, 2 * 3600 * 192000), st.integers(1, 10**7)), max_size=10),
)
def test_rttm_round_trip_is_sample_exact(rate: int, ivs: list[tuple[int, int]]) -> None:
    intervals = merge_intervals(np.array([(a, a + d) for a, d in ivs], dtype=np.int64).reshape(-1, 2))
    buf = io.StringIO()
    write_rttm(buf, {"file_a": intervals, "file_b": intervals[::2]}, rate)
    back = read_rttm_intervals(io.StringIO(buf.getvalue()), rate)
    np.testing.assert_array_equal(back.get("file_a", np.zeros((0, 2), np.int64)), intervals)
    np.testing.assert_array_equal(back.get("file_b", np.zeros((0, 2), np.int64)), merge_intervals(intervals[::2]))


def test_rttm_line_format_and_mask_input(tmp_path) -> None:
    lines = rttm_lines("rec1", [[8000, 12000], [0, 400]], 8000)
    assert lines == [
        "SPEAKER rec1 1 0.000000 0.050000 <NA> <NA> speech <NA> <NA>",
        "SPEAKER rec1 1 1.000000 0.500000 <NA> <NA> speech <NA> <NA>",
    ]
    mask = np.zeros(20, bool)
    mask[3:7] = True
    path = tmp_path / "x.rttm"
    write_rttm(path, {"m": mask}, 10)
    assert path.read_text() == "SPEAKER m 1 0.300000 0.400000 <NA> <NA> speech <NA> <NA>\n"
    masks_back = read_rttm_masks(path, 10, {"m": 20, "silent": 5})
    np.testing.assert_array_equal(masks_back["m"], mask)
    assert not masks_back["silent"].any() and len(masks_back["silent"]) == 5
    with pytest.raises(ValueError, match="no known length"):
        read_rttm_masks(path, 10, {"other": 20})
    with pytest.raises(ValueError, match="whitespace"):
        rttm_lines("a b", [[0, 1]], 10)


def test_parse_rttm_skips_comments_and_other_types_and_merges_speakers() -> None:
    text = """;; a comment
# another comment

SPKR-INFO f1 1 <NA> <NA> <NA> unknown spk1 <NA> <NA>
SPEAKER f1 1 1.00 2.00 <NA> <NA> spk1 <NA> <NA>
SPEAKER f1 1 2.50 1.50 <NA> <NA> spk2 <NA>
SPEAKER f1 1 4.00 1.00 <NA> <NA> spk1 <NA> <NA>
SPEAKER f2 1 0.5 0 <NA> <NA> speech <NA> <NA>
LEXEME f1 1 1.0 0.3 hello lex spk1 <NA> <NA>
"""
    segs = parse_rttm(text)
    assert [(s.file_id, s.onset, s.duration, s.name) for s in segs] == [
        ("f1", 1.0, 2.0, "spk1"),
        ("f1", 2.5, 1.5, "spk2"),
        ("f1", 4.0, 1.0, "spk1"),
        ("f2", 0.5, 0.0, "speech"),
    ]
    iv = read_rttm_intervals(io.StringIO(text), 10)
    assert iv["f1"].tolist() == [[10, 50]]  # overlapping and touching segments merge
    assert iv["f2"].shape == (0, 2)  # zero-duration segment is empty


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("SPEAKER f1 1 1.0 2.0 <NA> <NA> speech", "9 or 10 fields"),
        ("SPEAKER f1 1 1.0 2.0 <NA> <NA> speech <NA> <NA> extra", "9 or 10 fields"),
        ("SPEAKER f1 1 one 2.0 <NA> <NA> speech <NA> <NA>", "onset 'one' is not a number"),
        ("SPEAKER f1 1 1.0 -2.0 <NA> <NA> speech <NA> <NA>", "duration '-2.0' is negative"),
        ("SPEAKER f1 1 nan 2.0 <NA> <NA> speech <NA> <NA>", "onset 'nan' is not finite"),
        ("SPEAKER f1 1 1.0 inf <NA> <NA> speech <NA> <NA>", "duration 'inf' is not finite"),
        ("SPEKAER f1 1 1.0 2.0 <NA> <NA> speech <NA> <NA>", "unknown RTTM line type 'SPEKAER'"),
    ],
)
def test_malformed_rttm_names_the_line(tmp_path, bad_line: str, message: str) -> None:
    good = "SPEAKER f1 1 0.0 1.0 <NA> <NA> speech <NA> <NA>"
    path = tmp_path / "bad.rttm"
    path.write_text(f";; header\n{good}\n{bad_line}\n{good}\n")
    with pytest.raises(ValueError, match=f"bad.rttm:3: .*{message}"):
        read_rttm(path)
    with pytest.raises(ValueError, match=f"<rttm>:3: .*{message}"):
        parse_rttm(path.read_text())


def test_seconds_to_samples_rounds() -> None:
    assert seconds_to_samples([0.0, 0.000125, 1.0000624, 1.0000626], 8000).tolist() == [0, 1, 8000, 8001]
    with pytest.raises(ValueError):
        seconds_to_samples(1.0, 0)
