"""parse_kiwi_url: redirect targets and user URLs (IPv6 brackets, default ports, garbage refused with a reason)."""

from __future__ import annotations

import pytest

from streamkit.protocols.kiwi_events import Terminal, TerminalKind
from streamkit.protocols.kiwi_url import KiwiAddress, parse_kiwi_url

from .test_kiwi import PRE_AUTH, feed, of, proto


@pytest.mark.parametrize(
    ("url", "want"),
    [
        ("http://kiwi2.example.net:8074/", KiwiAddress("kiwi2.example.net", 8074)),
        ("http://[::1]:18120/", KiwiAddress("::1", 18120)),
        ("ws://[2001:DB8::0007]:8073", KiwiAddress("2001:db8::7", 8073)),
        ("http://KIWI.example.net", KiwiAddress("kiwi.example.net", 80)),
        ("https://kiwi.example.net/", KiwiAddress("kiwi.example.net", 443, True)),
        ("wss://[::1]", KiwiAddress("::1", 443, True)),
        ("http://127.0.0.1:8073/?x=1#y", KiwiAddress("127.0.0.1", 8073)),
    ],
)
def test_good_urls(url: str, want: KiwiAddress) -> None:
    assert parse_kiwi_url(url) == want


def test_default_port_and_ws_url() -> None:
    assert parse_kiwi_url("ws://h", default_port=8073).port == 8073
    assert parse_kiwi_url("http://[::1]:18120/").ws_url("/1/SND") == "ws://[::1]:18120/1/SND"
    assert parse_kiwi_url("https://h:9000").ws_url() == "wss://h:9000"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("", "empty"),
        ("not a url", "spaces"),
        ("kiwi.example.net:8073", "scheme"),
        ("ftp://h:21/", "scheme"),
        ("http://:8073/", "no host"),
        ("http://host:port", "port"),
        ("http://host:99999", "port"),
        ("http://host:0", "port"),
        ("http://host:/", "empty port"),
        ("http://[::1:80/", "malformed"),
        ("http://[nothex]:80/", "IPv6"),
        ("http://user:pw@host:8073/", "user information"),
        ("http://h\x1b[2J:8073/", "control"),
        ("http://" + "a" * 3000, "longer"),
    ],
)
def test_garbage_is_refused_with_a_reason(url: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_kiwi_url(url)


def test_same_server() -> None:
    a = KiwiAddress("127.0.0.1", 8073)
    assert a.same_server(parse_kiwi_url("http://127.0.0.1:8073"))
    assert not a.same_server(parse_kiwi_url("http://127.0.0.1:8074"))
    assert not a.same_server(parse_kiwi_url("http://[::1]:8073"))
    assert KiwiAddress("Kiwi.Example.org", 8073).same_server(parse_kiwi_url("http://kiwi.example.org.:8073"))
    assert KiwiAddress("::0001", 1).same_server(KiwiAddress("::1", 1))


def test_protocol_redirect_terminal() -> None:
    (t,) = of(feed(proto(), *PRE_AUTH, b"MSG redirect=http%3A%2F%2F%5B%3A%3A1%5D%3A18120%2F"), Terminal)
    assert t.kind is TerminalKind.REDIRECT and t.retryable and t.redirect_url == "http://[::1]:18120/"
    (bad,) = of(feed(proto(), b"MSG redirect=ftp%3A%2F%2Fh%3A21"), Terminal)
    assert not bad.retryable and bad.redirect_url is None and "scheme" in bad.message
