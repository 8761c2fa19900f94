"""``streamkit monitor --ray ADDRESS``: :func:`run_cluster_monitor`, the cluster twin of :func:`streamkit.monitor.run_monitor`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from streamkit.core.errors import ConfigError
from streamkit.distributed.ledger import DriverSinks
from streamkit.distributed.tasks import StationTask

__all__ = ["run_cluster_monitor", "station_tasks"]


def station_tasks(specs: list[str], *, duration: float | None, **kiwi: Any) -> list[StationTask]:
    """One task per ``host:port:freq_khz:mode`` string, with more ``io.kiwi`` parameters ``kiwi``."""
    from streamkit.io.kiwi_source import parse_station, station_name

    tasks = []
    for s in specs:
        p = parse_station(s)
        p.update(kiwi)
        tasks.append(StationTask(station_name(p), p, duration))
    return tasks


def run_cluster_monitor(
    stations: list[str] | None,
    *,
    address: str = "auto",
    duration: float | None,
    events_dir: str | None = "events",
    events_on: str = "driver",
    record_dir: str | None = None,
    password: str = "",
    password_follows_redirect: bool = False,
    compression: bool = True,
    console: bool = True,
    console_file: IO[str] | Any = None,
    emulator_faults: str | None = "drop_every=60",
    stall_s: float = 10.0,
    max_retries: int | None = None,
    detectors: tuple[str, ...] = ("energy",),
    asr_options: Mapping[str, Any] | None = None,
    shard_size: int = 100,
    cpus_per_shard: float = 1.0,
    supervisor_options: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    live: Any = None,
    on_live: Any = None,
) -> dict[str, Any]:
    """Monitor ``stations`` (or the built-in emulator, on the driver's loopback) on a Ray cluster.

    ``events_on``: ``driver`` (per-station JSONL in ``events_dir`` on this machine) or ``node`` (in
    ``events_dir`` on the node that runs the station's shard). Recordings (``record_dir``) are always
    written on the nodes; a restarted station records into ``record_dir/restart<k>/``.

    ``live``: a :class:`~streamkit.web.attach.LiveView` that shows every station of the cluster (its
    waterfall rows computed in the shards, :mod:`streamkit.distributed.webfeed`); it is started by
    ``on_live(live)`` or ``live.start()`` before the shards, and closed by the caller.
    """
    from streamkit.distributed.ray_cluster import ClusterSupervisor, connect, require_ray
    from streamkit.monitor import DEMO_STATIONS, MonitorConsole

    if events_on not in ("driver", "node"):
        raise ConfigError(f"events_on must be driver or node (got {events_on!r})")
    ray = require_ray()
    emu = None
    specs = list(stations or [])
    if not specs:
        from streamkit.io.kiwi_emulator import EmulatorThread

        emu = EmulatorThread()
        port = emu.start()
        if emulator_faults:
            emu.call(lambda: emu.emulator.set_faults(spec=emulator_faults))
        specs = [s.format(port=port) for s in DEMO_STATIONS]
    connected = False
    sup = None
    con = None
    web = None
    try:
        tasks = station_tasks(specs, duration=duration, password=password, password_follows_redirect=password_follows_redirect,
                              compression=compression, stall_s=stall_s, max_retries=max_retries)  # fmt: skip
        names = [t.name for t in tasks]
        con = MonitorConsole(file=console_file) if console else None
        if con is not None:
            for n in names:
                con.expect(n)
        others: list[Any] = [con] if con is not None else []
        if live is not None:
            from streamkit.distributed.webfeed import DriverWeb

            web = DriverWeb(live)
            for t in tasks:
                p = t.params
                web.station(t.name, freq_khz=p.get("freq_khz"), mode=p.get("mode"), host=f"{p.get('host')}:{p.get('port')}")
            others.append(live.hub.events_sink)
        sinks = DriverSinks(names, events_dir if events_on == "driver" else None, others)
        options: dict[str, Any] = {"detectors": tuple(detectors), "asr_options": dict(asr_options or {}), "record_dir": record_dir}
        if events_on == "node" and events_dir is not None:
            options["events_on_node"] = events_dir
        connected = connect(address)
        sup = ClusterSupervisor(tasks, sinks, options=options, shard_size=shard_size, cpus_per_shard=cpus_per_shard,
                                web=web, **dict(supervisor_options or {}))  # fmt: skip
        if live is not None:
            (on_live or (lambda v: v.start()))(live)
        sinks.open()
        try:
            sup.start()
            sup.run(timeout=timeout)
        except KeyboardInterrupt:
            pass
        finally:
            sup.shutdown()
            sinks.close()
    finally:
        if connected:
            ray.shutdown()
        if emu is not None:
            emu.stop()
    rep = sup.report() if sup is not None else {"stations": {}, "shards": [], "restarts": 0}
    rep["fatal"] = {n: s["fatal"] for n, s in rep["stations"].items() if s["fatal"]}
    rep["emulated"] = emu is not None
    rep["console_lost"] = con.output_lost if con is not None else None
    if web is not None:
        rep["web"] = web.summary()
        for n, st in rep["stations"].items():
            st["web_rows_dropped"] = web.rows_dropped.get(n, 0)
    return rep
