"""``streamkit corpus openset``: non-model-language speech for the open-set LID. Needs espeak-ng and
the gettext catalogs of the Debian base system (coreutils, libc, apt...: installed everywhere)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import soundfile as sf

from streamkit.cli import main
from streamkit.data import asr_corpus as ac
from streamkit.data.openset_corpus import DEV_LANGS, TEST_LANGS, catalog_words, generate


def test_dev_and_test_languages_are_disjoint_and_not_model_languages() -> None:
    assert not set(DEV_LANGS) & set(TEST_LANGS)
    assert not (set(DEV_LANGS) | set(TEST_LANGS)) & set(ac.LANGS)


def test_catalog_words() -> None:
    de = catalog_words("de")
    assert len(de) > 1000 and de == tuple(sorted(set(de)))
    assert all(w == w.lower() and w.isalpha() for w in de[:500])
    with pytest.raises(ValueError, match="only 0 words"):
        catalog_words("xx-nonexistent")


def test_generate_small(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    man = generate(tmp_path / "o", per_language=2, seed=3, dev_langs=("de",), test_langs=("fr",))
    assert man["languages"] == {"dev": ["de"], "test": ["fr"]} and man["counts"]["dev"]["utterances"] == 2
    for split, lang in (("dev", "de"), ("test", "fr")):
        recs = ac.read_jsonl(tmp_path / "o" / f"{split}.jsonl")
        assert [r["lang"] for r in recs] == [lang, lang]
        for r in recs:
            assert r["voice"].split("+")[0].startswith(lang)  # fr: fr-fr, fr-be, fr-ch voices
            assert set(r["text"].split()) <= set(catalog_words(lang))
            assert sf.info(str(tmp_path / "o" / r["path"])).samplerate == 8000
    assert json.loads((tmp_path / "o" / "manifest.json").read_text(encoding="utf-8")) == man
    with pytest.raises(ValueError, match="both dev and test"):
        generate(tmp_path / "p", 1, dev_langs=("de",), test_langs=("de",))
    assert main(["corpus", "openset", "--out", str(tmp_path / "q"), "--per-language", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: per_language")
