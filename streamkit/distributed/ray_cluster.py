"""Ray glue: connect to a cluster, run shards as actors, supervise them (the only module that imports Ray).

:class:`ClusterSupervisor` creates one actor (:class:`RayShard`, a :class:`~.shard.ShardWorker`) per
shard with ``num_cpus=cpus_per_shard`` and the ``SPREAD`` scheduling strategy, so shards spread
over the nodes by CPU. It polls every shard (``poll.remote(max_events)``, one call in flight per
shard), hands the events to the driver's sinks and the statuses to each station's
:class:`~.ledger.StationLedger`. Fault model:

* a poll that fails with ``RayActorError`` (the worker process or its node died), or that has not
  answered for ``dead_after_s``, marks the shard dead: it is killed and a new actor is created
  with the shard's unfinished stations resumed (:meth:`StationLedger.resume`); the scheduler
  places it on a live node, another one when its node is gone. Ray's own actor restart
  (``max_restarts``) is left off on purpose: it would re-run the constructor with the first
  arguments, while a resumed station needs its confirmed indices and wall time. A shard is
  restarted at most ``max_restarts`` times; after that its stations end as failed.
* a station its server refused (bad password, kick, ...: the ``io.kiwi`` block's fatal
  message) ends once with that reason and is not restarted with its shard.
* events beyond a shard's bounded outbox are dropped there and counted (``events_dropped``), so a
  slow driver never holds up audio; so are live-view rows beyond a shard's web rings (``web``, a
  :class:`~.webfeed.DriverWeb`: each poll names the stations a viewer listens to, and its reply
  carries the new rows and that audio).
"""

from __future__ import annotations

import logging
import site
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamkit.core.errors import ConfigError
from streamkit.distributed.ledger import DriverSinks, StationLedger
from streamkit.distributed.shard import GraphOptions, ShardWorker
from streamkit.distributed.tasks import StationTask, plan_shards

__all__ = ["INSTALL_HINT", "require_ray", "connect", "ClusterSupervisor", "RayShard"]

log = logging.getLogger("streamkit.distributed")

INSTALL_HINT = "pip install 'streamkit[cluster]'"


def require_ray() -> Any:
    """The ``ray`` module, or a :class:`ConfigError` naming the extra that installs it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"--ray needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


def worker_runtime_env() -> dict[str, Any]:
    """Runs streamkit from a source checkout: its directory goes first on the workers' PYTHONPATH
    (harmless on a node where that path does not exist; an installed streamkit is used there)."""
    import streamkit

    root = Path(streamkit.__file__).resolve().parent.parent
    installed = {str(Path(p).resolve()) for p in site.getsitepackages()}
    if str(root) in installed:
        return {}
    return {"env_vars": {"PYTHONPATH": str(root)}}


def connect(address: str, **init_kwargs: Any) -> bool:
    """Join the Ray cluster at ``address`` (``auto``, ``host:port``, ``ray://host:port``); never
    starts one. Returns True when this call connected (and :func:`disconnect` should end it)."""
    ray = require_ray()
    if ray.is_initialized():
        return False
    if not address:
        raise ConfigError("a Ray cluster address is needed (auto, HOST:PORT or ray://HOST:PORT)")
    try:
        ray.init(address=address, runtime_env=worker_runtime_env(), log_to_driver=False, logging_level=logging.WARNING, **init_kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ConfigError(f"cannot join a Ray cluster at {address!r} ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                          "start one with `ray start --head` (and `ray start --address HEAD:6379` on each worker machine)") from None  # fmt: skip
    return True


class RayShard(ShardWorker):
    """A shard as a Ray actor: :meth:`where` also names its Ray node."""

    def where(self) -> dict[str, Any]:
        import ray

        return {**super().where(), "node_id": ray.get_runtime_context().get_node_id()}


@dataclass
class _Shard:
    sid: int
    names: list[str]
    actor: Any = None
    incarnation: int = 0
    ref: Any = None
    sent: float = 0.0
    due: float = 0.0
    done: bool = False
    restarts: int = 0
    where: Any = None  # ObjectRef of where(), then its value
    history: list[dict[str, Any]] = field(default_factory=list)
    cpu_s: float = 0.0
    cpu_before: float = 0.0


class ClusterSupervisor:
    """Runs ``tasks`` on the connected Ray cluster and feeds ``sinks`` on the driver."""

    def __init__(self, tasks: list[StationTask], sinks: DriverSinks, *, options: GraphOptions | None = None, shard_size: int = 100,
                 cpus_per_shard: float = 1.0, outbox_size: int = 20000, poll_s: float = 0.25, max_events: int = 5000,
                 dead_after_s: float = 20.0, max_restarts: int = 10, stop_grace_s: float = 30.0, web: Any = None) -> None:  # fmt: skip
        self.ray = require_ray()
        self.sinks = sinks
        self.options = dict(options or {})
        self.web = web  # a DriverWeb (streamkit.distributed.webfeed): the shards feed its live view
        if web is not None:
            self.options.setdefault("web", web.options())
        self.cpus_per_shard = float(cpus_per_shard)
        self.outbox_size = outbox_size
        self.poll_s = poll_s
        self.max_events = max_events
        self.dead_after_s = dead_after_s
        self.max_restarts = max_restarts
        self.stop_grace_s = stop_grace_s
        self.ledgers = {t.name: StationLedger(t) for t in tasks}
        self.shards = [_Shard(k, [t.name for t in group]) for k, group in enumerate(plan_shards(tasks, shard_size))]
        self.restarts = 0
        self._actor_cls = self.ray.remote(RayShard)
        self._stop = False

    # -- actors -----------------------------------------------------------------------------------
    def _spawn(self, sh: _Shard) -> None:
        tasks = [self.ledgers[n].task for n in sh.names if not self.ledgers[n].done]
        sh.actor = self._actor_cls.options(num_cpus=self.cpus_per_shard, scheduling_strategy="SPREAD", max_restarts=0,
                                           max_task_retries=0).remote(sh.sid, tasks, self.options, self.outbox_size)  # fmt: skip
        sh.where = sh.actor.where.remote()
        sh.ref = None
        sh.due = 0.0

    def start(self) -> None:
        for sh in self.shards:
            self._spawn(sh)

    def request_stop(self) -> None:
        self._stop = True

    def _died(self, sh: _Shard, why: str) -> None:
        ray = self.ray
        try:
            ray.kill(sh.actor, no_restart=True)
        except Exception:
            pass
        sh.history.append({"incarnation": sh.incarnation, "where": self._where(sh), "died": why})
        sh.cpu_before += sh.cpu_s
        sh.cpu_s = 0.0
        left = [n for n in sh.names if not self.ledgers[n].done]
        if not left:
            sh.done = True
            return
        if sh.restarts >= self.max_restarts or self._stop:
            for n in left:
                led = self.ledgers[n]
                led.done, led.fatal = True, f"shard {sh.sid} lost ({why}); not restarted"
            sh.done = True
            return
        log.warning("shard %d (%d station(s)) died: %s; restarting", sh.sid, len(left), why)
        now = time.time()
        for n in left:
            self.ledgers[n].resume(now)
        sh.restarts += 1
        sh.incarnation += 1
        self.restarts += 1
        self._spawn(sh)

    def _where(self, sh: _Shard) -> Any:
        if sh.where is None or isinstance(sh.where, dict):
            return sh.where
        ready, _ = self.ray.wait([sh.where], timeout=0)
        if ready:
            try:
                sh.where = self.ray.get(sh.where)
            except Exception:
                sh.where = None
            return sh.where
        return None

    def _listen(self, sh: _Shard) -> list[str] | None:
        """The shard's stations a viewer of the live view listens to (None: no live view)."""
        if self.web is None:
            return None
        return sorted(self.web.listening().intersection(sh.names))

    def _take(self, sh: _Shard, reply: dict[str, Any]) -> None:
        if self.web is not None and reply.get("web"):
            self.web.feed(reply["web"])
        for ev in reply["events"]:
            led = self.ledgers.get(ev.stream)
            if led is not None:
                led.note(ev)
            self.sinks.handle(ev)
        dropped = reply.get("dropped") or {}
        for name, st in (reply.get("status") or {}).items():
            self.ledgers[name].update(st, dropped.get(name, 0))
        sh.cpu_s = float(reply.get("cpu_s") or 0.0)

    def _finish_shard(self, sh: _Shard) -> None:
        """The shard's MultiRunner ended: take its final status and every event left, then end the actor."""
        ray = self.ray
        try:
            fin = ray.get(sh.actor.stop.remote(self.stop_grace_s), timeout=self.stop_grace_s + 10)
            while True:
                reply = ray.get(sh.actor.poll.remote(self.max_events, self._listen(sh)), timeout=self.dead_after_s)
                reply["status"] = fin["status"]
                self._take(sh, reply)
                if not reply["events"]:
                    break
        except self.ray.exceptions.RayActorError as exc:
            self._died(sh, f"{type(exc).__name__} while finishing")
            return
        if fin.get("error"):
            for n in sh.names:
                led = self.ledgers[n]
                if not led.done:
                    led.done, led.fatal = True, f"shard {sh.sid}: {fin['error']}"
        self._where(sh)
        try:
            ray.kill(sh.actor, no_restart=True)
        except Exception:
            pass
        sh.done = True

    # -- the loop ---------------------------------------------------------------------------------
    def run(self, timeout: float | None = None) -> None:
        """Poll until every shard is done, :meth:`request_stop`, or ``timeout`` wall seconds."""
        ray = self.ray
        t_end = None if timeout is None else time.monotonic() + timeout
        while not all(sh.done for sh in self.shards):
            now = time.monotonic()
            if self._stop or (t_end is not None and now >= t_end):
                break
            for sh in self.shards:
                if not sh.done and sh.ref is None and now >= sh.due:
                    sh.ref, sh.sent = sh.actor.poll.remote(self.max_events, self._listen(sh)), now
            pending = {sh.ref: sh for sh in self.shards if not sh.done and sh.ref is not None}
            if not pending:
                time.sleep(self.poll_s)
                continue
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=self.poll_s)
            for ref in ready:
                sh = pending[ref]
                sh.ref = None
                try:
                    reply = ray.get(ref)
                except ray.exceptions.RayActorError as exc:
                    self._died(sh, type(exc).__name__)
                    continue
                self._take(sh, reply)
                # a full batch: ask again at once (the driver catches up); else after poll_s
                sh.due = time.monotonic() + (0.0 if len(reply["events"]) >= self.max_events else self.poll_s)
                if reply["finished"]:
                    self._finish_shard(sh)
            now = time.monotonic()
            for sh in self.shards:
                if not sh.done and sh.ref is not None and now - sh.sent > self.dead_after_s:
                    if ray.wait([sh.ref], timeout=0)[0]:
                        continue  # its answer came while this driver was busy or starved: taken on the next turn
                    self._died(sh, f"no answer for {self.dead_after_s:g} s")

    def shutdown(self) -> None:
        """Stop every shard still running (flushed, files closed), take its last events, end the actors."""
        self._stop = True
        for sh in self.shards:
            if not sh.done:
                try:
                    self._finish_shard(sh)
                except Exception as exc:  # a dead or hung shard: its stations end unfinished
                    log.warning("shard %d: %s at shutdown", sh.sid, exc)
                    try:
                        self.ray.kill(sh.actor, no_restart=True)
                    except Exception:
                        pass
                    sh.done = True

    def report(self) -> dict[str, Any]:
        return {
            "stations": {n: led.summary() for n, led in self.ledgers.items()},
            "shards": [{"shard": sh.sid, "stations": len(sh.names), "restarts": sh.restarts, "where": self._where(sh),
                        "history": sh.history, "cpu_s": sh.cpu_before + sh.cpu_s} for sh in self.shards],  # fmt: skip
            "restarts": self.restarts,
        }
