"""The repository reads as a product, not a lab notebook: no numbered work-log references.

Code, docs and graph files state facts ("Target: RT factor <= 0.03"), not the history that led to
them. A numbered session or issue reference means nothing to a reader of the repository, so every
tracked ``.py``, ``.md`` and ``.yaml``/``.yml`` file is checked for one. The measurement records in
``benchmarks/results/`` (JSON) are data and are not checked.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: "session" or "sessions" followed by a number, and "issue #" followed by a number
WORK_LOG = re.compile(r"\bsessions?\s+\d+|\bissues?\s*#\s*\d+", re.IGNORECASE)

SUFFIXES = (".py", ".md", ".yaml", ".yml")


def tracked_text_files() -> list[Path]:
    """The tracked files with a checked suffix, outside ``benchmarks/results/``."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"not a git checkout ({e}): the tracked files are unknown")
    names = [n for n in out.decode("utf-8").split("\0") if n]
    return [ROOT / n for n in names if n.endswith(SUFFIXES) and not n.startswith("benchmarks/results/")]


def work_log_hits(paths: list[Path]) -> list[str]:
    """``path:line: text`` for every line that carries a numbered work-log reference."""
    hits = []
    for p in paths:
        if not p.is_file():  # deleted in the work tree, not yet committed
            continue
        for i, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if WORK_LOG.search(line):
                hits.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()}")
    return hits


N = 4  # the examples are built at run time so that this file passes its own check


@pytest.mark.parametrize(
    ("text", "found"),
    [
        (f"Run A of session {N} ended with dev LID 36 %", True),
        (f"refitted in Sessions {N}-{N + 1}", True),
        (f"Target (issue #{N}): engine <= 1.2x", True),
        (f"see Issue # {N}", True),
        ("Target: engine <= 1.2x the hand loop", False),
        ("a fresh <ts> per session (the server ignores a duplicate)", False),
        ("max_sessions: stop after this many sessions", False),
        ("the paper's §6.3 shutoff", False),
    ],
)
def test_pattern(text: str, found: bool) -> None:
    assert bool(WORK_LOG.search(text)) is found


def test_checks_the_code_and_the_docs() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in tracked_text_files()}
    assert "README.md" in names and "tests/test_repo_hygiene.py" in names
    assert not any(n.startswith("benchmarks/results/") for n in names)


def test_no_numbered_work_log_references() -> None:
    hits = work_log_hits(tracked_text_files())
    assert not hits, "numbered work-log references (state the fact, not its history):\n" + "\n".join(hits)
