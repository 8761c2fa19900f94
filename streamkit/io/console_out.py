"""ConsoleOut: the console's text stream, which outlives its reader.

``streamkit monitor | head`` closes the pipe after a few lines while the monitor still has minutes
to run. Every later write to stdout then fails (``BrokenPipeError``), and Python would print one
traceback per failed write and another at exit. The console writes through :class:`ConsoleOut`
instead: the first failure prints one line on stderr, and from then on what is written is
discarded while the run goes on (its event files and recordings do not go through the console).
:attr:`ConsoleOut.lost` says why output stopped, for the exit status (``streamkit.cli``).

A reader that stalls without closing is a different problem, solved where events are delivered:
console sinks get their own bounded queue and thread (``EventSink.may_drop``), so a blocked write
holds up only the console.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import IO, Any

__all__ = ["ConsoleOut", "console_out"]


class ConsoleOut:
    """A text stream over ``target`` (default: ``sys.stdout`` at creation) that never raises on write.

    The first write or flush that fails (a closed pipe, a closed file) sets :attr:`lost`, prints
    one ``streamkit: console output lost ...`` line on stderr, and turns every later write into a
    no-op. On a broken pipe at the process's stdout, the descriptor is pointed at ``/dev/null``
    so that the interpreter's final flush does not fail again.
    """

    def __init__(self, target: IO[str] | None = None) -> None:
        self.target: IO[str] = target if target is not None else sys.stdout
        #: why output stopped (``None`` while it works)
        self.lost: str | None = None
        self._lock = threading.Lock()

    # -- the parts of a text stream the console uses ----------------------------------------------
    def write(self, s: str) -> int:
        if self.lost is None:
            try:
                self.target.write(s)
            except Exception as exc:  # OSError (EPIPE, EIO, ENOSPC), ValueError (closed), ...
                self._lose(exc)
        return len(s)

    def flush(self) -> None:
        if self.lost is None:
            try:
                self.target.flush()
            except Exception as exc:
                self._lose(exc)

    def isatty(self) -> bool:
        try:
            return self.lost is None and bool(self.target.isatty())
        except Exception:
            return False

    def fileno(self) -> int:
        return self.target.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self.target, "encoding", None) or "utf-8"

    @property
    def is_stdout(self) -> bool:
        """Whether this writes to the process's standard output."""
        return self.target is sys.stdout or self.target is sys.__stdout__

    def __getattr__(self, name: str) -> Any:  # anything else a library may look up (errors, mode, ...)
        return getattr(self.target, name)

    # -- failure --------------------------------------------------------------------------------------
    def _lose(self, exc: BaseException) -> None:
        with self._lock:
            if self.lost is not None:
                return
            if isinstance(exc, (BrokenPipeError, ConnectionResetError)):
                self.lost = "closed by its reader"
            elif isinstance(exc, ValueError):
                self.lost = "closed"
            else:
                self.lost = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, BrokenPipeError):
            self._detach_stdout()
        try:
            print(f"streamkit: console output lost ({self.lost}): live view stopped; the run goes on and its event files "
                  "are still written", file=sys.__stderr__ if sys.stderr is None else sys.stderr, flush=True)  # fmt: skip
        except Exception:
            pass

    def _detach_stdout(self) -> None:
        """Point a broken stdout descriptor at /dev/null (Python's documented cure for EPIPE at exit)."""
        try:
            fd = self.target.fileno()
            if sys.__stdout__ is None or fd != sys.__stdout__.fileno():
                return
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, fd)
            finally:
                os.close(devnull)
        except Exception:
            pass


def console_out(target: IO[str] | ConsoleOut | None = None) -> ConsoleOut:
    """``target`` as a :class:`ConsoleOut` (itself when it already is one)."""
    return target if isinstance(target, ConsoleOut) else ConsoleOut(target)
