"""The live view's server: aiohttp (HTTP + WebSocket) on its own thread and asyncio loop.

Routes:
    ``GET /``                  the page (``static/index.html``)
    ``GET /static/...``        its modules and style (no build step, no third-party code)
    ``GET /ws``                the WebSocket: JSON text frames (hello, events, status, end) and binary
                               frames (waterfall rows, audio; :mod:`streamkit.web.frames`)
    ``GET /api/stations``      the stations and their status (JSON)
    ``GET /api/events.jsonl``  the kept events (``?station=NAME&kind=PATTERN&q=TEXT``), JSON Lines
    ``GET /api/search``        with an archive index (``index=``): ranked hits (``?q=TEXT&top=N&station=S``), JSON
    ``GET /api/clip``          a hit's audio as WAV (``?file=PATH&start=N&end=N``; :mod:`streamkit.web.search_api`)

Data routes need the access token when the server is not on loopback (:mod:`streamkit.web.access`).

Each viewer has a bounded queue (``queue_frames`` entries, one per tick) and two tasks: a ticker
that polls the hub every ``tick_s`` and queues what is new as one entry (the binary frames of every
station packed into one batch message, a status every ``status_s``), and a sender that writes the
queue to the socket. A viewer that does not read makes its own sender wait on the socket; its queue then fills
and further frames are dropped and counted (shown on its page when it reads again). The graphs, the
event files and the other viewers never wait for it. A viewer whose sender has made no progress for
``stall_close_s`` is disconnected. What a viewer has in flight is bounded (``sndbuf_bytes`` of kernel
send buffer, ``write_buffer_bytes`` in the transport), so that a slow viewer's view stays near live
and drops what it cannot take, rather than queueing minutes of backlog in the kernel.

Client messages (JSON): ``{"listen": INDEX | null}``, ``{"watch": [INDEX, ...] | null}``; anything
else is answered with ``{"type": "error", ...}`` and otherwise ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import logging
import socket
import threading
import time
from importlib import resources
from pathlib import Path
from typing import Any

from streamkit.core.errors import ConfigError
from streamkit.web.access import check_access, check_origin, is_loopback, new_token, view_url
from streamkit.web.frames import encode_batch
from streamkit.web.hub import LiveHub, Viewer

__all__ = ["LiveServer"]

log = logging.getLogger("streamkit.web")

STATIC = Path(str(resources.files("streamkit.web") / "static"))
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; "
       "worker-src 'self' blob:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")  # fmt: skip


class LiveServer:
    """Serve ``hub`` on ``host:port`` (port 0: a free one) until :meth:`stop`.

    ``token``: ``"auto"`` (default) requires a random token unless the host is loopback; ``None``
    never requires one; a string is that token.
    """

    def __init__(self, hub: LiveHub, host: str = "127.0.0.1", port: int = 0, *, token: str | None = "auto", tick_s: float = 0.2,
                 status_s: float = 0.5, queue_frames: int = 64, stall_close_s: float = 30.0, sndbuf_bytes: int | None = 262144,
                 write_buffer_bytes: int = 65536, index: str | None = None) -> None:  # fmt: skip
        self.hub = hub
        self.index = None if index is None else str(index)
        self.host = host
        self.port = port
        self.token = (None if is_loopback(host) else new_token()) if token == "auto" else token
        self.tick_s = tick_s
        self.status_s = status_s
        self.queue_frames = queue_frames
        self.stall_close_s = stall_close_s
        self.sndbuf_bytes = sndbuf_bytes
        self.write_buffer_bytes = write_buffer_bytes
        self.viewers: set[_Session] = set()
        self.refused = 0  # data requests refused (no or wrong token, foreign origin)
        self.closed_viewers: list[dict[str, Any]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: Any = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.cpu_s = 0.0  # CPU time of the server thread (at stop)

    # -- lifecycle -------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return view_url(self.host, self.port, self.token)

    def start(self, timeout: float = 10.0) -> str:
        """Bind and serve on a thread; returns the URL to open (with the token when one is required)."""
        try:
            import aiohttp  # noqa: F401
        except ImportError:
            raise ConfigError("the live view needs aiohttp: pip install aiohttp (a dependency of streamkit)") from None
        self._thread = threading.Thread(target=self._main, name="streamkit-web", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise ConfigError(f"live view: the server did not start within {timeout:g} s")
        if self._error is not None:
            err = self._error
            if isinstance(err, OSError):
                why = str(err.strerror or err).rsplit(": ", 1)[-1]  # asyncio's "error while attempting to bind on address ...: <reason>"
                raise ConfigError(f"live view: cannot listen on {self.host}:{self.port}: {why}") from None
            raise ConfigError(f"live view: {err}") from None
        return self.url

    def stop(self, timeout: float = 5.0) -> None:
        loop, t = self._loop, self._thread
        if loop is None or t is None:
            return
        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(loop.stop)
        t.join(timeout)
        self._loop = None

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        t0 = time.thread_time()
        try:
            loop.run_until_complete(self._start())
        except BaseException as exc:  # bind errors are reported by start()
            self._error = exc
            self._loop = None
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            self.cpu_s = time.thread_time() - t0
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _start(self) -> None:
        from aiohttp import web

        app = web.Application(middlewares=[_headers_middleware()])
        app.router.add_get("/", self._index)
        app.router.add_get("/ws", self._ws)
        app.router.add_get("/api/stations", self._api_stations)
        app.router.add_get("/api/events.jsonl", self._api_events)
        app.router.add_get("/api/search", self._api_search)
        app.router.add_get("/api/clip", self._api_clip)
        app.router.add_static("/static/", STATIC, follow_symlinks=False, append_version=False)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)  # no access log: URLs carry the token
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        self._runner = runner
        sockets = getattr(site._server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        for s in list(self.viewers):
            s.flush_and_close()
        deadline = time.monotonic() + 1.0
        while self.viewers and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if self._runner is not None:
            await self._runner.cleanup()

    # -- access ----------------------------------------------------------------------------------
    def _denied(self, request: Any, websocket: bool = False) -> Any:
        from aiohttp import web

        ok, why = check_access(self.token, request.query.get("token"), request.headers.get("Authorization"))
        if ok and websocket:
            ok, why = check_origin(request.headers.get("Origin"), request.headers.get("Host"))
            if not ok:
                self.refused += 1
                return web.Response(status=403, text=why + "\n")
        if not ok:
            self.refused += 1
            return web.Response(status=401, text=why + "\n")
        return None

    def _bound_buffers(self, transport: Any) -> None:
        """Bound what a viewer can have in flight: the kernel's send buffer (else it grows to megabytes
        on its own, minutes of backlog at ~20 kB/s) and the transport's. Past them the sender waits,
        the viewer's queue fills and its frames are dropped and counted: its view stays near live."""
        if transport is None:
            return
        sock = transport.get_extra_info("socket")
        if sock is not None and self.sndbuf_bytes:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, int(self.sndbuf_bytes))
        with contextlib.suppress(Exception):
            transport.set_write_buffer_limits(high=self.write_buffer_bytes)

    # -- handlers --------------------------------------------------------------------------------
    async def _index(self, request: Any) -> Any:
        from aiohttp import web

        return web.FileResponse(STATIC / "index.html")

    async def _api_stations(self, request: Any) -> Any:
        from aiohttp import web

        denied = self._denied(request)
        if denied is not None:
            return denied
        v = Viewer(self.hub)
        return web.json_response({"stations": self.hub.stations_json(), "status": json.loads(v.status())["stations"], "ended": self.hub.ended,
                                  "viewers": len(self.viewers), "search": self.index is not None})  # fmt: skip

    async def _api_search(self, request: Any) -> Any:
        from streamkit.web import search_api

        return await self._off_loop(request, search_api.search_params, lambda p: search_api.run_search(self.index, p))

    async def _api_clip(self, request: Any) -> Any:
        from streamkit.web import search_api

        return await self._off_loop(request, search_api.clip_params, lambda p: search_api.clip_wav(self.index, *p), wav=True)

    async def _off_loop(self, request: Any, parse: Any, work: Any, wav: bool = False) -> Any:
        """A search route: access, parameters (400 with the reason), the work in an executor (off the event loop)."""
        from aiohttp import web

        from streamkit.core.errors import StreamkitError

        denied = self._denied(request)
        if denied is not None:
            return denied
        if self.index is None:
            return web.Response(status=404, text="no archive index: start the run with --record DIR --index IDX\n")
        try:
            params = parse(request.query)
        except ValueError as exc:
            return web.Response(status=400, text=f"{exc}\n")
        try:
            out = await asyncio.get_running_loop().run_in_executor(None, work, params)
        except LookupError as exc:
            return web.Response(status=404, text=f"{exc}\n")
        except ValueError as exc:
            return web.Response(status=400, text=f"{exc}\n")
        except StreamkitError as exc:  # no index yet (nothing recorded), a corrupt one
            return web.Response(status=503, text=f"{str(exc).splitlines()[0]}\n")
        if wav:
            return web.Response(body=out, content_type="audio/wav")
        return web.json_response(out)

    async def _api_events(self, request: Any) -> Any:
        from aiohttp import web

        denied = self._denied(request)
        if denied is not None:
            return denied
        station = request.query.get("station") or None
        kind = request.query.get("kind") or None
        q = (request.query.get("q") or "").lower()
        lines = []
        for d in self.hub.events_log(station):
            if kind and not fnmatch.fnmatchcase(d["kind"], kind):
                continue
            line = json.dumps(d, separators=(",", ":"), default=str)
            if q and q not in line.lower():
                continue
            lines.append(line)
        body = "\n".join(lines) + ("\n" if lines else "")
        return web.Response(text=body, content_type="application/x-ndjson",
                            headers={"Content-Disposition": 'attachment; filename="streamkit-events.jsonl"'})  # fmt: skip

    async def _ws(self, request: Any) -> Any:
        from aiohttp import web

        denied = self._denied(request, websocket=True)
        if denied is not None:
            return denied
        ws = web.WebSocketResponse(heartbeat=20.0, max_msg_size=1 << 16, compress=False, writer_limit=self.write_buffer_bytes)
        self._bound_buffers(request.transport)
        await ws.prepare(request)
        session = _Session(self, ws)
        self.viewers.add(session)
        try:
            await session.run()
        finally:
            self.viewers.discard(session)
            self.closed_viewers.append(session.summary())
        return ws


def _headers_middleware() -> Any:
    from aiohttp import web

    @web.middleware
    async def headers(request: Any, handler: Any) -> Any:
        resp = await handler(request)
        resp.headers.setdefault("Content-Security-Policy", CSP)
        resp.headers.setdefault("X-Content-Type-Options", "nosniff")
        resp.headers.setdefault("Referrer-Policy", "no-referrer")  # the token is in the page URL
        resp.headers.setdefault("Cache-Control", "no-store")
        return resp

    return headers


class _Session:
    """One connected viewer: its :class:`Viewer` cursor, bounded queue, ticker and sender."""

    def __init__(self, server: LiveServer, ws: Any) -> None:
        self.server = server
        self.ws = ws
        self.viewer = Viewer(server.hub)
        self.queue: asyncio.Queue[list[bytes | str] | None] = asyncio.Queue(maxsize=server.queue_frames)  # one entry per tick
        self.connected_at = time.time()
        self._last_progress = time.monotonic()
        self._closing = False
        self._ended_sent = False

    def put(self, frames: list[bytes | str]) -> None:
        """Queue one tick's messages (its binary frames packed into one batch message); when the
        queue is full they are dropped, and counted frame by frame."""
        binary = [f for f in frames if isinstance(f, bytes)]
        entry: list[bytes | str] = ([encode_batch(binary)] if len(binary) > 1 else binary) + [f for f in frames if isinstance(f, str)]
        if not entry:
            return
        try:
            self.queue.put_nowait(entry)
        except asyncio.QueueFull:
            self.viewer.stats.dropped_frames += len(frames)

    def flush_and_close(self) -> None:
        """The run is over: one last status and the end message, then close once they are sent."""
        if self._closing:
            return
        self._closing = True
        self.put([self.viewer.status(), json.dumps({"type": "end", "reason": self.server.hub.ended or "server stopped"})])
        with contextlib.suppress(asyncio.QueueFull):
            self.queue.put_nowait(None)

    async def run(self) -> None:
        joined = self.viewer.join()  # hello, the history, a status: one entry, whatever its size
        self.queue.put_nowait(
            [m for m in joined if isinstance(m, str)][:1]
            + [f for f in joined if isinstance(f, bytes)]
            + [m for m in joined if isinstance(m, str)][1:]
        )
        sender = asyncio.ensure_future(self._send())
        ticker = asyncio.ensure_future(self._tick())
        try:
            await self._read()
        finally:
            ticker.cancel()
            sender.cancel()
            for t in (ticker, sender):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
            with contextlib.suppress(Exception):
                await self.ws.close()

    async def _read(self) -> None:
        from aiohttp import WSMsgType

        async for msg in self.ws:
            if msg.type == WSMsgType.TEXT:
                self._command(msg.data)
            elif msg.type == WSMsgType.BINARY:
                self.put([json.dumps({"type": "error", "error": "binary messages are not understood"})])
            elif msg.type in (WSMsgType.ERROR, WSMsgType.CLOSE, WSMsgType.CLOSING):
                break

    def _command(self, text: str) -> None:
        try:
            cmd = json.loads(text)
            if not isinstance(cmd, dict):
                raise ValueError("want a JSON object")
            if "listen" in cmd:
                li = cmd["listen"]
                self.viewer.set_listen(None if li is None else int(li))
            if "watch" in cmd:
                w = cmd["watch"]
                self.viewer.set_watch(None if w is None else [int(i) for i in w])
        except (ValueError, TypeError) as exc:
            self.put([json.dumps({"type": "error", "error": f"bad command: {str(exc)[:200]}"})])

    async def _tick(self) -> None:
        srv = self.server
        next_status = time.monotonic() + srv.status_s
        while not self._closing:
            await asyncio.sleep(srv.tick_s)
            if self._closing:
                break
            tick = self.viewer.poll()  # polled even when the queue is full: the cursors move on, the loss is counted
            now = time.monotonic()
            if now >= next_status:
                next_status = now + srv.status_s
                tick.append(self.viewer.status())
                if srv.hub.ended and not self._ended_sent:
                    self._ended_sent = True
                    tick.append(json.dumps({"type": "end", "reason": srv.hub.ended}))
            self.put(tick)
            if not self.queue.empty() and now - self._last_progress > srv.stall_close_s:
                log.warning("live view: a viewer made no progress for %.0f s: disconnected", srv.stall_close_s)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.ws.close(code=1008, message=b"stalled"), 2.0)
                break

    async def _send(self) -> None:
        st = self.viewer.stats
        while True:
            entry = await self.queue.get()
            if entry is None:
                await self.ws.close()
                return
            for frame in entry:
                if isinstance(frame, bytes):
                    await self.ws.send_bytes(frame)
                else:
                    await self.ws.send_str(frame)
                st.frames_sent += 1
                st.bytes_sent += len(frame)
                self._last_progress = time.monotonic()

    def summary(self) -> dict[str, Any]:
        s = self.viewer.stats
        return {"connected_s": time.time() - self.connected_at, "frames_sent": s.frames_sent, "bytes_sent": s.bytes_sent,
                "dropped_frames": s.dropped_frames, "missed_rows": s.missed_rows, "missed_events": s.missed_events}  # fmt: skip
