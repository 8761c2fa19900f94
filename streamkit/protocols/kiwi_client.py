"""Sans-I/O KiwiSDR audio (``SND``) WebSocket client: :class:`KiwiClientProtocol`.

It does no I/O: no sockets, no asyncio, no clock. The caller (``streamkit.io.kiwi_source``) owns
the WebSocket and feeds this object whole messages and the current monotonic time, in the style of
python-websockets' sans-I/O core:

* :meth:`KiwiClientProtocol.connection_made` after the WebSocket upgrade,
* :meth:`KiwiClientProtocol.receive_message` for every WebSocket message received,
* :meth:`KiwiClientProtocol.tick` every few hundred milliseconds (keepalives),
* :meth:`KiwiClientProtocol.events_received` to drain typed events
  (:mod:`streamkit.protocols.kiwi_events`), and
* :meth:`KiwiClientProtocol.data_to_send` to drain text commands to send, one message each.

Nothing raised on the receive path: malformed input becomes a :class:`ProtocolViolation`
event, server errors become a :class:`Terminal` event. The wire format shared with the server
is in :mod:`streamkit.protocols.kiwi_frames`; protocol notes in ``docs/kiwisdr.md``.
"""

from __future__ import annotations

import logging
import math
from typing import Final
from urllib.parse import quote, unquote

import numpy as np
from numpy.typing import NDArray

from streamkit.protocols.adpcm import AdpcmDecoder
from streamkit.protocols.kiwi_events import (
    AudioFrame,
    AuthResult,
    GapReason,
    IgnoredMessage,
    KiwiCounters,
    KiwiEvent,
    ProtocolViolation,
    SampleRate,
    SequenceGap,
    ServerInfo,
    State,
    Terminal,
    TerminalKind,
    UnknownMessage,
)
from streamkit.protocols.kiwi_frames import (
    ENCODED_KEYS,
    U32,
    SndFlag,
    adpcm_to_float,
    check_freq,
    check_mode,
    parse_float,
    parse_int,
    parse_number,
    parse_snd_header,
    pcm_to_float,
    resolve_passband,
    samples_per_frame,
    smeter_dbm,
    snd_payload_error,
)
from streamkit.protocols.kiwi_msg_keys import ENDING_KEYS, INFO_KEYS, KNOWN_IGNORED_TAGS, badp_ending, msg_pairs, session_ending
from streamkit.protocols.kiwi_tally import MessageTally, message_kind

__all__ = [
    "AR_OUT_RATE",
    "MAX_KEEPALIVES_BEFORE_SETUP",
    "MAX_SAMPLE_RATE",
    "MIN_SAMPLE_RATE",
    "PRE_SETUP_KEEPALIVE_INTERVAL",
    "KiwiClientProtocol",
]

logger = logging.getLogger(__name__)

AR_OUT_RATE: Final = 44100
"""``out=`` value of ``SET AR OK``; kiwiclient's value. Only ``out != 0`` matters."""
MIN_SAMPLE_RATE: Final = 1000.0
MAX_SAMPLE_RATE: Final = 1e6
MAX_KEEPALIVES_BEFORE_SETUP: Final = 4
"""The server drops a client that sends more than 4 keepalives before setup is complete."""
PRE_SETUP_KEEPALIVE_INTERVAL: Final = 5.0
"""Minimum keepalive spacing (s) before setup is complete: 4 x 5 s covers the 20 s pre-auth
window without spending the pre-setup keepalive budget in the first seconds."""
_HALF_U32: Final = 1 << 31


class KiwiClientProtocol:
    """Sans-I/O client side of one KiwiSDR ``/<ts>/SND`` WebSocket connection.

    Usage (the adapter's loop)::

        p = KiwiClientProtocol(7100.0, "lsb")
        ws = await connect(f"ws://{host}:8073{p.url_path(ts)}")
        p.connection_made(now())
        send(p.data_to_send())
        for each message m (and every ~0.25 s with no message: p.tick(now())):
            p.receive_message(m, now())
            send(p.data_to_send()); handle(p.events_received())
            # on Terminal: close the socket (the server will not)

    Parameters:
        freq_khz: Carrier/dial frequency in kHz as sent in ``SET mod freq=`` (baseband: the
            Kiwi's ``freq_offset``, reported as ServerInfo, is NOT subtracted here).
        mode: One of :data:`MODES`.
        low_cut, high_cut: Passband edges in Hz relative to the carrier; None = the mode's
            default (:data:`DEFAULT_PASSBANDS`). Must satisfy ``low_cut < high_cut``.
        password: Channel password (percent-encoded on the wire).
        user: Name shown in the Kiwi's user list (percent-encoded on the wire).
        compression: Ask for ADPCM (True) or 16-bit PCM (False) mono audio.
        agc, man_gain, agc_hang, agc_thresh, agc_slope, agc_decay: ``SET agc=...`` fields
            (kiwiclient defaults: 1, 50, 0, -100, 6, 1000).
        keepalive_interval: Minimum spacing of ``SET keepalive`` once setup is complete (s).
        stall_timeout: If set, :meth:`tick` ends the session with a retryable
            ``Terminal(STALLED)`` when nothing was received for this many seconds (the server
            never closes a dead session itself; kiwiclient uses 10 s), or
            ``Terminal(NO_AUDIO)`` naming the kinds and counts of what it sent when messages
            came but no audio frame. None disables both.

    Events:
        :data:`KiwiEvent`: SampleRate, AudioFrame, SequenceGap, ServerInfo, AuthResult,
        Terminal, ProtocolViolation, UnknownMessage, IgnoredMessage.

    Which commands go out when, the keepalive budget before setup, and how frames are decoded
    (ADPCM resets, duplicates, sequence gaps, malformed frames): ``docs/kiwisdr.md``, *The client
    protocol object*.

    State:
        :class:`State`; the ADPCM decoder state; sequence tracking; :class:`KiwiCounters`.
        After a :class:`Terminal` the state is CLOSED, the outgoing queue is cleared, command
        methods do nothing, and further messages are silently counted in
        ``counters.ignored_after_close`` without events.
    """

    def __init__(
        self,
        freq_khz: float,
        mode: str = "lsb",
        low_cut: float | None = None,
        high_cut: float | None = None,
        password: str = "",
        user: str = "streamkit",
        compression: bool = True,
        agc: bool = True,
        man_gain: int = 50,
        agc_hang: bool = False,
        agc_thresh: int = -100,
        agc_slope: int = 6,
        agc_decay: int = 1000,
        keepalive_interval: float = 1.0,
        stall_timeout: float | None = None,
    ) -> None:
        self._mode = check_mode(mode)
        self._freq_khz = check_freq(freq_khz)
        self._low_cut, self._high_cut = resolve_passband(self._mode, low_cut, high_cut, None)
        self._password = password
        self._user = user
        self._compression = bool(compression)
        self._agc = bool(agc)
        self._agc_hang = bool(agc_hang)
        self._agc_thresh = int(agc_thresh)
        self._agc_slope = int(agc_slope)
        self._agc_decay = int(agc_decay)
        self._man_gain = int(man_gain)
        if not (math.isfinite(keepalive_interval) and keepalive_interval > 0):
            raise ValueError(f"keepalive_interval must be > 0, got {keepalive_interval}")
        self._keepalive_interval = float(keepalive_interval)
        if stall_timeout is not None and not (math.isfinite(stall_timeout) and stall_timeout > 0):
            raise ValueError(f"stall_timeout must be > 0 or None, got {stall_timeout}")
        self._stall_timeout = stall_timeout

        self._state = State.CONNECTING
        self._events: list[KiwiEvent] = []
        self._out: list[str] = []
        self.counters = KiwiCounters()
        """Running counters; see :class:`KiwiCounters`."""
        self.server_info: dict[str, int | float | str | None] = {}
        """Last value of every ServerInfo key received."""
        self._terminal: Terminal | None = None

        self._connected_at: float | None = None
        self._last_rx_at: float | None = None
        self._last_audio_at: float | None = None
        self._since_audio = MessageTally()
        self._last_keepalive_at: float | None = None
        self._keepalives_before_setup = 0

        self._sample_rate: float | None = None
        self._audio_rate: int | None = None
        self._sample_rate_emitted = False
        self._warned_no_rate = False
        self._auth_ok = False
        self._setup_sent = False
        self._ar_ok_sent = False

        self._decoder = AdpcmDecoder()
        self._prev_flags: int | None = None
        self._last_seq: int | None = None

    # ---------------------------------------------------------------- properties

    @property
    def state(self) -> State:
        """Current :class:`State`."""
        return self._state

    @property
    def sample_rate(self) -> float | None:
        """The true sample rate from ``MSG sample_rate`` (Hz), once known."""
        return self._sample_rate

    @property
    def audio_rate(self) -> int | None:
        """The nominal ``MSG audio_rate`` (Hz), once known."""
        return self._audio_rate

    @property
    def authenticated(self) -> bool:
        """``badp=0`` was received."""
        return self._auth_ok

    @property
    def setup_complete(self) -> bool:
        """Every command the server needs before it streams has been queued."""
        return self._setup_sent and self._ar_ok_sent

    @property
    def terminal(self) -> Terminal | None:
        """The Terminal event that closed the session, if any."""
        return self._terminal

    @property
    def freq_khz(self) -> float:
        """Current tuning frequency (kHz)."""
        return self._freq_khz

    @property
    def mode(self) -> str:
        """Current mode."""
        return self._mode

    @property
    def passband(self) -> tuple[int, int]:
        """Current ``(low_cut, high_cut)`` in Hz."""
        return self._low_cut, self._high_cut

    @property
    def adpcm_state(self) -> tuple[int, int]:
        """The ADPCM decoder's ``(index, prev)``."""
        return self._decoder.state

    # ---------------------------------------------------------------- sans-I/O interface

    @staticmethod
    def url_path(ts: int) -> str:
        """The request path ``/<ts>/SND``. Use a fresh ``ts`` for each session.

        Raises:
            ValueError: ``ts`` negative.
        """
        if ts < 0:
            raise ValueError(f"ts must be >= 0, got {ts}")
        return f"/{int(ts)}/SND"

    def connection_made(self, now: float) -> None:
        """The WebSocket is open: queue ``SET auth`` (it must be the first message).

        Args:
            now: Monotonic time in seconds.
        """
        if self._state is not State.CONNECTING:
            logger.debug("connection_made() in state %s ignored", self._state.name)
            return
        self._connected_at = now
        self._last_rx_at = self._last_audio_at = now
        self._set_state(State.AUTHENTICATING)
        self._out.append(f"SET auth t=kiwi p={quote(self._password, safe='')}")

    def receive_message(self, data: bytes | bytearray | memoryview | str, now: float) -> None:
        """Process one whole WebSocket message. Never raises on bad input.

        Args:
            data: The message payload: bytes for binary messages, str for text messages
                (the Kiwi sends only binary).
            now: Monotonic time in seconds.
        """
        if self._state is State.CLOSED:
            self.counters.ignored_after_close += 1
            return
        self.counters.messages += 1
        self._last_rx_at = now
        try:
            if isinstance(data, str):
                self.counters.bytes += len(data)
                self._since_audio.add(message_kind(data))
                self._violation("text message where the Kiwi sends binary ones", len(data))
                return
            mv = memoryview(data)
            if mv.ndim != 1 or mv.format != "B":
                mv = mv.cast("B")
            self.counters.bytes += len(mv)
            frames = self.counters.frames
            self._dispatch(mv, now)
            if self.counters.frames != frames:
                self._last_audio_at = now
                self._since_audio.clear()
            else:
                self._since_audio.add(message_kind(mv))
        except Exception as exc:  # pragma: no cover - defensive: never raise across the boundary
            logger.exception("internal error while parsing a Kiwi message")
            self._violation(f"internal error while parsing: {exc!r}", len(data))

    def tick(self, now: float) -> None:
        """Advance timers: queue a keepalive when due, detect stalls if enabled.

        Call it regularly (every 0.1-0.5 s) while the connection is open.

        Args:
            now: Monotonic time in seconds.
        """
        if self._state is State.CLOSED or self._connected_at is None:
            return
        if self._stall_timeout is not None and self._last_rx_at is not None and now - self._last_rx_at >= self._stall_timeout:
            self._terminate(
                TerminalKind.STALLED,
                True,
                f"nothing received for {now - self._last_rx_at:.1f} s",
            )
            return
        if self._stall_timeout is not None and self._last_audio_at is not None and self._since_audio.total:
            quiet = now - self._last_audio_at
            if quiet >= self._stall_timeout:
                n = self._since_audio.total
                self._terminate(
                    TerminalKind.NO_AUDIO,
                    True,
                    f"no audio for {quiet:.1f} s: the server sent {n} other message{'s' if n != 1 else ''} instead ({self._since_audio.summary()})",
                )
                return
        self._maybe_keepalive(now)

    def connection_lost(self, now: float) -> None:
        """The transport closed. Emits a retryable ``Terminal(CONNECTION_LOST)`` unless a
        Terminal was already emitted or :meth:`close` was called.

        Args:
            now: Monotonic time in seconds.
        """
        if self._state is State.CLOSED:
            return
        self._terminate(TerminalKind.CONNECTION_LOST, True, "connection closed by the peer")

    def close(self) -> None:
        """Local close (e.g. the user stops the source): CLOSED, no event, queue cleared."""
        if self._state is not State.CLOSED:
            self._out.clear()
            self._set_state(State.CLOSED)

    def events_received(self) -> list[KiwiEvent]:
        """Drain and return the events parsed since the last call."""
        events, self._events = self._events, []
        return events

    def data_to_send(self) -> list[str]:
        """Drain and return the commands to send, one text WebSocket message each."""
        out, self._out = self._out, []
        return out

    # ---------------------------------------------------------------- commands

    def set_frequency(
        self,
        freq_khz: float,
        mode: str | None = None,
        low_cut: float | None = None,
        high_cut: float | None = None,
    ) -> None:
        """Retune: queue the whole ``SET mod=...`` command.

        A changed mode without explicit cuts takes that mode's default passband; the same mode
        keeps the current cuts unless new ones are given. Before setup the new values are only
        stored (they go out with the setup); after a Terminal nothing is sent.

        Raises:
            ValueError: unknown mode, negative/non-finite frequency, frequency above the
                server's ``bandwidth`` (once known), or ``low_cut >= high_cut``.
        """
        new_mode = self._mode if mode is None else check_mode(mode)
        f = check_freq(freq_khz)
        bandwidth = self.server_info.get("bandwidth")
        if isinstance(bandwidth, int | float) and bandwidth > 0 and f > bandwidth / 1000.0:
            raise ValueError(f"freq_khz {f} above the server's span of {bandwidth / 1000.0} kHz")
        current = (self._low_cut, self._high_cut) if new_mode == self._mode else None
        lo, hi = resolve_passband(new_mode, low_cut, high_cut, current)
        self._freq_khz, self._mode, self._low_cut, self._high_cut = f, new_mode, lo, hi
        if self._setup_sent:
            self._queue(self._mod_command())

    def set_agc(
        self,
        agc: bool | None = None,
        hang: bool | None = None,
        thresh: int | None = None,
        slope: int | None = None,
        decay: int | None = None,
        man_gain: int | None = None,
    ) -> None:
        """Change AGC settings (None keeps a field) and queue ``SET agc=...`` after setup."""
        if agc is not None:
            self._agc = bool(agc)
        if hang is not None:
            self._agc_hang = bool(hang)
        if thresh is not None:
            self._agc_thresh = int(thresh)
        if slope is not None:
            self._agc_slope = int(slope)
        if decay is not None:
            self._agc_decay = int(decay)
        if man_gain is not None:
            self._man_gain = int(man_gain)
        if self._setup_sent:
            self._queue(self._agc_command())

    def set_compression(self, enabled: bool) -> None:
        """Switch ADPCM on or off; queues ``SET compression=0|1`` after setup.

        The decoder follows the frame flags, so it resets itself when compressed frames
        start again.
        """
        self._compression = bool(enabled)
        if self._setup_sent:
            self._queue(f"SET compression={int(self._compression)}")

    def reinit(self) -> None:
        """Queue ``SET reinit`` (server resets AGC and ADPCM; next frame has RESTART).

        Ignored before setup (nothing to reset yet, and a ``SET`` before auth gets the client
        kicked).
        """
        if self._setup_sent:
            self._queue("SET reinit")

    # ---------------------------------------------------------------- internals: output

    def _set_state(self, state: State) -> None:
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("kiwi protocol %s -> %s", self._state.name, state.name)
        self._state = state

    def _queue(self, command: str) -> None:
        if self._state is not State.CLOSED:
            self._out.append(command)

    def _mod_command(self) -> str:
        return f"SET mod={self._mode} low_cut={self._low_cut} high_cut={self._high_cut} freq={self._freq_khz:.3f}"

    def _agc_command(self) -> str:
        return (
            f"SET agc={int(self._agc)} hang={int(self._agc_hang)} thresh={self._agc_thresh} "
            f"slope={self._agc_slope} decay={self._agc_decay} manGain={self._man_gain}"
        )

    def _advance_handshake(self, now: float) -> None:
        """Queue setup and AR OK once their preconditions hold; setup comes first."""
        if self._state is State.CLOSED or self._connected_at is None or not self._auth_ok:
            return
        if not self._setup_sent and self._sample_rate is not None:
            self._setup_sent = True
            self._queue(f"SET ident_user={quote(self._user, safe='')}")
            self._queue(self._mod_command())
            self._queue(self._agc_command())
            self._queue(f"SET compression={int(self._compression)}")
            # One keepalive when sample_rate arrives, subject to the rate limit and
            # the pre-setup budget like every other keepalive.
            if self._keepalive_allowed(now, min_interval=self._keepalive_interval):
                self._send_keepalive(now)
        if not self._ar_ok_sent and self._audio_rate is not None:
            self._ar_ok_sent = True
            self._queue(f"SET AR OK in={self._audio_rate} out={AR_OUT_RATE}")

    def _keepalive_allowed(self, now: float, min_interval: float) -> bool:
        if not self.setup_complete and self._keepalives_before_setup >= MAX_KEEPALIVES_BEFORE_SETUP:
            return False
        last = self._last_keepalive_at
        return last is None or now - last >= min_interval

    def _maybe_keepalive(self, now: float) -> None:
        """Keepalive from tick() or frame arrival: at most one per interval, and at
        most 4 (spaced >= 5 s) before setup is complete."""
        if self._state is State.CLOSED or self._connected_at is None:
            return
        if self.setup_complete:
            if self._keepalive_allowed(now, self._keepalive_interval):
                self._send_keepalive(now)
            return
        interval = max(self._keepalive_interval, PRE_SETUP_KEEPALIVE_INTERVAL)
        if self._keepalives_before_setup >= MAX_KEEPALIVES_BEFORE_SETUP:
            return
        reference = self._last_keepalive_at if self._last_keepalive_at is not None else self._connected_at
        if now - reference >= interval:
            self._send_keepalive(now)

    def _send_keepalive(self, now: float) -> None:
        self._queue("SET keepalive")
        self._last_keepalive_at = now
        self.counters.keepalives_sent += 1
        if not self.setup_complete:
            self._keepalives_before_setup += 1

    # ---------------------------------------------------------------- internals: events

    def _emit(self, event: KiwiEvent) -> None:
        self._events.append(event)

    def _violation(self, reason: str, data_len: int, fatal: bool = False) -> None:
        self.counters.violations += 1
        self._emit(ProtocolViolation(reason, data_len, fatal))

    def _terminate(
        self,
        kind: TerminalKind,
        retryable: bool,
        message: str,
        redirect_url: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        event = Terminal(kind, retryable, message, redirect_url, retry_after)
        self._terminal = event
        self._emit(event)
        self._out.clear()  # the caller closes the socket; pending commands are moot
        self._set_state(State.CLOSED)

    def _maybe_emit_sample_rate(self, frame_arrived: bool) -> None:
        """Emit SampleRate once: when audio_rate is also known (so ``nominal`` is filled), or
        at the latest right before the first audio frame."""
        if self._sample_rate_emitted or self._sample_rate is None:
            return
        if self._audio_rate is not None or frame_arrived:
            self._sample_rate_emitted = True
            self._emit(SampleRate(self._sample_rate, self._audio_rate))

    # ---------------------------------------------------------------- internals: parsing

    def _dispatch(self, mv: memoryview, now: float) -> None:
        n = len(mv)
        if n < 3:
            self._violation(f"message shorter than 3 bytes ({n})", n)
            return
        tag = bytes(mv[:3])
        if tag == b"SND":
            self._handle_snd(mv)
            self._maybe_keepalive(now)  # kiwiclient's cadence: keepalive on frame arrival
        elif tag == b"MSG":
            self._handle_msg(mv)
            self._advance_handshake(now)
            if self._state is not State.CLOSED:
                self._maybe_emit_sample_rate(frame_arrived=False)
        elif tag in KNOWN_IGNORED_TAGS:
            self._emit(IgnoredMessage(tag.decode("ascii"), n))
        else:
            self._violation(f"unknown tag {tag!r}", n)

    # MSG ------------------------------------------------------------------------------------

    def _handle_msg(self, mv: memoryview) -> None:
        n = len(mv)
        pairs, error = msg_pairs(bytes(mv[4:]))
        if error is not None:
            self._violation(error, n)
        if not pairs:
            self._violation("empty MSG", n)
            return
        keys = dict(pairs)
        for key, value in pairs:
            if self._state is State.CLOSED:
                break
            if value is not None and key in ENCODED_KEYS:
                value = unquote(value)
            self._handle_kv(key, value, keys, n)

    def _handle_kv(self, key: str, value: str | None, msg: dict[str, str | None], n: int) -> None:
        if key == "sample_rate":
            self._on_sample_rate(value, n)
        elif key == "badp":
            self._on_badp(value, n)
        elif key == "audio_rate":
            rate = parse_int(value)
            if rate is None or rate <= 0:
                self._violation(f"bad audio_rate {value!r}", n)
                return
            if self._audio_rate is None:
                self._audio_rate = rate
            self._info(key, rate)
        elif key in ENDING_KEYS:
            e = session_ending(key, value, msg)
            self._terminate(e.kind, e.retryable, e.message, e.redirect_url, e.retry_after)
        elif key == "reason_disabled":
            if "down" not in msg:  # otherwise reported with `down`
                self._info(key, value)
        elif key == "audio_adpcm_state":
            self._on_adpcm_state(value, n)
        elif key in INFO_KEYS:
            self._info(key, value)
        else:
            self._emit(UnknownMessage(key, value))

    def _info(self, key: str, value: str | float | None) -> None:
        if isinstance(value, str) and key not in ENCODED_KEYS:
            value = parse_number(value)
        self.server_info[key] = value
        self._emit(ServerInfo(key, value))

    def _on_sample_rate(self, value: str | None, n: int) -> None:
        rate = parse_float(value)
        if rate is None or not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE:
            self._violation(f"absurd sample_rate {value!r}", n, fatal=True)
            self._terminate(TerminalKind.PROTOCOL_ERROR, False, f"absurd sample_rate {value!r}")
            return
        if self._sample_rate is None:
            self._sample_rate = rate
        elif rate != self._sample_rate:
            self._violation(f"sample_rate changed from {self._sample_rate} to {rate}; kept the first", n)

    def _on_badp(self, value: str | None, n: int) -> None:
        code = parse_int(value)
        if code is None or code < 0:
            self._violation(f"bad badp value {value!r}", n)
            return
        if code == 0:
            if not self._auth_ok:
                self._auth_ok = True
                self._emit(AuthResult(True, 0))
            return
        self._emit(AuthResult(False, code))
        e = badp_ending(code)
        self._terminate(e.kind, e.retryable, e.message, e.redirect_url, e.retry_after)

    def _on_adpcm_state(self, value: str | None, n: int) -> None:
        index_s, _, prev_s = (value or "").partition(",")
        index, prev = parse_int(index_s), parse_int(prev_s)
        try:
            if index is None or prev is None:
                raise ValueError(value)
            self._decoder.preset(index, prev)
        except ValueError:
            self._violation(f"bad audio_adpcm_state {value!r}", n)
            return
        self._info("audio_adpcm_state", value)

    # SND ------------------------------------------------------------------------------------

    def _handle_snd(self, mv: memoryview) -> None:
        n = len(mv)
        head = parse_snd_header(mv)
        if isinstance(head, str):
            self._violation(head, n)
            return
        flags, seq = head.flags, head.seq

        # 1. duplicates are dropped before anything else touches the state.
        if self._last_seq is not None and seq == self._last_seq:
            self.counters.duplicates += 1
            self._emit(SequenceGap((seq + 1) % U32, seq, 0, 0, GapReason.DUPLICATE))
            return

        # 2. ADPCM state mirrors the server's encoder, following the flags.
        prev_flags = self._prev_flags
        if flags & SndFlag.RESTART or (
            prev_flags is not None
            and (
                (flags & SndFlag.COMPRESSED and not prev_flags & SndFlag.COMPRESSED) or (prev_flags & SndFlag.MODE_IQ and not flags & SndFlag.MODE_IQ)
            )
        ):
            self._decoder.reset()
        self._prev_flags = flags

        # 3. payload checks. A malformed frame is dropped WITHOUT consuming its sequence
        #    number, so the next good frame reports it as a lost frame (never zero-filled).
        error = snd_payload_error(flags, len(head.payload))
        if error is not None:
            self._violation(error, n)
            return

        # 4. sequence continuity (uint32, wraps at 2**32).
        lost_before = 0
        if self._last_seq is not None:
            expected = (self._last_seq + 1) % U32
            distance = (seq - expected) % U32
            if distance:
                spf = samples_per_frame(flags)
                if distance < _HALF_U32:
                    lost_before = distance
                    self.counters.lost_frames += distance
                    self.counters.lost_samples += distance * spf
                    self._emit(SequenceGap(expected, seq, distance, distance * spf, GapReason.LOST))
                else:
                    back = distance - U32
                    self.counters.backward_jumps += 1
                    self._emit(SequenceGap(expected, seq, back, back * spf, GapReason.BACKWARD))
        self._last_seq = seq

        # 5. decode.
        samples: NDArray[np.float32] | NDArray[np.complex64]
        if head.iq:
            samples = pcm_to_float(head.payload, flags).view(np.complex64)
        elif flags & SndFlag.COMPRESSED:
            samples = adpcm_to_float(self._decoder, head.payload)
        else:
            samples = pcm_to_float(head.payload, flags)

        if self._sample_rate is None and not self._warned_no_rate:
            self._warned_no_rate = True
            self._violation("audio frame before sample_rate", n)
        self._maybe_emit_sample_rate(frame_arrived=True)
        self.counters.frames += 1
        self.counters.samples += samples.shape[0]
        if self._state is State.AUTHENTICATING or self._state is State.CONNECTING:
            self._set_state(State.STREAMING)
        self._emit(AudioFrame(seq, flags, smeter_dbm(head.smeter_raw), samples, head.iq, head.gps, lost_before))
