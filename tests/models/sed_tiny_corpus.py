"""A tiny `streamkit corpus sed` corpus for the SED training tests (skips when espeak-ng is missing)."""

from __future__ import annotations

from pathlib import Path

import pytest


def tiny_sed_corpus(tmp_path_factory: pytest.TempPathFactory, counts: dict[str, int], seed: int) -> Path:
    from streamkit.data.sed_corpus import generate
    from streamkit.data.tts import EspeakMissingError

    out = tmp_path_factory.mktemp("sedc")
    try:
        generate(out, counts, seed=seed)
    except EspeakMissingError:
        pytest.skip("espeak-ng not installed")
    return out
