"""Graph-file commands: ``streamkit run``, ``streamkit bench``, ``streamkit describe``, ``streamkit blocks``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from streamkit.cli.common import (
    add_command,
    add_event_outputs,
    add_web_argument,
    exit_status,
    live_view,
    run_graph,
    say,
    start_web,
    summary_line,
    web_summary,
)
from streamkit.core.clock import FreeRun, parse_mode
from streamkit.core.graph import Graph
from streamkit.core.machine import machine_info
from streamkit.core.runtime import Runner


def add_parsers(sub: Any) -> None:
    add_command(sub, "run", help="run a graph file (YAML/JSON)", description="Run a graph file.", arguments=add_run_arguments, run=cmd_run)
    add_command(sub, "bench", help="per-block RT-factor table of a graph (FreeRun), written as JSON",
                description="Benchmark a graph in FreeRun: per-block RT factor table + JSON.", arguments=add_bench_arguments, run=cmd_bench)  # fmt: skip
    add_command(sub, "blocks", help="list registered block types", description="List the block types graph files can use.", run=cmd_blocks)
    add_command(sub, "describe", help="print a graph's blocks, specs and latencies",
                description="Negotiate a graph file and print specs and algorithmic latency per path.", arguments=add_describe_arguments, run=cmd_describe)  # fmt: skip


# --------------------------------------------------------------------------- run
SET_HELP = ("set a parameter of the graph: NAME=VALUE for one the file declares (its 'parameters'), BLOCK.PARAM=VALUE for a block's "
            "(e.g. --set src.path=x.wav --set sad.threshold=0.2); the value is read as YAML (number, true/false, [list], else text); repeatable")  # fmt: skip


def add_set_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help=SET_HELP)


def graph_overrides(a: argparse.Namespace) -> dict[str, Any]:
    """``Graph.from_spec(..., params=)`` from the ``--set NAME=VALUE`` options."""
    from streamkit.core.graph_params import parse_assignments

    return parse_assignments(getattr(a, "set", None) or [])


def add_run_arguments(r: argparse.ArgumentParser) -> None:
    r.add_argument("graph", help="graph file (.yaml/.yml/.json)")
    r.add_argument("--mode", default=None, help="freerun | realtime | paced[:speed] (default: the file's run.mode or freerun)")
    r.add_argument("--duration", type=float, default=None, help="stop after S seconds of stream time")
    r.add_argument("--events", default=None, help="JSONL event file or directory")
    r.add_argument("--chunk-ms", type=float, default=20.0)
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--quiet", action="store_true")
    add_web_argument(r)
    r.add_argument("--web-tap", default=None, metavar="BLOCK",
                   help="with --web: the block whose (real, float32) audio output the live view shows and plays (default: the graph's first source)")
    add_set_argument(r)


def cmd_run(a: argparse.Namespace) -> int:
    g = Graph.from_spec(a.graph, params=graph_overrides(a))
    defaults = g.run_defaults
    mode = parse_mode(a.mode or defaults.get("mode", "freerun"))
    duration = a.duration if a.duration is not None else defaults.get("duration")
    con = add_event_outputs(g, a.events, console=not a.quiet)
    view = None
    if a.web is not None:
        view = live_view(a)
        srcs = g.sources()
        view.attach(g, tap=a.web_tap or (srcs[0] if srcs else ""))
    g.build()
    if view is not None:
        from streamkit.io.console_out import ConsoleOut

        out = ConsoleOut(sys.stdout)
        start_web(view, out)
        try:
            st = run_graph(g, mode, duration, a.chunk_ms, threads=a.threads)
        finally:
            web_summary(out, view)
    else:
        st = run_graph(g, mode, duration, a.chunk_ms, threads=a.threads)
    if a.quiet:
        from streamkit.io.console_out import ConsoleOut

        con = ConsoleOut(sys.stdout)
        say(con, summary_line(st))
    return exit_status(con, [st])


# --------------------------------------------------------------------------- bench
def add_bench_arguments(b: argparse.ArgumentParser) -> None:
    b.add_argument("graph")
    b.add_argument("--json", default=None, help="output JSON path (default bench-<graph>.json)")
    b.add_argument("--repeat", type=int, default=3, help="runs; the fastest is reported (default 3)")
    b.add_argument("--chunk-ms", type=float, default=20.0)
    b.add_argument("--threads", type=int, default=1)
    b.add_argument("--duration", type=float, default=None, help="cap stream seconds (for endless sources)")
    add_set_argument(b)


def bench_graph(spec: Any, repeat: int = 3, chunk_ms: float = 20.0, threads: int = 1, duration: float | None = None) -> dict[str, Any]:
    """Run a graph ``repeat`` times in FreeRun and keep the run with the lowest total busy time."""
    best: dict[str, Any] | None = None
    runs = []
    for _ in range(max(1, repeat)):
        g = Graph.from_spec(spec) if not isinstance(spec, Graph) else spec
        r = Runner(g, FreeRun(), duration=duration, chunk_s=chunk_ms / 1000.0, threads=threads, stats_interval_s=0)
        st = r.run()
        runs.append(st["rtf_total"])
        if best is None or (st["rtf_total"] or 0) < (best["rtf_total"] or 0):
            best = st
    assert best is not None
    best["rtf_total_runs"] = runs
    return best


def format_rtf_table(st: dict[str, Any]) -> str:
    rows = [f"{'block':<14} {'calls':>7} {'items in':>11} {'busy ms':>10} {'max call ms':>12} {'first ms':>9} {'start ms':>9} {'RT factor':>11}"]
    for name, b in st["blocks"].items():
        rtf = b.get("rtf")
        rows.append(
            f"{name:<14} {b['calls']:>7} {b['items_in']:>11} {b['busy_ms']:>10.2f} {b['max_call_ms']:>12.3f} {b['first_call_ms']:>9.2f} "
            f"{b['start_ms']:>9.1f} {f'{rtf:.5f}' if rtf is not None else '-':>11}"
        )
    tot = st.get("rtf_total")
    rows.append(f"{'TOTAL':<14} {'':>7} {'':>11} {'':>10} {'':>12} {'':>9} {'':>9} {f'{tot:.5f}' if tot is not None else '-':>11}")
    rows.append(
        f"stream {st['stream_s']:.2f} s, wall {st['wall_s']:.2f} s; gaps {st['gaps']} {st['gaps_by_cause'] or ''}; RT factor excludes each block's first call (warm-up, in 'first ms')"
    )
    return "\n".join(rows)


def cmd_bench(a: argparse.Namespace) -> int:
    spec = Graph.from_spec(a.graph, params=graph_overrides(a)).to_spec()  # validates the file once, up front; parameters resolved
    Graph.from_spec(spec).build()
    from streamkit.io.outputs import check_output_path, write_text

    check_output_path(a.json or f"bench-{spec.get('name', 'graph')}.json")  # refused before the runs, not after
    st = bench_graph(spec, repeat=a.repeat, chunk_ms=a.chunk_ms, threads=a.threads, duration=a.duration)
    print(f"graph {st['graph']}: FreeRun, chunk {a.chunk_ms:g} ms, threads {a.threads}, best of {a.repeat}")
    print(format_rtf_table(st))
    out = Path(a.json) if a.json else Path(f"bench-{st['graph']}.json")
    result = {"graph_file": str(a.graph), **({"set": list(a.set)} if a.set else {}), "chunk_ms": a.chunk_ms, "threads": a.threads, "repeat": a.repeat, "machine": machine_info(),
              "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "stats": st}  # fmt: skip
    write_text(out, json.dumps(result, indent=2, default=str))
    print(f"wrote {out}")
    return 0


# --------------------------------------------------------------------------- blocks, describe
def cmd_blocks(a: argparse.Namespace) -> int:
    from streamkit.core.registry import lookup, names

    for n in names():
        cls = lookup(n)
        doc = (cls.__doc__ or "").strip().splitlines()
        print(f"{n:<20} {cls.__module__}.{cls.__name__}: {doc[0] if doc else ''}")
    return 0


def add_describe_arguments(ds: argparse.ArgumentParser) -> None:
    ds.add_argument("graph")
    add_set_argument(ds)


def cmd_describe(a: argparse.Namespace) -> int:
    g = Graph.from_spec(a.graph, params=graph_overrides(a))
    print(g.describe())
    return 0
