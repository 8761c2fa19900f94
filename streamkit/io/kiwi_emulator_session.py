"""The I/O side of one KiwiSDR emulator connection (:class:`EmulatorSession`).

A reader task feeds the client's messages to the connection's sans-I/O
:class:`~streamkit.protocols.kiwi_server.KiwiServerProtocol` and sends the replies; the clock
coroutine sleeps until the protocol's next timer, runs it and sends (or closes, resets, cuts) what
it returns. Used by :class:`streamkit.io.kiwi_emulator.KiwiEmulator`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame, Opcode

from streamkit.protocols.kiwi_faults import FaultConfig
from streamkit.protocols.kiwi_server import Abort, Close, FrameOut, KiwiServerProtocol, Output, Timer
from streamkit.protocols.kiwi_server_log import ConnectionLog, SentMessage

if TYPE_CHECKING:
    from streamkit.io.kiwi_emulator import KiwiEmulator

__all__ = ["EmulatorSession"]

logger = logging.getLogger("streamkit.io.kiwi_emulator")  # the emulator's logger


class EmulatorSession:
    """The I/O side of one WebSocket connection: a reader task feeds client messages to the
    connection's :class:`KiwiServerProtocol`; the clock coroutine (run by the connection handler)
    sleeps until its next timer, runs it and sends what it returns."""

    def __init__(self, emu: KiwiEmulator, ws: ServerConnection, log: ConnectionLog) -> None:
        self.emu = emu
        self.cfg = emu.config
        self.ws = ws
        self.log = log
        self.loop = asyncio.get_running_loop()
        self.proto = KiwiServerProtocol(emu.config, log, emu._channels, emu._station_block)
        self._wake = asyncio.Event()
        self._send_lock = asyncio.Lock()
        self._peer_closed = False
        self._stop_requested = False
        self._phase = log.phase

    @property
    def faults(self) -> FaultConfig:
        """This connection's faults (``log.faults``; change them with :meth:`KiwiEmulator.set_faults`)."""
        return self.log.faults

    def wake(self) -> None:
        self._wake.set()

    def request_stop(self) -> None:
        self._stop_requested = True
        self._wake.set()

    def _phase_changed(self) -> None:
        """Tell the emulator's waiters when the protocol moved to another phase."""
        if self.log.phase is not self._phase:
            self._phase = self.log.phase
            self.emu._notify()

    async def _send(self, data: bytes | str) -> bool:
        """Send one message (binary for bytes); False if the connection is gone."""
        if self._peer_closed:
            return False
        async with self._send_lock:
            try:
                await self.ws.send(data)
            except ConnectionClosed:
                self._peer_closed = True
                self._wake.set()
                return False
        self.log.bytes_sent += len(data)
        if isinstance(data, bytes) and data[:3] == b"MSG" and len(self.log.messages) < 10_000:
            self.log.messages.append(SentMessage(self.loop.time(), data))
        return True

    async def _send_all(self, messages: list[bytes]) -> None:
        for m in messages:
            if not await self._send(m):
                return

    # ------------------------------------------------------------------ reader side

    async def reader(self) -> None:
        """Receive client messages until the connection closes."""
        try:
            async for message in self.ws:
                now = self.loop.time()
                text = message if isinstance(message, str) else bytes(message).decode("utf-8", "replace")
                try:
                    out = self._on_message(text, now)
                except Exception:  # never let a bad command kill the connection handler
                    logger.exception("kiwi emulator: internal error on command %r", text[:200])
                    out = []
                if out:
                    await self._send_all(out)
                self._phase_changed()
                self._wake.set()
        except ConnectionClosed:
            pass
        finally:
            self._peer_closed = True
            self._wake.set()

    def _on_message(self, text: str, now: float) -> list[bytes]:
        """Process one client message; returns the messages to send (in order)."""
        return self.proto.receive_message(text, now)

    # ------------------------------------------------------------------ clock side

    def _next_action(self, now: float) -> tuple[float | None, Callable[[float], Awaitable[bool]] | None]:
        """The protocol's earliest pending timer and the coroutine that runs it."""
        deadline, timer = self.proto.next_timer(now)
        if timer is None:
            return None, None
        if timer is Timer.FRAME:
            return deadline, self._on_frame_due
        return deadline, functools.partial(self._on_timer, timer)

    async def _sleep_until(self, deadline: float | None) -> None:
        handle = self.loop.call_at(deadline, self._wake.set) if deadline is not None else None
        try:
            await self._wake.wait()
        finally:
            if handle is not None:
                handle.cancel()
            self._wake.clear()

    async def clock(self) -> None:
        """Run timers and frames until the session ends."""
        while not self._peer_closed and not self._stop_requested:
            now = self.loop.time()
            deadline, action = self._next_action(now)
            if action is None or deadline is None or deadline > now:
                await self._sleep_until(deadline)
                continue
            if await action(now):
                return

    async def _perform(self, outputs: list[Output]) -> bool:
        """Send or do what the protocol asked; True when the session is over."""
        for o in outputs:
            if isinstance(o, bytes):
                await self._send(o)
            elif isinstance(o, Close):
                with contextlib.suppress(ConnectionClosed):
                    await self.ws.close(o.code, o.reason)
                return True
            elif isinstance(o, Abort):
                self.ws.transport.abort()
                return True
        return False

    async def _on_timer(self, timer: Timer, now: float) -> bool:
        outputs = self.proto.fire(timer, now)
        self._phase_changed()
        return await self._perform(outputs)

    async def _on_frame_due(self, now: float) -> bool:
        """Send (or drop, corrupt, cut) the next frame; True when the session is over."""
        out: FrameOut = self.proto.frame_due(now, time.time_ns())
        if out.status == "cut":
            await self._cut(out.frame)
            return True
        if out.status != "dropped":
            if not await self._send(out.payload):
                return True
            if out.status == "sent":
                self.log.frames_sent += 1
            else:
                self.log.frames_malformed += 1
        if self.cfg.speed <= 0:
            await asyncio.sleep(0)  # as fast as the client reads, but let other tasks run
        if out.close_after:
            self.log.end_reason = "max_frames"
            with contextlib.suppress(ConnectionClosed):
                await self.ws.close(1000, "")
            return True
        return False

    async def _cut(self, frame: bytes) -> None:
        """close_mid_frame: write the first half of the frame's WebSocket bytes straight to the
        transport, then close TCP (FIN after the buffered bytes; no WebSocket close frame), as a
        server process dying mid-write would. ``websockets`` serialises the frame (unmasked, as a
        server sends it); only the partial write bypasses its connection."""
        raw = Frame(Opcode.BINARY, frame).serialize(mask=False)
        async with self._send_lock:
            transport = self.ws.transport
            transport.write(raw[: len(raw) // 2])
            self.log.bytes_sent += len(raw) // 2
            transport.close()
        self.log.end_reason = "close_mid_frame"
        self._peer_closed = True
