"""What every ``streamkit`` command shares: exit statuses, the user-facing error, the command registration, output helpers.

Every command is registered the same way, by :func:`add_command`: a sub-parser of its family's
parser, whose options are added by an ``arguments(parser)`` function when that command is parsed
(not when the whole parser is built), and whose ``func`` default runs it. Both may be named as
``"module:function"``, imported only when the command runs: the trainers import torch, the
emulator websockets, and ``streamkit --help`` imports neither.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from streamkit.core.errors import StreamkitError
from streamkit.core.graph import Graph
from streamkit.core.runtime import Runner

EXIT_USAGE = 2
EXIT_RUNTIME = 1
EXIT_CONSOLE_LOST = 3

#: a command's options (``arguments(parser)``) or its runner (``run(namespace) -> int``), or ``"module:function"`` naming one
Ref = Callable[..., Any] | str


class CliError(StreamkitError):
    """A user-facing error: printed as one line."""


def error(msg: str) -> None:
    """One ``streamkit: error: ...`` line on stderr (a command's own error report; it returns its status)."""
    print(f"streamkit: error: {msg}", file=sys.stderr)


# --------------------------------------------------------------------------- command registration
def resolve(ref: Ref) -> Callable[..., Any]:
    """A callable, or the function a ``"module:function"`` string names (imported now)."""
    if callable(ref):
        return ref
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


class CommandParser(argparse.ArgumentParser):
    """The parser of one command: its options are added the first time it parses (or prints its help)."""

    def __init__(self, *args: Any, arguments: Ref | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._arguments = arguments

    def _add_arguments(self) -> None:
        if self._arguments is not None:
            add, self._arguments = resolve(self._arguments), None
            add(self)

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None) -> Any:
        self._add_arguments()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self._add_arguments()
        return super().format_help()


class _Run:
    """A command's ``func``: its runner, imported when called."""

    def __init__(self, run: Ref) -> None:
        self.run = run

    def __call__(self, a: argparse.Namespace) -> int:
        return int(resolve(self.run)(a) or 0)


def commands(parser: argparse.ArgumentParser, dest: str, metavar: str = "COMMAND", required: bool = False) -> Any:
    """The sub-parsers action of ``parser``: :func:`add_command` registers each command on it."""
    return parser.add_subparsers(dest=dest, metavar=metavar, required=required, parser_class=CommandParser)


def add_command(sub: Any, name: str, *, help: str, description: str, arguments: Ref | None = None, run: Ref | None = None) -> CommandParser:
    """Register command ``name`` on ``sub``: ``arguments(parser)`` adds its options when it is parsed, ``run(namespace)`` runs it.

    A family of commands (``train``, ``corpus``...) gives no ``run``: its ``arguments`` registers the
    family's commands on ``commands(parser, ...)``.
    """
    p: CommandParser = sub.add_parser(name, help=help, description=description, arguments=arguments)
    if run is not None:
        p.set_defaults(func=_Run(run))
    return p


# --------------------------------------------------------------------------- output helpers
def registry_block(name: str, **params: Any) -> Any:
    from streamkit.core.registry import lookup

    return lookup(name)(**params)


def add_event_outputs(g: Graph, events: str | None, console: bool) -> Any:
    """Subscribe the JSONL event file and the console view; returns the console sink (or ``None``)."""
    if events:
        p = Path(events)
        if p.suffix != ".jsonl":
            from streamkit.io.filenames import safe_filename

            p = p / f"{safe_filename(g.name)}.jsonl"
        g.subscribe(registry_block("io.jsonl_events", path=str(p)))
    if console:
        sink = registry_block("io.console")
        g.subscribe(sink)
        return sink
    return None


def say(out: Any, text: str) -> None:
    """One line to a ConsoleOut: escaped, and never a traceback when the reader is gone."""
    from streamkit.io.textsafe import printable

    out.write(printable(text) + "\n")
    out.flush()


def exit_status(out: Any, stats: list[dict[str, Any]]) -> int:
    """0, or EXIT_CONSOLE_LOST when the console lost its reader: ``out`` (a ConsoleOut or a console
    sink) was closed (its own stderr line said so), or the console was still blocked at the end."""
    if out is not None and (getattr(out, "lost", None) or getattr(out, "output_lost", None)):
        return EXIT_CONSOLE_LOST
    if any(st.get("event_sinks_left_behind") for st in stats):
        print("streamkit: console output stalled (stdout not being read): the live view was left behind; the run completed "
              "and its event files are complete", file=sys.stderr)  # fmt: skip
        return EXIT_CONSOLE_LOST
    return 0


def run_graph(g: Graph, mode: Any, duration: float | None, chunk_ms: float, threads: int = 1) -> dict[str, Any]:
    r = Runner(g, mode, duration=duration, chunk_s=chunk_ms / 1000.0, threads=threads)
    return r.run()


# --------------------------------------------------------------------------- the live view (--web)
WEB_HELP = ("serve the live view (spectrogram, timeline, events, audio) at [HOST:]PORT while it runs; default host 127.0.0.1 "
            "(this machine only); any other host needs the access token the printed URL carries; port 0 picks a free one")  # fmt: skip


def add_web_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--web", default=None, metavar="[HOST:]PORT", help=WEB_HELP)


def live_view(a: argparse.Namespace) -> Any:
    """The :class:`~streamkit.web.attach.LiveView` of ``--web`` (not started yet), or ``None``."""
    if getattr(a, "web", None) is None:
        return None
    from streamkit.core.errors import ConfigError
    from streamkit.web.attach import LiveView

    try:
        return LiveView(a.web)
    except ConfigError as exc:
        raise CliError(str(exc)) from None


def start_web(view: Any, out: Any) -> None:
    """Start a :class:`~streamkit.web.attach.LiveView` and print its URL (a :class:`CliError` when it cannot listen)."""
    from streamkit.core.errors import ConfigError

    try:
        url = view.start()
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    say(out, f"live view: {url}")


def web_summary(out: Any, view: Any) -> None:
    """Close the live view; one line on what its viewers got and lost."""
    r = view.close()
    if r.get("viewers") or r.get("refused"):
        lost = (
            f", {r['dropped_frames']} frame(s) dropped and {r['missed_rows']} row(s) missed by slow viewers"
            if r["dropped_frames"] or r["missed_rows"]
            else ""
        )
        refused = f", {r['refused']} request(s) refused (no or wrong token)" if r["refused"] else ""
        say(out, f"live view: {r['viewers']} viewer(s), {r['bytes_sent'] / 1e3:.0f} kB sent{lost}{refused}")


def summary_line(st: dict[str, Any]) -> str:
    """One line per run: stream and wall seconds, RT factor, gaps, xruns and events."""
    rtf = st.get("rtf_total")
    return (
        f"{st['graph']}: {st['stream_s']:.2f} s of stream in {st['wall_s']:.2f} s, RT factor {rtf:.4f}, " if rtf is not None else f"{st['graph']}: "
    ) + (f"gaps {st['gaps']}, xruns {st['xruns']}, events {sum(st.get('events', {}).values())}")
