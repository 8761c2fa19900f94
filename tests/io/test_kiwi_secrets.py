"""KiwiSDR passwords: from argv, an environment variable or a file; never in debug logs, events or output."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from streamkit.cli import main
from streamkit.core.clock import RealTime
from streamkit.core.errors import ConfigError
from streamkit.core.graph import Graph
from streamkit.core.runtime import Runner
from streamkit.io.collect import CollectSink
from streamkit.io.kiwi_emulator import EmulatorThread, add_emulator_arguments, config_from_args
from streamkit.io.kiwi_secrets import PASSWORD_ENV, RedactSecrets, redact, resolve_password
from streamkit.io.kiwi_source import KiwiSource

SECRET = "Zq9-s3cret%pw"
ENCODED = "Zq9-s3cret%25pw"  # as the client puts it on the wire (percent-encoded)


def test_redact() -> None:
    assert redact("> TEXT 'SET auth t=kiwi p=abc' [21 bytes]") == "> TEXT 'SET auth t=kiwi p=<redacted>' [21 bytes]"
    assert redact("SET auth t=kiwi p=abc ipl=def") == "SET auth t=kiwi p=<redacted> ipl=<redacted>"
    assert redact("SET auth t=kiwi p=") == "SET auth t=kiwi p=<redacted>"
    assert redact("SET mod=lsb p=1 freq=7100") == "SET mod=lsb p=1 freq=7100"  # not an auth command
    r = logging.LogRecord("websockets.client", logging.DEBUG, __file__, 1, "> %s", ("TEXT 'SET auth t=kiwi p=abc'",), None)
    assert RedactSecrets().filter(r) and r.getMessage() == "> TEXT 'SET auth t=kiwi p=<redacted>'"


def test_resolve_password(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KIWI_TEST_PW", SECRET)
    f = tmp_path / "pw.txt"
    f.write_text(SECRET + "\n")
    assert resolve_password(SECRET) == resolve_password(env="KIWI_TEST_PW") == resolve_password(file=f) == SECRET
    assert resolve_password() == ""
    for kw, match in ((dict(env="KIWI_TEST_NOPE"), "KIWI_TEST_NOPE"), (dict(file=tmp_path / "missing"), "missing")):
        with pytest.raises(ConfigError, match=match) as ei:
            resolve_password(**kw)
        assert SECRET not in str(ei.value)


def _run_session(port: int, seconds: float = 0.6) -> tuple[KiwiSource, Runner]:
    g = Graph("pw")
    src = g.add(KiwiSource(host="127.0.0.1", port=port, password=SECRET, max_retries=0, stall_s=2.0), name="kiwi")
    g.connect(src, g.add(CollectSink(), name="k"))
    r = Runner(g, RealTime(), duration=seconds, keep_events=True, threaded_events=False, stats_interval_s=0)
    r.run()
    return src, r


@pytest.mark.timeout(60)
def test_debug_logs_of_an_authenticated_session_hold_no_password(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with EmulatorThread(speed=8.0, password=SECRET) as emu:
        src, r = _run_session(emu.port)
        logs = emu.call(lambda: list(emu.emulator.connections))
    assert logs[0].badp == 0 and src.fatal_message is None  # the password did reach the server
    text = caplog.text
    assert "SET auth t=kiwi p=<redacted>" in text  # the frames were logged (client and server side) ...
    assert any(r.name == "websockets.client" and "SET auth" in r.getMessage() for r in caplog.records)
    assert any(r.name == "websockets.server" and "SET auth" in r.getMessage() for r in caplog.records)
    assert SECRET not in text and ENCODED not in text  # ... without the password
    for e in r.events:  # nor in any event
        assert SECRET not in repr(e) and ENCODED not in repr(e)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["env", "file", "default_env"])
def test_monitor_takes_the_password_from_env_or_file(how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog, capsys) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    if how == "env":
        monkeypatch.setenv("MY_KIWI_PW", SECRET)
        opt = ["--password-env", "MY_KIWI_PW"]
    elif how == "file":
        (tmp_path / "pw").write_text(SECRET + "\n")
        opt = ["--password-file", str(tmp_path / "pw")]
    else:
        monkeypatch.setenv(PASSWORD_ENV, SECRET)
        opt = []
    events = tmp_path / "ev"
    with EmulatorThread(speed=4.0, password=SECRET) as emu:
        rc = main(["-v", "monitor", "--station", f"127.0.0.1:{emu.port}:7100:lsb", "--duration", "0.5", "--quiet", "--max-retries", "0",
                   "--events", str(events), *opt])  # fmt: skip
        logs = emu.call(lambda: list(emu.emulator.connections))
    out = capsys.readouterr()
    assert rc == 0 and logs[0].badp == 0, out.err
    for text in (out.out, out.err, caplog.text, *(p.read_text() for p in events.glob("*.jsonl"))):
        assert SECRET not in text and ENCODED not in text
    assert any(json.loads(line)["kind"] == "source.state" for p in events.glob("*.jsonl") for line in p.read_text().splitlines())


def test_monitor_password_errors_name_the_source_not_the_secret(tmp_path: Path, capsys) -> None:
    assert main(["monitor", "--password-file", str(tmp_path / "nope"), "--quiet"]) == 2
    assert "cannot read the password file" in capsys.readouterr().err
    assert main(["monitor", "--password-env", "KIWI_TEST_UNSET_VAR", "--quiet"]) == 2
    assert "KIWI_TEST_UNSET_VAR" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["monitor", "--password", "a", "--password-env", "B"])  # one way only


def test_emulator_options_and_config_repr(tmp_path: Path) -> None:
    import argparse

    p = argparse.ArgumentParser()
    add_emulator_arguments(p)
    (tmp_path / "pw").write_text(SECRET)
    cfg = config_from_args(p.parse_args(["--password-file", str(tmp_path / "pw")]))
    assert cfg.password == SECRET and SECRET not in repr(cfg)
