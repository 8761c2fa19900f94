"""KiwiSource redirects against two loopback emulators: IPv6 and IPv4 targets, the password kept
from other servers, and a reason on every stop."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from streamkit.core.errors import ConfigError
from streamkit.core.graph import Graph
from streamkit.io.collect import CollectSink
from streamkit.io.kiwi_emulator import EmulatorThread
from streamkit.io.kiwi_source import KiwiSource, parse_station
from streamkit.protocols.kiwi_frames import parse_client_command
from tests.io.kiwi_run import run_source, states

SECRET = "s3cret-Pa55"


def run(port: int, duration: float = 1.0, **kw):
    return run_source(port, duration, "redirect-test", **{"stall_s": 2.0, "max_retries": 6, **kw})


def auth_passwords(emu: EmulatorThread) -> list[str]:
    """The ``p=`` of every ``SET auth`` the emulator received, over all its connections."""
    logs = emu.call(lambda: list(emu.emulator.connections))
    out = []
    for log in logs:
        for c in log.commands:
            if c.text.startswith("SET auth"):
                out.append(parse_client_command(c.text)[1].get("p", ""))
    return out


@contextlib.contextmanager
def redirecting(target_url: str | None = None) -> Iterator[EmulatorThread]:
    """An emulator on 127.0.0.1 that answers every client with ``MSG redirect=<target_url>``
    (None: to itself)."""
    with EmulatorThread(speed=8.0) as emu:
        url = target_url or f"ws://127.0.0.1:{emu.port}"
        emu.call(lambda: emu.emulator.set_faults(redirect=url))
        yield emu


@pytest.mark.parametrize(("bind", "url_host"), [("::1", "[::1]"), ("127.0.0.1", "127.0.0.1")], ids=["ipv6", "ipv4"])
def test_redirect_is_followed_and_the_password_stays_home(bind: str, url_host: str) -> None:
    with EmulatorThread(host=bind, speed=8.0) as second:
        with redirecting(f"http://{url_host}:{second.port}/") as first:
            sink, r, src = run(first.port, password=SECRET)
            sent_first = auth_passwords(first)
        sent_second = auth_passwords(second)
    assert sent_first == [SECRET]  # the configured server gets it
    assert sent_second and all(p == "" for p in sent_second)  # the other one never does
    assert sink.samples.shape[0] > 0 and src.fatal_message is None
    s = states(r)
    retry = [d for st, d in s if st == "retrying"]
    assert retry and f"redirected to http://{url_host}:{second.port}/" in retry[0]
    assert "password is not sent" in retry[0]
    assert ("connecting", f"ws://{url_host}:{second.port}") in s
    assert all(d for _, d in s)  # every state says why


def test_password_follows_redirect_only_when_asked() -> None:
    with EmulatorThread(host="::1", speed=8.0) as second:
        with redirecting(f"http://[::1]:{second.port}") as first:
            sink, r, src = run(first.port, password=SECRET, password_follows_redirect=True)
        assert auth_passwords(second)[0] == SECRET
    assert sink.samples.shape[0] > 0


@pytest.mark.timeout(60)
def test_redirect_to_garbage_is_fatal_with_a_reason() -> None:
    with redirecting("http://[::1:80/") as emu:
        sink, r, src = run(emu.port, duration=3.0)
    assert src.fatal_message and "invalid URL" in src.fatal_message
    s = states(r)
    assert ("fatal", src.fatal_message) in s and s[-1] == ("closed", src.fatal_message)
    assert sink.samples.shape[0] == 0


@pytest.mark.timeout(60)
def test_redirect_loop_gives_up_with_a_reason() -> None:
    with redirecting() as emu:
        sink, r, src = run(emu.port, duration=3.0, password=SECRET, max_retries=None)
        sent = auth_passwords(emu)
    assert "too many redirects" in (src.fatal_message or "")
    assert states(r)[-1] == ("closed", src.fatal_message)
    assert set(sent) == {SECRET} and len(sent) == 4  # the same server: its own password; 3 redirects followed


def test_password_never_in_params_or_repr(tmp_path, monkeypatch) -> None:
    src = KiwiSource(host="h", password=SECRET)
    assert SECRET not in repr(src) and "password" not in src.params()
    g = Graph("g")
    g.add(src, name="kiwi")
    g.connect(src, g.add(CollectSink(), name="k"))
    assert SECRET not in repr(g.to_spec())
    g.save(tmp_path / "g.yaml")
    assert SECRET not in (tmp_path / "g.yaml").read_text()
    monkeypatch.setenv("KIWI_PW_TEST", SECRET)
    assert KiwiSource(host="h", password_env="KIWI_PW_TEST").password == SECRET
    f = tmp_path / "pw"
    f.write_text(SECRET + "\n")
    assert KiwiSource(host="h", password_file=str(f)).password == SECRET
    with pytest.raises(ConfigError, match="one way only"):
        KiwiSource(host="h", password="x", password_env="KIWI_PW_TEST")
    with pytest.raises(ConfigError, match="KIWI_PW_UNSET") as ei:
        KiwiSource(host="h", password_env="KIWI_PW_UNSET")
    assert SECRET not in str(ei.value)


def test_ipv6_station_and_url() -> None:
    assert parse_station("[::1]:18120:7100:usb") == {"host": "::1", "port": 18120, "freq_khz": 7100.0, "mode": "usb"}
    src = KiwiSource(url="ws://[::1]:18120/")
    assert (src.host, src.port) == ("::1", 18120)
    assert KiwiSource(url="http://kiwi.example.org").port == 8073
    with pytest.raises(ConfigError, match="bad url"):
        KiwiSource(url="ws://[::1:18120/")
