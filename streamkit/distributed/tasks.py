"""What a shard is asked to run: :class:`StationTask` (one station, maybe resumed) and :func:`plan_shards`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from streamkit.core.errors import ConfigError

__all__ = ["StationTask", "plan_shards", "rebase_port"]


@dataclass(frozen=True)
class StationTask:
    """One station for a shard.

    Attributes:
        name: the station (graph) name, unique in the cluster.
        params: ``io.kiwi`` parameters (host, port, freq_khz, mode, password, ...).
        duration: stream seconds still to deliver (None: until stopped).
        incarnation: 0 for the first run, k for the k-th restart of the station.
        base: per block, the items its output had delivered in earlier incarnations: this run's
            event spans are shifted by it, so that a station's indices go on across restarts.
        seq_base: the first event sequence number of this run (strictly after every earlier one).
        resume_after_wall: wall time up to which earlier incarnations' samples are accounted for
            (None on the first run); the first frame of this run reports the outage since then as
            ``Gap(cause=reconnect)`` (``io.kiwi`` parameter ``resume_after_wall``).
    """

    name: str
    params: dict[str, Any]
    duration: float | None
    incarnation: int = 0
    base: dict[str, int] = field(default_factory=dict)
    seq_base: int = 0
    resume_after_wall: float | None = None

    def resumed(self, *, base: dict[str, int], seq_base: int, resume_after_wall: float, duration: float | None) -> StationTask:
        """The task of the next incarnation."""
        return replace(self, incarnation=self.incarnation + 1, base=dict(base), seq_base=seq_base,
                       resume_after_wall=resume_after_wall, duration=duration)  # fmt: skip

    def __repr__(self) -> str:  # the password stays out of logs and Ray's task descriptions
        return f"StationTask({self.name!r}, incarnation={self.incarnation}, duration={self.duration})"


def plan_shards(tasks: list[StationTask], shard_size: int) -> list[list[StationTask]]:
    """Group stations into shards of at most ``shard_size``, as evenly as possible (in order)."""
    if shard_size < 1:
        raise ConfigError(f"shard size must be >= 1 (got {shard_size})")
    names = [t.name for t in tasks]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"station(s) given twice: {', '.join(dup)}")
    if not tasks:
        return []
    n_shards = -(-len(tasks) // shard_size)
    per, extra = divmod(len(tasks), n_shards)
    out, i = [], 0
    for k in range(n_shards):
        m = per + (1 if k < extra else 0)
        out.append(tasks[i : i + m])
        i += m
    return out


def rebase_port(port: str, base: dict[str, int]) -> int:
    """The offset of an event port (``"<block>.out"``) in a resumed run."""
    return base.get(port.rsplit(".", 1)[0], 0) if base else 0
