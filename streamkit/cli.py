"""``streamkit`` command line: monitor | mic | run | bench | devices | blocks | describe.

Every failure the user can cause (a missing file, a bad graph, an unknown device) prints one line
``streamkit: error: ...`` and exits with status 2; a crash inside a block while running exits 1
with the block and the item span named.

Exit status:

* 0: the run completed.
* 1 (``EXIT_RUNTIME``): the run failed: a block crashed, or every monitored station failed.
* 2 (``EXIT_USAGE``): bad input (arguments, files, graphs, devices).
* 3 (``EXIT_CONSOLE_LOST``): the run completed, but its console output was cut short because
  stdout was closed by its reader (``streamkit monitor | head``): one ``streamkit: console output
  lost`` line went to stderr and the run went on; event files and recordings are complete.
  Deliberately not 141 (128 + SIGPIPE, what a shell reports for a process killed by a broken
  pipe): the process was not killed and its work is done, and a small code of its own lets a
  script tell "output truncated, data complete" from a failure (1 takes precedence over it).
* 130: interrupted (Ctrl-C).

What a server sends (station errors, kick and redirect messages) is printed through
:func:`streamkit.io.textsafe.printable`: control characters are shown escaped, never acted on.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import streamkit
from streamkit.core.clock import FreeRun, RealTime, parse_mode
from streamkit.core.errors import BlockError, GraphFatal, StreamkitError
from streamkit.core.graph import Graph
from streamkit.core.runtime import Runner
from streamkit.eval.bench import machine_info  # (streamkit.cli.machine_info: the same function)

EXIT_USAGE = 2
EXIT_RUNTIME = 1
EXIT_CONSOLE_LOST = 3


class CliError(StreamkitError):
    """A user-facing error: printed as one line."""


# --------------------------------------------------------------------------- helpers
def _registry_block(name: str, **params: Any) -> Any:
    from streamkit.core.registry import lookup

    return lookup(name)(**params)


def _add_event_outputs(g: Graph, events: str | None, console: bool, quiet_kinds: tuple[str, ...] = ()) -> Any:
    """Subscribe the JSONL event file and the console view; returns the console sink (or ``None``)."""
    if events:
        p = Path(events)
        if p.suffix != ".jsonl":
            from streamkit.io.filenames import safe_filename

            p = p / f"{safe_filename(g.name)}.jsonl"
        g.subscribe(_registry_block("io.jsonl_events", path=str(p)))
    if console:
        sink = _registry_block("io.console")
        g.subscribe(sink)
        return sink
    return None


def _say(out: Any, text: str) -> None:
    """One line to a ConsoleOut: escaped, and never a traceback when the reader is gone."""
    from streamkit.io.textsafe import printable

    out.write(printable(text) + "\n")
    out.flush()


def _exit_status(out: Any, stats: list[dict[str, Any]]) -> int:
    """0, or EXIT_CONSOLE_LOST when the console lost its reader: ``out`` (a ConsoleOut or a console
    sink) was closed (its own stderr line said so), or the console was still blocked at the end."""
    if out is not None and (getattr(out, "lost", None) or getattr(out, "output_lost", None)):
        return EXIT_CONSOLE_LOST
    if any(st.get("event_sinks_left_behind") for st in stats):
        print("streamkit: console output stalled (stdout not being read): the live view was left behind; the run completed "
              "and its event files are complete", file=sys.stderr)  # fmt: skip
        return EXIT_CONSOLE_LOST
    return 0


def _run_graph(g: Graph, mode: Any, duration: float | None, chunk_ms: float, threads: int = 1) -> dict[str, Any]:
    r = Runner(g, mode, duration=duration, chunk_s=chunk_ms / 1000.0, threads=threads)
    return r.run()


# --------------------------------------------------------------------------- commands
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
    if not a.quiet:
        where = ", ".join(stations) if stations else "the built-in KiwiSDR emulator on loopback (3 stations, 1 frame in 60 dropped)"
        _say(out, f"streamkit {streamkit.__version__}: monitoring {where} for {a.duration:g} s of stream time; events -> {a.events}/")
    res = run_monitor(stations, duration=a.duration, events_dir=a.events, record_dir=a.record, password=password,
                      password_follows_redirect=a.password_follows_redirect,
                      compression=a.compression, console=not a.quiet, stall_s=a.stall, max_retries=a.max_retries,
                      detectors=_sad_detectors(a.sad) + (("asr",) if a.asr else ()) + (("sed",) if a.sed else ()), asr_options=_asr_options(a),
                      console_file=out)  # fmt: skip
    if a.quiet:
        for st in res["stations"].values():
            _say(out, _summary_line(st))
    bad = {**res["failures"], **res["fatal"]}
    for name, msg in bad.items():  # server text (a kick message, ...): escaped, so that it cannot forge a line
        print(f"streamkit: error: station {printable(name)}: {printable(msg)}", file=sys.stderr)
    if bad and len(bad) == len(res["stations"]):
        return EXIT_RUNTIME
    return _exit_status(out, list(res["stations"].values()))


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


def _run_nested(prog: str, description: str, add_arguments: Any, run: Any, args: list[str]) -> int:
    """Commands whose options live in their own module: build that parser lazily and run."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    add_arguments(p)
    return int(run(p.parse_args(list(args))) or 0)


def cmd_corpus(a: argparse.Namespace) -> int:
    # --- corpus asr (streamkit.data.asr_corpus) ---
    if a.what == "asr":
        from streamkit.data.asr_corpus import add_asr_arguments
        from streamkit.data.asr_corpus import run_from_args as run_asr

        return _run_nested("streamkit corpus asr", "Generate the multilingual ASR corpus (en, hi, ta, gu): espeak-ng sentences from offline "
                           "word lists, speakers disjoint across train/dev/test, optional HF channel augmentation, grapheme vocabularies "
                           "with B_ word-start symbols.", add_asr_arguments, run_asr, a.args)  # fmt: skip
    # --- end corpus asr ---
    # --- corpus sed (streamkit.data.sed_corpus) ---
    if a.what == "sed":
        from streamkit.data.sed_corpus import add_sed_arguments
        from streamkit.data.sed_corpus import run_from_args as run_sed

        return _run_nested("streamkit corpus sed", "Generate the SED soundscape corpus (DCASE 2019 task 4 layout, 10 classes, 10 s clips): "
                           "strongly labelled synthetic clips, weak and unlabelled real-domain clips (rooms, backgrounds, microphones), "
                           "validation and eval with strong labels.", add_sed_arguments, run_sed, a.args)  # fmt: skip
    # --- end corpus sed ---
    from streamkit.data.hf_corpus import add_corpus_arguments, run_from_args

    return _run_nested("streamkit corpus hf", "Generate the parallel HF speech corpus: espeak-ng speech in the paper's layout, through the HF "
                       "channel simulator, with sample-exact labels and RTTM, train/dev/eval splits.", add_corpus_arguments, run_from_args, a.args)  # fmt: skip


def cmd_sad(a: argparse.Namespace) -> int:
    from streamkit.eval.sad_cli import add_sad_arguments, run_sad

    return _run_nested("streamkit sad", "Run a SAD over WAV/FLAC files or directories (resampled to 8 kHz); write one RTTM per file.",
                       add_sad_arguments, run_sad, a.args)  # fmt: skip


def cmd_eval(a: argparse.Namespace) -> int:
    from streamkit.eval.sad_cli import add_eval_arguments, run_eval

    return _run_nested("streamkit eval sad", "Score SAD systems on a `streamkit corpus hf` corpus: dev-EER threshold applied to eval, ROC plot, "
                       "Markdown/JSON table.", add_eval_arguments, run_eval, a.args)  # fmt: skip


# --- SAD choice of monitor/mic (--sad) ------------------------------------------------------------
SAD_CHOICES = ["energy", "stat", "dnn", "both", "all"]
ASR_LEXICON_HELP = ("with --asr: decode only words of a word list, 'system' (the Debian dictionaries the ASR corpus is drawn from) "
                    "or a directory of <lang>.words.txt files (see `streamkit transcribe --lexicon`)")  # fmt: skip
SAD_HELP = ("speech activity detector: energy (baseline, default), stat (the statistical SAD, dsp.stat_sad), dnn (the CNN-GRU SAD, "
            "models.sad_dnn), both (stat and dnn) or all (energy, stat and dnn)")  # fmt: skip


def _sad_detectors(choice: str) -> tuple[str, ...]:
    return {"both": ("stat", "dnn"), "all": ("energy", "stat", "dnn")}.get(choice, (choice,))


# --- train (streamkit.models.train_sad_dnn, streamkit.train.rnnt, streamkit.train.sed) -----------
TRAINERS = {
    "sad-dnn": ("streamkit.models.train_sad_dnn", "add_train_arguments", "run_from_args",
                "Train the CNN-GRU SAD on a `streamkit corpus hf` corpus (channel augmentation per epoch, best checkpoint by dev loss, "
                "resumable); writes the weights and a model card JSON."),
    "rnnt": ("streamkit.train.rnnt", "add_arguments", "run_from_args",
             "Train a multilingual streaming RNN-T (vanilla, onehot, multisoftmax, lsp, lid) on a `streamkit corpus asr` corpus "
             "(resumable checkpoints, model card JSON)."),
    "rnnt-lid": ("streamkit.train.rnnt_lid", "add_arguments", "run_from_args",
                 "Second stage of the lid RNN-T: refit its LID head on the frozen encoder with language-balanced data (the rest of "
                 "the model stays bit-for-bit); writes weights and a model card JSON."),
    "sed": ("streamkit.train.sed", "add_arguments", "run_from_args",
            "Train the SED CRNN on a `streamkit corpus sed` corpus with one of the paper's methods (baseline, adversarial, "
            "tri-training); resumable, writes weights and a model card JSON."),
    "sed-post": ("streamkit.train.sed_tune", "add_arguments", "run_from_args",
                 "Fit the SED post-processing per class (median window, threshold) on a corpus' validation subset; writes a copy "
                 "of the weight file with them in its meta (models.sed post='tuned', streamkit sed --post tuned)."),
}


def _lazy(module: str, *names: str) -> list[Any]:
    import importlib

    mod = importlib.import_module(module)
    return [getattr(mod, n) for n in names]


def cmd_train(a: argparse.Namespace) -> int:
    module, add_name, run_name, description = TRAINERS[a.what]
    add_arguments, run = _lazy(module, add_name, run_name)
    return _run_nested(f"streamkit train {a.what}", description, add_arguments, run, a.args)


def cmd_transcribe(a: argparse.Namespace) -> int:
    add_arguments, run = _lazy("streamkit.models.transcribe", "add_arguments", "run_from_args")
    return _run_nested("streamkit transcribe", "Run SAD + multilingual streaming RNN-T over audio files: per utterance the language, the "
                       "text and the times (--json for JSON Lines).", add_arguments, run, a.args)  # fmt: skip


def cmd_sed(a: argparse.Namespace) -> int:
    add_arguments, run = _lazy("streamkit.models.sed_stream", "add_arguments", "run_from_args")
    return _run_nested("streamkit sed", "Sliding-window sound event detection over audio files of any length; detections in the DCASE "
                       "format (filename, onset, offset, event_label).", add_arguments, run, a.args)  # fmt: skip
# --- end train / transcribe / sed ----------------------------------------------------------------


def cmd_emulate(a: argparse.Namespace) -> int:
    from streamkit.io.kiwi_emulator import main as emulator_main

    return int(emulator_main(list(a.args)) or 0)


def _asr_options(a: argparse.Namespace) -> dict[str, Any]:
    """``models.rnnt_asr`` parameters from ``--asr-lexicon`` (monitor, mic); with a lexicon the block's
    own defaults give the lexicon beam and word penalty."""
    lex = getattr(a, "asr_lexicon", None)
    return {} if lex is None else {"lexicon": lex}


def build_mic_graph(a: argparse.Namespace) -> Graph:
    """The graph of ``streamkit mic`` from its parsed arguments (microphone -> 8 kHz level meter -> detectors)."""
    g = Graph("mic")
    src = g.add(_registry_block("io.mic", device=a.device, rate=a.rate, channels=1), name="mic")
    rs = g.add(_registry_block("dsp.resample", to_hz=8000), name="rs")
    lvl = g.add(_registry_block("dsp.level", interval_s=0.1), name="level")
    g.chain(src, rs, lvl)
    dets = _sad_detectors(getattr(a, "sad", "energy"))
    if "energy" in dets:
        g.connect(lvl, g.add(_registry_block("dsp.energy_vad"), name="vad"))
    if "stat" in dets:  # the SADs hang off the level meter (fan-out)
        g.connect(lvl, g.add(_registry_block("dsp.stat_sad"), name="stat_sad"))
    if "dnn" in dets:
        g.connect(lvl, g.add(_registry_block("models.sad_dnn"), name="dnn_sad"))
    if getattr(a, "asr", False):
        from streamkit.monitor import _asr_weights

        gate = g.add(_registry_block("dsp.speech_gate", events="stat" not in dets), name="asr_sad")
        g.connect(lvl, gate)
        _asr_weights()
        g.connect(gate, g.add(_registry_block("models.rnnt_asr", **_asr_options(a)), name="asr"))
    if getattr(a, "sed", False):
        from streamkit.monitor import LIVE_SED, _sed_weights

        _sed_weights()
        rs16 = g.add(_registry_block("dsp.resample", to_hz=16000), name="rs16")
        g.connect(src, rs16)
        g.connect(rs16, g.add(_registry_block("models.sed", **LIVE_SED), name="sed"))
    return g


def cmd_mic(a: argparse.Namespace) -> int:
    g = build_mic_graph(a)
    con = _add_event_outputs(g, a.events, console=True)
    st = _run_graph(g, RealTime(), a.duration, a.chunk_ms)
    return _exit_status(con, [st])


# --- graph parameters (run, bench, describe: --set) ------------------------------------------------
SET_HELP = ("set a parameter of the graph: NAME=VALUE for one the file declares (its 'parameters'), BLOCK.PARAM=VALUE for a block's "
            "(e.g. --set src.path=x.wav --set sad.threshold=0.2); the value is read as YAML (number, true/false, [list], else text); repeatable")  # fmt: skip


def _add_set_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help=SET_HELP)


def _graph_overrides(a: argparse.Namespace) -> dict[str, Any]:
    """``Graph.from_spec(..., params=)`` from the ``--set NAME=VALUE`` options."""
    from streamkit.core.graph_params import parse_assignments

    return parse_assignments(getattr(a, "set", None) or [])
# --- end graph parameters ----------------------------------------------------------------------------


def cmd_run(a: argparse.Namespace) -> int:
    g = Graph.from_spec(a.graph, params=_graph_overrides(a))
    defaults = g.run_defaults
    mode = parse_mode(a.mode or defaults.get("mode", "freerun"))
    duration = a.duration if a.duration is not None else defaults.get("duration")
    con = _add_event_outputs(g, a.events, console=not a.quiet)
    g.build()
    st = _run_graph(g, mode, duration, a.chunk_ms, threads=a.threads)
    if a.quiet:
        from streamkit.io.console_out import ConsoleOut

        con = ConsoleOut(sys.stdout)
        _say(con, _summary_line(st))
    return _exit_status(con, [st])


def bench_graph(spec: Any, repeat: int = 3, chunk_ms: float = 20.0, threads: int = 1, duration: float | None = None) -> dict[str, Any]:
    """Run a graph ``repeat`` times in FreeRun and keep the run with the lowest total busy time."""
    best: dict[str, Any] | None = None
    runs = []
    for _ in range(max(1, repeat)):
        g = Graph.from_spec(spec) if not isinstance(spec, Graph) else spec
        r = Runner(g, FreeRun(), duration=duration, chunk_s=chunk_ms / 1000.0, threads=threads, stats_interval_s=0)
        st = r.run()
        runs.append(st["rtf_total"])
        if best is None or (st["rtf_total"] or 0) < (best["rtf_total"] or 0):
            best = st
    assert best is not None
    best["rtf_total_runs"] = runs
    return best


def format_rtf_table(st: dict[str, Any]) -> str:
    rows = [f"{'block':<14} {'calls':>7} {'items in':>11} {'busy ms':>10} {'max call ms':>12} {'first ms':>9} {'start ms':>9} {'RT factor':>11}"]
    for name, b in st["blocks"].items():
        rtf = b.get("rtf")
        rows.append(
            f"{name:<14} {b['calls']:>7} {b['items_in']:>11} {b['busy_ms']:>10.2f} {b['max_call_ms']:>12.3f} {b['first_call_ms']:>9.2f} "
            f"{b['start_ms']:>9.1f} {f'{rtf:.5f}' if rtf is not None else '-':>11}"
        )
    tot = st.get("rtf_total")
    rows.append(f"{'TOTAL':<14} {'':>7} {'':>11} {'':>10} {'':>12} {'':>9} {'':>9} {f'{tot:.5f}' if tot is not None else '-':>11}")
    rows.append(f"stream {st['stream_s']:.2f} s, wall {st['wall_s']:.2f} s; gaps {st['gaps']} {st['gaps_by_cause'] or ''}; RT factor excludes each block's first call (warm-up, in 'first ms')")
    return "\n".join(rows)


def cmd_bench(a: argparse.Namespace) -> int:
    spec = Graph.from_spec(a.graph, params=_graph_overrides(a)).to_spec()  # validates the file once, up front; parameters resolved
    Graph.from_spec(spec).build()
    from streamkit.io.outputs import check_output_path, write_text

    check_output_path(a.json or f"bench-{spec.get('name', 'graph')}.json")  # refused before the runs, not after
    st = bench_graph(spec, repeat=a.repeat, chunk_ms=a.chunk_ms, threads=a.threads, duration=a.duration)
    print(f"graph {st['graph']}: FreeRun, chunk {a.chunk_ms:g} ms, threads {a.threads}, best of {a.repeat}")
    print(format_rtf_table(st))
    out = Path(a.json) if a.json else Path(f"bench-{st['graph']}.json")
    result = {"graph_file": str(a.graph), **({"set": list(a.set)} if a.set else {}), "chunk_ms": a.chunk_ms, "threads": a.threads, "repeat": a.repeat, "machine": machine_info(),
              "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "stats": st}  # fmt: skip
    write_text(out, json.dumps(result, indent=2, default=str))
    print(f"wrote {out}")
    return 0


def cmd_devices(a: argparse.Namespace) -> int:
    from streamkit.io.mic_source import format_devices

    print(format_devices())
    return 0


def cmd_blocks(a: argparse.Namespace) -> int:
    from streamkit.core.registry import lookup, names

    for n in names():
        cls = lookup(n)
        doc = (cls.__doc__ or "").strip().splitlines()
        print(f"{n:<20} {cls.__module__}.{cls.__name__}: {doc[0] if doc else ''}")
    return 0


def cmd_describe(a: argparse.Namespace) -> int:
    g = Graph.from_spec(a.graph, params=_graph_overrides(a))
    print(g.describe())
    return 0


def _summary_line(st: dict[str, Any]) -> str:
    rtf = st.get("rtf_total")
    return (f"{st['graph']}: {st['stream_s']:.2f} s of stream in {st['wall_s']:.2f} s, RT factor {rtf:.4f}, " if rtf is not None else f"{st['graph']}: ") + (
        f"gaps {st['gaps']}, xruns {st['xruns']}, events {sum(st.get('events', {}).values())}"
    )


# --------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="streamkit", description="Real-time streaming audio engine: KiwiSDR / microphone / file monitoring with detectors.")
    p.add_argument("--version", action="version", version=f"streamkit {streamkit.__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug messages and show tracebacks")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    m = sub.add_parser("monitor", help="monitor KiwiSDR stations live (no station: the built-in emulator)",
                       description="Monitor one or more KiwiSDR stations at once: console view (S-meter, RT factor, gaps, events) and JSONL "
                                   "events per station. With no --station, starts the built-in KiwiSDR emulator on loopback and monitors it.")  # fmt: skip
    m.add_argument("--station", action="append", metavar="HOST:PORT:FREQ_KHZ:MODE", help="a station to monitor (repeatable), e.g. kiwi.example.org:8073:7100:lsb")
    m.add_argument("--stations-file", metavar="YAML", help="YAML list of stations (strings as above, or {host, port, freq_khz, mode})")
    m.add_argument("--duration", type=float, default=15.0, help="stop after S seconds of stream time and exit 0 (default 15)")
    m.add_argument("--events", default="events", metavar="DIR", help="directory for one JSONL event file per station (default ./events)")
    m.add_argument("--record", default=None, metavar="DIR", help="also record each station's received audio as WAV at its true rate (IQ: 2 channels)")
    from streamkit.io.kiwi_secrets import PASSWORD_ENV, add_password_arguments

    add_password_arguments(m, default_env=PASSWORD_ENV)
    m.add_argument("--password-follows-redirect", action="store_true",
                   help="also send the password to the server a station redirects to (default: only to the station's own host and port)")
    m.add_argument("--compression", dest="compression", action="store_true", default=True, help="ADPCM audio transport (default)")
    m.add_argument("--no-compression", dest="compression", action="store_false", help="16-bit PCM transport")
    m.add_argument("--stall", type=float, default=10.0, help="reconnect after S seconds without data (default 10)")
    m.add_argument("--max-retries", type=int, default=None, help="give a station up after N failed reconnects in a row (default: retry forever)")
    m.add_argument("--sad", choices=SAD_CHOICES, default="energy", help=SAD_HELP)
    m.add_argument("--asr", action="store_true", help="also transcribe: statistical SAD (dsp.speech_gate) -> multilingual streaming RNN-T (models.rnnt_asr)")
    m.add_argument("--asr-lexicon", default=None, metavar="SPEC", help=ASR_LEXICON_HELP)
    m.add_argument("--sed", action="store_true", help="also detect sound events (models.sed, 10 s windows every 1 s, at 16 kHz; the tuned thresholds, no clip gates)")
    m.add_argument("--quiet", action="store_true", help="no live view; print a one-line summary per station")
    m.set_defaults(func=cmd_monitor)

    em = sub.add_parser("emulate", help="run a built-in server: `emulate kiwi` is a KiwiSDR on loopback",
                        description="Run a built-in emulator. `streamkit emulate kiwi --help` lists the KiwiSDR emulator's options.")  # fmt: skip
    em.add_argument("what", choices=["kiwi"], help="kiwi: a KiwiSDR-compatible WebSocket server (real protocol, programmable signals, faults)")
    em.add_argument("args", nargs=argparse.REMAINDER, help="options of the emulator (see `streamkit emulate kiwi --help`)")
    em.set_defaults(func=cmd_emulate)

    co = sub.add_parser("corpus", help="generate a corpus: `corpus hf` is the parallel HF speech corpus, `corpus asr` the multilingual ASR corpus",
                        description="Generate a corpus. `streamkit corpus hf --help` / `streamkit corpus asr --help` list the options.")  # fmt: skip
    co.add_argument("what", choices=["hf", "asr", "sed"], help="hf: espeak-ng speech through the HF channel simulator, with labels and RTTM; "
                    "asr: multilingual (en, hi, ta, gu) espeak-ng sentences with transcripts and grapheme vocabularies; "
                    "sed: 10 s soundscapes of 10 event classes with DCASE labels (synthetic/weak/unlabelled/validation/eval)")  # fmt: skip
    co.add_argument("args", nargs=argparse.REMAINDER, help="options of the generator (see `streamkit corpus hf --help`, `streamkit corpus asr --help`)")
    co.set_defaults(func=cmd_corpus)

    sa = sub.add_parser("sad", help="run a SAD over audio files or directories, write one RTTM per file", add_help=False,
                        description="Run a SAD. `streamkit sad --help` lists the options.")  # fmt: skip
    sa.add_argument("args", nargs=argparse.REMAINDER, help="see `streamkit sad --help`")
    sa.set_defaults(func=cmd_sad)

    ev = sub.add_parser("eval", help="evaluate: `eval sad` scores SAD systems on a generated corpus",
                        description="Evaluate. `streamkit eval sad --help` lists the options.")  # fmt: skip
    ev.add_argument("what", choices=["sad"], help="sad: the paper's protocol (collar, dev-EER threshold on eval, ROC)")
    ev.add_argument("args", nargs=argparse.REMAINDER, help="see `streamkit eval sad --help`")
    ev.set_defaults(func=cmd_eval)

    tr = sub.add_parser("train", help="train a model: sad-dnn (CNN-GRU SAD), rnnt (multilingual RNN-T), rnnt-lid (its LID head), sed (SED CRNN), "
                        "sed-post (its per-class post-processing)",
                        description="Train a model. `streamkit train WHAT --help` lists the options.")  # fmt: skip
    tr.add_argument("what", choices=list(TRAINERS), help="sad-dnn: the CNN-GRU SAD (models.sad_dnn); rnnt: the multilingual streaming "
                    "RNN-T (models.rnnt_asr); rnnt-lid: refit a lid RNN-T's LID head on its frozen encoder; sed: the sound event detection CRNN (models.sed); "
                    "sed-post: fit its per-class median windows and thresholds on the validation clips")  # fmt: skip
    tr.add_argument("args", nargs=argparse.REMAINDER, help="see `streamkit train WHAT --help`")
    tr.set_defaults(func=cmd_train)

    tc = sub.add_parser("transcribe", help="SAD + multilingual ASR over audio files: language, text and times per utterance", add_help=False,
                        description="Transcribe files. `streamkit transcribe --help` lists the options.")  # fmt: skip
    tc.add_argument("args", nargs=argparse.REMAINDER, help="see `streamkit transcribe --help`")
    tc.set_defaults(func=cmd_transcribe)

    se = sub.add_parser("sed", help="sound event detection over audio files, DCASE-format detections", add_help=False,
                        description="Sound event detection. `streamkit sed --help` lists the options.")  # fmt: skip
    se.add_argument("args", nargs=argparse.REMAINDER, help="see `streamkit sed --help`")
    se.set_defaults(func=cmd_sed)

    mic = sub.add_parser("mic", help="live microphone demo: level meter and detector events", description="Live microphone demo: level meter and the events of the detectors.")
    mic.add_argument("--device", default=None, help="input device index or name substring (see `streamkit devices`)")
    mic.add_argument("--rate", type=float, default=None, help="capture rate (default: the device's)")
    mic.add_argument("--duration", type=float, default=None, help="stop after S seconds (default: until Ctrl-C)")
    mic.add_argument("--events", default=None, help="JSONL event file or directory")
    mic.add_argument("--chunk-ms", type=float, default=20.0)
    mic.add_argument("--sad", choices=SAD_CHOICES, default="energy", help=SAD_HELP)
    mic.add_argument("--asr", action="store_true", help="also transcribe (statistical SAD -> multilingual streaming RNN-T)")
    mic.add_argument("--asr-lexicon", default=None, metavar="SPEC", help=ASR_LEXICON_HELP)
    mic.add_argument("--sed", action="store_true", help="also detect sound events (models.sed at 16 kHz; the tuned thresholds, no clip gates)")
    mic.set_defaults(func=cmd_mic)

    r = sub.add_parser("run", help="run a graph file (YAML/JSON)", description="Run a graph file.")
    r.add_argument("graph", help="graph file (.yaml/.yml/.json)")
    r.add_argument("--mode", default=None, help="freerun | realtime | paced[:speed] (default: the file's run.mode or freerun)")
    r.add_argument("--duration", type=float, default=None, help="stop after S seconds of stream time")
    r.add_argument("--events", default=None, help="JSONL event file or directory")
    r.add_argument("--chunk-ms", type=float, default=20.0)
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--quiet", action="store_true")
    _add_set_argument(r)
    r.set_defaults(func=cmd_run)

    b = sub.add_parser("bench", help="per-block RT-factor table of a graph (FreeRun), written as JSON", description="Benchmark a graph in FreeRun: per-block RT factor table + JSON.")
    b.add_argument("graph")
    b.add_argument("--json", default=None, help="output JSON path (default bench-<graph>.json)")
    b.add_argument("--repeat", type=int, default=3, help="runs; the fastest is reported (default 3)")
    b.add_argument("--chunk-ms", type=float, default=20.0)
    b.add_argument("--threads", type=int, default=1)
    b.add_argument("--duration", type=float, default=None, help="cap stream seconds (for endless sources)")
    _add_set_argument(b)
    b.set_defaults(func=cmd_bench)

    d = sub.add_parser("devices", help="list audio devices", description="List audio input/output devices (PortAudio).")
    d.set_defaults(func=cmd_devices)

    bl = sub.add_parser("blocks", help="list registered block types", description="List the block types graph files can use.")
    bl.set_defaults(func=cmd_blocks)

    ds = sub.add_parser("describe", help="print a graph's blocks, specs and latencies", description="Negotiate a graph file and print specs and algorithmic latency per path.")
    ds.add_argument("graph")
    _add_set_argument(ds)
    ds.set_defaults(func=cmd_describe)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    nested = {"sad": cmd_sad, "transcribe": cmd_transcribe, "sed": cmd_sed}
    if argv and argv[0] in nested:  # everything after the command belongs to its own parser (--help included)
        a = argparse.Namespace(cmd=argv[0], func=nested[argv[0]], args=argv[1:], verbose="-v" in argv[1:] or "--verbose" in argv[1:])
    else:
        a = parser.parse_args(argv)
    if a.cmd is None:
        parser.print_help()
        return EXIT_USAGE
    import logging

    from streamkit.io.textsafe import SafeLogFormatter

    handler = logging.StreamHandler()  # log messages quote servers: escaped like everything else on the console
    handler.setFormatter(SafeLogFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.DEBUG if a.verbose else logging.WARNING, handlers=[handler])
    try:
        return int(a.func(a) or 0)
    except KeyboardInterrupt:
        print("streamkit: interrupted", file=sys.stderr)
        return 130
    except (BlockError, GraphFatal) as exc:
        if a.verbose:
            raise
        from streamkit.io.textsafe import printable

        print(f"streamkit: error: {printable(exc)}", file=sys.stderr)
        return EXIT_RUNTIME
    except (StreamkitError, OSError, ValueError) as exc:
        if a.verbose:
            raise
        from streamkit.io.textsafe import printable

        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"streamkit: error: {printable(msg)}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
