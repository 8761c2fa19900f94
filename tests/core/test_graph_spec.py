"""Graph files: round trip, errors with places, registry."""

import json

import numpy as np
import pytest

from streamkit.core.block import Source, SourceRead
from streamkit.core.errors import ConfigError
from streamkit.core.graph import Graph
from streamkit.core.registry import lookup, register
from streamkit.core.runtime import Runner
from streamkit.core.types import StreamSpec
from streamkit.dsp.passthrough import Gain, PassThrough
from streamkit.io.collect import CollectSink


@register("test.ramp")
class Ramp(Source):
    """0, 1, 2, ... for n items."""

    def __init__(self, *, n=1000, rate=8000, name=None):
        super().__init__(name=name)
        self.n, self.rate = n, rate

    def negotiate(self, inputs):
        return {"out": StreamSpec(self.rate, 1, np.float32)}

    def start(self, ctx):
        self.pos = 0

    def read(self, max_items, ctx):
        if self.pos >= self.n:
            return None
        k = min(max_items, self.n - self.pos)
        x = np.arange(self.pos, self.pos + k, dtype=np.float32)
        self.pos += k
        return SourceRead(x)


def make_graph():
    g = Graph("roundtrip")
    src = g.add(Ramp(n=500, rate=8000), name="src")
    a = g.add(Gain(gain_db=6.0), name="a")
    b = g.add(PassThrough(), name="b")
    k = g.add(CollectSink(), name="k")
    g.chain(src, a, b, k)
    g.run_defaults = {"mode": "freerun"}
    return g


def test_spec_round_trip_dict_yaml_json(tmp_path):
    g = make_graph()
    spec = g.to_spec()
    assert spec["blocks"]["a"] == {"type": "dsp.gain", "gain_db": 6.0}
    assert Graph.from_spec(spec).to_spec() == spec
    for name in ("g.yaml", "g.json"):
        p = tmp_path / name
        g.save(p)
        g2 = Graph.from_spec(p)
        assert g2.to_spec() == spec
    # and the loaded graph runs to the same output as the original
    g3 = Graph.from_spec(tmp_path / "g.json")
    Runner(g3, stats_interval_s=0).run()
    np.testing.assert_allclose(g3.blocks["k"].samples[:, 0], np.arange(500) * 10 ** (6 / 20), rtol=1e-6)


def test_chain_shorthand_and_edge_strings():
    spec = {"name": "s", "blocks": {"src": {"type": "test.ramp"}, "p": {"type": "dsp.passthrough"}, "k": {"type": "io.collect"}}, "edges": ["src -> p"], "chain": ["p", "k"]}
    g = Graph.from_spec(spec)
    assert g.edges == [("src", "p"), ("p", "k")]


@pytest.mark.parametrize(
    "spec, msg",
    [
        ({"blocks": {}}, "non-empty mapping"),
        ({"blocks": {"x": {"type": "dsp.nope"}}}, "unknown block type 'dsp.nope'"),
        ({"blocks": {"x": {"gain": 1}}}, "must be a mapping with a 'type'"),
        ({"blocks": {"x": {"type": "dsp.gain", "gainz": 1}}}, r"blocks.x \(dsp.gain\): bad parameters"),
        ({"blocks": {"x": {"type": "dsp.gain", "gain": 1, "gain_db": 2}}}, "give gain or gain_db"),
        ({"blocks": {"x": {"type": "test.ramp"}}, "edges": [["x"]]}, "bad edge"),
        ({"blocks": {"x": {"type": "test.ramp"}}, "edges": [["x", "y"]]}, "no block named 'y'"),
        ({"blocks": {"x": {"type": "test.ramp"}}, "bogus": 1}, "unknown keys"),
        ({"blocks": {"x": {"type": "test.ramp"}}, "events": [{"kinds": ["a"]}]}, "needs a 'sink'"),
    ],
)
def test_bad_specs_give_config_errors(spec, msg):
    with pytest.raises(ConfigError, match=msg):
        Graph.from_spec(spec)


def test_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="graph file not found"):
        Graph.from_spec(tmp_path / "missing.yaml")
    p = tmp_path / "bad.yaml"
    p.write_text("blocks: [unclosed")
    with pytest.raises(ConfigError, match="cannot parse graph file"):
        Graph.from_spec(p)
    p2 = tmp_path / "list.json"
    p2.write_text(json.dumps([1, 2]))
    with pytest.raises(ConfigError, match="must hold a mapping"):
        Graph.from_spec(p2)


def test_registry_lookup_and_duplicate_name():
    assert lookup("dsp.gain") is Gain
    with pytest.raises(ConfigError, match="already used"):

        @register("dsp.gain")
        class Other(PassThrough):
            pass


def test_unregistered_block_cannot_be_saved():
    class Anon(PassThrough):
        registry_name = None

    g = Graph("x")
    g.add(Anon(), name="a")
    with pytest.raises(ConfigError, match="no registry name"):
        g.to_spec()


def test_positional_args_rejected():
    with pytest.raises(TypeError, match="keyword arguments only"):
        Gain(2.0)
