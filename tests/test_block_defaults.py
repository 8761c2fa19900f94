"""Block defaults are the CLI's: models.rnnt_asr in a graph file needs no parameters and runs as
`streamkit transcribe`, `monitor --asr` and `mic --asr` do; the monitor passes its blocks only what its
user chose (and the documented live-stream settings)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import streamkit.models
from streamkit.cli import build_parser, main
from streamkit.cli.monitor import build_mic_graph
from streamkit.core.errors import ConfigError
from streamkit.core.graph import Graph
from streamkit.models.rnnt_stream import RnntAsr
from tests.models.test_rnnt_stream import make_model, signal

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "graphs" / "transcribe_file.yaml"
#: what the block decides with (the attributes its parameters become)
SETTINGS = ("beam", "max_symbols_per_frame", "tau_frames", "s_th", "languages", "lid_select", "lid_score", "lid_prior", "utterance_mode",
            "pre_roll_s", "max_utterance_s", "partial_interval_s", "threads", "lexicon", "word_penalty")  # fmt: skip


def settings(blk: RnntAsr) -> dict:
    return {k: getattr(blk, k) for k in SETTINGS}


def test_rnnt_asr_in_a_graph_needs_no_parameters(monkeypatch, tmp_path):
    spec = {"blocks": {"src": {"type": "io.tone", "rate": 8000, "duration_s": 1}, "asr": {"type": "models.rnnt_asr"}}, "chain": ["src", "asr"]}
    g = Graph.from_spec(spec)
    g.build()
    assert g.blocks["asr"].model == str(streamkit.models.RNNT_WEIGHTS)
    assert g.to_spec()["blocks"]["asr"] == {"type": "models.rnnt_asr"}  # the file stays portable: no machine path
    monkeypatch.setattr(streamkit.models, "RNNT_WEIGHTS", tmp_path / "absent.pt")
    with pytest.raises(ConfigError, match=r"asr: no shipped RNN-T weights at .*absent.pt"):  # when the graph is built, before any audio
        Graph.from_spec(spec).build()


@pytest.fixture
def speech(tmp_path):
    sf = pytest.importorskip("soundfile")
    rng = np.random.default_rng(4)
    x = np.concatenate([np.zeros(8000), signal(2.0, seed=5), np.zeros(12000), signal(1.5, seed=6), np.zeros(8000)])
    x = (x + 0.003 * rng.standard_normal(len(x))).astype(np.float32)
    wav = tmp_path / "talk.wav"
    sf.write(wav, x, 8000, subtype="FLOAT")
    return wav


def test_transcribe_passes_the_block_defaults(tmp_path, speech, monkeypatch, capsys):
    """The CLI's settings read from the block it builds, against the block built with no parameters."""
    weights = make_model(tmp_path, lid_hidden=4)
    seen: list[RnntAsr] = []
    init = RnntAsr.__init__

    def spy(self, **kw):
        init(self, **kw)
        seen.append(self)

    monkeypatch.setattr(RnntAsr, "__init__", spy)
    assert main(["transcribe", str(speech), "--weights", weights, "--json"]) == 0
    capsys.readouterr()
    assert len(seen) == 1 and seen[0].model == weights
    monkeypatch.setattr(RnntAsr, "__init__", init)
    assert settings(seen[0]) == settings(RnntAsr())


def test_monitor_and_mic_pass_nothing_but_the_users_choices():
    from streamkit.monitor import build_station_graph

    g = build_station_graph({"host": "127.0.0.1", "port": 1, "freq_khz": 7100, "mode": "lsb"}, detectors=("stat", "asr"))
    m = build_mic_graph(build_parser().parse_args(["mic", "--asr"]))
    for blk in (g.blocks["asr"], m.blocks["asr"]):
        assert blk.params() == {} and settings(blk) == settings(RnntAsr()) and blk.model == str(streamkit.models.RNNT_WEIGHTS)
    lex = build_mic_graph(build_parser().parse_args(["mic", "--asr", "--asr-lexicon", "system"])).blocks["asr"]
    assert lex.params() == {"lexicon": "system"} and settings(lex) == settings(RnntAsr(lexicon="system"))


def test_the_example_graph_transcribes_as_the_cli_does(tmp_path, speech, monkeypatch, capsys):
    """examples/graphs/transcribe_file.yaml (models.rnnt_asr with no parameters) gives `streamkit transcribe`'s utterances."""
    weights = make_model(tmp_path, lid_hidden=4)
    assert main(["transcribe", str(speech), "--weights", weights, "--json"]) == 0
    cli = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(cli) >= 2, cli  # both bursts are utterances
    monkeypatch.setattr(streamkit.models, "RNNT_WEIGHTS", Path(weights))
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(EXAMPLE), "--set", f"input={speech}", "--quiet"]) == 0
    events = [json.loads(line) for line in (tmp_path / "events" / "transcribe-file.jsonl").read_text().splitlines()]
    finals = [e for e in events if e["kind"] == "asr.final"]
    lids = [e["payload"] for e in events if e["kind"] == "lid.result"]
    got = [(round(e["span"][0] / 8000, 3), round(e["span"][1] / 8000, 3), e["payload"]["lang"], e["payload"]["text"]) for e in finals]
    assert got == [(u["start_s"], u["end_s"], u["lang"], u["text"]) for u in cli]
    assert [q["method"] for q in lids] == [u["lid_method"] for u in cli] == ["lid-last"] * len(cli)


def test_monitor_station_graph_passes_only_the_users_choices(monkeypatch):
    import streamkit.monitor as monitor

    runners = []

    class Capture:
        def __init__(self, rs):
            runners.extend(rs)
            self.failures = {}

        def run(self):
            return {}

    monkeypatch.setattr(monitor, "MultiRunner", Capture)
    monitor.run_monitor(["127.0.0.1:1:7100:lsb"], duration=1.0, events_dir=None, console=False, detectors=("energy", "stat", "dnn", "asr", "sed"))
    g = runners[0].graph
    # the station (host, port, frequency, mode) and the monitor's options; nothing else
    user = {"password_follows_redirect", "compression", "stall_s", "max_retries"}
    assert set(g.blocks["kiwi"].params()) == {"host", "port", "freq_khz", "mode"} | user
    assert g.blocks["kiwi"].backoff_initial_s == 0.5
    for name in ("vad", "stat_sad", "dnn_sad", "asr"):
        assert g.blocks[name].params() == {}, name
    assert g.blocks["sed"].params() == monitor.LIVE_SED  # a live stream is not cut into clips: no clip gates
    assert g.blocks["asr_sad"].params() == {"events": False}  # the stat SAD already reports the segments
