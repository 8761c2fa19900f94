"""Training progress shared by the trainers: a rich bar on a terminal, plain lines in logs."""

from __future__ import annotations

import sys
from typing import Any


class TrainProgress:
    """A rich progress bar when stderr is a terminal; otherwise the caller's plain lines (nohup logs).

    ``update(completed, info, line)`` moves the bar, or prints ``line`` when there is no bar and the
    caller passes one (the caller decides how often). ``quiet`` silences everything.
    """

    def __init__(self, label: str, total: float | None, *, done: float = 0, quiet: bool = False, count: bool = False) -> None:
        self.quiet = quiet
        self.bar: Any = None
        if sys.stderr.isatty() and not quiet:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            cols = [TextColumn(label), BarColumn(), *([MofNCompleteColumn()] if count else []), TextColumn("{task.fields[info]}"),
                    TimeElapsedColumn(), TimeRemainingColumn()]  # fmt: skip
            self.bar = Progress(*cols)
            self.bar.start()
            self.task = self.bar.add_task("train", total=total, completed=done, info="")

    def update(self, completed: float, info: str, line: str | None = None) -> None:
        if self.quiet:
            return
        if self.bar is not None:
            self.bar.update(self.task, completed=completed, info=info)
        elif line is not None:
            print(line, flush=True)

    def note(self, msg: str) -> None:
        if self.quiet:
            return
        if self.bar is not None:
            self.bar.console.print(msg)
        else:
            print(msg, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
