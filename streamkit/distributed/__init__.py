"""Scale-out of ``streamkit monitor`` over a Ray cluster (``streamkit monitor --ray ADDRESS``).

Stations are grouped into shards; each shard is a Ray actor running a
:class:`~streamkit.core.runtime.MultiRunner` of the same station graphs a single process runs
(:func:`streamkit.monitor.build_station_graph`). A supervisor on the driver polls the shards for
their events (bounded batches), feeds the driver's sinks (per-station JSONL, the live console)
and restarts a shard that dies, with each of its stations resuming after a ``Gap(RECONNECT)``.

Only :mod:`streamkit.distributed.ray_cluster` imports Ray, and only when called; the graphs, the
shard worker (:mod:`.shard`) and the driver's ledger (:mod:`.ledger`) know nothing of it. Ray is
the optional extra ``pip install 'streamkit[cluster]'``.
"""

from streamkit.distributed.tasks import StationTask, plan_shards

__all__ = ["StationTask", "plan_shards"]
