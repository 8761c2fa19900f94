"""``streamkit`` command line: one module per family of commands.

* :mod:`streamkit.cli.monitor`: ``monitor`` (KiwiSDR stations), ``mic``, ``devices``, ``emulate kiwi``;
* :mod:`streamkit.cli.files`: ``sad``, ``eval sad``, ``transcribe``, ``sed`` over audio files;
* :mod:`streamkit.cli.graphs`: ``run``, ``bench``, ``describe``, ``blocks`` for graph files;
* :mod:`streamkit.cli.corpus`: ``corpus hf|asr|sed|real|transmission``;
* :mod:`streamkit.cli.align`: ``align`` (a reception against its transmission's markers);
* :mod:`streamkit.cli.train`: ``train sad-dnn|rnnt|rnnt-lid|sed|sed-post``;
* :mod:`streamkit.cli.index`: ``index build``, ``search`` over an archive of recordings;
* :mod:`streamkit.cli.singers`: ``singers enroll|identify`` (singer identification);
* :mod:`streamkit.cli.common`: exit statuses, errors, the command registration, output helpers.

Each family's ``add_parsers(sub)`` registers its commands with
:func:`~streamkit.cli.common.add_command`: a command's options come from its ``arguments(parser)``
function, added when that command is parsed, and its ``func`` runs it.

Every failure the user can cause (a missing file, a bad graph, an unknown device) prints one line
``streamkit: error: ...`` and exits with status 2; a crash inside a block while running exits 1
with the block and the item span named.

Exit status:

* 0: the run completed.
* 1 (``EXIT_RUNTIME``): the run failed: a block crashed, or every monitored station failed.
* 2 (``EXIT_USAGE``): bad input (arguments, files, graphs, devices).
* 3 (``EXIT_CONSOLE_LOST``): the run completed, but its console output was cut short because
  stdout was closed by its reader (``streamkit monitor | head``): one ``streamkit: console output
  lost`` line went to stderr and the run went on; event files and recordings are complete.
  Deliberately not 141 (128 + SIGPIPE, what a shell reports for a process killed by a broken
  pipe): the process was not killed and its work is done, and a small code of its own lets a
  script tell "output truncated, data complete" from a failure (1 takes precedence over it).
* 130: interrupted (Ctrl-C).

What a server sends (station errors, kick and redirect messages) is printed through
:func:`streamkit.io.textsafe.printable`: control characters are shown escaped, never acted on.
"""

from __future__ import annotations

import argparse
import sys

import streamkit
from streamkit.cli import align, corpus, files, graphs, index, monitor, singers, train
from streamkit.cli.common import EXIT_CONSOLE_LOST, EXIT_RUNTIME, EXIT_USAGE, CliError, commands
from streamkit.core.errors import BlockError, GraphFatal, StreamkitError

__all__ = ["EXIT_CONSOLE_LOST", "EXIT_RUNTIME", "EXIT_USAGE", "CliError", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The ``streamkit`` parser: every command registered, none of their options added until it is parsed."""
    p = argparse.ArgumentParser(
        prog="streamkit", description="Real-time streaming audio engine: KiwiSDR / microphone / file monitoring with detectors."
    )
    p.add_argument("--version", action="version", version=f"streamkit {streamkit.__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug messages and show tracebacks")
    sub = commands(p, "cmd")
    for family in (monitor, corpus, align, files, train, graphs, index, singers):
        family.add_parsers(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    a = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    if a.cmd is None:
        parser.print_help()
        return EXIT_USAGE
    import logging

    from streamkit.io.textsafe import SafeLogFormatter

    handler = logging.StreamHandler()  # log messages quote servers: escaped like everything else on the console
    handler.setFormatter(SafeLogFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.DEBUG if a.verbose else logging.WARNING, handlers=[handler])
    try:
        return int(a.func(a) or 0)
    except KeyboardInterrupt:
        print("streamkit: interrupted", file=sys.stderr)
        return 130
    except (BlockError, GraphFatal) as exc:
        if a.verbose:
            raise
        from streamkit.io.textsafe import printable

        print(f"streamkit: error: {printable(exc)}", file=sys.stderr)
        return EXIT_RUNTIME
    except (StreamkitError, OSError, ValueError) as exc:
        if a.verbose:
            raise
        from streamkit.io.textsafe import printable

        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"streamkit: error: {printable(msg)}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
