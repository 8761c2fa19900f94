"""ConsoleSink: a live console view of a running graph, and a summary at the end.

Two renderings of the same state, chosen when the run starts:

* **rich** (a terminal): a :class:`rich.live.Live` panel redrawn at most 4 times a second with the
  stream time, the RT factor in total and per block (from ``graph.stats``), gap / xrun / reconnect
  counters, a level meter when ``level.update`` events arrive, and the last few events as readable
  lines.
* **plain** (CI logs, pipes, files): one readable line per event as it arrives, plus a one-line
  stats summary at most every ``plain_interval_s`` seconds. Lines are rate-limited
  (``max_lines_per_s``) so an xrun storm cannot flood a log; suppressed lines are counted and
  reported.

At close both print a final summary table from the last ``graph.stats`` event (the runtime emits a
full ``Runner.stats()`` as its last one): per-block RT factor, calls, errors and first-call time,
the totals, gaps by cause and events by kind.

Subscribe it to everything (``g.subscribe(ConsoleSink())``); it needs ``graph.stats`` for the RT
factors and ``stream.*`` for the counters, and hides ``quiet_kinds`` from the event lines.

What reaches the terminal is safe and never holds the run up: text from events (a server's
messages among them) goes through :func:`~streamkit.io.textsafe.printable` and, in rich mode, into
:class:`rich.text.Text` (never markup); the sink runs on its own thread with a bounded queue
(``may_drop``), so a terminal that stops reading stalls only the console; and it writes through a
:class:`~streamkit.io.console_out.ConsoleOut`, so a closed pipe ends the output with one line on
stderr (``output_lost``) instead of a traceback per write.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from typing import IO, Any

from streamkit.core import events as E
from streamkit.core.block import EventSink
from streamkit.core.errors import ConfigError
from streamkit.core.events import Event, kind_matches
from streamkit.core.registry import register
from streamkit.io.console_out import ConsoleOut, console_out
from streamkit.io.textsafe import printable

__all__ = ["ConsoleSink", "format_event", "format_summary"]

_MODES = ("auto", "rich", "plain")


# ------------------------------------------------------------------------------------ formatting
def _fields(payload: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(payload) and not isinstance(payload, type):
        return {f.name: getattr(payload, f.name) for f in dataclasses.fields(payload)}
    if isinstance(payload, Mapping):
        return dict(payload)
    if payload is None:
        return {}
    return {"value": payload}


def _num(v: Any, fmt: str = "{:.3g}") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return fmt.format(v)
    return str(v)


def _clock(ns: int | None) -> str:
    if ns is None:
        return "--:--:--.---"
    t = _dt.datetime.fromtimestamp(ns / 1e9, tz=_dt.timezone.utc)
    return t.strftime("%H:%M:%S.") + f"{t.microsecond // 1000:03d}"


def _hms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = max(0.0, float(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{int(h):02d}:{int(m):02d}:{sec:04.1f}"


def _payload_text(kind: str, p: dict[str, Any]) -> str:
    if kind == E.STREAM_GAP:
        lost = "unknown number of" if p.get("lost") is None else str(p.get("lost"))
        extra = f" ({p['detail']})" if p.get("detail") else ""
        filled = ", zero-filled" if p.get("filled") else ""
        return f"{lost} items lost ({p.get('cause', '?')}{filled}); gap #{p.get('count', '?')}, {p.get('total_lost', '?')} lost in all{extra}"
    if kind == E.STREAM_XRUN:
        return f"device overflow #{p.get('count', '?')} ({p.get('flags', '')})"
    if kind in (E.SOURCE_STATE, E.GRAPH_STATE):
        s = str(p.get("state", ""))
        if p.get("retry_in_s") is not None:
            s += f" (retry in {float(p['retry_in_s']):.1f} s, attempt {p.get('attempt', 0)})"
        return s + (f": {p['detail']}" if p.get("detail") else "")
    if kind == E.BLOCK_ERROR:
        return f"{p.get('error', 'error')}: {p.get('message', '')} (policy {p.get('policy', '?')}, {p.get('consecutive', 1)} in a row)"
    if kind == E.STREAM_END:
        return f"{p.get('reason', 'end')} after {p.get('items', '?')} items"
    if kind == E.STREAM_FORMAT:
        spec = p.get("spec", {})
        return (
            f"format now {spec.get('rate', '?')} Hz x{spec.get('channels', '?')} {spec.get('dtype', '')}" if isinstance(spec, Mapping) else str(spec)
        )
    if kind == E.LEVEL:
        return f"rms {_num(p.get('rms_dbfs'), '{:.1f}')} dBFS, peak {_num(p.get('peak_dbfs'), '{:.1f}')} dBFS"
    if "text" in p:  # asr.partial / asr.final and the like
        rest = " ".join(f"{k}={_short(v)}" for k, v in p.items() if k in ("lang", "conf", "confidence", "label", "score"))
        return f'"{p["text"]}"' + (f" {rest}" if rest else "")
    if {"start_s", "end_s"} <= p.keys():
        who = p.get("detector") or p.get("label") or ""
        score = f" score {_num(p.get('score'), '{:.2f}')}" if "score" in p else ""
        return f"{who} {float(p['start_s']):.2f}-{float(p['end_s']):.2f} s{score}".strip()
    return " ".join(f"{k}={_short(v)}" for k, v in p.items() if k != "traceback")


def _short(v: Any, limit: int = 40) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    s = str(v.value if hasattr(v, "value") and not isinstance(v, (dict, list)) else v)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def format_event(ev: Event, width: int = 160) -> str:
    """One readable line: ``UTC time  kind  source [span]  what happened``, control characters escaped."""
    try:
        text = _payload_text(ev.kind, _fields(ev.payload))
    except Exception:  # a strange payload must not break the console
        text = repr(ev.payload)
    span = f"[{ev.span[0]}]" if ev.span[0] == ev.span[1] else f"[{ev.span[0]}, {ev.span[1]})"
    line = f"{_clock(ev.t_start_ns if ev.t_start_ns is not None else ev.emitted_ns)}  {ev.kind:<13} {ev.source:<10} {span:<18} {text}"
    line = printable(line)  # a server's text must not act on the terminal (escape sequences, forged lines)
    return line if len(line) <= width else line[: width - 1] + "…"


def _rtf(v: Any) -> str:
    return "-" if v is None else f"{float(v):.4f}"


def _summary_rows(stats: Mapping[str, Any]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    first = stats.get("first_call_ms", {}) or {}
    for name, b in (stats.get("blocks") or {}).items():
        b = b or {}
        fc = b.get("first_call_ms", first.get(name))
        rows.append((printable(name), _rtf(b.get("rtf")), str(b.get("calls", "-")), str(b.get("items_in", "-")), str(b.get("errors", 0)),
                     "-" if fc is None else f"{float(fc):.1f}", "-" if b.get("start_ms") is None else f"{float(b['start_ms']):.1f}"))  # fmt: skip
    return rows


def _totals(stats: Mapping[str, Any], own_events: Mapping[str, int], suppressed: int) -> list[tuple[str, str]]:
    gaps = stats.get("gaps_by_cause") or {}
    events = stats.get("events") or dict(own_events)
    items = [
        ("state", printable(str(stats.get("state", "?")) + (f" ({stats['fatal']})" if stats.get("fatal") else ""))),
        ("stream time", f"{_hms(stats.get('stream_s'))} ({float(stats.get('stream_s') or 0.0):.2f} s)"),
        ("wall time", f"{float(stats.get('wall_s') or 0.0):.2f} s"),
        ("RT factor", f"{_rtf(stats.get('rtf_total'))} (incl. first calls {_rtf(stats.get('rtf_total_incl_first_call'))})"),
        ("gaps", f"{stats.get('gaps', 0)}" + (" (" + ", ".join(f"{k} {v}" for k, v in sorted(gaps.items())) + ")" if gaps else "")),
        ("dropped items", str(stats.get("dropped_items", 0))),
        ("xruns", str(stats.get("xruns", 0))),
        ("reconnects", str(stats.get("reconnects", 0))),
        ("events", printable(", ".join(f"{k} {v}" for k, v in sorted(events.items())) or "none")),
    ]
    if stats.get("events_dropped"):
        items.append(("events dropped", str(stats["events_dropped"])))
    for sink, n in sorted((stats.get("events_dropped_by_sink") or {}).items()):
        items.append((f"events {sink} missed", f"{n} (it fell behind; the event files have them all)"))
    if suppressed:
        items.append(("console lines suppressed", str(suppressed)))
    return items


def format_summary(stats: Mapping[str, Any], own_events: Mapping[str, int] | None = None, suppressed: int = 0) -> str:
    """The end-of-run summary as plain text (per-block table, then totals)."""
    rows = _summary_rows(stats)
    head = ("block", "rtf", "calls", "items in", "errors", "first call ms", "start ms")
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    lines = [printable(f"== summary: graph {stats.get('graph', '?')} ({stats.get('mode', '?')}) ==")]
    if rows:
        lines.append("  " + "  ".join(h.ljust(widths[i]) if i == 0 else h.rjust(widths[i]) for i, h in enumerate(head)))
        for r in rows:
            lines.append("  " + "  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)))
    for k, v in _totals(stats, own_events or {}, suppressed):
        lines.append(f"  {k + ':':<16} {v}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ the sink
@register("io.console")
class ConsoleSink(EventSink):
    """Show a running graph on the console; print a summary when it stops.

    Ports:
        None (an event subscriber, outside the data path).
    Parameters:
        mode: ``"auto"`` (default: rich for a TTY, plain otherwise), ``"rich"`` or ``"plain"``.
        file: where to write (default ``sys.stdout``); not a graph-file parameter.
        quiet_kinds: kind patterns counted but not printed as lines (default ``("level.*",)``).
        plain_interval_s: seconds between stats lines in plain mode (default 5 s).
        refresh_hz: redraws per second of the rich panel (capped at 4).
        max_events: event lines kept in the rich panel (default 8).
        max_lines_per_s: plain-mode line budget per second; the excess is counted and reported.
        width: console width for rich mode (default: the terminal's).
    Tags:
        None.
    Events:
        Reads ``graph.stats`` (RT factors, counters, the final summary), ``stream.gap``,
        ``stream.xrun``, ``source.state`` (counters between stats), ``level.update`` (level meter)
        and prints every other kind as a line.
    Latency:
        Display only: at most 1/refresh_hz s behind in rich mode, none in plain mode.
    State:
        The last stats, counters, recent lines; reset at ``open()``.
    """

    may_drop = True  # its own thread and queue: a stalled terminal never holds up the event files
    active_mode: str  #: "rich" or "plain", decided at open()
    _graph: str
    _state: str
    _stats: dict[str, Any]
    _final: dict[str, Any] | None
    _events: Counter[str]
    _gaps: Counter[str]
    _xruns: int
    _retries: int
    _level: tuple[Any, Any, float] | None
    _recent: deque[tuple[str, str]]
    _last_plain_stats: float
    _budget_t: float
    _budget: float
    _suppressed: int
    _suppressed_since: int

    def __init__(
        self,
        *,
        mode: str = "auto",
        file: IO[str] | None = None,
        quiet_kinds: Iterable[str] = ("level.*",),
        plain_interval_s: float = 5.0,
        refresh_hz: float = 4.0,
        max_events: int = 8,
        max_lines_per_s: float = 50.0,
        width: int | None = None,
    ) -> None:
        self._init_params.pop("file", None)  # a stream is not a graph-file parameter
        if mode not in _MODES:
            raise ConfigError(f"mode must be one of {list(_MODES)}, got {mode!r}")
        if isinstance(quiet_kinds, str):
            quiet_kinds = (quiet_kinds,)
        self.mode = mode
        self.file = file
        self.quiet_kinds = tuple(str(k) for k in quiet_kinds)
        self.plain_interval_s = float(plain_interval_s)
        if not self.plain_interval_s > 0:
            raise ConfigError(f"plain_interval_s must be > 0, got {plain_interval_s!r}")
        self.refresh_hz = min(4.0, float(refresh_hz))
        if not self.refresh_hz > 0:
            raise ConfigError(f"refresh_hz must be > 0, got {refresh_hz!r}")
        self.max_events = int(max_events)
        self.max_lines_per_s = float(max_lines_per_s)
        self.width = width
        self._lock = threading.Lock()
        self._live: Any = None
        self._console: Any = None
        self._o: ConsoleOut | None = None
        self._reset("graph")

    # -- EventSink --------------------------------------------------------------------------------
    @property
    def output_lost(self) -> str | None:
        """Why console output stopped (its reader closed it, ...), or ``None``."""
        return self._o.lost if self._o is not None else None

    def open(self, graph_name: str) -> None:
        self._reset(graph_name)
        self._o = out = console_out(self.file if self.file is not None else sys.stdout)
        rich_mode = self.mode == "rich" or (self.mode == "auto" and _isatty(out))
        self.active_mode = "rich" if rich_mode else "plain"
        if rich_mode:
            from rich.console import Console
            from rich.live import Live

            self._console = Console(file=out, force_terminal=True if self.mode == "rich" else None, width=self.width)  # type: ignore[arg-type]
            is_std = out.is_stdout
            self._live = Live(get_renderable=self._render, console=self._console, refresh_per_second=self.refresh_hz,
                              transient=False, redirect_stdout=is_std, redirect_stderr=is_std)  # fmt: skip
            self._live.start()
        else:
            self._write(f"streamkit: graph {graph_name} running (events below; stats every {self.plain_interval_s:g} s)")

    def handle(self, event: Event) -> None:
        kind = event.kind
        now = time.monotonic()
        line: str | None = None
        stats_line: str | None = None
        with self._lock:
            self._events[kind] += 1
            p = event.payload
            if kind == E.GRAPH_STATS:
                st = _fields(p)
                self._stats = st
                if "first_call_ms" in st:  # the full Runner.stats() the runtime emits last
                    self._final = st
                if self.active_mode == "plain" and (now - self._last_plain_stats >= self.plain_interval_s):
                    self._last_plain_stats = now
                    stats_line = self._stats_line()
                if self.active_mode == "plain" and stats_line is None:
                    return
            else:
                f = _fields(p)
                if kind == E.STREAM_GAP:
                    self._gaps[str(f.get("cause", "?"))] += 1
                elif kind == E.STREAM_XRUN:
                    self._xruns += 1
                elif kind == E.SOURCE_STATE and str(f.get("state", "")).startswith(("retry", "reconnect")):
                    self._retries += 1
                elif kind == E.LEVEL:
                    self._level = (f.get("rms_dbfs"), f.get("peak_dbfs"), now)
                if kind == E.GRAPH_STATE:
                    self._state = str(f.get("state", self._state))
                if not kind_matches(kind, self.quiet_kinds):
                    line = format_event(event, width=self._line_width())
                    self._recent.append((kind, line))
        if self.active_mode == "plain":
            if line is not None:
                self._emit_plain(line, now)
            if stats_line is not None:
                self._write(stats_line)
        elif self._live is not None and self.output_lost:  # the terminal is gone: end the live view
            self._stop_live()

    def _stop_live(self) -> None:
        live, self._live = self._live, None
        stop_live(live)

    def close(self) -> None:
        self._stop_live()
        with self._lock:
            stats = self._final or self._stats or {}
            own = dict(self._events)
            suppressed = self._suppressed
            if not stats:
                stats = {"graph": self._graph, "state": self._state, "gaps": sum(self._gaps.values()), "gaps_by_cause": dict(self._gaps),
                         "xruns": self._xruns, "events": own}  # fmt: skip
        if self.active_mode == "rich" and self._console is not None:
            try:
                self._console.print(self._summary_table(stats, own, suppressed))
                return
            except Exception:
                pass
        self._write(format_summary(stats, own, suppressed))

    # -- state ------------------------------------------------------------------------------------
    def _reset(self, graph_name: str) -> None:
        self._graph = graph_name
        self._state = "starting"
        self._stats = {}
        self._final = None
        self._events = Counter()
        self._gaps = Counter()
        self._xruns = 0
        self._retries = 0
        self._level = None
        self._recent = deque(maxlen=max(1, self.max_events))
        self._last_plain_stats = float("-inf")
        self._budget_t = time.monotonic()
        self._budget = self.max_lines_per_s
        self._suppressed = 0
        self._suppressed_since = 0
        self.active_mode = "plain"

    # -- plain mode -------------------------------------------------------------------------------
    def _out(self) -> ConsoleOut:
        if self._o is None:
            self._o = console_out(self.file if self.file is not None else sys.stdout)
        return self._o

    def _write(self, text: str) -> None:
        out = self._out()  # never raises: a closed pipe ends the output with one line on stderr
        out.write("\n".join(printable(line) for line in text.split("\n")) + "\n")
        out.flush()

    def _emit_plain(self, line: str, now: float) -> None:
        # token bucket: max_lines_per_s lines per second, bursts up to one second's worth
        rate = self.max_lines_per_s
        if rate > 0:
            self._budget = min(rate, self._budget + (now - self._budget_t) * rate)
            self._budget_t = now
            if self._budget < 1.0:
                self._suppressed += 1
                self._suppressed_since += 1
                return
            self._budget -= 1.0
        if self._suppressed_since:
            self._write(f"... {self._suppressed_since} event line(s) suppressed (more than {rate:g}/s)")
            self._suppressed_since = 0
        self._write(line)

    def _stats_line(self) -> str:
        st = self._stats
        gaps = st.get("gaps_by_cause") or dict(self._gaps)
        g = ", ".join(f"{k} {v}" for k, v in sorted(gaps.items()))
        blocks = st.get("blocks") or {}
        worst = max(
            ((n, (b or {}).get("rtf")) for n, b in blocks.items() if (b or {}).get("rtf") is not None), key=lambda t: float(t[1] or 0.0), default=None
        )
        parts = [
            f"[stats] t={_hms(st.get('stream_s'))}",
            f"rtf={_rtf(st.get('rtf_total'))}" + (f" (max {worst[0]} {_rtf(worst[1])})" if worst else ""),
            f"gaps={st.get('gaps', sum(self._gaps.values()))}" + (f" ({g})" if g else ""),
            f"xruns={max(int(st.get('xruns') or 0), self._xruns)}",
            f"reconnects={st.get('reconnects', 0)}",
            f"dropped={st.get('dropped_items', 0)}",
        ]
        if self._level is not None and self._level[0] is not None:
            parts.append(f"level={float(self._level[0]):.1f} dBFS")
        return " | ".join(parts)

    def _line_width(self) -> int:
        # rich mode: keep the whole line, the panel ellipsises it to the terminal's width
        return 400 if self.active_mode == "rich" else 200

    # -- rich mode --------------------------------------------------------------------------------
    def _render(self) -> Any:
        from rich.console import Group
        from rich.panel import Panel
        from rich.table import Table
        from rich.text import Text

        with self._lock:
            st = dict(self._stats)
            recent = list(self._recent)
            level = self._level
            gaps = st.get("gaps_by_cause") or dict(self._gaps)
            xruns = max(int(st.get("xruns") or 0), self._xruns)
            reconnects = max(int(st.get("reconnects") or 0), 0)
            retries = self._retries
            state = st.get("state") or self._state
        head = Text()
        head.append(printable(self._graph), style="bold")
        head.append(printable(f"  {state}" + (f"  mode {st['mode']}" if st.get("mode") else "") + "  "))
        head.append(f"stream {_hms(st.get('stream_s'))}", style="cyan")
        head.append(f"  wall {float(st.get('wall_s') or 0.0):.1f} s  ")
        rtf = st.get("rtf_total")
        head.append(f"RT factor {_rtf(rtf)}", style="green" if rtf is None or rtf < 0.5 else ("yellow" if rtf < 1.0 else "bold red"))
        counters = Text()
        n_gaps = int(st.get("gaps") or sum(self._gaps.values()))
        counters.append(f"gaps {n_gaps}", style="yellow" if n_gaps else "")
        if gaps:
            counters.append(" (" + ", ".join(f"{k} {v}" for k, v in sorted(gaps.items())) + ")")
        counters.append(f"   xruns {xruns}", style="red" if xruns else "")
        counters.append(f"   reconnects {reconnects}", style="yellow" if reconnects else "")
        if retries:
            counters.append(f"   retries {retries}")
        counters.append(f"   dropped {st.get('dropped_items', 0)} items")
        parts: list[Any] = [head, counters]
        if level is not None and level[0] is not None:
            parts.append(_level_meter(level[0], level[1]))
        blocks = st.get("blocks") or {}
        if blocks:
            tb = Table(show_header=True, header_style="bold", box=None, padding=(0, 1))
            tb.add_column("block")
            tb.add_column("rtf", justify="right")
            tb.add_column("errors", justify="right")
            for name, b in blocks.items():
                b = b or {}
                errs = int(b.get("errors") or 0)
                tb.add_row(Text(printable(name)), _rtf(b.get("rtf")), Text(str(errs), style="red" if errs else ""))
            parts.append(tb)
        lines: list[Any] = []
        for kind, line in recent:  # one row per event, cut with an ellipsis rather than wrapped
            style = "red" if kind in (E.BLOCK_ERROR, E.STREAM_XRUN) else ("yellow" if kind == E.STREAM_GAP else "")
            lines.append(Text(line, style=style, no_wrap=True, overflow="ellipsis"))
        parts.append(Panel(Group(*lines) if lines else Text("no events yet", style="dim"), title="events", title_align="left"))
        return Panel(Group(*parts), title="streamkit", title_align="left")

    def _summary_table(self, stats: Mapping[str, Any], own: Mapping[str, int], suppressed: int) -> Any:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        # cells and title as Text: a name or message with [brackets] is shown as written, not read as markup
        tb = Table(title=Text(printable(f"summary: graph {stats.get('graph', self._graph)} ({stats.get('mode', '?')})")), title_justify="left")
        for h, j in (("block", "left"), ("rtf", "right"), ("calls", "right"), ("items in", "right"), ("errors", "right"),
                     ("first call ms", "right"), ("start ms", "right")):  # fmt: skip
            tb.add_column(h, justify=j)  # type: ignore[arg-type]
        for r in _summary_rows(stats):
            tb.add_row(*(Text(c) for c in r))
        tot = Table(show_header=False, box=None, padding=(0, 1))
        tot.add_column(style="bold")
        tot.add_column()
        for k, v in _totals(stats, own, suppressed):
            tot.add_row(Text(k), Text(v))
        return Group(tb, tot)


def _level_meter(rms: Any, peak: Any, floor_db: float = -100.0) -> Any:
    """A horizontal bar from ``floor_db`` to 0 dBFS, with the rms level filled and the peak marked."""
    from rich.text import Text

    width = 40
    r = float(rms)
    frac = min(1.0, max(0.0, (r - floor_db) / -floor_db))
    k = int(round(frac * width))
    bar = Text("level ")
    bar.append("█" * k, style="green" if r < -12 else ("yellow" if r < -3 else "red"))
    bar.append("░" * (width - k), style="dim")
    bar.append(f" rms {r:6.1f} dBFS")
    if peak is not None:
        bar.append(f"  peak {float(peak):6.1f} dBFS")
    return bar


def stop_live(live: Any) -> None:
    """Stop a rich ``Live`` view (None: nothing to stop); a terminal that is gone may make it raise,
    which changes nothing for the run."""
    if live is not None:
        try:
            live.stop()
        except Exception:
            pass


def _isatty(f: Any) -> bool:
    try:
        return bool(f.isatty())
    except Exception:
        return False
