"""The pure helpers of benchmarks/rnnt_real.py: references, answers, scoring, the goals table."""

from __future__ import annotations

import pytest

from streamkit.eval.bench.rnnt_real import asterisk_reference, file_answer, fmt_goals, goals, norm_text, sphinx_transcripts, wer_cer


def test_sphinx_transcripts_parses_ids_and_normalises() -> None:
    text = "<s> he was not an ill disposed young man </s> (sense-0880)\n\n<s> ten of clubs  </s> (001)\n"
    assert sphinx_transcripts(text) == {"sense-0880": "he was not an ill disposed young man", "001": "ten of clubs"}
    with pytest.raises(ValueError, match="not a Sphinx transcription line"):
        sphinx_transcripts("no id here")


@pytest.mark.parametrize(("rel", "ref"), [
    ("usr/share/asterisk/sounds/en_US_f_Allison/digits/0.wav", "zero"),
    ("x/digits/17.wav", "seventeen"),
    ("x/digits/40.wav", "forty"),
    ("x/digits/h-1.wav", "first"),
    ("x/digits/h-12.wav", "twelfth"),
    ("x/digits/h-20.wav", "twentieth"),
    ("x/digits/h-40.wav", "fortieth"),
    ("x/digits/h-thousand.wav", "thousandth"),
    ("x/digits/mon-0.wav", "january"),
    ("x/digits/mon-11.wav", "december"),
    ("x/digits/day-3.wav", "wednesday"),
    ("x/digits/tomorrow.wav", "tomorrow"),
    ("x/phonetic/j_p.wav", "juliet"),
    ("x/phonetic/9_p.wav", "niner"),
])  # fmt: skip
def test_asterisk_reference_from_file_name(rel: str, ref: str) -> None:
    assert asterisk_reference(rel) == ref


@pytest.mark.parametrize("rel", ["x/digits/a-m.wav", "x/digits/oclock.wav", "x/digits/mon-12.wav", "x/digits/25.wav",
                                 "x/en_US_f_Allison/invalid.wav", "x/letters/a.wav", "transfer.wav"])  # fmt: skip
def test_asterisk_reference_refuses_to_guess(rel: str) -> None:
    assert asterisk_reference(rel) is None


def test_norm_text() -> None:
    assert norm_text("Don't  STOP, o'clock!") == "dont stop oclock"
    assert norm_text("") == ""


def test_file_answer_joins_texts_and_takes_longest_language() -> None:
    utts = [{"start_s": 0.0, "end_s": 0.5, "lang": "hi", "text": "a"}, {"start_s": 1.0, "end_s": 3.0, "lang": "en", "text": ""},
            {"start_s": 3.5, "end_s": 4.0, "lang": "ta", "text": "b"}]  # fmt: skip
    assert file_answer(utts) == ("a b", "en")
    assert file_answer([]) == ("", "none")


def test_wer_cer_pooled() -> None:
    r = wer_cer(["one two three four", "five"], ["one two Three four", ""])
    assert r["wer"] == 20.0  # one deletion in five words; case is normalised
    assert r["cer"] == pytest.approx(100 * 4 / (18 + 4), abs=0.01)


def test_goals_pass_and_miss() -> None:
    res = {"real": {"ours": {"all": {"lid_en_pct": 91.0, "wer": 99.0, "cer": 80.0}}},
           "synthetic": [{"lid_acc_utt": 95.5, "t_avg": 4.0, "decoder_cpu_per_audio_s": 0.14, "rt_cpu": 0.18},
                         {"lid_acc_utt": 80.0, "t_avg": 1.7, "decoder_cpu_per_audio_s": 0.07, "rt_cpu": 0.10}]}  # fmt: skip
    got = {g: ok for g, _t, _m, ok in goals(res)}
    assert got == {"real English identified as en": True, "real English WER / CER, ours": None, "synthetic LID, no shutoff": True,
                   "synthetic LID, tau 30 / s_th 0.5": False, "T_avg at tau 30 / s_th 0.5": True, "decoder CPU, shutoff vs none": True,
                   "RT factor at tau 30 / s_th 0.5": True}  # fmt: skip
    table = fmt_goals(goals(res))
    assert "MISS" in table and "-50.0 %" in table
