"""A Python viewer of the live view's WebSocket, for tests: counts what it receives until the connection ends."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from streamkit.web import frames


class WsTally:
    """Rows and audio samples per station index, gap rows, message types, the last status."""

    def __init__(self) -> None:
        self.rows: Counter[int] = Counter()
        self.audio: Counter[int] = Counter()
        self.gap_rows = 0
        self.types: set[str] = set()
        self.status: dict[str, Any] | None = None

    def read(self, ws: Any, timeout: float = 15.0) -> None:
        """Receive until the connection ends or nothing comes for ``timeout`` seconds (run it on a thread)."""
        try:
            while True:
                self.take(ws.recv(timeout=timeout))
        except Exception:
            pass

    def take(self, m: bytes | str) -> None:
        if isinstance(m, bytes):
            for d in frames.decode_all(m):
                if isinstance(d, tuple):
                    self.rows[d[0]] += len(d[1])
                    self.gap_rows += sum(r.gap for r in d[1])
                else:
                    self.audio[d.station] += d.samples.size
            return
        j = json.loads(m)
        self.types.add(j["type"])
        if j["type"] == "status":
            self.status = j
