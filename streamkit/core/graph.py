"""Graph: blocks, data edges and event subscriptions; negotiation; graph files.

::

    g = Graph("demo")
    src = g.add(ToneSource(rate=12000, freq_hz=440), name="src")
    rs = g.add(Resample(to_hz=8000), name="rs")
    g.chain(src, rs, WavSink(path="out.wav"))
    g.subscribe(JsonlEventSink(path="events.jsonl"), kinds=("stream.*",))
    g.build()                      # ConfigError here, before any audio flows, if formats clash

Every block has at most one data input; an output may feed any number of blocks (fan-out). The
graph is therefore a forest rooted at its sources, which lets the runtime push each chunk
depth-first through it with no queue between blocks (see :mod:`streamkit.core.runtime`).

A graph file (YAML or JSON) says the same with registry names::

    name: demo
    blocks:
      src: {type: io.tone, rate: 12000, freq_hz: 440}
      rs:  {type: dsp.resample, to_hz: 8000}
      wav: {type: io.wav_sink, path: out.wav}
    chain: [src, rs, wav]          # or edges: [[src, rs], [rs, wav]]
    events:
      - {sink: {type: io.jsonl_events, path: events.jsonl}, kinds: ["stream.*"]}
    run: {mode: freerun}           # optional defaults for `streamkit run`

It may declare parameters and refer to them as ``${name}`` (:mod:`streamkit.core.graph_params`);
``Graph.from_spec(path, params={"input": "x.wav", "rs.to_hz": 16000})`` sets declared parameters
and block parameters (``streamkit run graph.yaml --set input=x.wav --set rs.to_hz=16000``)::

    parameters:
      input: {default: input.wav, help: audio file to read}
    blocks:
      src: {type: io.file, path: "${input}"}
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamkit.core.block import Block, ErrorPolicy, EventSink, Sink, Source
from streamkit.core.errors import ConfigError
from streamkit.core.registry import lookup
from streamkit.core.types import StreamSpec


@dataclass
class Subscription:
    sink: EventSink
    kinds: tuple[str, ...] | None = None


@dataclass
class BuildInfo:
    """Result of negotiation: specs per block and a topological order."""

    order: list[str]
    in_specs: dict[str, dict[str, StreamSpec]]
    out_specs: dict[str, dict[str, StreamSpec]]
    children: dict[str, list[str]]
    parent: dict[str, str | None]
    latency_items: dict[str, int] = field(default_factory=dict)


class Graph:
    """A named processing graph.

    Args:
        name: the stream / station name; copied into every event.
    """

    def __init__(self, name: str = "graph") -> None:
        self.name = name
        self.blocks: dict[str, Block] = {}
        self.edges: list[tuple[str, str]] = []
        self.subscriptions: list[Subscription] = []
        self.run_defaults: dict[str, Any] = {}
        #: values of the graph file's declared parameters (see :meth:`from_spec`)
        self.parameters: dict[str, Any] = {}
        self._built: BuildInfo | None = None

    # -- construction -----------------------------------------------------------------------------
    def add(self, block: Block, name: str | None = None) -> Block:
        """Add a block; returns it (so ``x = g.add(Block(...), name="x")`` reads well)."""
        if not isinstance(block, Block):
            raise ConfigError(f"graph {self.name!r}: {block!r} is not a Block")
        nm = name or block.name or self._auto_name(block)
        if nm in self.blocks and self.blocks[nm] is not block:
            raise ConfigError(f"graph {self.name!r}: duplicate block name {nm!r}")
        if any(b is block for k, b in self.blocks.items() if k != nm):
            raise ConfigError(f"graph {self.name!r}: block {block!r} added twice")
        if not nm or "." in nm or " " in nm:
            raise ConfigError(f"graph {self.name!r}: bad block name {nm!r} (no dots or spaces)")
        block.name = nm
        self.blocks[nm] = block
        self._built = None
        return block

    def _auto_name(self, block: Block) -> str:
        base = (type(block).registry_name or type(block).__name__).split(".")[-1].lower()
        k = 0
        while f"{base}{k}" in self.blocks:
            k += 1
        return f"{base}{k}"

    def _ref(self, b: Block | str) -> str:
        if isinstance(b, str):
            if b not in self.blocks:
                raise ConfigError(f"graph {self.name!r}: no block named {b!r}")
            return b
        for k, v in self.blocks.items():
            if v is b:
                return k
        return self.add(b).name

    def connect(self, src: Block | str, dst: Block | str) -> None:
        """Data edge ``src.out -> dst.in``. Blocks not yet added are added."""
        a, b = self._ref(src), self._ref(dst)
        if (a, b) in self.edges:
            raise ConfigError(f"graph {self.name!r}: edge {a} -> {b} declared twice")
        self.edges.append((a, b))
        self._built = None

    def chain(self, *blocks: Block | str) -> None:
        """``connect`` each block to the next: ``g.chain(src, a, b, sink)``."""
        for x, y in zip(blocks, blocks[1:]):
            self.connect(x, y)

    def subscribe(self, sink: EventSink, kinds: Iterable[str] | None = None) -> EventSink:
        """Deliver events whose kind matches any pattern in ``kinds`` (all if None) to ``sink``."""
        if not isinstance(sink, EventSink):
            raise ConfigError(f"graph {self.name!r}: {sink!r} is not an EventSink")
        self.subscriptions.append(Subscription(sink, tuple(kinds) if kinds is not None else None))
        return sink

    # -- negotiation ------------------------------------------------------------------------------
    def build(self) -> BuildInfo:
        """Validate the topology and negotiate formats. Raises ConfigError naming the blocks."""
        if not self.blocks:
            raise ConfigError(f"graph {self.name!r} has no blocks")
        parent: dict[str, str | None] = {n: None for n in self.blocks}
        children: dict[str, list[str]] = {n: [] for n in self.blocks}
        for a, b in self.edges:
            ba, bb = self.blocks[a], self.blocks[b]
            if not ba.outputs:
                raise ConfigError(f"graph {self.name!r}: {a} ({type(ba).__name__}) has no output, cannot feed {b}")
            if not bb.inputs:
                raise ConfigError(f"graph {self.name!r}: {b} ({type(bb).__name__}) has no input, cannot be fed by {a}")
            if parent[b] is not None:
                raise ConfigError(f"graph {self.name!r}: {b} already fed by {parent[b]}; a block has one input (add a mixer to merge {parent[b]} and {a})")
            parent[b] = a
            children[a].append(b)
        for n, blk in self.blocks.items():
            if blk.inputs and parent[n] is None:
                raise ConfigError(f"graph {self.name!r}: block {n} ({type(blk).__name__}) has no input connected")
            if isinstance(blk, Source) and parent[n] is not None:
                raise ConfigError(f"graph {self.name!r}: source {n} cannot have an input")
        roots = [n for n in self.blocks if parent[n] is None]
        if not roots:
            raise ConfigError(f"graph {self.name!r}: no source (the edges form a cycle)")
        order: list[str] = []
        stack = list(reversed(roots))
        seen: set[str] = set()
        while stack:
            n = stack.pop()
            if n in seen:
                raise ConfigError(f"graph {self.name!r}: cycle through {n}")
            seen.add(n)
            order.append(n)
            stack.extend(reversed(children[n]))
        if len(order) != len(self.blocks):
            missing = sorted(set(self.blocks) - seen)
            raise ConfigError(f"graph {self.name!r}: blocks not reachable from a source (cycle?): {missing}")
        in_specs: dict[str, dict[str, StreamSpec]] = {}
        out_specs: dict[str, dict[str, StreamSpec]] = {}
        latency: dict[str, int] = {}
        for n in order:
            blk = self.blocks[n]
            p = parent[n]
            ins: dict[str, StreamSpec] = {}
            if p is not None:
                up = out_specs[p].get("out")
                if up is None:
                    raise ConfigError(f"graph {self.name!r}: {p} produced no 'out' spec for {n}")
                ins = {"in": up}
            try:
                outs = dict(blk.negotiate(ins))
            except ConfigError as exc:
                where = f"{p} -> {n}" if p else n
                raise ConfigError(f"graph {self.name!r}: {where}: {exc}") from None
            for port in blk.outputs:
                if port not in outs:
                    raise ConfigError(f"graph {self.name!r}: {n}.negotiate() gave no spec for output {port!r}")
            if blk.on_error == ErrorPolicy.BYPASS and ins.get("in") != outs.get("out"):
                raise ConfigError(f"graph {self.name!r}: {n}: on_error=bypass needs out spec == in spec ({ins.get('in')} vs {outs.get('out')})")
            in_specs[n] = ins
            out_specs[n] = outs
            lat = int(blk.algorithmic_latency())
            latency[n] = lat
        self._built = BuildInfo(order, in_specs, out_specs, children, parent, latency)
        return self._built

    @property
    def built(self) -> BuildInfo:
        return self._built or self.build()

    def describe(self) -> str:
        """Ports and negotiated specs per block, and the algorithmic latency summed along each path."""
        info = self.built
        lines = [f"graph {self.name}"]
        if self.parameters:
            from streamkit.core.graph_params import format_value

            lines.append("  parameters: " + ", ".join(f"{k}={format_value(v)}" for k, v in self.parameters.items()))
        path_lat: dict[str, float] = {}
        for n in info.order:
            blk = self.blocks[n]
            p = info.parent[n]
            spec_in = info.in_specs[n].get("in")
            own = info.latency_items[n] / float(spec_in.rate) if spec_in is not None and info.latency_items[n] else 0.0
            path_lat[n] = (path_lat[p] if p else 0.0) + own
            spec_out = info.out_specs[n].get("out")
            kind = type(blk).registry_name or type(blk).__name__
            lines.append(
                f"  {n:<12} {kind:<18} in: {spec_in or '-'!s:<24} out: {spec_out or '-'!s:<24} "
                f"latency {own * 1e3:7.1f} ms (path {path_lat[n] * 1e3:7.1f} ms)" + (f"  <- {p}" if p else "")
            )
        for s in self.subscriptions:
            lines.append(f"  events -> {type(s.sink).__name__} kinds={list(s.kinds) if s.kinds else 'all'}")
        return "\n".join(lines)

    def path_latency_s(self) -> dict[str, float]:
        info = self.built
        out: dict[str, float] = {}
        for n in info.order:
            p = info.parent[n]
            spec_in = info.in_specs[n].get("in")
            own = info.latency_items[n] / float(spec_in.rate) if spec_in is not None and info.latency_items[n] else 0.0
            out[n] = (out[p] if p else 0.0) + own
        return out

    def sources(self) -> list[str]:
        return [n for n, b in self.blocks.items() if isinstance(b, Source)]

    def sinks(self) -> list[str]:
        return [n for n, b in self.blocks.items() if isinstance(b, Sink)]

    # -- graph files ------------------------------------------------------------------------------
    def to_spec(self) -> dict[str, Any]:
        """The graph as JSON-ready data (registry names + parameters)."""
        blocks: dict[str, Any] = {}
        for n, b in self.blocks.items():
            reg = type(b).registry_name
            if reg is None:
                raise ConfigError(f"block {n} ({type(b).__name__}) has no registry name; it cannot be written to a graph file")
            blocks[n] = {"type": reg, **_plain(b.params())}
        events = []
        for s in self.subscriptions:
            reg = type(s.sink).registry_name
            if reg is None:
                raise ConfigError(f"event sink {type(s.sink).__name__} has no registry name")
            ev: dict[str, Any] = {"sink": {"type": reg, **_plain(s.sink.params())}}
            if s.kinds is not None:
                ev["kinds"] = list(s.kinds)
            events.append(ev)
        spec: dict[str, Any] = {"name": self.name, "blocks": blocks, "edges": [list(e) for e in self.edges]}
        if events:
            spec["events"] = events
        if self.run_defaults:
            spec["run"] = dict(self.run_defaults)
        return spec

    @classmethod
    def from_spec(
        cls, spec: Mapping[str, Any] | str | os.PathLike[str], params: Mapping[str, Any] | None = None, **overrides: Any
    ) -> Graph:
        """Build a graph from a dict or a YAML/JSON file. Errors are ConfigErrors naming the place.

        ``params``: values of the file's declared parameters (``{"input": "x.wav"}``) and of block
        parameters (``{"src.path": "x.wav"}``), see :func:`streamkit.core.graph_params.apply_params`;
        ``overrides`` update the file's ``run`` defaults.
        """
        if isinstance(spec, (str, os.PathLike)):
            spec = load_spec_file(spec)
        if not isinstance(spec, Mapping):
            raise ConfigError("graph spec must be a mapping with 'blocks'")
        unknown = set(spec) - {"name", "blocks", "edges", "chain", "events", "run", "description", "parameters"}
        if unknown:
            raise ConfigError(f"graph spec: unknown keys {sorted(unknown)}")
        from streamkit.core.graph_params import apply_params

        spec, values = apply_params(spec, params)
        g = cls(str(spec.get("name", "graph")))
        g.parameters = values
        blocks = spec.get("blocks")
        if not isinstance(blocks, Mapping) or not blocks:
            raise ConfigError("graph spec: 'blocks' must be a non-empty mapping of name -> {type: ..., params}")
        for name, bspec in blocks.items():
            g.add(_instantiate(bspec, f"blocks.{name}", kind="block"), name=str(name))
        edges = spec.get("edges", [])
        if not isinstance(edges, list):
            raise ConfigError("graph spec: 'edges' must be a list of [from, to] pairs")
        for e in edges:
            if isinstance(e, str) and "->" in e:
                e = [x.strip() for x in e.split("->")]
            if not isinstance(e, (list, tuple)) or len(e) != 2:
                raise ConfigError(f"graph spec: bad edge {e!r} (want [from, to])")
            g.connect(str(e[0]), str(e[1]))
        chain = spec.get("chain")
        if chain is not None:
            if not isinstance(chain, list) or not all(isinstance(c, str) for c in chain):
                raise ConfigError("graph spec: 'chain' must be a list of block names")
            g.chain(*chain)
        for i, ev in enumerate(spec.get("events", []) or []):
            if not isinstance(ev, Mapping) or "sink" not in ev:
                raise ConfigError(f"graph spec: events[{i}] needs a 'sink'")
            sink = _instantiate(ev["sink"], f"events[{i}].sink", kind="event sink")
            kinds = ev.get("kinds")
            g.subscribe(sink, kinds=[str(k) for k in kinds] if kinds is not None else None)
        run = spec.get("run") or {}
        if not isinstance(run, Mapping):
            raise ConfigError("graph spec: 'run' must be a mapping")
        g.run_defaults = dict(run)
        g.run_defaults.update(overrides)
        return g

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the graph file (YAML if the suffix says so, else JSON)."""
        from streamkit.io.outputs import write_text

        p = Path(path)
        spec = self.to_spec()
        if p.suffix.lower() in (".yaml", ".yml"):
            import yaml

            write_text(p, yaml.safe_dump(spec, sort_keys=False))
        else:
            write_text(p, json.dumps(spec, indent=2))


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    from fractions import Fraction

    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Fraction):
            v = str(v)
        elif isinstance(v, tuple):
            v = list(v)
        elif isinstance(v, os.PathLike):
            v = os.fspath(v)
        out[k] = v
    return out


def _instantiate(bspec: Any, where: str, kind: str) -> Any:
    if not isinstance(bspec, Mapping) or "type" not in bspec:
        raise ConfigError(f"graph spec: {where} must be a mapping with a 'type'")
    params = {k: v for k, v in bspec.items() if k != "type"}
    cls = lookup(str(bspec["type"]))
    try:
        obj = cls(**params)
    except ConfigError as exc:
        raise ConfigError(f"graph spec: {where} ({bspec['type']}): {exc}") from None
    except (TypeError, ValueError) as exc:  # an unknown keyword, or a value a block did not check itself
        raise ConfigError(f"graph spec: {where} ({bspec['type']}): bad parameters: {exc}") from None
    if kind == "event sink" and not isinstance(obj, EventSink):
        raise ConfigError(f"graph spec: {where}: {bspec['type']} is not an event sink")
    if kind == "block" and not isinstance(obj, Block):
        raise ConfigError(f"graph spec: {where}: {bspec['type']} is not a block (event sinks go under 'events')")
    return obj


def load_spec_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a YAML or JSON graph file. Raises ConfigError with the file name on any problem."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"graph file not found: {p}")
    text = p.read_text()
    try:
        if p.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:  # yaml.YAMLError, json.JSONDecodeError
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"cannot parse graph file {p}: {msg}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"graph file {p} must hold a mapping with 'blocks'")
    return data
