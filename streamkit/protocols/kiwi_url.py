"""Sans-I/O parsing of KiwiSDR server addresses: redirect targets and user-given URLs.

A Kiwi that is full may answer ``MSG redirect=<percent-encoded URL>``, e.g.
``http://kiwi2.example.net:8073`` or ``http://[2001:db8::7]:8073/``. The URL is parsed with
:func:`urllib.parse.urlsplit` (IPv6 literals in brackets, explicit or default port) and checked;
anything else is refused with a reason a person can act on. :meth:`KiwiAddress.same_server` is what
the client uses to decide whether a channel password may be sent to the new address.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

__all__ = ["DEFAULT_KIWI_PORT", "SCHEME_PORTS", "KiwiAddress", "format_hostport", "parse_kiwi_url"]

DEFAULT_KIWI_PORT: Final = 8073
"""The KiwiSDR's usual port."""

SCHEME_PORTS: Final[dict[str, int]] = {"http": 80, "ws": 80, "https": 443, "wss": 443}
"""Accepted URL schemes and the port each implies when the URL names none (as a browser would)."""

_MAX_URL: Final = 2048


def _normalise_host(host: str) -> str:
    """Lower-case a name; write an IP literal in its canonical form (``::0001`` -> ``::1``)."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host.lower().rstrip(".")


def format_hostport(host: str, port: int) -> str:
    """``host:port`` with an IPv6 literal in brackets (``[::1]:8073``)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True, slots=True)
class KiwiAddress:
    """Where a KiwiSDR listens.

    Attributes:
        host: Host name (lower case) or IP literal (IPv6 without brackets, canonical form).
        port: TCP port.
        secure: True for ``https``/``wss`` (the WebSocket is then opened with TLS).
    """

    host: str
    port: int
    secure: bool = False

    @property
    def hostport(self) -> str:
        """``host:port``, IPv6 in brackets."""
        return format_hostport(self.host, self.port)

    def ws_url(self, path: str = "") -> str:
        """``ws://host:port<path>`` (``wss://`` when :attr:`secure`)."""
        return f"{'wss' if self.secure else 'ws'}://{self.hostport}{path}"

    def same_server(self, other: KiwiAddress) -> bool:
        """Same host (names compared case-insensitively, IP literals canonically) and same port."""
        return _normalise_host(self.host) == _normalise_host(other.host) and self.port == other.port


def parse_kiwi_url(url: str, default_port: int | None = None) -> KiwiAddress:
    """Parse ``scheme://host[:port][/path]`` into a :class:`KiwiAddress`.

    Args:
        url: The URL (already percent-decoded, as the protocol's redirect URL is).
        default_port: Port when the URL has none; None = the scheme's (80 for http/ws, 443 for
            https/wss), which is where a browser following the same URL would go.

    Raises:
        ValueError: with the reason: empty or over-long URL, control characters or spaces, a
            scheme other than http/https/ws/wss, user information, no host, a bad IPv6
            literal, a port that is not a number in 1..65535.
    """
    if not url:
        raise ValueError("empty URL")
    if len(url) > _MAX_URL:
        raise ValueError(f"URL longer than {_MAX_URL} characters")
    if any(c.isspace() or not c.isprintable() for c in url):
        raise ValueError("URL contains spaces or control characters")
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # e.g. an unbalanced '[' of an IPv6 literal
        raise ValueError(f"malformed URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEME_PORTS:
        raise ValueError(f"scheme {parts.scheme + '://' if parts.scheme else '(none)'} is not one of http, https, ws, wss")
    netloc = parts.netloc
    if "@" in netloc:
        raise ValueError("user information in the URL is not accepted")
    host = parts.hostname
    if not host:
        raise ValueError("no host in the URL")
    if netloc.startswith("["):
        try:
            ipaddress.IPv6Address(host.split("%", 1)[0])
        except ValueError:
            raise ValueError(f"bad IPv6 address [{host}]") from None
    elif ":" in host or "[" in host or "]" in host:
        raise ValueError("an IPv6 address must be written in brackets, e.g. http://[::1]:8073/")
    try:
        port = parts.port
    except ValueError:
        raise ValueError("the port is not a number in 0..65535") from None
    if port is None:
        if netloc.endswith(":"):
            raise ValueError("empty port after ':'")
        port = SCHEME_PORTS[scheme] if default_port is None else int(default_port)
    if not 0 < port < 65536:
        raise ValueError(f"port {port} is not in 1..65535")
    return KiwiAddress(_normalise_host(host), port, scheme in ("https", "wss"))
