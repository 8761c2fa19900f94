"""Who may see the live view: the bind address, the access token and the WebSocket Origin check (no sockets here).

- On a loopback address (127.0.0.0/8, ::1, ``localhost``) the page is served to this machine only and
  needs no token.
- On any other address a random token (:func:`new_token`, 128 bits) is required on every data
  request (the WebSocket and ``/api/...``): ``?token=...`` in the URL the CLI prints, or an
  ``Authorization: Bearer ...`` header. No token, no data (HTTP 401/403). The token is compared in
  constant time and never logged (the server keeps no access log).
- A browser WebSocket must come from the page itself: its ``Origin`` must name the host it
  connected to, so that another web site open in the same browser cannot read the stream
  (cross-site WebSocket hijacking). Non-browser clients send no Origin and pass this check.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from urllib.parse import urlsplit

__all__ = ["AccessError", "check_access", "check_origin", "is_loopback", "new_token", "parse_bind", "view_url"]


class AccessError(ValueError):
    """A bind address that cannot be used (the message says why)."""


def parse_bind(spec: str, *, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """``"8080"``, ``"0.0.0.0:8080"``, ``"[::1]:8080"``, ``"localhost:0"`` -> ``(host, port)``; port 0 picks a free one."""
    s = str(spec).strip()
    if not s:
        raise AccessError("empty --web address: want [HOST:]PORT, e.g. 8080 or 0.0.0.0:8080")
    host, port_s = default_host, s
    if s.startswith("["):
        end = s.find("]")
        if end < 0 or not s[end + 1 :].startswith(":"):
            raise AccessError(f"bad --web address {spec!r}: want [IPV6]:PORT")
        host, port_s = s[1:end], s[end + 2 :]
    elif ":" in s:
        if s.count(":") > 1:
            raise AccessError(f"bad --web address {spec!r}: write an IPv6 host in brackets, e.g. [::1]:8080")
        host, port_s = s.rsplit(":", 1)
        if not host:
            raise AccessError(f"bad --web address {spec!r}: empty host")
    try:
        port = int(port_s)
    except ValueError:
        raise AccessError(f"bad --web port {port_s!r} in {spec!r}: want a number 0-65535") from None
    if not 0 <= port <= 65535:
        raise AccessError(f"bad --web port {port} in {spec!r}: want 0-65535")
    return host, port


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach."""
    h = host.strip("[]").lower()
    if h in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    return secrets.token_urlsafe(16)


def check_access(expected: str | None, query_token: str | None, authorization: str | None) -> tuple[bool, str]:
    """``(ok, reason)`` for a data request; ``expected=None`` means no token is required."""
    if expected is None:
        return True, ""
    given = query_token
    if not given and authorization and authorization.lower().startswith("bearer "):
        given = authorization[7:].strip()
    if not given:
        return False, "access token required: open the URL the server printed (it ends in ?token=...)"
    if not hmac.compare_digest(given.encode(), expected.encode()):
        return False, "wrong access token"
    return True, ""


def check_origin(origin: str | None, host_header: str | None) -> tuple[bool, str]:
    """``(ok, reason)``: a browser's WebSocket must come from a page served by this host."""
    if origin is None:
        return True, ""  # not a browser (curl, the Python clients of the tests and benchmark)
    if origin == "null" or not host_header:
        return False, "WebSocket from a page of another origin"
    o = urlsplit(origin)
    if o.scheme not in ("http", "https") or (o.netloc or "").lower() != host_header.lower():
        return False, f"WebSocket from another origin ({origin[:80]})"
    return True, ""


def view_url(host: str, port: int, token: str | None) -> str:
    """The URL to print: the page, with the token when one is required."""
    h = host
    if h in ("0.0.0.0", "::", ""):
        import socket

        h = socket.gethostname()
    if ":" in h and not h.startswith("["):
        h = f"[{h}]"
    return f"http://{h}:{port}/" + (f"?token={token}" if token else "")
