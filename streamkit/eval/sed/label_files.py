"""DCASE task 4 label files (tab-separated, UTF-8, an optional header line) and the strong-label
containers every SED scorer takes.

* *strong*: ``filename  onset  offset  event_label``, times in seconds. A row with the filename
  only (or with the three other fields empty, as DCASE submissions write it) declares a file with
  no events, so empty clips are not lost;
* *weak*: ``filename  event_labels``, the clip tags comma-separated (empty: no event).

Readers check every row (field count, finite times, ``0 <= onset < offset``, a known class, no
duplicate weak rows) and raise :class:`ValueError` naming the source and the 1-based line number.
Strong labels are held per file, ``{filename: [Event, ...]}`` in first-seen order (:data:`EventsByFile`);
every scorer takes that mapping, a flat iterable of :class:`Event` or a TSV path
(:func:`events_by_file`). Neither sed_eval nor sed_scores_eval is needed here.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from streamkit.data.sed_corpus import CLASSES
from streamkit.io.outputs import write_text

__all__ = ["Event", "EventsByFile", "EventsLike", "PathLike", "events_by_file", "parse_strong", "parse_weak", "read_strong_tsv",
           "read_weak_tsv", "strong_tsv_text", "weak_from_strong", "weak_tsv_text", "write_strong_tsv", "write_weak_tsv"]  # fmt: skip

STRONG_HEADER = ("filename", "onset", "offset", "event_label")
WEAK_HEADER = ("filename", "event_labels")


@dataclass(frozen=True)
class Event:
    """One strongly labelled event (times in seconds)."""

    filename: str
    onset: float
    offset: float
    event_label: str

    def as_sed_eval(self) -> dict[str, Any]:
        return {"filename": self.filename, "event_onset": float(self.onset), "event_offset": float(self.offset), "event_label": self.event_label}


EventsByFile = dict[str, list[Event]]
"""Strong labels per file, first-seen order; a file may have no events."""

PathLike = str | os.PathLike[str]
EventsLike = Mapping[str, Sequence[Event]] | Iterable[Event] | PathLike


def _lines(src: PathLike | TextIO | Iterable[str], source: str | None) -> tuple[Iterable[str], str]:
    if isinstance(src, (str, os.PathLike)):
        p = Path(src)
        return p.read_text(encoding="utf-8").splitlines(), source or str(p)
    if isinstance(src, io.TextIOBase) or hasattr(src, "read"):
        return src.read().splitlines(), source or getattr(src, "name", "<stream>")  # type: ignore[union-attr]
    return src, source or "<lines>"


def _check_label(label: str, classes: Sequence[str] | None, where: str) -> str:
    if not label:
        raise ValueError(f"{where}: empty event label")
    if classes is not None and label not in classes:
        raise ValueError(f"{where}: unknown class {label!r}; one of {', '.join(classes)}")
    return label


def _time(text: str, name: str, where: str) -> float:
    try:
        t = float(text)
    except ValueError:
        raise ValueError(f"{where}: {name} {text!r} is not a number") from None
    if not math.isfinite(t):
        raise ValueError(f"{where}: {name} {text!r} is not finite")
    return t


def _check_event(filename: str, onset: float, offset: float, label: str, classes: Sequence[str] | None, where: str) -> Event:
    if not filename:
        raise ValueError(f"{where}: empty filename")
    if not (math.isfinite(onset) and math.isfinite(offset)):
        raise ValueError(f"{where}: onset/offset must be finite, got {onset!r}, {offset!r}")
    if onset < 0:
        raise ValueError(f"{where}: negative onset {onset}")
    if not onset < offset:
        raise ValueError(f"{where}: onset {onset} must be < offset {offset}")
    return Event(filename, float(onset), float(offset), _check_label(label, classes, where))


def parse_strong(lines: Iterable[str], *, source: str = "<lines>", classes: Sequence[str] | None = CLASSES) -> EventsByFile:
    """Parse strong DCASE TSV lines (header optional) into ``{filename: [Event, ...]}``."""
    out: EventsByFile = {}
    for no, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        where = f"{source}:{no}"
        f = line.split("\t")
        if no == 1 and tuple(x.strip() for x in f) == STRONG_HEADER:
            continue
        if len(f) == 1 or (len(f) == 4 and not any(x.strip() for x in f[1:])):
            name = f[0].strip()
            if not name:
                raise ValueError(f"{where}: empty filename")
            out.setdefault(name, [])
            continue
        if len(f) != 4:
            raise ValueError(f"{where}: expected 4 tab-separated fields (filename, onset, offset, event_label), got {len(f)}: {line!r}")
        name, label = f[0].strip(), f[3].strip()
        ev = _check_event(name, _time(f[1].strip(), "onset", where), _time(f[2].strip(), "offset", where), label, classes, where)
        out.setdefault(name, []).append(ev)
    return out


def parse_weak(lines: Iterable[str], *, source: str = "<lines>", classes: Sequence[str] | None = CLASSES) -> dict[str, frozenset[str]]:
    """Parse weak DCASE TSV lines (header optional) into ``{filename: frozenset(tags)}``."""
    out: dict[str, frozenset[str]] = {}
    for no, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        where = f"{source}:{no}"
        f = line.split("\t")
        if no == 1 and tuple(x.strip() for x in f) == WEAK_HEADER:
            continue
        if len(f) > 2:
            raise ValueError(f"{where}: expected 2 tab-separated fields (filename, event_labels), got {len(f)}: {line!r}")
        name = f[0].strip()
        if not name:
            raise ValueError(f"{where}: empty filename")
        if name in out:
            raise ValueError(f"{where}: duplicate row for {name!r}")
        tags = [t.strip() for t in f[1].split(",")] if len(f) == 2 and f[1].strip() else []
        out[name] = frozenset(_check_label(t, classes, where) for t in tags)
    return out


def read_strong_tsv(src: PathLike | TextIO | Iterable[str], *, classes: Sequence[str] | None = CLASSES, source: str | None = None) -> EventsByFile:
    """Read a strong label file (path, open text file or lines); see :func:`parse_strong`."""
    lines, name = _lines(src, source)
    return parse_strong(lines, source=name, classes=classes)


def read_weak_tsv(
    src: PathLike | TextIO | Iterable[str], *, classes: Sequence[str] | None = CLASSES, source: str | None = None
) -> dict[str, frozenset[str]]:
    """Read a weak label file (path, open text file or lines); see :func:`parse_weak`."""
    lines, name = _lines(src, source)
    return parse_weak(lines, source=name, classes=classes)


def events_by_file(events: EventsLike, *, classes: Sequence[str] | None = CLASSES) -> EventsByFile:
    """Normalise a mapping, a flat iterable of :class:`Event` or a TSV path to :data:`EventsByFile`,
    checking every event (onset < offset, finite, known class)."""
    if isinstance(events, (str, os.PathLike)):
        return read_strong_tsv(events, classes=classes)
    out: EventsByFile = {}
    if isinstance(events, Mapping):
        for name, evs in events.items():
            lst = out.setdefault(str(name), [])
            for i, e in enumerate(evs):
                if e.filename != name:
                    raise ValueError(f"{name!r} event {i}: filename {e.filename!r} differs from its key")
                lst.append(_check_event(e.filename, e.onset, e.offset, e.event_label, classes, f"{name!r} event {i}"))
        return out
    for i, e in enumerate(events):
        out.setdefault(e.filename, []).append(_check_event(e.filename, e.onset, e.offset, e.event_label, classes, f"event {i} ({e.filename!r})"))
    return out


def weak_from_strong(events: EventsLike, *, classes: Sequence[str] | None = CLASSES) -> dict[str, frozenset[str]]:
    """Clip tags of strong labels (files without events get an empty set)."""
    return {name: frozenset(e.event_label for e in evs) for name, evs in events_by_file(events, classes=classes).items()}


def _fmt(t: float, decimals: int) -> str:
    return f"{t:.{decimals}f}"


def strong_tsv_text(events: EventsLike, *, decimals: int = 3, header: bool = True, classes: Sequence[str] | None = CLASSES) -> str:
    """Strong TSV text; events sorted by (onset, label) per file, files in first-seen order; a file
    with no events is written as a filename-only row so that it survives a round trip."""
    lines = ["\t".join(STRONG_HEADER)] if header else []
    for name, evs in events_by_file(events, classes=classes).items():
        if not evs:
            lines.append(name)
        for e in sorted(evs, key=lambda e: (e.onset, e.event_label, e.offset)):
            lines.append(f"{name}\t{_fmt(e.onset, decimals)}\t{_fmt(e.offset, decimals)}\t{e.event_label}")
    return "\n".join(lines) + "\n"


def weak_tsv_text(tags: Mapping[str, Iterable[str]], *, header: bool = True, classes: Sequence[str] | None = CLASSES) -> str:
    """Weak TSV text, tags sorted and comma-separated."""
    lines = ["\t".join(WEAK_HEADER)] if header else []
    for name, t in tags.items():
        ts = sorted(set(t))
        for x in ts:
            _check_label(x, classes, f"{name!r}")
        lines.append(f"{name}\t{','.join(ts)}")
    return "\n".join(lines) + "\n"


def write_strong_tsv(path: PathLike, events: EventsLike, **kw: Any) -> Path:
    return write_text(path, strong_tsv_text(events, **kw))


def write_weak_tsv(path: PathLike, tags: Mapping[str, Iterable[str]], **kw: Any) -> Path:
    return write_text(path, weak_tsv_text(tags, **kw))
