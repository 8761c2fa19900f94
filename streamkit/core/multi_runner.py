"""Many graphs on one scheduler thread: :class:`MultiRunner` (``streamkit monitor``: one graph per station)."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from streamkit.core.errors import BlockError, ConfigError, GraphFatal

if TYPE_CHECKING:
    from streamkit.core.runtime import Runner

__all__ = ["MultiRunner", "ReadyFlag"]


class ReadyFlag:
    """A runner's ``notify`` under a :class:`MultiRunner`: ``set()`` (called by a live source's
    producer after each write) queues the runner as ready and wakes the scheduler. Duck-types the
    ``threading.Event`` methods sources use (set, clear, wait, is_set)."""

    __slots__ = ("runner", "ready", "shared")

    def __init__(self, runner: Runner, ready: deque[Runner], shared: threading.Event) -> None:
        self.runner, self.ready, self.shared = runner, ready, shared

    def set(self) -> None:
        self.ready.append(self.runner)  # deque.append is atomic: safe from any producer thread
        self.shared.set()

    def is_set(self) -> bool:
        return self.shared.is_set()

    def clear(self) -> None:
        self.shared.clear()

    def wait(self, timeout: float | None = None) -> bool:
        return self.shared.wait(timeout)


class MultiRunner:
    """Runs many graphs (one per station) on one scheduler thread.

    A graph whose sources are all live is stepped only when one of its sources signalled new items
    (its :class:`ReadyFlag` queued it), plus once every ``sweep_s`` for statistics, watchdog-driven
    ends and stop requests; graphs with file or paced sources are stepped every round. Stepping
    every graph whenever any source signals would cost N steps per arriving frame, i.e. O(N^2) per
    second: benchmarks/kiwi_stations.py measured 89 % of a core for 200 KiwiSDR stations that way
    and 35 % with the ready queue. A graph that fails (GraphFatal, a block error under RAISE) is
    finished and reported in ``failures``; the others go on.
    """

    def __init__(self, runners: list[Runner], sweep_s: float = 0.25) -> None:
        self.runners = list(runners)
        self.notify = threading.Event()
        self.ready: deque[Runner] = deque()
        self.sweep_s = sweep_s
        for r in self.runners:
            if r._started:
                raise ConfigError(f"graph {r.graph.name!r}: start it through the MultiRunner, not before")
            r.notify = ReadyFlag(r, self.ready, self.notify)  # type: ignore[assignment]
        self.failures: dict[str, str] = {}
        self._stop = threading.Event()

    def request_stop(self) -> None:
        self._stop.set()
        self.notify.set()

    def _step(self, r: Runner, active: set[Runner]) -> bool:
        try:
            moved = r.step()
        except (GraphFatal, BlockError) as exc:
            self.failures[r.graph.name] = str(exc)
            r.fatal = str(exc)
            r.finish(flush=False)
            active.discard(r)
            return False
        if r.done:
            r.finish()
            active.discard(r)
        return moved

    def run(self) -> dict[str, dict[str, Any]]:
        # every block of every graph starts (models loaded, kernels compiled) before any source does:
        # a station streaming while another graph compiles would overflow its ring
        try:
            for r in self.runners:
                r.prepare()
            for r in self.runners:
                r.start()
        except BaseException:
            for r in self.runners:
                r.abort()
                r.finish(flush=False)
            raise
        active = set(self.runners)
        polled = [r for r in self.runners if any(not s.live for s in r._sources)]
        last_sweep = 0.0
        try:
            while active and not self._stop.is_set():
                now = time.monotonic()
                moved = False
                if now - last_sweep >= self.sweep_s:
                    last_sweep = now
                    self.ready.clear()
                    for r in list(active):
                        moved = self._step(r, active) or moved
                else:
                    seen: set[Runner] = set()
                    while self.ready:
                        r = self.ready.popleft()
                        if r in active and r not in seen:
                            seen.add(r)
                            moved = self._step(r, active) or moved
                    for r in polled:
                        if r in active and r not in seen:
                            moved = self._step(r, active) or moved
                if moved or self.ready or not active:
                    continue
                timeout = max(0.0, self.sweep_s - (time.monotonic() - last_sweep))
                now = time.monotonic()
                dues = [s.next_due for r in polled if r in active for s in r._sources if not s.ended and not s.live and s.next_due > now]
                if dues:
                    timeout = min(timeout, max(0.0, min(dues) - now))
                self.notify.wait(timeout)
                self.notify.clear()
        finally:
            for r in list(active):
                r.finish()
        return {r.graph.name: r.stats() for r in self.runners}
