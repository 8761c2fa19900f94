"""``streamkit monitor --ray [ADDRESS]``: the monitor's stations on a Ray cluster (``streamkit.distributed``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from streamkit.cli.common import EXIT_RUNTIME, CliError, exit_status, say, start_web, web_summary
from streamkit.core.errors import ConfigError


def add_cluster_arguments(m: argparse.ArgumentParser) -> None:
    """The ``--ray`` options of ``streamkit monitor``."""
    m.add_argument("--ray", nargs="?", const="auto", default=None, metavar="ADDRESS",
                   help="run the stations on a Ray cluster: auto (the cluster `ray start` runs on this machine; the default), HOST:PORT or "
                        "ray://HOST:PORT. Never starts a cluster. Needs pip install 'streamkit[cluster]'")  # fmt: skip
    m.add_argument("--ray-shard-size", type=int, default=100, metavar="N", help="with --ray: stations per shard (one Ray actor each; default 100)")
    m.add_argument("--ray-cpus-per-shard", type=float, default=1.0, metavar="C", help="with --ray: CPUs reserved per shard (default 1)")
    m.add_argument("--ray-events-on", choices=["driver", "node"], default="driver",
                   help="with --ray: write the JSONL event files on this machine (driver, default) or on each station's node")  # fmt: skip


def cmd_monitor_ray(a: argparse.Namespace, stations: list[str], password: str, detectors: tuple[str, ...], asr_options: dict[str, Any],
                    out: Any, view: Any = None) -> int:  # fmt: skip
    """``cmd_monitor``'s branch for ``--ray`` (``view``: the live view of ``--web``, or None)."""
    import streamkit
    from streamkit.distributed.monitor import run_cluster_monitor
    from streamkit.io.textsafe import printable

    if not a.quiet:
        where = f"{len(stations)} station(s)" if stations else "the built-in KiwiSDR emulator on this machine's loopback (3 stations)"
        say(out, f"streamkit {streamkit.__version__}: monitoring {where} on the Ray cluster at {a.ray} for {a.duration:g} s of stream time; "
                 f"events -> {a.events}/ on the {a.ray_events_on}")  # fmt: skip
    try:
        res = run_cluster_monitor(stations, address=a.ray, duration=a.duration, events_dir=a.events, events_on=a.ray_events_on,
                                  record_dir=a.record, password=password, password_follows_redirect=a.password_follows_redirect,
                                  compression=a.compression, console=not a.quiet, console_file=out, stall_s=a.stall, max_retries=a.max_retries,
                                  detectors=detectors, asr_options=asr_options, shard_size=a.ray_shard_size,
                                  cpus_per_shard=a.ray_cpus_per_shard, live=view,
                                  on_live=(lambda v: start_web(v, out)) if view is not None else None)  # fmt: skip
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    finally:
        if view is not None:
            web_summary(out, view)
    st = res["stations"]
    if a.quiet:
        for s in st.values():
            say(out, station_line(s))
    if res.get("web") is not None:
        say(out, web_line(res["web"], len(st)))
    if res["restarts"]:
        say(out, f"{res['restarts']} shard restart(s); the stations' outages are in their events as gaps (cause reconnect)")
    for name, msg in res["fatal"].items():  # server text: escaped, so that it cannot forge a line
        print(f"streamkit: error: station {printable(name)}: {printable(msg)}", file=sys.stderr)
    if st and len(res["fatal"]) == len(st):
        return EXIT_RUNTIME
    return exit_status(out, [s["final"] or {} for s in st.values()])


def station_line(s: dict[str, Any]) -> str:
    """One line per station of a cluster run."""
    return (f"{s['graph']}: {s['stream_s']:.2f} s of stream, {s['delivered']} items delivered, {s['lost']} lost in "
            f"{sum(s['gaps_by_cause'].values())} gap(s) {s['gaps_by_cause']}, restarts {s['restarts']}, events {s['events']} "
            f"({s['events_dropped']} dropped by its shard)" + (f", {s['web_rows_dropped']} live-view row(s) dropped by its shard"
                                                              if s.get("web_rows_dropped") else ""))  # fmt: skip


def web_line(w: dict[str, Any], stations: int) -> str:
    """What the shards sent to the live view (``--web``), and what they dropped."""
    dropped = sum(w["rows_dropped"].values())
    return (f"live view: {sum(w['rows'].values())} waterfall row(s) from {len(w['rows'])} of {stations} station(s), "
            f"{w['bytes'] / 1e3:.0f} kB from the shards, "
            + (f"{dropped} row(s) dropped by the shards ({', '.join(f'{n}: {k}' for n, k in sorted(w['rows_dropped'].items()) if k)})"
               if dropped else "no row dropped"))  # fmt: skip
