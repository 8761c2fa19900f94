"""JsonlEventSink: write events as JSON Lines, the wire format for every event consumer.

One :func:`~streamkit.core.events.event_to_json` record per line, in the order the runtime
delivered them (per-stream ``seq`` order). The file is line-buffered, so every complete event is
in the file as soon as it is handled (``tail -f`` works, and a crash loses at most the event being
written); it is flushed and closed at the end of the run. Which kinds arrive is decided by the
graph subscription (``g.subscribe(sink, kinds=("vad.*", "stream.*"))`` or ``kinds:`` in a graph
file), not by the sink.

Read a file back with :func:`read_events`.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import IO, Any

from streamkit.core.block import EventSink
from streamkit.core.errors import ConfigError
from streamkit.core.events import Event, event_to_json
from streamkit.core.registry import register
from streamkit.io.filenames import safe_filename
from streamkit.io.outputs import open_stream

__all__ = ["JsonlEventSink", "read_events"]


def read_events(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Parse a JSON Lines event file (a torn last line from a crash is skipped)."""
    out: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            if i >= len(lines) - 2:  # only the last record may be incomplete
                break
            raise
    return out


@register("io.jsonl_events")
class JsonlEventSink(EventSink):
    """Append events to a JSON Lines file.

    Ports:
        None (an event subscriber, outside the data path).
    Parameters:
        path: the file. ``{graph}`` in the path is replaced by the graph (station) name, so one graph
            file can serve many stations (``events/{graph}.jsonl``); the name is made one safe file name
            first (:func:`~streamkit.io.filenames.safe_filename`: no ``/``, no ``..``), so it cannot
            lead out of the directory. Parent directories are created.
        append: add to an existing file (default True: a restarted station keeps its history);
            False truncates it at open.
    Tags:
        None.
    Events:
        Handles every kind it is subscribed to; one line each, ``event_to_json`` format: ``kind``,
        ``stream``, ``source``, ``port``, ``span``, ``t_start_ns``, ``t_end_ns``, ``emitted_ns``,
        ``seq``, ``payload``.
    Latency:
        None added: line-buffered, each line reaches the OS when it is written.
    State:
        The open file and ``written`` (lines written this run).

    Raises:
        ConfigError: at ``open()`` when the file cannot be created.
    """

    def __init__(self, *, path: str | os.PathLike[str], append: bool = True) -> None:
        self.path = os.fspath(path)
        if not self.path:
            raise ConfigError("path must not be empty")
        self.append = bool(append)
        self.written = 0
        self.resolved_path: str | None = None
        self._f: IO[str] | None = None
        self._lock = threading.Lock()

    def open(self, graph_name: str) -> None:
        path = self.path.replace("{graph}", safe_filename(graph_name))
        p = Path(path)
        try:
            f = open_stream(p, append=self.append, buffering=1, newline="\n")  # refuses a symlink, FIFO, device ...
        except OSError as exc:
            raise ConfigError(f"io.jsonl_events: cannot open {path}: {exc.strerror or exc}") from None
        with self._lock:
            self._close_locked()
            self._f = f
            self.resolved_path = str(p)
            self.written = 0

    def handle(self, event: Event) -> None:
        line = event_to_json(event)
        with self._lock:
            if self._f is None:
                raise RuntimeError("io.jsonl_events: handle() before open() or after close()")
            self._f.write(line + "\n")
            self.written += 1

    def close(self) -> None:
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        f, self._f = self._f, None
        if f is not None:
            try:
                f.flush()
                os.fsync(f.fileno())
            except OSError:
                pass
            f.close()
