"""Sample accounting of a monitored KiwiSDR stream: what the client delivered and reported lost,
against what the server(s) actually streamed.

The client side comes from a station's JSONL event file (``streamkit monitor --events DIR``):

* **delivered**: items the ``kiwi`` source passed downstream (``blocks.kiwi.items_out`` of the final
  ``graph.stats``; else the ``items`` of ``stream.end``);
* **lost**: the sum of every ``stream.gap``'s ``lost`` (sequence gaps, reconnect outages, overloads);
  a gap with an unknown count is counted apart (``unknown_gaps``);
* the stream index of every reconnect gap, which cuts the delivered stream into one segment per
  connection.

The server side is what the emulator logged for each connection that streamed: every frame built,
with its loop time, first sample index, length and fate (``sent``, ``dropped``, ``malformed:*``,
``cut``). The *expected* count, the stream the client must account for, is

* every sample the server generated on each connection but the last (sent or not);
* for each outage between two connections, the samples a receiver would have produced meanwhile:
  ``(first sample time of the next connection - last sample time of the previous) * rate``, on the
  server's clock (the client estimates the same outage on its own clock);
* on the last connection, the samples up to where the client's stream ended: its last segment's
  delivered count, walked along that connection's well-formed frames (samples of dropped or
  malformed frames on the way are expected, and must have been reported lost; a malformed frame
  the client's reports do not cover is taken as passed on, and counted apart). What the server
  sent after the client stopped (the end of a ``--duration`` run) is not part of the stream;
* when the client stopped short of the stream it asked for (``requested``), the missing remainder.

``accounted % = 100 * (delivered + lost) / expected``: 100 when every sample is either delivered or
reported lost; below when samples vanished silently (or the stream stopped early); above when more
was reported lost than happened. Reconnect outages are estimates on two clocks, so rows with
reconnects agree to within the timing of the outage, not to the sample.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ClientReport:
    """What a station's event file says about its stream."""

    delivered: int | None
    """Items the source passed downstream (None: no final statistics in the file)."""
    lost: int
    """Items reported lost (sum of the known ``lost`` of every ``stream.gap``)."""
    unknown_gaps: int = 0
    """Gaps whose loss count is unknown."""
    gaps_by_cause: dict[str, int] = field(default_factory=dict)
    reconnect_offsets: tuple[int, ...] = ()
    """Stream index of each reconnect gap (the first item of each later connection)."""
    gaps: tuple[tuple[int, int | None, str], ...] = ()
    """``(stream index, lost, cause)`` of every gap, in order."""
    retries: int = 0
    """``source.state`` ``retrying`` events (reconnect attempts, failed ones included)."""
    rate: float | None = None
    """The last sample rate the server reported (``kiwi.info``)."""
    states: tuple[tuple[str, str], ...] = ()
    """``(state, detail)`` of every ``source.state`` event, in order."""
    end_reason: str | None = None
    """``reason`` of ``stream.end`` (``duration reached``, ``end of stream``...)."""
    max_silence_s: float | None = None
    """Longest time between two consecutive events written (``emitted_ns``)."""
    events: int = 0

    @property
    def final_detail(self) -> str:
        """Detail of the last ``fatal`` state, else of the last ``closed`` or ``retrying`` one with a detail."""
        for wanted in ("fatal", "closed", "retrying"):
            for state, detail in reversed(self.states):
                if state == wanted and detail:
                    return detail
        return ""


def read_jsonl(path: str | Path) -> tuple[list[dict[str, Any]], int]:
    """The events of a JSONL file and the number of lines that are not JSON objects (e.g. a last line
    cut by a killed process)."""
    events: list[dict[str, Any]] = []
    bad = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                d = json.loads(line)
            except ValueError:
                bad += 1
                continue
            if isinstance(d, dict):
                events.append(d)
            else:
                bad += 1
    return events, bad


def client_report(events: Iterable[Mapping[str, Any]]) -> ClientReport:
    """Count a station's stream from its events (one station; the order of the file)."""
    lost = 0
    unknown = 0
    causes: Counter[str] = Counter()
    reconnects: list[int] = []
    gaps: list[tuple[int, int | None, str]] = []
    retries = 0
    rate: float | None = None
    states: list[tuple[str, str]] = []
    end_reason: str | None = None
    end_items: int | None = None
    final_out: int | None = None
    emitted: list[int] = []
    n = 0
    for ev in events:
        n += 1
        kind = ev.get("kind")
        p = ev.get("payload") or {}
        if isinstance(ev.get("emitted_ns"), int):
            emitted.append(ev["emitted_ns"])
        if kind == "stream.gap":
            cause = str(p.get("cause"))
            causes[cause] += 1
            if p.get("lost") is None:
                unknown += 1
            else:
                lost += int(p["lost"])
            span = ev.get("span") or [0, 0]
            gaps.append((int(span[0]), None if p.get("lost") is None else int(p["lost"]), cause))
            if cause == "reconnect":
                reconnects.append(int(span[0]))
        elif kind == "source.state":
            state = str(p.get("state", ""))
            states.append((state, str(p.get("detail") or "")))
            if state == "retrying":
                retries += 1
        elif kind == "kiwi.info" and p.get("sample_rate") is not None:
            rate = float(p["sample_rate"])
        elif kind == "stream.end" and ev.get("source") == "kiwi":
            end_reason = p.get("reason")
            end_items = p.get("items")
        elif kind == "graph.stats" and isinstance(p.get("blocks"), dict):
            kiwi = p["blocks"].get("kiwi") or {}
            if "items_out" in kiwi:
                final_out = int(kiwi["items_out"])
    delivered = final_out if final_out is not None else end_items
    silence = None
    if len(emitted) >= 2:
        emitted.sort()
        silence = max(b - a for a, b in zip(emitted, emitted[1:])) / 1e9
    return ClientReport(
        delivered=delivered,
        lost=lost,
        unknown_gaps=unknown,
        gaps_by_cause=dict(causes),
        reconnect_offsets=tuple(reconnects),
        gaps=tuple(gaps),
        retries=retries,
        rate=rate,
        states=tuple(states),
        end_reason=end_reason,
        max_silence_s=silence,
        events=n,
    )


@dataclass(frozen=True)
class ServerFrame:
    """One frame a server built: loop time (when its last sample was due), first sample index,
    samples, fate (``sent``, ``dropped``, ``malformed:<kind>``, ``cut``)."""

    t: float
    start: int
    n: int
    status: str = "sent"


@dataclass(frozen=True)
class ServerStream:
    """The frames of one connection that streamed, in order."""

    frames: tuple[ServerFrame, ...]

    def __post_init__(self) -> None:
        if not self.frames:
            raise ValueError("a ServerStream needs at least one frame")

    @property
    def generated(self) -> int:
        """Samples the connection's counter went through (sent, dropped, malformed or cut)."""
        last = self.frames[-1]
        return last.start + last.n

    def position_after(self, delivered: int, reported_lost: int = 0) -> tuple[int, int, int]:
        """Where a client that delivered ``delivered`` samples of this connection and reported
        ``reported_lost`` lost on it stands: ``(sample index, excess, malformed frames passed on)``.

        Every well-formed frame is delivered, in order; a dropped, cut or malformed frame is one the
        client reported lost while its report covers it; a malformed frame beyond that is taken as
        passed on (counted in the third figure: a correct client reports it lost); a dropped frame
        beyond it vanished silently (it stays expected). ``excess``: what the client delivered
        beyond the frames (0 when consistent).
        """
        d, budget, passed = delivered, reported_lost, 0
        if d <= 0:
            return 0, 0, 0
        for f in self.frames:
            if f.status != "sent":
                if budget >= f.n:
                    budget -= f.n
                    continue
                if not f.status.startswith("malformed"):
                    continue
                passed += 1
            if d <= f.n:
                return f.start + d, 0, passed
            d -= f.n
        return self.generated, d, passed

    @classmethod
    def from_frames(cls, frames: Iterable[Any]) -> ServerStream | None:
        """From the emulator's frame records (``t``, ``start_index``, ``samples``, ``status``); None
        if there are none."""
        out = tuple(ServerFrame(float(f.t), int(f.start_index), int(f.samples.shape[0]), str(f.status)) for f in frames)
        return cls(out) if out else None


@dataclass(frozen=True)
class Accounting:
    """The client's counts against the expected stream (see the module docstring)."""

    delivered: int
    lost: int
    expected: int
    covered: int
    """Expected samples over the span the client's stream covered (server side)."""
    missing_tail: int
    """Samples of the requested stream never reached (the client stopped short)."""
    accounted_pct: float | None
    """``100 * (delivered + lost) / expected``; None when nothing was expected."""
    unaccounted: int
    """``expected - delivered - lost``: > 0 vanished silently, < 0 over-reported."""
    malformed_passed: int = 0
    """Malformed frames of the last connection the client passed on instead of reporting them lost."""
    notes: tuple[str, ...] = ()


def account(client: ClientReport, streams: Sequence[ServerStream], rate: float, requested: int | None = None) -> Accounting:
    """Account for a client's stream against the server's connections.

    Args:
        client: The station's counts (:func:`client_report`).
        streams: The connections that streamed, in any order (sorted by their first frame).
        rate: The server's true sample rate (Hz).
        requested: Items the client was asked for (``--duration`` x rate); when it delivered fewer,
            the rest counts as expected and missing. None: whatever span it covered.
    """
    notes: list[str] = []
    delivered = client.delivered if client.delivered is not None else 0
    if client.delivered is None:
        notes.append("no final statistics in the event file")
    if client.unknown_gaps:
        notes.append(f"{client.unknown_gaps} gaps of unknown size")
    ordered = sorted(streams, key=lambda s: s.frames[0].t)
    covered = 0
    malformed_passed = 0
    if ordered:
        if len(client.reconnect_offsets) + 1 != len(ordered):
            notes.append(f"client saw {len(client.reconnect_offsets) + 1} connections, server streamed {len(ordered)}")
        for prev, nxt in zip(ordered, ordered[1:]):
            covered += prev.generated
            first = nxt.frames[0]
            outage_s = (first.t - first.n / rate) - prev.frames[-1].t
            covered += max(0, round(outage_s * rate))
        seg_start = client.reconnect_offsets[-1] if client.reconnect_offsets else 0
        last_segment = delivered - seg_start
        seg_lost = sum(lost or 0 for at, lost, cause in client.gaps if at >= seg_start and cause != "reconnect")
        pos, excess, passed = ordered[-1].position_after(last_segment, seg_lost)
        if passed:
            malformed_passed = passed
            notes.append(f"{passed} malformed frame(s) passed on, not reported lost")
        covered += pos
        if excess:
            notes.append(f"{excess} samples delivered beyond the last connection's frames")
    elif delivered:
        notes.append("samples delivered but no server connection streamed")
    missing = max(0, requested - delivered) if requested is not None else 0
    expected = covered + missing
    pct = 100.0 * (delivered + client.lost) / expected if expected > 0 else None
    if pct is not None and not math.isfinite(pct):
        pct = None
    return Accounting(
        delivered=delivered,
        lost=client.lost,
        expected=expected,
        covered=covered,
        missing_tail=missing,
        accounted_pct=pct,
        unaccounted=expected - delivered - client.lost,
        malformed_passed=malformed_passed,
        notes=tuple(notes),
    )
