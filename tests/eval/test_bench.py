"""The benchmarks' shared helpers (streamkit.eval.bench) and the scripts' imports: streamkit only, no path tricks."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from streamkit.core.machine import machine_info as core_machine_info
from streamkit.eval.bench import RESULTS, machine_info, write_result

REPO = Path(__file__).resolve().parents[2]


def test_write_result_and_machine_info(tmp_path, capsys):
    out = tmp_path / "sub" / "r.json"
    assert write_result(out, {"rows": [1, 2], "machine": machine_info()}) == 0
    res = json.loads(out.read_text(encoding="utf-8"))
    assert res["rows"] == [1, 2] and {"python", "cpu_count", "numpy", "streamkit"} <= set(res["machine"])
    assert capsys.readouterr().err.strip() == "wrote r.json"  # the file name only, no machine path
    assert core_machine_info is machine_info  # one definition (streamkit.core.machine)
    assert RESULTS == REPO / "benchmarks" / "results"


def test_benchmark_scripts_import_streamkit_not_each_other():
    """No script touches sys.path or imports a sibling script: each runs against the installed streamkit."""
    scripts = sorted((REPO / "benchmarks").glob("*.py"))
    stems = {p.stem for p in scripts} | {"_bench"}
    assert len(scripts) >= 10
    for p in scripts:
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) and node.value.id == "sys":
                raise AssertionError(f"{p.name}:{node.lineno}: sys.path")
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module.split(".")[0] not in stems, f"{p.name}:{node.lineno}: imports the script {node.module}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name.split(".")[0] not in stems, f"{p.name}:{node.lineno}: imports the script {alias.name}"


def test_results_and_cards_carry_no_machine_paths(tmp_path):
    from streamkit.eval.bench import REPO, portable_paths

    inside = str(REPO / "benchmarks" / "results" / "x.json")
    got = portable_paths({"command": f"python b.py --real /data/corpora/real_v2 --dnn old=/tmp/w/old.pt --out {inside}", "rows": ["n/a", "1/3 dB/s"]})
    assert got == {"command": "python b.py --real real_v2 --dnn old=old.pt --out benchmarks/results/x.json", "rows": ["n/a", "1/3 dB/s"]}
    out = tmp_path / "r.json"
    write_result(out, {"corpus": "/data/corpora/hf2", "n": 3})
    assert json.loads(out.read_text()) == {"corpus": "hf2", "n": 3}
