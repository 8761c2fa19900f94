"""streamkit.eval.sed: DCASE TSV I/O and our glue around sed_eval / sed_scores_eval, checked
against hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamkit.data import sed_corpus
from streamkit.eval import sed
from streamkit.eval.sed import Event as E

pytest.importorskip("sed_eval")

C3 = ("Cat", "Dog", "Speech")


def test_classes_are_dcase2019_task4():
    assert sed.CLASSES is sed_corpus.CLASSES
    assert len(sed.CLASSES) == 10 and {"Speech", "Dog", "Vacuum_cleaner", "Electric_shaver_toothbrush"} <= set(sed.CLASSES)


# --------------------------------------------------------------------------------------------
# TSV


def test_strong_round_trip_keeps_empty_files(tmp_path):
    ev = {"a.wav": [E("a.wav", 2.0, 3.5, "Dog"), E("a.wav", 0.25, 9.0, "Speech")], "empty.wav": [], "b.wav": [E("b.wav", 0.0, 10.0, "Frying")]}
    p = sed.write_strong_tsv(tmp_path / "s.tsv", ev)
    text = p.read_text()
    assert text.splitlines()[0] == "filename\tonset\toffset\tevent_label"
    assert "a.wav\t0.250\t9.000\tSpeech" in text.splitlines()[1]  # sorted by onset
    assert "empty.wav" in text.splitlines()
    back = sed.read_strong_tsv(p)
    assert list(back) == ["a.wav", "empty.wav", "b.wav"]
    assert back["empty.wav"] == []
    assert sorted(back["a.wav"], key=lambda e: e.onset) == sorted(ev["a.wav"], key=lambda e: e.onset)
    # headerless, CRLF, blank lines and DCASE's "file<TAB><TAB><TAB>" empty row
    back2 = sed.parse_strong(["x.wav\t1\t2\tCat\r\n", "", "y.wav\t\t\t\n"])
    assert back2 == {"x.wav": [E("x.wav", 1.0, 2.0, "Cat")], "y.wav": []}


def test_reads_the_corpus_labels_format(tmp_path):
    clips = [
        {"id": "c0", "events": [{"onset": 1.5, "offset": 2.25, "event_label": "Dog"}, {"onset": 0.5, "offset": 4.0, "event_label": "Speech"}]},
        {"id": "c1", "events": [{"onset": 3.0, "offset": 9.999, "event_label": "Blender"}]},
    ]
    (tmp_path / "strong.tsv").write_text(sed_corpus._labels_tsv("strong", clips))
    (tmp_path / "weak.tsv").write_text(sed_corpus._labels_tsv("weak", clips))
    strong = sed.read_strong_tsv(tmp_path / "strong.tsv")
    assert strong["c0.wav"] == [E("c0.wav", 0.5, 4.0, "Speech"), E("c0.wav", 1.5, 2.25, "Dog")]
    weak = sed.read_weak_tsv(tmp_path / "weak.tsv")
    assert weak == {"c0.wav": frozenset({"Dog", "Speech"}), "c1.wav": frozenset({"Blender"})}
    assert sed.weak_from_strong(strong) == weak


def test_weak_round_trip(tmp_path):
    tags = {"a.wav": {"Dog", "Cat"}, "b.wav": set()}
    p = sed.write_weak_tsv(tmp_path / "w.tsv", tags)
    assert p.read_text().splitlines() == ["filename\tevent_labels", "a.wav\tCat,Dog", "b.wav\t"]
    assert sed.read_weak_tsv(p) == {"a.wav": frozenset({"Cat", "Dog"}), "b.wav": frozenset()}


@pytest.mark.parametrize(
    "line, message",
    [
        ("a.wav\t1.0\t2.0", "expected 4 tab-separated fields"),
        ("a.wav 1.0 2.0 Dog", None),  # spaces are not separators: one field = a filename-only row
        ("a.wav\t2.0\t1.0\tDog", "onset 2.0 must be < offset 1.0"),
        ("a.wav\t1.0\t1.0\tDog", "must be < offset"),
        ("a.wav\t-0.5\t1.0\tDog", "negative onset"),
        ("a.wav\tnan\t1.0\tDog", "not finite"),
        ("a.wav\t0\tinf\tDog", "not finite"),
        ("a.wav\tabc\t1.0\tDog", "onset 'abc' is not a number"),
        ("a.wav\t0\t1\tdog", "unknown class 'dog'"),
        ("a.wav\t0\t1\t", "empty event label"),
        ("\t0\t1\tDog", "empty filename"),
    ],
)
def test_strong_errors_name_file_and_line(tmp_path, line, message):
    p = tmp_path / "bad.tsv"
    p.write_text(f"filename\tonset\toffset\tevent_label\nok.wav\t0\t1\tCat\n{line}\n")
    if message is None:
        assert sed.read_strong_tsv(p)["a.wav 1.0 2.0 Dog"] == []
        return
    with pytest.raises(ValueError, match=f"bad.tsv:3: .*{message}"):
        sed.read_strong_tsv(p)


def test_strong_classes_can_be_opened():
    assert sed.parse_strong(["a\t0\t1\tdog"], classes=None)["a"][0].event_label == "dog"
    assert sed.parse_strong(["a\t0\t1\tdog"], classes=("dog",))["a"][0].event_label == "dog"


def test_weak_errors(tmp_path):
    with pytest.raises(ValueError, match=r"w.tsv:2: unknown class 'Horse'"):
        sed.read_weak_tsv(["filename\tevent_labels", "a.wav\tDog,Horse"], source="w.tsv")
    with pytest.raises(ValueError, match=r"<lines>:2: duplicate row for 'a.wav'"):
        sed.parse_weak(["a.wav\tDog", "a.wav\tCat"])
    with pytest.raises(ValueError, match=r":1: expected 2 tab-separated fields"):
        sed.parse_weak(["a.wav\tDog\tCat"])


def test_event_objects_are_validated_too():
    with pytest.raises(ValueError, match="unknown class 'Horse'"):
        sed.event_based([E("a", 0, 1, "Horse")], [])
    with pytest.raises(ValueError, match="must be < offset"):
        sed.segment_based([], [E("a", 2, 1, "Dog")])
    with pytest.raises(ValueError, match="differs from its key"):
        sed.events_by_file({"a": [E("b", 0, 1, "Dog")]})


# --------------------------------------------------------------------------------------------
# event-based (onset collar 200 ms, offset collar max(200 ms, 20 % of the reference length))

EV_REF = [
    E("a.wav", 1.000, 2.000, "Dog"),
    E("a.wav", 4.000, 4.500, "Cat"),
    E("a.wav", 6.000, 9.000, "Speech"),
    E("b.wav", 0.500, 2.500, "Speech"),
    E("b.wav", 5.000, 5.300, "Dog"),
]
EV_EST = [
    # onset +0.15, offset +0.15 (<= max(0.2, 0.2 * 1.0)): TP
    E("a.wav", 1.150, 2.150, "Dog"),
    # onset +0.25 > 0.2: miss (FN) and a false alarm (FP)
    E("a.wav", 4.250, 4.500, "Cat"),
    # offset +0.5 > 0.2, but <= 20 % of 3 s = 0.6: TP (the offset collar where 20 % > 200 ms)
    E("a.wav", 6.100, 9.500, "Speech"),
    # offset +0.5 > 20 % of 2 s = 0.4: FN + FP
    E("b.wav", 0.500, 3.000, "Speech"),
    # matches the Dog 5.0-5.3 in time with the wrong class: FN Dog + FP Cat, one substitution
    E("b.wav", 5.050, 5.300, "Cat"),
]


def test_event_based_hand_computed():
    r = sed.event_based(EV_REF, EV_EST, classes=C3)
    # per class (N_ref, N_sys, TP): Dog (2, 1, 1): P 1, R 1/2, F1 2/3
    #                               Cat (1, 2, 0): F1 0
    #                               Speech (2, 2, 1): P = R = 1/2, F1 1/2
    pc = r.per_class
    assert (pc["Dog"].n_ref, pc["Dog"].n_sys, pc["Dog"].n_tp) == (2, 1, 1)
    assert (pc["Cat"].n_ref, pc["Cat"].n_sys, pc["Cat"].n_tp) == (1, 2, 0)
    assert (pc["Speech"].n_ref, pc["Speech"].n_sys, pc["Speech"].n_tp) == (2, 2, 1)
    assert pc["Dog"].f1 == pytest.approx(2 / 3) and pc["Dog"].precision == pytest.approx(1.0) and pc["Dog"].recall == pytest.approx(0.5)
    assert pc["Cat"].f1 == 0.0
    assert pc["Speech"].f1 == pytest.approx(0.5)
    # macro F1 = (2/3 + 0 + 1/2) / 3 = 7/18
    assert r.macro_f1 == pytest.approx(7 / 18)
    # micro: N_ref 5, N_sys 5, TP 2: P = R = F1 = 0.4
    assert (r.n_ref, r.n_sys, r.n_tp) == (5, 5, 2)
    assert r.micro_f1 == pytest.approx(0.4)
    # ER: a.wav D 1 (Cat) I 1 (Cat); b.wav S 1 (Dog->Cat), D 1 (Speech), I 1 (Speech): (1 + 2 + 2) / 5 = 1
    assert r.substitution_rate == pytest.approx(1 / 5)
    assert r.deletion_rate == pytest.approx(2 / 5)
    assert r.insertion_rate == pytest.approx(2 / 5)
    assert r.error_rate == pytest.approx(1.0)
    # class-wise ER = (FN + FP) / N_ref: Dog (1 + 0) / 2, Cat (1 + 2) / 1, Speech (1 + 1) / 2
    assert pc["Dog"].error_rate == pytest.approx(0.5)
    assert pc["Cat"].error_rate == pytest.approx(3.0)
    assert pc["Speech"].error_rate == pytest.approx(1.0)
    assert r.kind == "event" and r.params["offset_collar_rate"] == 0.2 and r.params["files"] == 2


def test_event_based_collars_are_the_dcase_ones():
    ref = [E("a.wav", 6.0, 9.0, "Speech")]
    # sed_eval's own default offset rate would be 50 %: +1.2 s on a 3 s event passes 50 % but not 20 %
    assert sed.event_based(ref, [E("a.wav", 6.0, 10.2, "Speech")], classes=C3).micro_f1 == 0.0
    assert sed.event_based(ref, [E("a.wav", 6.0, 9.55, "Speech")], classes=C3).micro_f1 == pytest.approx(1.0)
    # a short event: the 200 ms floor of the offset collar applies (20 % of 0.3 s = 0.06 s)
    short = [E("a.wav", 5.0, 5.3, "Dog")]
    assert sed.event_based(short, [E("a.wav", 5.0, 5.45, "Dog")], classes=C3).micro_f1 == pytest.approx(1.0)
    assert sed.event_based(short, [E("a.wav", 5.0, 5.55, "Dog")], classes=C3).micro_f1 == 0.0
    # onsets: 190 ms early is in, 210 ms late is out
    assert sed.event_based(short, [E("a.wav", 4.81, 5.3, "Dog")], classes=C3).micro_f1 == pytest.approx(1.0)
    assert sed.event_based(short, [E("a.wav", 5.21, 5.3, "Dog")], classes=C3).micro_f1 == 0.0


def test_perfect_and_default_classes():
    r = sed.event_based(EV_REF, EV_REF)
    assert r.macro_f1 == pytest.approx(1.0) and r.micro_f1 == pytest.approx(1.0) and r.error_rate == pytest.approx(0.0)
    # the 7 of 10 classes absent from reference and estimate are undefined and left out of macro F1
    assert math.isnan(r.per_class["Blender"].f1) and math.isnan(r.per_class["Blender"].error_rate)
    assert set(r.per_class) == set(sed.CLASSES)


# --------------------------------------------------------------------------------------------
# segment-based (1 s segments; a class is active in every segment its events overlap)

SEG_REF = [
    E("a.wav", 0.5, 1.2, "Dog"),  # segments 0, 1
    E("a.wav", 2.1, 2.9, "Cat"),  # segment 2
    E("b.wav", 0.0, 3.0, "Speech"),  # segments 0, 1, 2 (3.0 ends segment 2)
]
SEG_EST = [
    E("a.wav", 0.9, 1.1, "Dog"),  # segments 0, 1 across the 1 s boundary: 2 TP
    E("a.wav", 3.0, 3.5, "Cat"),  # segment 3: FP, and the Cat in segment 2 is a FN
    E("b.wav", 0.2, 1.5, "Speech"),  # segments 0, 1: 2 TP, segment 2 FN
]


def test_segment_based_hand_computed():
    r = sed.segment_based(SEG_REF, SEG_EST, classes=C3, durations={"a.wav": 4.0, "b.wav": 4.0})
    pc = r.per_class
    # Dog (N_ref 2, N_sys 2, TP 2): F1 1; Cat (1, 1, 0): F1 0; Speech (3, 2, 2): P 1, R 2/3, F1 0.8
    assert (pc["Dog"].n_ref, pc["Dog"].n_sys, pc["Dog"].n_tp) == (2, 2, 2)
    assert (pc["Cat"].n_ref, pc["Cat"].n_sys, pc["Cat"].n_tp) == (1, 1, 0)
    assert (pc["Speech"].n_ref, pc["Speech"].n_sys, pc["Speech"].n_tp) == (3, 2, 2)
    assert pc["Dog"].f1 == pytest.approx(1.0)
    assert pc["Cat"].f1 == 0.0
    assert pc["Speech"].f1 == pytest.approx(0.8)
    # macro = (1 + 0 + 0.8) / 3 = 0.6
    assert r.macro_f1 == pytest.approx(0.6)
    # micro: N_ref 6, N_sys 5, TP 4: P 0.8, R 2/3, F1 = 2 * 0.8 * 2/3 / (0.8 + 2/3) = 8/11
    assert r.micro_f1 == pytest.approx(8 / 11)
    # ER per segment: a.seg2 D (Cat), a.seg3 I (Cat), b.seg2 D (Speech): (0 + 2 + 1) / 6
    assert r.error_rate == pytest.approx(0.5)
    assert r.deletion_rate == pytest.approx(2 / 6) and r.insertion_rate == pytest.approx(1 / 6)


def test_segment_substitution_and_length():
    # one segment holds a reference Dog and an estimated Cat: S = 1 (not D + I), ER 1
    r = sed.segment_based([E("a", 0.2, 0.8, "Dog")], [E("a", 0.1, 0.9, "Cat")], classes=C3)
    assert r.substitution_rate == pytest.approx(1.0) and r.error_rate == pytest.approx(1.0)
    # an estimate past the file's duration is cut there: segments 0..9 only
    r = sed.segment_based([E("a", 9.5, 10.0, "Dog")], [E("a", 9.5, 12.0, "Dog")], classes=C3, durations={"a": 10.0})
    assert (r.n_ref, r.n_sys, r.n_tp) == (1, 1, 1)


def test_evaluate_both_and_from_tsv(tmp_path):
    ref = sed.write_strong_tsv(tmp_path / "ref.tsv", EV_REF)
    est = sed.write_strong_tsv(tmp_path / "est.tsv", EV_EST)
    r = sed.evaluate(str(ref), est, classes=C3)
    assert set(r) == {"event", "segment"}
    assert r["event"].macro_f1 == pytest.approx(7 / 18)
    d = r["segment"].as_dict()
    assert d["kind"] == "segment" and set(d["per_class"]) == set(C3)


# --------------------------------------------------------------------------------------------
# empty reference / estimate


def test_empty_estimate():
    r = sed.event_based(EV_REF, [], classes=C3)
    assert r.macro_f1 == 0.0 and r.micro_f1 == 0.0
    assert r.micro_precision == 0.0 and r.micro_recall == 0.0
    assert r.error_rate == pytest.approx(1.0) and r.deletion_rate == pytest.approx(1.0)
    s = sed.segment_based(SEG_REF, [], classes=C3)
    assert s.macro_f1 == 0.0 and s.error_rate == pytest.approx(1.0)


def test_empty_reference():
    r = sed.event_based([], EV_EST, classes=C3)
    # nothing to find: recall, F1 and ER are undefined (NaN), not 0 and not sed_eval's I / eps
    assert math.isnan(r.macro_f1) and math.isnan(r.micro_f1) and math.isnan(r.error_rate)
    assert r.n_sys == 5 and r.micro_precision == 0.0
    s = sed.segment_based([], SEG_EST, classes=C3)
    assert math.isnan(s.macro_f1) and math.isnan(s.error_rate) and s.n_sys > 0


def test_both_empty_and_files_without_events():
    for f in (sed.event_based, sed.segment_based):
        r = f([], [], classes=C3)
        assert math.isnan(r.macro_f1) and math.isnan(r.error_rate) and r.n_ref == r.n_sys == 0
    # a declared event-free reference file still counts its false alarms
    ref = {"a.wav": [E("a.wav", 1.0, 2.0, "Dog")], "quiet.wav": []}
    est = [E("a.wav", 1.0, 2.0, "Dog"), E("quiet.wav", 3.0, 4.0, "Dog")]
    r = sed.event_based(ref, est, classes=C3)
    # Dog: N_ref 1, N_sys 2, TP 1: P 1/2, R 1, F1 2/3
    assert r.per_class["Dog"].f1 == pytest.approx(2 / 3) and r.error_rate == pytest.approx(1.0)
    with pytest.raises(ValueError, match="not in the scored file list: quiet.wav"):
        sed.event_based(ref, est, classes=C3, files=["a.wav"])


# --------------------------------------------------------------------------------------------
# PSDS (sed_scores_eval)

PSDS_REF = {
    "a.wav": [E("a.wav", 1.0, 3.0, "Dog"), E("a.wav", 5.0, 8.0, "Speech")],
    "b.wav": [E("b.wav", 0.5, 1.5, "Cat"), E("b.wav", 2.0, 9.0, "Speech")],
    "c.wav": [],
}


def _scores(ref, hop=0.064, duration=10.0):
    return {name: sed.FrameScores.from_events(evs, duration, hop, C3) for name, evs in ref.items()}


def test_frame_scores_container():
    fs = sed.FrameScores.from_events([E("x", 0.1, 0.25, "Dog")], 1.0, 0.1, C3)
    assert fs.n_frames == 10 and fs.duration == pytest.approx(1.0)
    assert fs.scores[:, 1].tolist() == [0, 1, 1, 0, 0, 0, 0, 0, 0, 0]
    assert np.allclose(fs.timestamps(), np.arange(11) * 0.1)
    df = fs.to_dataframe()
    assert list(df.columns) == ["onset", "offset", *C3] and len(df) == 10
    with pytest.raises(ValueError, match=r"scores must be \(frames, 3\)"):
        sed.FrameScores(np.zeros((5, 2)), 0.1, C3)
    with pytest.raises(ValueError, match="hop must be > 0"):
        sed.FrameScores(np.zeros((5, 3)), 0.0, C3)
    with pytest.raises(ValueError, match="finite"):
        sed.FrameScores(np.full((5, 3), np.nan), 0.1, C3)


def test_psds_perfect_is_one():
    r = sed.psds(PSDS_REF, _scores(PSDS_REF), classes=C3)
    assert r.psds == pytest.approx(1.0)
    assert all(v == pytest.approx(1.0) for v in r.per_class.values())
    r2 = sed.psds(PSDS_REF, _scores(PSDS_REF), classes=C3, **sed.PSDS2)
    assert r2.psds == pytest.approx(1.0) and r2.params["alpha_ct"] == 0.5


def test_psds_no_detection_is_zero():
    zero = {n: sed.FrameScores(np.zeros_like(fs.scores), fs.hop, C3) for n, fs in _scores(PSDS_REF).items()}
    assert sed.psds(PSDS_REF, zero, classes=C3).psds == 0.0
    # detections on the wrong class only
    wrong = {n: sed.FrameScores(fs.scores[:, ::-1].copy(), fs.hop, C3) for n, fs in _scores(PSDS_REF).items()}
    assert sed.psds(PSDS_REF, wrong, classes=C3).psds == pytest.approx(0.0, abs=1e-9)


def test_psds_partial_between():
    # Dog and Cat found, Speech never: with alpha_st = 0, PSDS = mean of per-class TPR = 2/3
    sc = _scores(PSDS_REF)
    for fs in sc.values():
        fs.scores[:, 2] = 0.0
    r = sed.psds(PSDS_REF, sc, classes=C3, alpha_st=0.0)
    assert r.per_class["Speech"] == 0.0 and r.per_class["Dog"] == pytest.approx(1.0)
    assert r.psds == pytest.approx(2 / 3)


def test_psds_errors():
    sc = _scores(PSDS_REF)
    del sc["b.wav"]
    with pytest.raises(ValueError, match="no scores for reference files: b.wav"):
        sed.psds(PSDS_REF, sc, classes=C3)
    with pytest.raises(ValueError, match="differ from"):
        sed.psds(PSDS_REF, _scores(PSDS_REF), classes=("Dog", "Cat", "Speech"))


def test_event_based_onset_only_frees_the_offsets():
    ref = [E("a.wav", 6.0, 9.0, "Speech")]
    late_end = [E("a.wav", 6.1, 10.2, "Speech")]
    assert sed.event_based(ref, late_end, classes=C3).micro_f1 == 0.0
    r = sed.event_based(ref, late_end, classes=C3, evaluate_offset=False)
    assert r.micro_f1 == pytest.approx(1.0) and r.params["evaluate_offset"] is False
    # the onset collar still holds, and with offsets off the offset collar may differ
    assert sed.event_based(ref, [E("a.wav", 6.3, 9.0, "Speech")], classes=C3, evaluate_offset=False).micro_f1 == 0.0
    assert sed.event_based(ref, late_end, classes=C3, evaluate_offset=False, onset_collar=0.5, offset_collar=0.2).micro_f1 == 1.0
    with pytest.raises(ValueError, match="t_collar"):
        sed.event_based(ref, late_end, classes=C3, onset_collar=0.5, offset_collar=0.2)


TAG_REF = [E("a.wav", 1.0, 3.0, "Dog"), E("a.wav", 5.0, 6.0, "Cat"), E("b.wav", 0.0, 2.0, "Speech"), E("c.wav", 1.0, 2.0, "Dog")]
TAG_EST = [E("a.wav", 1.1, 2.0, "Dog"), E("a.wav", 2.2, 3.5, "Dog"), E("b.wav", 4.0, 5.0, "Cat"), E("c.wav", 7.0, 8.0, "Dog")]


def test_tagging_hand_computed():
    r = sed.tagging_based(TAG_REF, TAG_EST, classes=C3)
    pc = r.per_class
    # one decision per (clip, class), timing ignored: Dog (ref a, c; est a, c) TP 2; Cat (ref a; est b) TP 0;
    # Speech (ref b; no estimate) F1 0 as the event scores' zero_score convention
    assert (pc["Dog"].n_ref, pc["Dog"].n_sys, pc["Dog"].n_tp) == (2, 2, 2) and pc["Dog"].f1 == pytest.approx(1.0)
    assert (pc["Cat"].n_ref, pc["Cat"].n_sys, pc["Cat"].n_tp) == (1, 1, 0) and pc["Cat"].f1 == 0.0
    assert (pc["Speech"].n_ref, pc["Speech"].n_sys) == (1, 0) and pc["Speech"].f1 == 0.0 and pc["Speech"].precision == 0.0
    assert r.macro_f1 == pytest.approx(1 / 3)
    # micro: TP 2 of 4 reference and 3 estimated tags
    assert (r.n_ref, r.n_sys, r.n_tp) == (4, 3, 2) and r.micro_f1 == pytest.approx(4 / 7)
    assert r.kind == "tagging" and math.isnan(r.error_rate) and r.params["files"] == 3
    # the c.wav Dog estimate is a tagging hit but an event-based miss
    assert sed.event_based(TAG_REF, TAG_EST, classes=C3).per_class["Dog"].n_tp == 0


def test_tagging_edge_cases():
    # a class absent from the reference is NaN and left out of the macro mean (its false alarms still count in micro)
    r = sed.tagging_based([E("a.wav", 0.0, 1.0, "Dog")], [E("a.wav", 0.0, 1.0, "Dog"), E("a.wav", 0.0, 1.0, "Cat")], classes=C3)
    assert math.isnan(r.per_class["Cat"].f1) and r.macro_f1 == pytest.approx(1.0) and r.micro_f1 == pytest.approx(2 / 3)
    # files without events are scored as clips without tags; an estimate for an unlisted file is an error
    r = sed.tagging_based({"a.wav": [], "b.wav": []}, {"a.wav": [E("a.wav", 0.0, 1.0, "Dog")]}, classes=C3)
    assert r.n_sys == 1 and r.n_ref == 0 and math.isnan(r.macro_f1) and r.params["files"] == 2
    with pytest.raises(ValueError, match="not in the scored file list"):
        sed.tagging_based(TAG_REF, TAG_EST, classes=C3, files=["a.wav"])
    e = sed.tagging_based([], [], classes=C3)
    assert e.n_ref == 0 and math.isnan(e.macro_f1)


def test_localisation_errors_hand_computed():
    r = sed.localisation_errors(TAG_REF, TAG_EST, classes=C3)
    # Dog a.wav 1-3: two estimates overlap (split), the longer overlap is 1.1-2.0 (0.9 s against 0.8 s):
    # onset +0.1 (inside 200 ms), offset -1.0 (outside max(0.2, 0.4)), length 0.45; Cat, Speech, c.wav Dog missed
    assert (r.n_ref, r.n_sys) == (4, 4)
    assert r.missed == pytest.approx(3 / 4) and r.split == pytest.approx(1 / 4)
    assert r.onset_error["median"] == pytest.approx(0.1) and r.onset_error["within_collar"] == 1.0
    assert r.offset_error["median"] == pytest.approx(-1.0) and r.offset_error["within_collar"] == 0.0
    assert r.length_ratio == pytest.approx(0.45)
    # estimates: both a.wav Dogs hit one reference each; b.wav Cat and c.wav Dog overlap nothing of their class
    assert r.false_alarm == pytest.approx(2 / 4) and r.merged == 0.0
    # b.wav holds no Cat (an absent class); c.wav holds Dog, only elsewhere in time
    assert r.false_alarm_absent == pytest.approx(1 / 2)
    # one long estimate over two references of its class is merged
    m = sed.localisation_errors([E("a.wav", 1.0, 2.0, "Dog"), E("a.wav", 3.0, 4.0, "Dog")], [E("a.wav", 0.9, 4.1, "Dog")], classes=C3)
    assert m.merged == 1.0 and m.missed == 0.0 and m.offset_error["median"] == pytest.approx(1.1)
    # no pairs at all: NaN statistics, not an error
    n = sed.localisation_errors([E("a.wav", 1.0, 2.0, "Dog")], [], classes=C3)
    assert n.missed == 1.0 and math.isnan(n.onset_error["median"]) and math.isnan(n.false_alarm) and math.isnan(n.length_ratio)
    assert math.isnan(n.false_alarm_absent)
    assert sed.localisation_errors({"a.wav": []}, {}, classes=C3).as_dict()["n_ref"] == 0


# --------------------------------------------------------------------------------------------
# per-file counts and the paired bootstrap


def _random_events(rng, files, classes, n_max=4):
    out = {}
    for f in files:
        evs = []
        for _ in range(int(rng.integers(0, n_max + 1))):
            on = float(rng.uniform(0, 9))
            evs.append(E(f, round(on, 3), round(min(10.0, on + float(rng.uniform(0.1, 3))), 3), str(rng.choice(classes))))
        out[f] = evs
    return out


def _jitter(rng, events, classes, p_drop=0.25, p_false=0.3):
    """An imperfect 'system': references moved by up to 0.4 s, some dropped, some false alarms added."""
    out = {}
    for f, evs in events.items():
        est = []
        for e in evs:
            if rng.random() < p_drop:
                continue
            on = max(0.0, e.onset + float(rng.uniform(-0.4, 0.4)))
            est.append(E(f, round(on, 3), round(max(on + 0.05, e.offset + float(rng.uniform(-0.5, 0.5))), 3), e.event_label))
        if rng.random() < p_false:
            on = float(rng.uniform(0, 8))
            est.append(E(f, round(on, 3), round(on + 1.0, 3), str(rng.choice(classes))))
        out[f] = est
    return out


def test_event_counts_add_up_to_sed_eval_scores():
    rng = np.random.default_rng(3)
    files = [f"f{i}.wav" for i in range(40)]
    ref = _random_events(rng, files, C3)
    est = _jitter(rng, ref, C3)
    c = sed.event_counts(ref, est, classes=C3, files=files)
    assert c.files == tuple(files) and c.classes == C3 and c.counts.shape == (40, 3, 3)
    whole = sed.event_based(ref, est, classes=C3, files=files)
    for k, cls in enumerate(C3):
        pc = whole.per_class[cls]
        assert tuple(c.counts[:, k].sum(axis=0)) == (pc.n_ref, pc.n_sys, pc.n_tp)
    assert c.macro_f1() == pytest.approx(whole.macro_f1, rel=1e-9)
    # each file's counts are that file scored alone
    for i in (0, 7, 23):
        alone = sed.event_based({files[i]: ref[files[i]]}, {files[i]: est[files[i]]}, classes=C3, files=[files[i]])
        assert [tuple(c.counts[i, k]) for k in range(3)] == [(alone.per_class[x].n_ref, alone.per_class[x].n_sys, alone.per_class[x].n_tp) for x in C3]
    # weights = a multiset of files: file 0 twice, file 1 once equals scoring the three copies
    w = np.zeros(40, dtype=int)
    w[0], w[1] = 2, 1
    copies = {"a.wav": ref[files[0]], "b.wav": ref[files[0]], "c.wav": ref[files[1]]}
    ecop = {"a.wav": est[files[0]], "b.wav": est[files[0]], "c.wav": est[files[1]]}
    ren = {k: [E(k, e.onset, e.offset, e.event_label) for e in v] for k, v in copies.items()}
    eren = {k: [E(k, e.onset, e.offset, e.event_label) for e in v] for k, v in ecop.items()}
    got, want = c.macro_f1(w), sed.event_based(ren, eren, classes=C3).macro_f1
    assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want, rel=1e-9)
    # onset-only counts follow the same switch as event_based
    c_on = sed.event_counts(ref, est, classes=C3, files=files, evaluate_offset=False)
    assert c_on.macro_f1() == pytest.approx(sed.event_based(ref, est, classes=C3, files=files, evaluate_offset=False).macro_f1, rel=1e-9)


def test_macro_f1_from_counts_conventions():
    # (N_ref, N_sys, N_tp) per class: 2/3; 0 (no estimates); undefined (no reference) -> mean of two
    assert sed.macro_f1_from_counts([[2, 1, 1], [3, 0, 0], [0, 4, 0]]) == pytest.approx(1 / 3)
    assert math.isnan(sed.macro_f1_from_counts([[0, 1, 0], [0, 0, 0]]))
    batch = sed.macro_f1_from_counts(np.array([[[1, 1, 1]], [[2, 2, 1]]]))
    assert batch.shape == (2,) and batch[0] == 1.0 and batch[1] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="shape"):
        sed.macro_f1_from_counts([1, 2, 3])


def test_bootstrap_gain_is_paired_and_centred():
    rng = np.random.default_rng(5)
    files = [f"f{i}.wav" for i in range(60)]
    ref = _random_events(rng, files, C3)
    weak = sed.event_counts(ref, _jitter(rng, ref, C3, p_drop=0.5), classes=C3, files=files)
    strong = sed.event_counts(ref, _jitter(rng, ref, C3, p_drop=0.1), classes=C3, files=files)
    r = sed.bootstrap_macro_f1_gain([weak, weak], [strong, weak], n_boot=400, seed=1)
    p0, p1 = r["pairs"]
    assert p0["gain"] == pytest.approx(strong.macro_f1() - weak.macro_f1()) and p0["gain"] > 0
    assert p0["ci"][0] < p0["gain"] < p0["ci"][1]
    # a run against itself gains exactly 0 in every resample: the pairing shares the clips
    assert p1["gain"] == 0.0 and p1["ci"] == [0.0, 0.0]
    assert r["mean_gain"] == pytest.approx(p0["gain"] / 2)
    assert r["draws"].shape == (400,) and r["ci"][0] < r["mean_gain"] < r["ci"][1]
    # reproducible from its seed
    again = sed.bootstrap_macro_f1_gain([weak, weak], [strong, weak], n_boot=400, seed=1)
    assert again["ci"] == r["ci"]
    with pytest.raises(ValueError, match="as many"):
        sed.bootstrap_macro_f1_gain([weak], [strong, weak])
    other = sed.event_counts(ref, ref, classes=C3, files=files[::-1])
    with pytest.raises(ValueError, match="same files"):
        sed.bootstrap_macro_f1_gain([weak], [other])
    with pytest.raises(ValueError, match="n_boot"):
        sed.bootstrap_macro_f1_gain([weak], [strong], n_boot=0)
    with pytest.raises(ValueError, match="level"):
        sed.bootstrap_macro_f1_gain([weak], [strong], level=1.0)
