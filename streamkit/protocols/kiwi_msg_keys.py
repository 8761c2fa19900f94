"""The receiver's ``MSG`` messages as the client reads them: splitting a message into key/value pairs
(:func:`msg_pairs`), the informational keys (:data:`INFO_KEYS`), and the keys that end a session, with
the :class:`~streamkit.protocols.kiwi_events.Terminal` each one becomes (:func:`session_ending`,
:func:`badp_ending`). Sans-I/O and stateless; the client state machine is
:mod:`streamkit.protocols.kiwi_client`. What each ending means: ``docs/kiwisdr.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

from streamkit.protocols.kiwi_events import TerminalKind
from streamkit.protocols.kiwi_frames import parse_int
from streamkit.protocols.kiwi_url import parse_kiwi_url

__all__ = ["ENDING_KEYS", "INFO_KEYS", "KNOWN_IGNORED_TAGS", "Ending", "badp_ending", "msg_pairs", "session_ending"]

# Informational MSG keys, reported as ServerInfo. Anything else that is not handled
# explicitly becomes an UnknownMessage event.
INFO_KEYS: Final[frozenset[str]] = frozenset(
    {
        "audio_init", "audio_rate", "version_maj", "version_min", "debian_ver", "model",
        "platform", "ext_clk", "abyy", "freq_offset", "center_freq", "bandwidth", "adc_clk_nom",
        "client_public_ip", "rx_chans", "chan_no_pwd", "chan_no_pwd_true", "is_local",
        "max_camp", "load_cfg", "load_dxcfg", "load_dxcomm_cfg", "cfg_loaded", "is_multi_core",
        "rf_attn", "max_thr", "status_msg_html", "notify_msg", "monitor", "camp", "audio_camp",
        "audio_passband", "isMasked", "stats_cb", "keepalive",
    }
)  # fmt: skip

#: message tags of other channels that the audio client ignores (an IgnoredMessage event each)
KNOWN_IGNORED_TAGS: Final[frozenset[bytes]] = frozenset({b"W/F", b"EXT", b"DAT", b"CLI"})

BADP_MESSAGES: Final[dict[int, str]] = {
    1: "bad password, or all free channels need a password",
    2: "still determining local interface, retry soon",
    3: "admin connection not allowed from this IP",
    4: "no admin password set, local network only",
    5: "no multiple connections from the same IP",
    6: "database update in progress, retry in a minute",
    7: "another admin connection is already open",
}
#: badp codes worth retrying, with a suggested delay in seconds
BADP_RETRY: Final[dict[int, float]] = {2: 10.0, 6: 60.0}

DOWN_MESSAGES: Final[dict[int, str]] = {
    0: "receiver disabled by the admin",
    1: "software update in progress",
    2: "backup in progress",
}

#: the MSG keys that end a session (:func:`session_ending`); ``badp`` ends one only when non-zero
ENDING_KEYS: Final[frozenset[str]] = frozenset(
    {"too_busy", "exclusive_use", "redirect", "down", "wb_only", "password_timeout", "inactivity_timeout", "ip_limit", "kiwi_kick",
     "camp_disconnect"}
)  # fmt: skip


@dataclass(frozen=True)
class Ending:
    """The fields of the :class:`~streamkit.protocols.kiwi_events.Terminal` that ends the session."""

    kind: TerminalKind
    retryable: bool
    message: str
    redirect_url: str | None = None
    retry_after: float | None = None


def msg_pairs(raw: bytes) -> tuple[list[tuple[str, str | None]], str | None]:
    """The ``key[=value]`` tokens of a MSG body (after ``MSG ``), values still percent-encoded, and the
    text of a violation when the body is not valid UTF-8 (its tokens are still read from the text
    with the bad bytes replaced: the keys are ASCII)."""
    error = None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", errors="replace")
        error = f"MSG is not valid UTF-8: {text[:200]!r}"
    pairs: list[tuple[str, str | None]] = []
    for token in text.split(" "):
        if not token:
            continue
        k, sep, v = token.partition("=")
        pairs.append((k, v if sep else None))
    return pairs, error


def badp_ending(code: int) -> Ending:
    """The ending of a refused authentication (``badp`` = ``code`` > 0)."""
    retry_after = BADP_RETRY.get(code)
    return Ending(TerminalKind.BADP, retry_after is not None, BADP_MESSAGES.get(code, f"authentication refused (badp={code})"),
                  retry_after=retry_after)  # fmt: skip


def session_ending(key: str, value: str | None, msg: dict[str, str | None]) -> Ending:
    """The ending that the MSG key ``key`` (one of :data:`ENDING_KEYS`) with ``value`` says; ``msg`` is the
    whole message (``down`` reports its ``reason_disabled``)."""
    if key == "too_busy":
        return Ending(TerminalKind.TOO_BUSY, True, f"all {value or '?'} channels are in use", retry_after=15.0)
    if key == "exclusive_use":
        return Ending(TerminalKind.EXCLUSIVE_USE, True, "the Kiwi is locked by an exclusive user (e.g. DRM)", retry_after=15.0)
    if key == "redirect":
        target = value or ""
        try:
            parse_kiwi_url(target)
        except ValueError as exc:
            return Ending(TerminalKind.REDIRECT, False, f"redirect to an invalid URL {target[:200]!r}: {exc}")
        return Ending(TerminalKind.REDIRECT, True, f"redirected to {target}", redirect_url=target, retry_after=2.0)
    if key == "down":
        code = parse_int(value)
        reason = msg.get("reason_disabled")
        text = DOWN_MESSAGES.get(code, f"down={value}") if code is not None else f"down={value}"
        if reason:
            text = f"{text}: {unquote(reason)}"
        return Ending(TerminalKind.DOWN, True, text, retry_after=60.0)
    if key == "wb_only":
        return Ending(TerminalKind.WB_ONLY, False, "wideband-only Kiwi: use a /wb/ URL")
    if key == "password_timeout":
        return Ending(TerminalKind.PASSWORD_TIMEOUT, False, "no successful auth in time")
    if key == "inactivity_timeout":
        return Ending(TerminalKind.INACTIVITY_TIMEOUT, False, f"inactivity timeout ({value or '?'} min)")
    if key == "ip_limit":
        mins, _, ip = (value or "").partition(",")
        return Ending(TerminalKind.IP_LIMIT, False, f"24-hour per-IP time limit reached ({mins or '?'} min, {ip or '?'})")
    if key == "kiwi_kick":
        head, sep, tail = (value or "").partition(",")
        text = (tail if sep else head).strip()
        return Ending(TerminalKind.KIWI_KICK, False, f"kicked by the admin: {text}" if text else "kicked by the admin")
    if key == "camp_disconnect":
        return Ending(TerminalKind.CAMP_DISCONNECT, False, "the camped channel went away")
    raise ValueError(f"{key!r} is not a MSG key that ends a session")
