"""``streamkit monitor``: watch one or more KiwiSDR stations at once.

Each station runs in its own graph::

    kiwi (io.kiwi, true rate e.g. 12001.188 Hz) ─┬─> rs (dsp.resample -> 8000 Hz) -> level -> vad
                                                 └─> wav (io.wav_sink at the true rate, with --record)

All graphs share one scheduler thread (:class:`~streamkit.core.runtime.MultiRunner`) and one
asyncio loop for the WebSockets, so a process monitors many stations with two threads (plus, per
station, an event thread and a console thread). Events go to ``<events>/<station>.jsonl`` and to a
live console view (one row per station), which has its own bounded queue: a terminal that stops
reading never holds up the event files or recordings, and one that is closed ends the view with one
line on stderr while the monitor goes on.

With no station given, the built-in KiwiSDR emulator is started on loopback with its default
stations and a simulated packet loss, and monitored: the embedded default that README's first
command runs.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from streamkit.core import events as E
from streamkit.core.block import EventSink
from streamkit.core.clock import RealTime
from streamkit.core.errors import ConfigError
from streamkit.core.events import Event, event_to_dict
from streamkit.core.graph import Graph
from streamkit.core.registry import lookup
from streamkit.core.runtime import MultiRunner, Runner
from streamkit.io.console import stop_live
from streamkit.io.console_out import ConsoleOut, console_out
from streamkit.io.filenames import safe_filename
from streamkit.io.kiwi_source import parse_station, station_name
from streamkit.io.textsafe import printable

#: the stations monitored on the built-in emulator (its default signals: two speech-like
#: stations and a tone over noise at the FT8 frequency)
DEMO_STATIONS = ("127.0.0.1:{port}:7100:lsb", "127.0.0.1:{port}:14200:usb", "127.0.0.1:{port}:7074:usb")


#: detectors :func:`build_station_graph` knows
DETECTORS = ("energy", "stat", "dnn", "asr", "sed")


#: ``models.sed`` parameters of the live paths (``monitor --sed``, ``mic --sed``). A live stream is not cut
#: into clips: a full 10 s window pools whatever sounds it spans, so the weight file's clip gates (fitted on
#: 10 s clips, one window each) gain nothing there and cost segment F1 (``benchmarks/sed_long_stream.py``,
#: eval clips joined into 100 s recordings: event F1 65.48 with the gates against 65.54 without, segment F1
#: 83.81 against 85.01). The thresholds and median windows the file was tuned with stay.
LIVE_SED: dict[str, Any] = {"clip_gate": 0.0}

def sed_weights() -> Any:
    """The shipped SED weight file; a :class:`ConfigError` naming the command that trains it when this build has none."""
    import streamkit.models as models

    w = getattr(models, "SED_WEIGHTS", None)
    if w is None or not w.is_file():
        raise ConfigError(f"no shipped SED weights{f' at {w}' if w is not None else ''} in this build: train them with `streamkit train sed`")
    return w


def asr_weights() -> Path:
    """The shipped RNN-T weight file; a :class:`ConfigError` naming the command that trains it when this build has none."""
    from streamkit.models import RNNT_WEIGHTS

    if not RNNT_WEIGHTS.is_file():
        raise ConfigError(f"no shipped RNN-T weights at {RNNT_WEIGHTS} in this build: train them with `streamkit train rnnt --variant lid`")
    return RNNT_WEIGHTS


def build_station_graph(
    params: dict[str, Any],
    *,
    name: str | None = None,
    events_dir: str | Path | None = None,
    record_dir: str | Path | None = None,
    detectors: tuple[str, ...] = ("energy",),
    out_rate: int = 8000,
    asr_options: Mapping[str, Any] | None = None,
) -> Graph:
    """One station's graph: Kiwi -> resample to ``out_rate`` -> level meter -> detectors.

    ``asr_options``: more ``models.rnnt_asr`` parameters for the ``asr`` detector (e.g. ``lexicon``).
    """
    name = name or station_name(params)
    g = Graph(name)
    kiwi = g.add(lookup("io.kiwi")(**params), name="kiwi")
    head = kiwi
    if params.get("mode") in ("iq", "drm", "sas", "qam"):
        head = g.add(lookup("dsp.iq_real")(), name="demod")
        g.connect(kiwi, head)
    rs = g.add(lookup("dsp.resample")(to_hz=out_rate), name="rs")
    lvl = g.add(lookup("dsp.level")(interval_s=0.5), name="level")
    g.chain(head, rs, lvl)
    last = lvl
    for d in detectors:
        if d == "energy":
            blk = g.add(lookup("dsp.energy_vad")(), name="vad")
        elif d == "stat":
            # a score stream, no audio output: it hangs off the level meter's output (fan-out)
            sad = g.add(lookup("dsp.stat_sad")(), name="stat_sad")
            g.connect(last, sad)
            continue
        elif d == "dnn":  # the CNN-GRU SAD (models.sad_dnn), also hung off the level meter
            sad = g.add(lookup("models.sad_dnn")(), name="dnn_sad")
            g.connect(last, sad)
            continue
        elif d == "asr":  # statistical SAD as an audio pass-through -> multilingual streaming RNN-T
            gate = g.add(lookup("dsp.speech_gate")(events="stat" not in detectors), name="asr_sad")
            g.connect(last, gate)
            asr_weights()  # the block's defaults are the CLI's: the shipped weights, LID shutoff, pre-roll
            g.connect(gate, g.add(lookup("models.rnnt_asr")(**dict(asr_options or {})), name="asr"))
            continue
        elif d == "sed":  # sound event detection at 16 kHz, from the receiver's own rate (not the 8 kHz branch)
            sed_weights()
            rs16 = g.add(lookup("dsp.resample")(to_hz=16000), name="rs16")
            g.connect(head, rs16)
            g.connect(rs16, g.add(lookup("models.sed")(**LIVE_SED), name="sed"))
            continue
        else:
            raise ConfigError(f"unknown detector {d!r} (available: {', '.join(DETECTORS)})")
        g.connect(last, blk)
        last = blk
    if record_dir is not None:
        Path(record_dir).mkdir(parents=True, exist_ok=True)
        wav = g.add(lookup("io.wav_sink")(path=str(Path(record_dir) / f"{safe_filename(name)}.wav")), name="wav")
        g.connect(kiwi, wav)
    if events_dir is not None:
        g.subscribe(lookup("io.jsonl_events")(path=str(Path(events_dir) / f"{safe_filename(name)}.jsonl")))
    return g


@dataclass
class _Row:
    state: str = "starting"
    detail: str = ""
    smeter: float | None = None
    level: float | None = None
    rtf: float | None = None
    stream_s: float = 0.0
    gaps: int = 0
    lost: int = 0
    reconnects: int = 0
    events: Counter[str] = field(default_factory=Counter)
    last: str = ""
    final: dict[str, Any] | None = None


class MonitorConsole(EventSink):
    """A live table of stations (rich on a TTY, plain lines otherwise) and a final summary.

    Subscribed to every station graph (:meth:`expect` each one first); the summary is printed
    once, after the last station stops. Like ``io.console`` it runs on its own threads with a
    bounded queue (``may_drop``: a terminal that stops reading stalls only the view, never the
    event files), escapes what servers send (:func:`~streamkit.io.textsafe.printable`, rich
    ``Text`` rather than markup) and writes through a :class:`~streamkit.io.console_out.ConsoleOut`
    (a closed pipe: one line on stderr, :attr:`output_lost` set, the run goes on).
    """

    may_drop = True

    def __init__(self, *, file: IO[str] | ConsoleOut | None = None, mode: str = "auto", plain_interval_s: float = 5.0) -> None:
        self._init_params.pop("file", None)
        self.file = file
        self.mode = mode
        self.plain_interval_s = plain_interval_s
        self.rows: dict[str, _Row] = {}
        self.recent: deque[str] = deque(maxlen=10)
        self._lock = threading.Lock()
        self._expected = 0
        self._opened = 0
        self._closed = 0
        self._live: Any = None
        self._o: ConsoleOut | None = None
        self._last_plain = 0.0
        self._t0 = time.monotonic()

    def _out(self) -> ConsoleOut:
        if self._o is None:
            self._o = console_out(self.file if self.file is not None else sys.stdout)
        return self._o

    @property
    def output_lost(self) -> str | None:
        """Why console output stopped (its reader closed it, ...), or ``None``."""
        return self._o.lost if self._o is not None else None

    def expect(self, graph_name: str) -> None:
        """Announce a station before the run: its row comes in this order, and the summary waits for it."""
        with self._lock:
            self.rows.setdefault(graph_name, _Row())
            self._expected += 1

    def open(self, graph_name: str) -> None:
        with self._lock:
            self.rows.setdefault(graph_name, _Row())
            self._opened += 1
            if self._opened > 1:
                return
        # outside the lock: Live renders once as it starts, through _render, which takes it
        out = self._out()
        rich_mode = self.mode == "rich" or (self.mode == "auto" and out.isatty())
        if rich_mode:
            from rich.console import Console
            from rich.live import Live

            console = Console(file=out)  # type: ignore[arg-type]
            live = Live(get_renderable=self._render, console=console, refresh_per_second=4, transient=False)
            live.start()
            with self._lock:
                self._live = live

    def _print(self, text: str) -> None:
        out = self._out()
        out.write("\n".join(printable(line) for line in text.split("\n")) + "\n")
        out.flush()

    def handle(self, event: Event) -> None:
        line = None
        with self._lock:
            row = self.rows.setdefault(event.stream, _Row())
            row.events[event.kind] += 1
            d = event_to_dict(event)["payload"]
            k = event.kind
            if k == E.GRAPH_STATS:
                row.rtf = d.get("rtf_total")
                row.stream_s = d.get("stream_s") or row.stream_s
                if "first_call_ms" in d:
                    row.final = d
            elif k == E.SOURCE_STATE:
                row.state = d.get("state", "?")
                row.detail = d.get("detail", "")
                if row.state == "retrying":
                    row.reconnects += 1
                line = f"{event.stream}: {row.state} {row.detail}" + (f" (retry in {d['retry_in_s']:.1f} s)" if d.get("retry_in_s") else "")
            elif k == "kiwi.smeter":
                row.smeter = d.get("dbm")
            elif k == E.LEVEL:
                row.level = d.get("rms_dbfs")
            elif k == E.STREAM_GAP:
                row.gaps += 1
                row.lost += d.get("lost") or 0
                line = f"{event.stream}: GAP {d.get('cause')} lost {d.get('lost')} items at {event.span[0]} ({d.get('detail', '')})"
            elif k == E.GRAPH_STATE:
                if d.get("state") in ("stopped", "fatal"):
                    row.state = "fatal" if d.get("state") == "fatal" or row.state == "fatal" else "stopped"
            elif k in (E.STREAM_END, "kiwi.info", E.STREAM_FORMAT, "asr.partial"):
                pass  # counted only (partials would flood the log)
            elif k == "asr.final":
                line = f"{event.stream}: asr [{d.get('lang') or '?'} {d.get('confidence', 0):.2f}] {d.get('text', '')!r}"
                row.last = f"asr {d.get('lang') or '?'}"
            elif k == "lid.result":
                pass
            elif k == "sed.detection":
                line = f"{event.stream}: sed {d.get('label')} {d.get('onset_s', 0):.2f}-{d.get('offset_s', 0):.2f} s ({d.get('confidence', 0):.2f})"
                row.last = f"sed {d.get('label')}"
            else:
                span_s = ""
                if event.t_start_ns is not None and event.t_end_ns is not None:
                    span_s = time.strftime("%H:%M:%S", time.gmtime(event.t_start_ns / 1e9)) + f" +{(event.t_end_ns - event.t_start_ns) / 1e9:.2f}s"
                line = f"{event.stream}: {k} {span_s} {_brief(d)}"
                row.last = f"{k} {span_s}"
            if line is not None:
                line = printable(line)  # server text (state details, kick messages) must not act on the terminal
                self.recent.append(line)
            live = self._live
        if live is not None:
            if self.output_lost:  # the terminal is gone: end the live view, the run goes on
                self._stop_live()
            return
        if line is not None:
            self._print(line)
        if time.monotonic() - self._last_plain >= self.plain_interval_s:
            self._last_plain = time.monotonic()
            self._print(self._plain_table())

    def _stop_live(self) -> None:
        with self._lock:
            live, self._live = self._live, None
        stop_live(live)

    def close(self) -> None:
        with self._lock:
            self._closed += 1
            if self._closed < max(self._expected, self._opened):
                return
        self._stop_live()
        self._print(self.summary())

    # -- rendering -------------------------------------------------------------------------------
    def _cells(self, name: str, r: _Row) -> list[str]:
        return [
            name,
            r.state,
            f"{r.smeter:.1f}" if r.smeter is not None else "-",
            f"{r.level:.1f}" if r.level is not None else "-",
            f"{r.stream_s:.1f}",
            f"{r.rtf:.4f}" if r.rtf is not None else "-",
            f"{r.gaps} ({r.lost})",
            str(r.reconnects),
            str(r.events.get("vad.segment", 0)),
            r.last,
        ]

    _HEAD = ["station", "state", "S dBm", "level dBFS", "stream s", "RT factor", "gaps (lost)", "retries", "segments", "last event"]

    def _render(self) -> Any:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        # every cell a Text of printable(...): a station name or detail with [brackets] or escapes is shown as it is
        with self._lock:
            t = Table(title=Text(f"streamkit monitor — {len(self.rows)} station(s), {time.monotonic() - self._t0:.0f} s"))
            for h in self._HEAD:
                t.add_column(h)
            for name, r in self.rows.items():
                t.add_row(*(Text(printable(c)) for c in self._cells(name, r)))
            recent = list(self.recent)
        return Group(t, Text("\n".join(recent[-8:])))

    def _plain_table(self) -> str:
        rows = [self._HEAD] + [[printable(c) for c in self._cells(n, r)] for n, r in self.rows.items()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(self._HEAD))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows)

    def summary(self) -> str:
        lines = ["", "summary (per station):", *self._plain_table().split("\n")]
        for name, r in self.rows.items():
            if r.final:
                b = r.final.get("blocks", {})
                per = ", ".join(f"{k} {v['rtf']:.5f}" for k, v in b.items() if v.get("rtf") is not None)
                lines.append(f"  {name}: RT factor total {r.final.get('rtf_total') or 0:.5f} [{per}]; gaps {r.final.get('gaps_by_cause')}; events {dict(r.final.get('events', {}))}")
                for sink, n in (r.final.get("events_dropped_by_sink") or {}).items():
                    lines.append(f"  {name}: {n} event(s) not shown by {sink} (it fell behind; the event files have them all)")
        return "\n".join(printable(line) for line in lines)


def _brief(d: Any) -> str:
    if isinstance(d, dict):
        return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in list(d.items())[:5])
    return str(d)


def run_monitor(
    stations: list[str] | None,
    *,
    duration: float | None,
    events_dir: str | None = "events",
    record_dir: str | None = None,
    password: str = "",
    password_follows_redirect: bool = False,
    compression: bool = True,
    console: bool = True,
    console_file: IO[str] | None = None,
    emulator_faults: str | None = "drop_every=60",
    stall_s: float = 10.0,
    max_retries: int | None = None,
    detectors: tuple[str, ...] = ("energy",),
    asr_options: Mapping[str, Any] | None = None,
    live: Any = None,
    on_live: Any = None,
    index: Any = None,
) -> dict[str, Any]:
    """Monitor ``stations`` (or the built-in emulator) for ``duration`` s of stream time.

    ``index``: a :class:`~streamkit.index.live.LiveIndexer` (needs ``record_dir``) that indexes the
    recordings as they are written; it is started with the graphs and finished after them, and its
    report is the result's ``index``.

    ``live``: a :class:`~streamkit.web.attach.LiveView` to show every station in (a waterfall of the
    8 kHz audio after the level meter, and every event); it is started, once the graphs are built,
    by ``on_live(live)`` (the CLI prints its URL there) or by ``live.start()``. The caller closes it.
    """
    emu = None
    specs = list(stations or [])
    if not specs:
        from streamkit.io.kiwi_emulator import EmulatorThread

        emu = EmulatorThread()
        port = emu.start()
        if emulator_faults:
            emu.call(lambda: emu.emulator.set_faults(spec=emulator_faults))
        specs = [s.format(port=port) for s in DEMO_STATIONS]
    if index is not None and record_dir is None:
        raise ConfigError("an archive index of the recordings needs record_dir (--index needs --record DIR)")
    con = MonitorConsole(file=console_file) if console else None
    runners = []
    try:
        for s in specs:
            p = parse_station(s)
            p.update(password=password, password_follows_redirect=password_follows_redirect, compression=compression, stall_s=stall_s, max_retries=max_retries)
            g = build_station_graph(p, events_dir=events_dir, record_dir=record_dir, detectors=detectors, asr_options=asr_options)
            if con is not None:
                con.expect(g.name)
                g.subscribe(con)
            if live is not None:
                live.attach(g, tap="level", freq_khz=p.get("freq_khz"), mode=p.get("mode"), host=f"{p.get('host')}:{p.get('port')}")
            if index is not None:
                index.watch(g.name, g.blocks["wav"])
            runners.append(Runner(g, RealTime(), duration=duration, stats_interval_s=1.0))
        if live is not None:
            (on_live or (lambda v: v.start()))(live)
        mr = MultiRunner(runners)
        if index is not None:
            index.start()
        stats = mr.run()
    finally:
        if index is not None:
            index.stop()
        if emu is not None:
            emu.stop()
    index_report = index.finish() if index is not None else None
    fatal = {r.graph.name: r.graph.blocks["kiwi"].fatal_message for r in runners if getattr(r.graph.blocks["kiwi"], "fatal_message", None)}
    return {"stations": stats, "failures": mr.failures, "fatal": fatal, "emulated": emu is not None,
            "console_lost": con.output_lost if con is not None else None, "index": index_report}
