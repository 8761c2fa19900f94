"""Live commands: ``streamkit monitor`` (KiwiSDR stations), ``streamkit mic`` (a microphone), ``streamkit devices``, ``streamkit emulate kiwi``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import streamkit
from streamkit.cli.common import (
    EXIT_RUNTIME,
    CliError,
    add_command,
    add_event_outputs,
    add_web_argument,
    commands,
    exit_status,
    live_view,
    registry_block,
    run_graph,
    say,
    start_web,
    summary_line,
    web_summary,
)
from streamkit.cli.live_index import add_index_arguments, indexing, live_indexer
from streamkit.core.clock import RealTime
from streamkit.core.graph import Graph

SAD_CHOICES = ["energy", "stat", "dnn", "both", "all"]
ASR_LEXICON_HELP = ("with --asr: decode only words of a word list, 'system' (the Debian dictionaries the ASR corpus is drawn from) "
                    "or a directory of <lang>.words.txt files (see `streamkit transcribe --lexicon`)")  # fmt: skip
SAD_HELP = ("speech activity detector: energy (baseline, default), stat (the statistical SAD, dsp.stat_sad), dnn (the CNN-GRU SAD, "
            "models.sad_dnn), both (stat and dnn) or all (energy, stat and dnn)")  # fmt: skip


def add_parsers(sub: Any) -> None:
    add_command(sub, "monitor", help="monitor KiwiSDR stations live (no station: the built-in emulator)",
                description="Monitor one or more KiwiSDR stations at once: console view (S-meter, RT factor, gaps, events) and JSONL "
                            "events per station. With no --station, starts the built-in KiwiSDR emulator on loopback and monitors it.",
                arguments=add_monitor_arguments, run=cmd_monitor)  # fmt: skip
    add_command(sub, "emulate", help="run a built-in server: `emulate kiwi` is a KiwiSDR on loopback",
                description="Run a built-in emulator. `streamkit emulate kiwi --help` lists the KiwiSDR emulator's options.",
                arguments=add_emulate_parsers)  # fmt: skip
    add_command(
        sub,
        "mic",
        help="live microphone demo: level meter and detector events",
        description="Live microphone demo: level meter and the events of the detectors.",
        arguments=add_mic_arguments,
        run=cmd_mic,
    )
    add_command(sub, "devices", help="list audio devices", description="List audio input/output devices (PortAudio).", run=cmd_devices)


# --------------------------------------------------------------------------- monitor
def add_monitor_arguments(m: argparse.ArgumentParser) -> None:
    m.add_argument(
        "--station", action="append", metavar="HOST:PORT:FREQ_KHZ:MODE", help="a station to monitor (repeatable), e.g. kiwi.example.org:8073:7100:lsb"
    )
    m.add_argument("--stations-file", metavar="YAML", help="YAML list of stations (strings as above, or {host, port, freq_khz, mode})")
    m.add_argument("--duration", type=float, default=15.0, help="stop after S seconds of stream time and exit 0 (default 15)")
    m.add_argument("--events", default="events", metavar="DIR", help="directory for one JSONL event file per station (default ./events)")
    m.add_argument("--record", default=None, metavar="DIR", help="also record each station's received audio as WAV at its true rate (IQ: 2 channels)")
    add_index_arguments(m)
    from streamkit.io.kiwi_secrets import PASSWORD_ENV, add_password_arguments

    add_password_arguments(m, default_env=PASSWORD_ENV)
    m.add_argument(
        "--password-follows-redirect",
        action="store_true",
        help="also send the password to the server a station redirects to (default: only to the station's own host and port)",
    )
    m.add_argument("--compression", dest="compression", action="store_true", default=True, help="ADPCM audio transport (default)")
    m.add_argument("--no-compression", dest="compression", action="store_false", help="16-bit PCM transport")
    m.add_argument("--stall", type=float, default=10.0, help="reconnect after S seconds without data (default 10)")
    m.add_argument("--max-retries", type=int, default=None, help="give a station up after N failed reconnects in a row (default: retry forever)")
    m.add_argument("--sad", choices=SAD_CHOICES, default="energy", help=SAD_HELP)
    m.add_argument(
        "--asr", action="store_true", help="also transcribe: statistical SAD (dsp.speech_gate) -> multilingual streaming RNN-T (models.rnnt_asr)"
    )
    m.add_argument("--asr-lexicon", default=None, metavar="SPEC", help=ASR_LEXICON_HELP)
    m.add_argument(
        "--sed",
        action="store_true",
        help="also detect sound events (models.sed, 10 s windows every 1 s, at 16 kHz; the tuned thresholds, no clip gates)",
    )
    m.add_argument("--quiet", action="store_true", help="no console view; print a one-line summary per station")
    add_web_argument(m)
    from streamkit.cli.cluster import add_cluster_arguments

    add_cluster_arguments(m)


def cmd_monitor(a: argparse.Namespace) -> int:
    from streamkit.io.console_out import ConsoleOut
    from streamkit.io.kiwi_secrets import PASSWORD_ENV, password_from_args
    from streamkit.io.textsafe import printable
    from streamkit.monitor import run_monitor

    password = password_from_args(a, default_env=PASSWORD_ENV)
    stations = list(a.station or [])
    if a.stations_file:
        stations += _load_station_file(a.stations_file)
    out = ConsoleOut(sys.stdout)  # shared with the live view: a closed stdout is reported once, and the run goes on
    if a.ray is not None:
        if a.index is not None or a.index_embedder is not None:  # the recordings are on the stations' nodes: nothing to index here
            raise CliError("--index is not available with --ray (the recordings are written on the nodes): run `streamkit index build` there")
        from streamkit.cli.cluster import cmd_monitor_ray

        return cmd_monitor_ray(a, stations, password, _sad_detectors(a.sad) + (("asr",) if a.asr else ()) + (("sed",) if a.sed else ()),
                               _asr_options(a), out, live_view(a))  # fmt: skip
    indexer = live_indexer(a, a.events)
    view = live_view(a)
    if view is not None and indexer is not None:
        view.search_index = a.index
    if not a.quiet:
        where = ", ".join(stations) if stations else "the built-in KiwiSDR emulator on loopback (3 stations, 1 frame in 60 dropped)"
        say(out, f"streamkit {streamkit.__version__}: monitoring {where} for {a.duration:g} s of stream time; events -> {a.events}/")
    try:
        res = run_monitor(stations, duration=a.duration, events_dir=a.events, record_dir=a.record, password=password,
                          password_follows_redirect=a.password_follows_redirect,
                          compression=a.compression, console=not a.quiet, stall_s=a.stall, max_retries=a.max_retries,
                          detectors=_sad_detectors(a.sad) + (("asr",) if a.asr else ()) + (("sed",) if a.sed else ()), asr_options=_asr_options(a),
                          console_file=out, live=view, on_live=(lambda v: start_web(v, out)) if view is not None else None,
                          index=indexer)  # fmt: skip
    finally:
        if view is not None:
            web_summary(out, view)
    if res.get("index") is not None:
        say(out, _index_line(a.index, res["index"]))
    if a.quiet:
        for st in res["stations"].values():
            say(out, summary_line(st))
    bad = {**res["failures"], **res["fatal"]}
    for name, msg in bad.items():  # server text (a kick message, ...): escaped, so that it cannot forge a line
        print(f"streamkit: error: station {printable(name)}: {printable(msg)}", file=sys.stderr)
    if bad and len(bad) == len(res["stations"]):
        return EXIT_RUNTIME
    return exit_status(out, list(res["stations"].values()))


def _index_line(index: str, r: Any) -> str:
    from streamkit.io.textsafe import printable

    f = r.final
    done = (f"{len(f.added)} file(s), {f.windows} windows and {f.segments} event segments; {r.live} window(s) embedded live, "
            f"{r.deferred} at the end" if f is not None else "not completed")  # fmt: skip
    errs = f"; {r.errors} failed round(s): {'; '.join(r.notes)}" if r.errors or r.notes else ""
    failed = f"; {len(f.failed)} file(s) failed" if f is not None and f.failed else ""
    return printable(f"index {index}: {done}{failed}{errs}")


def _load_station_file(path: str) -> list[str]:
    import yaml

    p = Path(path)
    if not p.is_file():
        raise CliError(f"station file not found: {p}")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise CliError(f"cannot parse station file {p}: {str(exc).splitlines()[0]}") from None
    if isinstance(data, dict):
        data = data.get("stations")
    if not isinstance(data, list):
        raise CliError(f"station file {p}: want a list of host:port:freq_khz:mode strings (or {{stations: [...]}})")
    out = []
    for item in data:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and "host" in item and "freq_khz" in item:
            out.append(f"{item['host']}:{item.get('port', 8073)}:{item['freq_khz']}:{item.get('mode', 'lsb')}")
        else:
            raise CliError(f"station file {p}: bad entry {item!r}")
    return out


def _sad_detectors(choice: str) -> tuple[str, ...]:
    return {"both": ("stat", "dnn"), "all": ("energy", "stat", "dnn")}.get(choice, (choice,))


def _asr_options(a: argparse.Namespace) -> dict[str, Any]:
    """``models.rnnt_asr`` parameters from ``--asr-lexicon`` (monitor, mic); with a lexicon the block's
    own defaults give the lexicon beam and word penalty."""
    lex = getattr(a, "asr_lexicon", None)
    return {} if lex is None else {"lexicon": lex}


# --------------------------------------------------------------------------- emulate
def add_emulate_parsers(em: argparse.ArgumentParser) -> None:
    add_command(commands(em, "what", metavar="WHAT", required=True), "kiwi",
                help="a KiwiSDR-compatible WebSocket server (real protocol, programmable signals, faults)",
                description="KiwiSDR-compatible loopback server: the real SND protocol, programmable signals per frequency, fault injection.",
                arguments=add_kiwi_arguments, run="streamkit.io.kiwi_emulator:run_from_args")  # fmt: skip


def add_kiwi_arguments(p: argparse.ArgumentParser) -> None:
    from streamkit.io.kiwi_emulator import add_emulator_arguments

    add_emulator_arguments(p)
    p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log debug messages")


# --------------------------------------------------------------------------- mic, devices
def add_mic_arguments(mic: argparse.ArgumentParser) -> None:
    mic.add_argument("--device", default=None, help="input device index or name substring (see `streamkit devices`)")
    mic.add_argument("--rate", type=float, default=None, help="capture rate (default: the device's)")
    mic.add_argument("--duration", type=float, default=None, help="stop after S seconds (default: until Ctrl-C)")
    mic.add_argument("--events", default=None, help="JSONL event file or directory")
    mic.add_argument("--chunk-ms", type=float, default=20.0)
    mic.add_argument("--sad", choices=SAD_CHOICES, default="energy", help=SAD_HELP)
    mic.add_argument("--asr", action="store_true", help="also transcribe (statistical SAD -> multilingual streaming RNN-T)")
    mic.add_argument("--asr-lexicon", default=None, metavar="SPEC", help=ASR_LEXICON_HELP)
    mic.add_argument("--sed", action="store_true", help="also detect sound events (models.sed at 16 kHz; the tuned thresholds, no clip gates)")
    mic.add_argument("--record", default=None, metavar="DIR", help="also record the captured audio as DIR/mic.wav (16-bit, at the capture rate)")
    add_index_arguments(mic)
    add_web_argument(mic)


def build_mic_graph(a: argparse.Namespace) -> Graph:
    """The graph of ``streamkit mic`` from its parsed arguments (microphone -> 8 kHz level meter -> detectors)."""
    g = Graph("mic")
    src = g.add(registry_block("io.mic", device=a.device, rate=a.rate, channels=1), name="mic")
    rs = g.add(registry_block("dsp.resample", to_hz=8000), name="rs")
    lvl = g.add(registry_block("dsp.level", interval_s=0.1), name="level")
    g.chain(src, rs, lvl)
    dets = _sad_detectors(getattr(a, "sad", "energy"))
    if "energy" in dets:
        g.connect(lvl, g.add(registry_block("dsp.energy_vad"), name="vad"))
    if "stat" in dets:  # the SADs hang off the level meter (fan-out)
        g.connect(lvl, g.add(registry_block("dsp.stat_sad"), name="stat_sad"))
    if "dnn" in dets:
        g.connect(lvl, g.add(registry_block("models.sad_dnn"), name="dnn_sad"))
    if getattr(a, "asr", False):
        from streamkit.monitor import asr_weights

        gate = g.add(registry_block("dsp.speech_gate", events="stat" not in dets), name="asr_sad")
        g.connect(lvl, gate)
        asr_weights()  # the block's defaults are the CLI's: the shipped weights, LID shutoff, pre-roll
        g.connect(gate, g.add(registry_block("models.rnnt_asr", **_asr_options(a)), name="asr"))
    if getattr(a, "sed", False):
        from streamkit.monitor import LIVE_SED, sed_weights

        sed_weights()
        rs16 = g.add(registry_block("dsp.resample", to_hz=16000), name="rs16")
        g.connect(src, rs16)
        g.connect(rs16, g.add(registry_block("models.sed", **LIVE_SED), name="sed"))
    if getattr(a, "record", None) is not None:
        Path(a.record).mkdir(parents=True, exist_ok=True)
        g.connect(src, g.add(registry_block("io.wav_sink", path=str(Path(a.record) / "mic.wav")), name="wav"))
    return g


def cmd_mic(a: argparse.Namespace) -> int:
    from streamkit.io.console_out import ConsoleOut

    events = a.events if a.events is None or not a.events.endswith(".jsonl") else str(Path(a.events).parent)
    indexer = live_indexer(a, events)  # checked before the device is opened
    g = build_mic_graph(a)
    con = add_event_outputs(g, a.events, console=True)
    if indexer is not None:
        indexer.watch("mic", g.blocks["wav"])
    view = live_view(a)
    out = ConsoleOut(sys.stdout) if view is not None or indexer is not None else None
    if view is not None:
        if indexer is not None:
            view.search_index = a.index
        view.attach(g, tap="level", station="mic", mode="microphone")
        start_web(view, out)
    try:
        with indexing(indexer):
            st = run_graph(g, RealTime(), a.duration, a.chunk_ms)
    finally:
        if view is not None:
            web_summary(out, view)
    if indexer is not None:
        say(out, _index_line(a.index, indexer.finish()))
    return exit_status(con, [st])


def cmd_devices(a: argparse.Namespace) -> int:
    from streamkit.io.mic_source import format_devices

    print(format_devices())
    return 0
