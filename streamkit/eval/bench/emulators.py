"""Emulator processes and /proc CPU readings shared by the station benchmarks (kiwi_stations, cluster_stations)."""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

from streamkit.io.kiwi_emulator import EmulatorConfig

__all__ = ["Emulator", "emulator_channel_limit", "emulators", "pin", "pin_self", "proc_times", "thread_cpu"]

CLK_TCK = os.sysconf("SC_CLK_TCK")
REPO = Path(__file__).resolve().parents[3]


def proc_times(pid: int | str = "self", tid: int | None = None) -> tuple[float, float]:
    """(user, system) CPU seconds of a process or one of its threads, from /proc."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    with open(path) as f:
        data = f.read()
    rest = data[data.rindex(")") + 2 :].split()  # fields from 3 (state) on
    return int(rest[11]) / CLK_TCK, int(rest[12]) / CLK_TCK  # fields 14 utime, 15 stime


def thread_cpu(tid: int | None) -> float:
    if tid is None:
        return 0.0
    try:
        u, s = proc_times("self", tid)
    except OSError:
        return 0.0
    return u + s


def emulator_channel_limit() -> int:
    """The largest --rx-chans the emulator accepts (its validate() says 1..64 at the time of writing)."""
    for n in (1000, 512, 256, 128, 64):
        try:
            EmulatorConfig(rx_chans=n).validate()
            return n
        except ValueError as exc:
            m = re.search(r"1\.\.(\d+)", str(exc))
            if m:
                return int(m.group(1))
    return 8


def pin(cpu: int | None) -> Callable[[], None] | None:
    if cpu is None or not hasattr(os, "sched_setaffinity"):
        return None
    return lambda: os.sched_setaffinity(0, {cpu})


def pin_self(cpu: int) -> None:
    """Pin every thread of this process (threads created later inherit it)."""
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(int(tid), {cpu})


class Emulator:
    """One emulator process (``python -m streamkit.io.kiwi_emulator``) on its own core."""

    def __init__(self, chans: int, cpu: int | None, log_lines: int = 200) -> None:
        self.cmd = [sys.executable, "-m", "streamkit.io.kiwi_emulator", "--host", "127.0.0.1", "--port", "0", "--rx-chans", str(chans)]
        self.proc = subprocess.Popen(self.cmd, cwd=str(REPO), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, preexec_fn=pin(cpu), start_new_session=True)  # fmt: skip
        self.lines: deque[str] = deque(maxlen=log_lines)
        self.notable: deque[str] = deque(maxlen=50)  # all but the per-connection open/close chatter
        self.port: int | None = None
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, name="emulator-stderr", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        boring = re.compile(r"connection (open|closed)|: connection \d+ (from|ended \(client closed\))|listening on")
        for line in self.proc.stderr:
            self.lines.append(line.rstrip())
            if not boring.search(line):
                self.notable.append(line.rstrip())
            if self.port is None:
                m = re.search(r"listening on ws://[^:]+:(\d+)/", line)
                if m:
                    self.port = int(m.group(1))
                    self._ready.set()
        self._ready.set()

    def wait_ready(self, timeout: float = 60.0) -> int:
        self._ready.wait(timeout)
        if self.port is None:
            raise RuntimeError(f"emulator did not start ({' '.join(self.cmd)}): " + " | ".join(list(self.lines)[-5:]))
        return self.port

    def cpu_s(self) -> float:
        try:
            u, s = proc_times(self.proc.pid)
            return u + s
        except OSError:
            return float("nan")

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@contextlib.contextmanager
def emulators(n_stations: int, limit: int, cpu: int | None) -> Iterator[list[Emulator]]:
    emus: list[Emulator] = []
    try:
        shards = max(1, math.ceil(n_stations / limit))
        per = math.ceil(n_stations / shards)
        for _ in range(shards):
            emus.append(Emulator(min(limit, per), cpu))
        for e in emus:
            e.wait_ready()
        yield emus
    finally:
        for e in emus:
            e.stop()
