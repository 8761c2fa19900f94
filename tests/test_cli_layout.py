"""The layout of the command line and of the runtime: one module per command family, one way to register a command,
no CLI code in the library, and no runtime module over ~800 lines."""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

import pytest

import streamkit
from streamkit.cli import build_parser
from streamkit.cli.common import CommandParser

PKG = Path(streamkit.__file__).parent


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(subs[0].choices) if subs else {}


def test_every_command_is_registered_one_way():
    top = _commands(build_parser())
    assert {"monitor", "mic", "devices", "emulate", "sad", "eval", "transcribe", "sed", "run", "bench", "describe", "blocks", "corpus", "train"} <= set(top)
    leaves = {}
    for name, p in top.items():
        assert isinstance(p, CommandParser), name
        p.format_help()  # adds its options (and a family's commands)
        nested = _commands(p)
        for sub, q in nested.items():
            assert isinstance(q, CommandParser), f"{name} {sub}"
            leaves[f"{name} {sub}"] = q
        if not nested:
            leaves[name] = p
    assert {"corpus hf", "corpus asr", "corpus sed", "eval sad", "emulate kiwi", "train sad-dnn", "train rnnt", "train sed"} <= set(leaves)
    for name, p in leaves.items():
        assert callable(p.get_default("func")), name


def test_nested_commands_parse_through_the_one_parser():
    a = build_parser().parse_args(["corpus", "sed", "--out", "x", "--clips-eval", "3"])
    assert (a.cmd, a.what, a.out, a.clips_eval) == ("corpus", "sed", "x", 3)
    a = build_parser().parse_args(["sed", "f.wav", "--hop", "0.5"])
    assert a.paths == ["f.wav"] and a.hop == 0.5 and callable(a.func)


def _imports(path: Path) -> set[str]:
    mods: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            mods.add(node.module)
            mods.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            mods.update(a.name for a in node.names)
    return mods


def test_the_library_does_not_import_the_cli():
    offenders = [str(p.relative_to(PKG)) for p in PKG.rglob("*.py") if "cli" not in p.relative_to(PKG).parts[:1] and p.name != "__main__.py"
                 and any(m == "streamkit.cli" or m.startswith("streamkit.cli.") for m in _imports(p))]  # fmt: skip
    assert offenders == []
    from streamkit.core.machine import machine_info

    info = machine_info()
    assert info["streamkit"] == streamkit.__version__ and info["cpu_count"]


def test_the_cli_uses_no_private_helper_of_the_monitor():
    for p in (PKG / "cli").glob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "streamkit.monitor":
                assert not [a.name for a in node.names if a.name.startswith("_")], p.name


@pytest.mark.parametrize("module", ["models/sed_stream.py", "models/sed_engine.py", "models/sed_offline.py", "models/sed_settings.py",
                                    "models/transcribe.py", "data/hf_corpus.py", "data/asr_corpus.py", "data/sed_corpus.py",
                                    "eval/sad_files.py"])  # fmt: skip
def test_no_argparse_in_model_data_and_eval_modules(module):
    assert "argparse" not in _imports(PKG / module)


def test_runtime_modules_are_small_and_keep_their_names():
    from streamkit.core.runtime import EventBus, MultiRunner, ReadyFlag, Runner, TagMapper, WindowBuffer, round_half_up  # noqa: F401

    for name in ("runtime", "buffers", "event_bus", "nodes", "sources", "run_stats", "multi_runner"):
        assert len((PKG / "core" / f"{name}.py").read_text().splitlines()) <= 800, name
    assert MultiRunner.__module__ == "streamkit.core.multi_runner"


def test_python_m_streamkit_and_the_entry_point():
    r = subprocess.run([sys.executable, "-m", "streamkit", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == f"streamkit {streamkit.__version__}"
    from importlib.metadata import EntryPoint

    assert EntryPoint(name="streamkit", group="console_scripts", value="streamkit.cli:main").load() is streamkit.cli.main
