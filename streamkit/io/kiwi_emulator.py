"""A KiwiSDR-compatible WebSocket server for loopback tests, demos and load tests.

:class:`KiwiEmulator` is the I/O adapter of the sans-I/O server state machine
:class:`~streamkit.protocols.kiwi_server.KiwiServerProtocol` (handshake, commands, limits, pacing
and frames are described there): a ``websockets`` asyncio server, one reader task and one clock
coroutine per connection, a thread runner (:class:`EmulatorThread`) and the command line
(``streamkit emulate kiwi``). What each station sounds like is in :mod:`streamkit.io.kiwi_signals`,
the faults it can inject in :mod:`streamkit.protocols.kiwi_faults`.

What a client sees on the wire
------------------------------
* Paths ``/<ts>/SND``, ``/ws/kiwi/<ts>/SND`` and ``/ws/no_wf/<ts>/SND`` are upgraded; anything else
  gets HTTP 404. Everything the server sends is a **binary** WebSocket message (but the
  ``malformed=SEQ:text`` fault); no permessage-deflate and no WebSocket pings (the firmware sends
  none). ``?camp`` and ``?foff=`` are accepted and ignored.
* "Dropped" is the firmware's behaviour by default: the server stops sending and ignores the
  client, but sends no close frame and keeps the TCP connection open. ``drop_action="close"`` or
  ``"abort"`` makes it close (1000) or reset instead; a dropped or refused connection that the
  client leaves open, or one that never sends anything, is closed (1001) after ``drop_linger``
  seconds (60) so that nothing leaks. A signal callable that raises ends only its own connection
  (close code 1011).
* The ``close_mid_frame`` fault writes half of a frame's WebSocket bytes (serialised by
  ``websockets``) straight to the transport and closes TCP, as a server process dying mid-write
  would; every other byte goes through the ``websockets`` connection.

Faults are set per server (:attr:`EmulatorConfig.faults`, ``--fault``, :meth:`KiwiEmulator.set_faults`
at run time) or per connection in the URL query: ``/<ts>/SND?drop_every=5`` or
``?fault=drop_every=5;kick=2``.

Recording
---------
Every connection has a :class:`~streamkit.protocols.kiwi_server_log.ConnectionLog`: the commands
received, the ``MSG`` messages sent, and for up to ``record_frames`` frames the exact int16 samples
sent and what a correct client decodes. Tests and the kiwirecorder interop check compare against
:meth:`ConnectionLog.expected_pcm` / :meth:`ConnectionLog.expected_iq`.

API
---
:class:`KiwiEmulator` (``async start() -> port``, ``async stop()``, ``async with``),
:class:`EmulatorThread` (the same in a background thread for synchronous callers),
:func:`add_emulator_arguments` / :func:`run_from_args` for ``streamkit emulate kiwi`` and
:func:`main` for ``python -m streamkit.io.kiwi_emulator``. The signal and fault names are
re-exported here for convenience.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import http
import logging
import math
import re
import signal as _signal
import sys
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

import numpy as np
from numpy.typing import NDArray
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from streamkit.core.errors import ConfigError
from streamkit.io.kiwi_emulator_session import EmulatorSession
from streamkit.io.kiwi_secrets import add_password_arguments, install_log_redaction, password_from_args
from streamkit.io.kiwi_signals import (
    SMETER_OFFSET_DB,
    Mix,
    Noise,
    SignalFn,
    SpeechLike,
    Tone,
    default_stations,
    frame_smeter_dbm,
    mix,
    noise,
    parse_station_spec,
    quantize,
    render_block,
    select_station,
    speech_like,
    tone,
)
from streamkit.protocols.adpcm import warmup as _adpcm_warmup
from streamkit.protocols.kiwi_faults import MALFORMED_KINDS, FaultConfig, faults_from_query, parse_fault_spec
from streamkit.protocols.kiwi_server import ChannelTable, DropAction
from streamkit.protocols.kiwi_server_log import ConnectionLog, Phase, RateLimitedLog, ReceivedCommand, SentFrame, SentMessage
from streamkit.protocols.kiwi_url import format_hostport

__all__ = [
    "DEFAULT_PORT",
    "MALFORMED_KINDS",
    "SMETER_OFFSET_DB",
    "ConnectionLog",
    "DropAction",
    "EmulatorConfig",
    "EmulatorThread",
    "FaultConfig",
    "KiwiEmulator",
    "Mix",
    "Noise",
    "Phase",
    "ReceivedCommand",
    "SentFrame",
    "SentMessage",
    "SignalFn",
    "SpeechLike",
    "Tone",
    "add_emulator_arguments",
    "config_from_args",
    "default_stations",
    "frame_smeter_dbm",
    "main",
    "mix",
    "noise",
    "parse_fault_spec",
    "parse_station_spec",
    "quantize",
    "run_emulator",
    "run_from_args",
    "speech_like",
    "tone",
]

logger = logging.getLogger("streamkit.io.kiwi_emulator")  # same name under `python -m`
install_log_redaction()  # websockets' debug log prints every command received, `SET auth t=kiwi p=...` included

DEFAULT_PORT: Final = 8073
"""The KiwiSDR's port."""

_PATH_RE: Final = re.compile(r"^/(?:ws/kiwi/|ws/no_wf/)?([0-9]{1,20})/SND$")

_rlog = RateLimitedLog(logger)


@dataclass(slots=True)
class EmulatorConfig:
    """Server configuration (see the module docstring for the behaviour).

    Attributes:
        host: Address to bind (loopback by default).
        port: Port to bind; 0 picks a free one (:meth:`KiwiEmulator.start` returns it).
        sample_rate: True audio rate in Hz (``MSG sample_rate``; 12001.188, or 11999.028).
        audio_rate: Nominal rate (``MSG audio_rate``).
        password: Channel password; None or "" = no password.
        rx_chans: Number of receiver channels (simultaneous streaming clients).
        speed: Pacing multiplier (1 = real time, 0 = as fast as the client reads).
        signals: Stations: ``{freq_khz: signal}``.
        noise_floor: Signal heard away from every station.
        faults: Server-wide faults (each connection starts from a copy, then its URL query).
        pre_auth_timeout: ``MSG password_timeout`` + drop when not authenticated this long after
            the first message (20 s).
        keepalive_timeout: Drop when no ``SET keepalive`` for this long after auth (60 s).
        setup_timeout: Drop when authenticated but the five bits are incomplete this long after
            auth (20 s; None = off).
        drop_action: What "drop" does on the wire: ``silent`` (firmware: stop sending, keep the
            socket), ``close`` (close frame 1000) or ``abort`` (TCP reset).
        drop_linger: Close (1001) a dropped or refused connection the client keeps open, or one
            that never sent a message, after this long (None = never).
        gps_solution: ``last_gps_solution`` of IQ frames: None cycles 0..3 (fix), 255 = no fix.
        gps_epoch: GPS time (s since 1980-01-06, GPS scale) of sample 0; None = the wall clock
            at the first frame.
        is_local: Report the client as local (``is_local``, ``audio_init``).
        record_frames: Frames per connection whose samples are kept in the log (0 = none).
        max_logs: Connection logs kept (oldest finished ones are discarded).
        max_sessions: Stop listening once this many channel-holding sessions have ended (for a
            deterministic capture); None = never.
        cache_signals: Cache quantised signal blocks shared by connections (signals must be
            deterministic).
        close_timeout: WebSocket closing-handshake timeout (s).
        stop_timeout: How long :meth:`KiwiEmulator.stop` waits for handlers before aborting.
        rx_gps: GNSS position in ``load_cfg`` (kiwiclient parses it).
        rx_name: Receiver name in ``load_cfg``.
    """

    host: str = "127.0.0.1"
    port: int = 0
    sample_rate: float = 12001.188
    audio_rate: int = 12000
    password: str | None = field(default=None, repr=False)
    rx_chans: int = 8
    speed: float = 1.0
    signals: dict[float, SignalFn] = field(default_factory=default_stations)
    noise_floor: SignalFn = field(default_factory=lambda: noise(-60.0, seed=0))
    faults: FaultConfig = field(default_factory=FaultConfig)
    pre_auth_timeout: float = 20.0
    keepalive_timeout: float = 60.0
    setup_timeout: float | None = 20.0
    drop_action: DropAction = "silent"
    drop_linger: float | None = 60.0
    gps_solution: int | None = None
    gps_epoch: float | None = None
    is_local: bool = False
    record_frames: int = 10_000
    max_logs: int = 1000
    max_sessions: int | None = None
    cache_signals: bool = True
    close_timeout: float = 2.0
    stop_timeout: float = 5.0
    rx_gps: str = "(52.000000, 0.000000)"
    rx_name: str = "streamkit KiwiSDR emulator"

    def validate(self) -> None:
        """Raise ValueError on out-of-range values."""
        if not (math.isfinite(self.sample_rate) and 1000.0 <= self.sample_rate <= 1e6):
            raise ValueError(f"sample_rate must be in 1000..1e6 Hz, got {self.sample_rate}")
        if self.audio_rate <= 0:
            raise ValueError(f"audio_rate must be > 0, got {self.audio_rate}")
        if not 1 <= self.rx_chans <= 64:
            raise ValueError(f"rx_chans must be 1..64, got {self.rx_chans}")
        if not (math.isfinite(self.speed) and self.speed >= 0):
            raise ValueError(f"speed must be >= 0, got {self.speed}")
        for name in ("pre_auth_timeout", "keepalive_timeout", "setup_timeout", "drop_linger"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be > 0, got {v}")
        if self.drop_action not in ("silent", "close", "abort"):
            raise ValueError(f"drop_action must be silent, close or abort, got {self.drop_action!r}")
        if self.gps_solution is not None and not 0 <= self.gps_solution <= 255:
            raise ValueError(f"gps_solution must be 0..255, got {self.gps_solution}")
        if self.record_frames < 0 or self.max_logs < 1:
            raise ValueError("record_frames must be >= 0 and max_logs >= 1")
        if self.max_sessions is not None and self.max_sessions < 1:
            raise ValueError(f"max_sessions must be >= 1, got {self.max_sessions}")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be 0..65535, got {self.port}")
        self.faults.validate()


# --------------------------------------------------------------------------------------------
# the server
# --------------------------------------------------------------------------------------------


class KiwiEmulator:
    """A KiwiSDR-compatible WebSocket server (see the module docstring).

    Usage::

        async with KiwiEmulator(EmulatorConfig(speed=4.0)) as emu:
            url = f"ws://127.0.0.1:{emu.port}/123/SND"
            ...
            log = emu.connections[-1]

    Args:
        config: Server configuration (validated in :meth:`start`); None = defaults. The emulator
            works on a copy (:attr:`config`); change faults with :meth:`set_faults`.
        **overrides: Field overrides applied to that copy.
    """

    def __init__(self, config: EmulatorConfig | None = None, **overrides: Any) -> None:
        base = config if config is not None else EmulatorConfig()
        self.config = dataclasses.replace(base, **overrides)
        self.config.faults = self.config.faults.copy()  # set_faults never mutates the caller's object
        self.config.signals = dict(self.config.signals)
        self._server: Server | None = None
        self._port: int | None = None
        self._logs: deque[ConnectionLog] = deque()
        self._sessions: dict[int, EmulatorSession] = {}
        self._channels = ChannelTable()
        self._next_id = 1
        self._ended_sessions = 0
        self._listening = False
        self._stopping = False
        self._changed: asyncio.Event | None = None
        self._cache: OrderedDict[tuple[object, int, int, bool], tuple[NDArray[np.int16], float]] = OrderedDict()

    # ------------------------------------------------------------------ lifecycle

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        if self._port is None:
            raise RuntimeError("the emulator is not started")
        return self._port

    @property
    def listening(self) -> bool:
        """Whether new connections are accepted."""
        return self._listening

    def url(self, ts: int = 1, query: str = "") -> str:
        """``ws://host:port/<ts>/SND[?query]``."""
        return f"ws://{format_hostport(self.config.host, self.port)}/{ts}/SND" + (f"?{query}" if query else "")

    async def start(self) -> int:
        """Bind and start serving; returns the port.

        Raises:
            ValueError: invalid configuration.
            OSError: the port cannot be bound.
        """
        if self._server is not None:
            raise RuntimeError("already started")
        self.config.validate()
        await asyncio.to_thread(_adpcm_warmup)  # compile (or load) the numba kernels off the loop
        self._changed = asyncio.Event()
        self._stopping = False
        self._server = await serve(
            self._handler,
            self.config.host,
            self.config.port,
            process_request=self._process_request,
            compression=None,
            ping_interval=None,
            close_timeout=self.config.close_timeout,
            max_size=1 << 16,
            max_queue=16,
            server_header="KiwiSDR-emulator (streamkit)",
        )
        sockets = list(self._server.sockets)
        self._port = int(sockets[0].getsockname()[1])
        self._listening = True
        logger.info(
            "kiwi emulator listening on ws://%s/<ts>/SND (rate %.6f Hz, speed %g)",
            format_hostport(self.config.host, self._port),
            self.config.sample_rate,
            self.config.speed,
        )
        return self._port

    async def stop(self) -> None:
        """Stop listening, close every connection (1001) and wait for the handlers (bounded by
        ``stop_timeout``; stragglers are aborted). Idempotent."""
        server = self._server
        if server is None:
            return
        self._listening = False
        self._stopping = True
        server.close(close_connections=True)  # close frames 1001 "going away"
        try:
            await asyncio.wait_for(server.wait_closed(), self.config.stop_timeout)
        except asyncio.TimeoutError:  # noqa: UP041 (not the builtin on 3.10)
            logger.warning("kiwi emulator: handlers did not finish in %.1f s; aborting connections", self.config.stop_timeout)
            for s in list(self._sessions.values()):
                s.request_stop()
                s.ws.transport.abort()
            with contextlib.suppress(asyncio.TimeoutError):  # noqa: UP041
                await asyncio.wait_for(server.wait_closed(), self.config.stop_timeout)
        self._server = None
        logger.info("kiwi emulator stopped")

    async def __aenter__(self) -> KiwiEmulator:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def stop_listening(self) -> None:
        """Stop accepting new connections; existing ones carry on."""
        if self._server is not None and self._listening:
            self._listening = False
            self._server.server.close()
            logger.info("kiwi emulator: stopped listening")
            self._notify()

    # ------------------------------------------------------------------ introspection

    @property
    def connections(self) -> list[ConnectionLog]:
        """Logs of the connections, oldest first (at most ``max_logs``)."""
        return list(self._logs)

    @property
    def active_channels(self) -> int:
        """Channels in use."""
        return len(self._channels)

    def set_faults(self, conn_id: int | None = None, spec: str | None = None, **changes: Any) -> None:
        """Change faults at run time (call from the emulator's loop).

        Args:
            conn_id: Only this connection; None = the server config and every live connection.
            spec: A fault spec string (:func:`parse_fault_spec`) applied first.
            **changes: :class:`FaultConfig` fields.

        Raises:
            ValueError: bad spec or values; KeyError: unknown connection.
        """

        def apply(f: FaultConfig) -> None:
            new = parse_fault_spec(spec, f) if spec else f.copy()
            for k, v in changes.items():
                if not hasattr(new, k):
                    raise ValueError(f"unknown fault {k!r}")
                setattr(new, k, v)
            new.validate()
            for fld in dataclasses.fields(FaultConfig):
                setattr(f, fld.name, getattr(new, fld.name))

        if conn_id is not None:
            s = self._sessions.get(conn_id)
            if s is None:
                raise KeyError(f"no live connection {conn_id}")
            apply(s.faults)
            s.wake()
            return
        apply(self.config.faults)
        for s in self._sessions.values():
            apply(s.faults)
            s.wake()

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``predicate()`` is true; it is re-checked whenever a connection changes
        phase or ends. Returns False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0 or self._changed is None:
                return False
            ev = self._changed
            if math.isinf(remaining):
                await ev.wait()
                continue
            with contextlib.suppress(asyncio.TimeoutError):  # noqa: UP041
                await asyncio.wait_for(ev.wait(), remaining)
        return True

    async def wait_stopped_listening(self) -> None:
        """Return when the server no longer listens and every connection has ended."""
        await self.wait_until(lambda: not self._listening and not self._sessions, timeout=math.inf)

    def _notify(self) -> None:
        ev = self._changed
        if ev is not None:
            self._changed = asyncio.Event()
            ev.set()

    # ------------------------------------------------------------------ internals

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        path = urlsplit(request.path).path
        if not _PATH_RE.match(path):
            return connection.respond(http.HTTPStatus.NOT_FOUND, "Not Found\n")
        return None

    async def _handler(self, ws: ServerConnection) -> None:
        loop = asyncio.get_running_loop()
        parts = urlsplit(ws.request.path if ws.request is not None else "/0/SND")
        m = _PATH_RE.match(parts.path)
        ts = int(m.group(1)) if m else 0
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        faults = self.config.faults.copy()
        try:
            faults = faults_from_query(query, faults)
        except ValueError as exc:
            logger.warning("kiwi emulator: bad fault in query %r: %s", parts.query, exc)
        peer = ws.remote_address
        peer_s = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)
        log = ConnectionLog(self._next_id, ws.request.path if ws.request else "", ts, query, peer_s, loop.time(), faults)
        self._next_id += 1
        self._logs.append(log)
        self._trim_logs()
        session = EmulatorSession(self, ws, log)
        self._sessions[log.id] = session
        _rlog.log(loop.time(), logging.INFO, "connect", "kiwi emulator: connection %d from %s path %s", log.id, peer_s, log.path)
        reader = asyncio.create_task(session.reader(), name=f"kiwi-emulator-reader-{log.id}")
        try:
            await session.clock()
        except Exception as exc:  # e.g. a signal callable that raised: end this connection only
            logger.exception("kiwi emulator: connection %d failed", log.id)
            log.end_reason = f"internal error: {exc!r}"
            with contextlib.suppress(ConnectionClosed):
                await ws.close(1011, "emulator error")
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            self._channels.release(log)
            had_channel = log.channel is not None
            log.closed_at = loop.time()
            if log.end_reason is None:
                log.end_reason = "server stopped" if self._stopping else "client closed"
            log.phase = Phase.CLOSED
            del self._sessions[log.id]
            _rlog.log(
                loop.time(),
                logging.INFO,
                "disconnect",
                "kiwi emulator: connection %d ended (%s), %d frames sent",
                log.id,
                log.end_reason,
                log.frames_sent,
            )
            if had_channel:
                self._ended_sessions += 1
                if self.config.max_sessions is not None and self._ended_sessions >= self.config.max_sessions:
                    self.stop_listening()
            self._notify()

    def _trim_logs(self) -> None:
        while len(self._logs) > self.config.max_logs:
            for i, old in enumerate(self._logs):
                if old.closed_at is not None:
                    del self._logs[i]
                    break
            else:
                return

    def _station_block(self, freq_khz: float, passband: tuple[int, int] | None, n: int, start: int, iq: bool) -> tuple[NDArray[np.int16], float]:
        """The frame samples heard at ``freq_khz`` (cached: signals are deterministic)."""
        fn = select_station(self.config.signals, self.config.noise_floor, freq_khz, passband)
        key = (fn, n, start, iq)
        if self.config.cache_signals:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        value = render_block(fn, n, start, self.config.sample_rate, iq)
        if self.config.cache_signals:
            self._cache[key] = value
            while len(self._cache) > 256:
                self._cache.popitem(last=False)
        return value


# --------------------------------------------------------------------------------------------
# thread runner
# --------------------------------------------------------------------------------------------


class EmulatorThread:
    """Run a :class:`KiwiEmulator` in a background thread with its own event loop.

    Usage::

        with EmulatorThread(EmulatorConfig(speed=4)) as t:
            url = f"ws://127.0.0.1:{t.port}/1/SND"
            ...
            logs = t.call(lambda: t.emulator.connections)

    Args:
        config: Server configuration; None = defaults.
        **overrides: Field overrides.
    """

    def __init__(self, config: EmulatorConfig | None = None, **overrides: Any) -> None:
        self.emulator = KiwiEmulator(config, **overrides)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.port: int = 0
        """The bound port (after :meth:`start`)."""

    def start(self, timeout: float = 30.0) -> int:
        """Start the thread and the server; returns the port.

        Raises:
            RuntimeError: already started, or the server did not come up in time.
            Exception: whatever :meth:`KiwiEmulator.start` raised.
        """
        if self._thread is not None:
            raise RuntimeError("already started")
        self._thread = threading.Thread(target=self._run, name="kiwi-emulator", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError("the kiwi emulator did not start in time")
        if self._error is not None:
            self._thread.join()
            raise self._error
        return self.port

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop_event = asyncio.Event()
            try:
                self.port = await self.emulator.start()
            except BaseException as exc:
                self._error = exc
                self._ready.set()
                return
            self._ready.set()
            try:
                await self._stop_event.wait()
            finally:
                await self.emulator.stop()

        asyncio.run(main())

    def call(self, fn: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Run ``fn()`` in the emulator's loop (e.g. ``set_faults``) and return its result."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("not started")

        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server and join the thread. Idempotent."""
        thread, loop, ev = self._thread, self._loop, self._stop_event
        if thread is None:
            return
        if loop is not None and ev is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(ev.set)
        thread.join(timeout)
        if thread.is_alive():
            raise RuntimeError("the kiwi emulator thread did not stop in time")
        self._thread = None

    def __enter__(self) -> EmulatorThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------


def add_emulator_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``streamkit emulate kiwi`` options to ``parser``."""
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 = any free port)")
    parser.add_argument("--sample-rate", type=float, default=12001.188, help="true audio rate in Hz (default 12001.188; the WB build uses 11999.028)")
    parser.add_argument("--audio-rate", type=int, default=12000, help="nominal audio_rate (default 12000)")
    add_password_arguments(parser, help_what="channel password (default: none)")
    parser.add_argument("--rx-chans", type=int, default=8, help="receiver channels (default 8)")
    parser.add_argument("--speed", type=float, default=1.0, help="pacing: 1 = real time, 2 = twice as fast, 0 = as fast as the client reads")
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="SPEC",
        help="fault spec, repeatable: drop_every=N; drop=S1,S2; too_busy; badp=N; down=N; down_reason=TEXT; redirect=URL; kick=T; "
        "kick_message=TEXT; inactivity_timeout=T; stall=T; slow=F; malformed=SEQ:KIND,...; close_mid_frame=SEQ; sample_rate=TEXT; max_frames=K",
    )
    parser.add_argument(
        "--station", action="append", default=[], metavar="KHZ=KIND", help="add a station, e.g. 7074=tone:1500:-12+noise:-40 or 9500=speech:3"
    )
    parser.add_argument(
        "--play", action="append", default=[], metavar="FREQ_KHZ:PATH[:PPM[:DELAY_S]]",
        help="a station playing an audio file from the connection's start + DELAY_S, its clock PPM fast (see streamkit.io.kiwi_signal_file)",
    )  # fmt: skip
    parser.add_argument("--no-default-stations", action="store_true", help="start from an empty station list")
    parser.add_argument("--duration", type=float, default=None, help="stop after S seconds (default: until Ctrl-C)")
    parser.add_argument("--max-sessions", type=int, default=None, help="stop after N sessions have ended (deterministic captures)")
    parser.add_argument("--gps-solution", type=int, default=None, help="last_gps_solution of IQ frames (255 = no fix; default cycles 0..3)")
    parser.add_argument("--keepalive-timeout", type=float, default=60.0, help="drop after S s without keepalive (default 60)")
    parser.add_argument("--pre-auth-timeout", type=float, default=20.0, help="password_timeout after S s without auth (default 20)")
    parser.add_argument(
        "--drop-action",
        choices=("silent", "close", "abort"),
        default="silent",
        help="what a drop does on the wire (default silent, like the firmware)",
    )
    parser.add_argument("--record-frames", type=int, default=0, help="frames per connection kept in memory for inspection (default 0)")


def config_from_args(ns: argparse.Namespace) -> EmulatorConfig:
    """Build an :class:`EmulatorConfig` from parsed :func:`add_emulator_arguments` options.

    Raises:
        ValueError: invalid option values.
    """
    signals = {} if ns.no_default_stations else default_stations()
    for spec in ns.station:
        khz, fn = parse_station_spec(spec)
        signals[khz] = fn
    for spec in getattr(ns, "play", []):
        from streamkit.io.kiwi_signal_file import parse_play_spec

        khz, fn = parse_play_spec(spec)
        signals[khz] = fn
    cfg = EmulatorConfig(
        host=ns.host,
        port=ns.port,
        sample_rate=ns.sample_rate,
        audio_rate=ns.audio_rate,
        password=password_from_args(ns) or None,
        rx_chans=ns.rx_chans,
        speed=ns.speed,
        signals=signals,
        faults=parse_fault_spec(ns.fault),
        pre_auth_timeout=ns.pre_auth_timeout,
        keepalive_timeout=ns.keepalive_timeout,
        drop_action=ns.drop_action,
        gps_solution=ns.gps_solution,
        record_frames=ns.record_frames,
        max_sessions=ns.max_sessions,
    )
    cfg.validate()
    if ns.duration is not None and not (math.isfinite(ns.duration) and ns.duration > 0):
        raise ValueError(f"--duration must be > 0, got {ns.duration}")
    return cfg


async def run_emulator(config: EmulatorConfig, duration: float | None = None, stop: asyncio.Event | None = None) -> KiwiEmulator:
    """Serve until ``duration`` elapses, ``stop`` is set, or (with ``max_sessions``) the server
    stopped listening and every connection ended. Returns the stopped emulator (for its logs)."""
    emu = KiwiEmulator(config)
    await emu.start()
    print(f"KiwiSDR emulator listening on ws://{format_hostport(config.host, emu.port)}/<ts>/SND", file=sys.stderr, flush=True)
    waiters: list[asyncio.Future[Any]] = [asyncio.ensure_future(emu.wait_stopped_listening())]
    if stop is not None:
        waiters.append(asyncio.ensure_future(stop.wait()))
    try:
        await asyncio.wait(waiters, timeout=duration, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
        await emu.stop()
    return emu


def run_from_args(ns: argparse.Namespace) -> int:
    """Run the emulator from parsed options until Ctrl-C, ``--duration`` or ``--max-sessions``.

    Returns:
        0 on a normal stop, 2 for invalid options or a port that cannot be bound.
    """
    try:
        cfg = config_from_args(ns)
    except (ValueError, ConfigError) as exc:
        print(f"streamkit: error: {exc}", file=sys.stderr)
        return 2

    async def amain() -> KiwiEmulator:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        installed = []
        for sig in (_signal.SIGINT, _signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
                installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        try:
            return await run_emulator(cfg, ns.duration, stop)
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)

    try:
        emu = asyncio.run(amain())
    except OSError as exc:
        print(f"streamkit: error: cannot listen on {cfg.host}:{cfg.port}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    logs = emu.connections
    print(f"KiwiSDR emulator stopped: {len(logs)} connections, {sum(c.frames_sent for c in logs)} frames sent", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None, prog: str = "streamkit emulate kiwi") -> int:
    """``streamkit emulate kiwi [options]`` (also ``python -m streamkit.io.kiwi_emulator``)."""
    parser = argparse.ArgumentParser(
        prog=prog, description="KiwiSDR-compatible loopback server: the real SND protocol, programmable signals per frequency, fault injection."
    )
    add_emulator_arguments(parser)
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    ns = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if ns.verbose else logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run_from_args(ns)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
