"""Graph files take parameters: declared ``parameters`` with ``${name}`` references, ``--set`` overrides of
declared and block parameters, clear errors for unknown names, the block's own errors for bad values."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from streamkit.cli import main
from streamkit.core.block import Source, SourceRead
from streamkit.core.errors import ConfigError
from streamkit.core.graph import Graph
from streamkit.core.graph_params import apply_params, parse_assignments
from streamkit.core.registry import register
from streamkit.core.types import StreamSpec


@register("test.probe")
class Probe(Source):
    """Records nested parameters; a few items of zeros."""

    def __init__(self, *, n: int = 10, rate: int = 8000, values: list | None = None, opts: dict | None = None, label: str = "", name=None):
        super().__init__(name=name)
        if not isinstance(n, int) or isinstance(n, bool):
            raise ConfigError(f"n must be an int, got {n!r}")
        self.n, self.rate, self.values, self.opts, self.label = n, rate, values, opts, label

    def negotiate(self, inputs):
        return {"out": StreamSpec(self.rate, 1, np.float32)}

    def start(self, ctx):
        self.pos = 0

    def read(self, max_items, ctx):
        if self.pos >= self.n:
            return None
        k = min(max_items, self.n - self.pos)
        self.pos += k
        return SourceRead(np.zeros(k, np.float32))


def spec(**extra):
    return {
        "name": "p",
        "parameters": {"count": {"default": 100, "help": "items"}, "tag": "x", "gain": {"default": 2.5}},
        "blocks": {
            "src": {
                "type": "test.probe",
                "n": "${count}",
                "values": ["${gain}", 1, ["${tag}"]],
                "opts": {"a": {"b": "${gain}"}},
                "label": "run-${tag}-${count}",
            },
            "rs": {"type": "dsp.resample", "to_hz": 8000},
        },
        "chain": ["src", "rs"],
        **extra,
    }


def test_declared_parameters_defaults_and_nested_references():
    g = Graph.from_spec(spec())
    src = g.blocks["src"]
    assert src.n == 100 and isinstance(src.n, int)  # "${count}" alone keeps the value's type
    assert src.values == [2.5, 1, ["x"]] and src.opts == {"a": {"b": 2.5}}  # lists and mappings, nested
    assert src.label == "run-x-100"  # inside a longer string: the value's text
    assert g.parameters == {"count": 100, "tag": "x", "gain": 2.5}
    assert "parameters: count=100, tag='x', gain=2.5" in g.describe()
    assert "parameters" not in g.to_spec() and g.to_spec()["blocks"]["src"]["n"] == 100  # written back resolved


def test_set_declared_and_block_parameters():
    g = Graph.from_spec(spec(), params={"count": 7, "tag": "y", "rs.to_hz": 16000})
    assert g.blocks["src"].n == 7 and g.blocks["src"].label == "run-y-7" and g.blocks["src"].values[2] == ["y"]
    assert g.build().out_specs["rs"]["out"].rate == 16000
    # a block parameter set directly wins over the file's value, references included
    g = Graph.from_spec(spec(), params={"count": 7, "src.n": 3})
    assert g.blocks["src"].n == 3 and g.blocks["src"].label == "run-x-7"


def test_literal_dollar_brace_and_required_parameter():
    s = {"parameters": {"who": {"help": "no default: required"}}, "blocks": {"src": {"type": "test.probe", "label": "$${who} is ${who}"}}}
    with pytest.raises(ConfigError, match=r"graph parameter 'who' has no default: .*--set who=VALUE"):
        Graph.from_spec(s)
    assert Graph.from_spec(s, params={"who": "me"}).blocks["src"].label == "${who} is me"


def test_graph_without_parameters_is_unchanged():
    s = {"name": "plain", "blocks": {"src": {"type": "test.probe", "n": 5, "label": "{graph}"}, "k": {"type": "io.collect"}}, "chain": ["src", "k"]}
    out, values = apply_params(s)
    assert out == s and values == {}
    g = Graph.from_spec(s)
    assert g.parameters == {} and "parameters" not in g.describe()
    assert g.to_spec() == Graph.from_spec(s, params={}).to_spec()
    assert Graph.from_spec(s, params={"src.n": 6}).blocks["src"].n == 6  # block parameters can still be set


@pytest.mark.parametrize(
    "params, msg",
    [
        ({"nope": 1}, r"unknown graph parameter 'nope' \(declared: count, tag, gain\); a block's parameter is BLOCK.PARAM \(blocks: src, rs\)"),
        ({"zz.n": 1}, r"unknown block 'zz' in zz.n \(blocks: src, rs\)"),
        ({"rs.rate": 1}, r"block 'rs' \(dsp.resample\) has no parameter 'rate' \(its parameters: to_hz, quality\)"),
        ({"rs.type": "dsp.gain"}, "a block's type is not a parameter"),
        ({"rs.to_hz.x": 1}, "want BLOCK.PARAM"),
    ],
)
def test_unknown_names_are_clear_errors(params, msg):
    with pytest.raises(ConfigError, match=msg):
        Graph.from_spec(spec(), params=params)


def test_unknown_references_and_bad_declarations():
    with pytest.raises(ConfigError, match=r"blocks.src.values\[0\]: unknown graph parameter \$\{gainz\} \(declared: count\)"):
        Graph.from_spec({"parameters": {"count": 1}, "blocks": {"src": {"type": "test.probe", "values": ["${gainz}"]}}})
    with pytest.raises(ConfigError, match=r"unknown graph parameter \$\{x\} \(the graph declares no 'parameters'\)"):
        Graph.from_spec({"blocks": {"src": {"type": "test.probe", "label": "a${x}"}}})
    with pytest.raises(ConfigError, match="unknown graph parameter 'x' .this graph declares no 'parameters'"):
        Graph.from_spec({"blocks": {"src": {"type": "test.probe"}}}, params={"x": 1})
    with pytest.raises(ConfigError, match=r"parameters.count: unknown keys \['defualt'\]"):
        Graph.from_spec({"parameters": {"count": {"defualt": 1}}, "blocks": {"src": {"type": "test.probe"}}})
    with pytest.raises(ConfigError, match="bad name 'a.b'"):
        Graph.from_spec({"parameters": {"a.b": 1}, "blocks": {"src": {"type": "test.probe"}}})
    with pytest.raises(ConfigError, match="'parameters' must be a mapping"):
        Graph.from_spec({"parameters": [1], "blocks": {"src": {"type": "test.probe"}}})


def test_type_errors_are_the_blocks_own():
    with pytest.raises(ConfigError, match=r"blocks.src \(test.probe\): n must be an int, got 'many'"):
        Graph.from_spec(spec(), params={"count": "many"})
    with pytest.raises(ConfigError, match=r"blocks.rs \(dsp.resample\): cannot read rate 'fast'"):
        Graph.from_spec(spec(), params={"rs.to_hz": "fast"})


def test_parse_assignments_reads_yaml_values():
    got = parse_assignments(["a.path=x.wav", "t=0.2", "n=3", "b=true", "l=[en, hi]", "e=1e-3", "i=inf", "s='3'", "z=", "m={en: 2}", "p=a=b"])
    assert got == {"a.path": "x.wav", "t": 0.2, "n": 3, "b": True, "l": ["en", "hi"], "e": 0.001, "i": math.inf, "s": "3", "z": None,
                   "m": {"en": 2}, "p": "a=b"}  # fmt: skip
    with pytest.raises(ConfigError, match="want NAME=VALUE"):
        parse_assignments(["novalue"])
    with pytest.raises(ConfigError, match="given twice"):
        parse_assignments(["a=1", "a=2"])
    with pytest.raises(ConfigError, match="cannot read"):
        parse_assignments(["a=[1, 2"])


GRAPH = """\
name: tone
parameters:
  seconds: {default: 2, help: stream length}
  freq: 440
blocks:
  src: {type: io.tone, rate: 16000, freq_hz: "${freq}", duration_s: "${seconds}"}
  rs:  {type: dsp.resample, to_hz: 8000}
  lvl: {type: dsp.level, interval_s: 0.5}
chain: [src, rs, lvl]
"""


def test_cli_run_describe_bench_take_set(tmp_path, capsys):
    g = tmp_path / "tone.yaml"
    g.write_text(GRAPH)
    assert main(["run", str(g), "--quiet"]) == 0
    assert "tone: 2.00 s of stream" in capsys.readouterr().out
    assert main(["run", str(g), "--quiet", "--set", "seconds=3", "--set", "lvl.interval_s=1"]) == 0
    out = capsys.readouterr().out
    assert "tone: 3.00 s of stream" in out and "events 3" not in out
    assert main(["describe", str(g), "--set", "rs.to_hz=12000", "--set", "freq=1000"]) == 0
    out = capsys.readouterr().out
    assert "parameters: seconds=2, freq=1000" in out and "out: 12000 Hz x1 float32" in out
    js = tmp_path / "b.json"
    assert main(["bench", str(g), "--repeat", "1", "--json", str(js), "--set", "seconds=1.5", "--set", "rs.to_hz=12000"]) == 0
    assert "TOTAL" in capsys.readouterr().out
    res = json.loads(js.read_text())
    assert res["stats"]["stream_s"] == pytest.approx(1.5) and res["set"] == ["seconds=1.5", "rs.to_hz=12000"]
    assert res["stats"]["blocks"]["lvl"]["items_in"] == 18000  # 1.5 s at 12 kHz


@pytest.mark.parametrize("cmd", ["run", "describe", "bench"])
def test_cli_set_errors_are_one_line(tmp_path, capsys, cmd):
    g = tmp_path / "tone.yaml"
    g.write_text(GRAPH)
    assert main([cmd, str(g), "--set", "sed.threshold=0.2"]) == 2
    assert capsys.readouterr().err.strip() == "streamkit: error: unknown block 'sed' in sed.threshold (blocks: src, rs, lvl)"
    assert main([cmd, str(g), "--set", "threshold"]) == 2
    assert "want NAME=VALUE" in capsys.readouterr().err
    assert main([cmd, str(g), "--set", "freq=loud"]) == 2
    assert "blocks.src (io.tone)" in capsys.readouterr().err
