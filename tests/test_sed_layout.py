"""The SED code is split by responsibility into modules of at most ~600 lines, each name defined in the
module of its task, and the scoring API importable from ``streamkit.eval.sed``."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import streamkit

PKG = Path(streamkit.__file__).parent

# where each name is defined
HOMES = {
    "streamkit.models.sed_settings": ["DEFAULT_WINDOW_S", "DEFAULT_HOP_S", "POSTS", "check_per_class", "default_weights", "load_meta",
                                      "resolve_post", "resolve_gate"],
    "streamkit.models.sed_engine": ["SedDetection", "SedGeometry", "SedStep", "SedEngine"],
    "streamkit.models.sed_offline": ["SedResult", "sed_file", "sed_stream_file"],
    "streamkit.models.sed_stream": ["SED_DETECTION", "SED_FRAMES", "SedFrames", "SedBlock"],
    "streamkit.eval.sed.label_files": ["Event", "parse_strong", "read_strong_tsv", "strong_tsv_text", "write_weak_tsv"],
    "streamkit.eval.sed.event_scores": ["SedScores", "event_based", "event_counts", "segment_based", "tagging_based", "evaluate",
                                        "localisation_errors"],
    "streamkit.eval.sed.bootstrap": ["EventCounts", "macro_f1_from_counts", "bootstrap_macro_f1_gain"],
    "streamkit.eval.sed.psds_score": ["FrameScores", "PsdsResult", "psds"],
}  # fmt: skip


@pytest.mark.parametrize("module", sorted(HOMES))
def test_each_name_lives_in_the_module_of_its_task(module):
    mod = importlib.import_module(module)
    for name in HOMES[module]:
        obj = getattr(mod, name)
        if callable(obj) and hasattr(obj, "__module__"):
            assert obj.__module__ == module, name


def test_sed_modules_are_small():
    files = [PKG / "models" / f"{m.rsplit('.', 1)[1]}.py" for m in HOMES if m.startswith("streamkit.models.")]
    files += sorted((PKG / "eval" / "sed").glob("*.py"))
    assert len(files) == 9
    for p in files:
        assert len(p.read_text().splitlines()) <= 600, p.name


def test_the_scoring_api_is_importable_from_the_package():
    import streamkit.eval.sed as sed

    for name in sed.__all__:
        assert getattr(sed, name) is not None, name
    assert callable(sed.psds) and sed.psds.__module__ == "streamkit.eval.sed.psds_score"
