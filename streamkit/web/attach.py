"""Wiring the live view into graphs: :class:`LiveView` = a :class:`~streamkit.web.hub.LiveHub` + its server."""

from __future__ import annotations

from typing import Any

from streamkit.core.errors import ConfigError
from streamkit.core.graph import Graph
from streamkit.core.registry import lookup
from streamkit.web.access import AccessError, parse_bind
from streamkit.web.hub import LiveHub

__all__ = ["LiveView"]


class LiveView:
    """A live view to attach graphs to, served at ``bind`` (``[HOST:]PORT``; default host 127.0.0.1).

    Usage::

        view = LiveView("8080")
        view.attach(graph, tap="level", freq_khz=7100, mode="lsb")
        url = view.start()          # print it; a non-loopback host adds ?token=...
        ... run the graphs ...
        view.close("run finished")  # viewers are told, then the server stops
    """

    def __init__(self, bind: str, **hub_options: Any) -> None:
        try:
            self.host, self.port = parse_bind(bind)
        except AccessError as exc:
            raise ConfigError(str(exc)) from None
        self.hub = LiveHub(**hub_options)
        self.server: Any = None
        self.search_index: str | None = None  #: an archive index the page can search (``/api/search``), e.g. ``monitor --index``

    def attach(self, graph: Graph, *, tap: str, station: str | None = None, **info: Any) -> None:
        """Show ``graph`` as a station: its events, and a waterfall + audio from block ``tap``'s output."""
        if tap not in graph.blocks:
            raise ConfigError(f"--web: graph {graph.name!r} has no block {tap!r} to show (blocks: {', '.join(graph.blocks)})")
        name = station or graph.name
        self.hub.station(name, **{k: v for k, v in info.items() if v is not None})
        graph.connect(tap, graph.add(lookup("web.tap")(hub=self.hub.id, station=name), name="web"))
        graph.subscribe(self.hub.events_sink)

    def start(self, **server_options: Any) -> str:
        from streamkit.web.server import LiveServer

        server_options.setdefault("index", self.search_index)
        self.server = LiveServer(self.hub, self.host, self.port, **server_options)
        return str(self.server.start())

    def close(self, reason: str = "run finished") -> dict[str, Any]:
        """Tell the viewers the run is over, stop the server; returns what the viewers got and lost."""
        self.hub.end(reason)
        srv, self.server = self.server, None
        if srv is None:
            return {}
        srv.stop()
        sessions = srv.closed_viewers + [s.summary() for s in list(srv.viewers)]  # every viewer is closed by stop(); any left over too
        return {"viewers": len(sessions), "refused": srv.refused, "cpu_s": srv.cpu_s,
                "bytes_sent": sum(s["bytes_sent"] for s in sessions), "dropped_frames": sum(s["dropped_frames"] for s in sessions),
                "missed_rows": sum(s["missed_rows"] for s in sessions)}  # fmt: skip
