"""Streaming ASR step costs: the packed one-step LSTM cell against ``nn.LSTM``, per call and in the whole block.

Streaming RNN-T decoding calls its LSTMs one time step at a time: the encoder once per 30 ms
frame with a batch of one, the prediction network once per symbol level with one row per
expanded hypothesis (up to beam x languages). ``nn.LSTM`` has a fixed per-call cost that
dominates such calls on a CPU; ``streamkit.models.lstm_step`` computes the same cell with one
``addmm`` pair per layer from weights packed once. Two parts, one thread:

* per call (the shipped model's sizes, random inputs, best of ``--repeat`` x ``--calls``):
  the 3-layer encoder step and the prediction network step at several row counts, ``nn.LSTM``
  against ``lstm_step``, and their largest output difference;
* whole block (with ``--corpus``): ``models.rnnt_asr`` over the first ``--limit`` test
  utterances per language (reference utterance boundaries, ``--lexicon``/``--beam`` as
  ``benchmarks/rnnt_multilingual.py``), with the packed cell (as shipped) and with every step
  forced through ``nn.LSTM`` (``STEP_FRAMES = STEP_ROWS = 0``), without shutoff and at
  tau 30 / s_th 0.5; block and decoder CPU time per second of audio (RT factor) and how many
  final texts agree between the two paths (rounding can move a close beam decision).

    python benchmarks/rnnt_step.py [--corpus C3 --limit 3] [--beam 16 --lexicon system] [--repeat 5]

Writes benchmarks/results/rnnt_step.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

import streamkit.models.rnnt as rnnt_mod
from streamkit.eval.bench import RESULTS, best_of, machine_info
from streamkit.io.outputs import write_text
from streamkit.models import RNNT_WEIGHTS
from streamkit.models.lstm_step import lstm_step
from streamkit.models.rnnt import load_model

WEIGHTS = RNNT_WEIGHTS
ROWS = (1, 8, 16, 32, 64)


def per_call_us(fn: Any, calls: int, repeat: int) -> float:
    """Best mean time per call in microseconds over ``repeat`` runs of ``calls`` calls (gc off)."""

    def run() -> None:
        for _ in range(calls):
            fn()

    return best_of(run, repeat) / calls * 1e6


def call_rows(weights: Path, calls: int, repeat: int) -> list[dict[str, Any]]:
    model, _ = load_model(weights)
    model.float().eval()
    g = torch.Generator().manual_seed(0)
    rows = []
    with torch.no_grad():
        cases = [("encoder", model.encoder, 1)] + [("predictor", model.predictors[0], b) for b in ROWS]
        for name, net, B in cases:
            L, H = net.num_layers, net.hidden_size
            x = torch.randn(B, net.input_size, generator=g)
            st = (torch.randn(L, B, H, generator=g) * 0.5, torch.randn(L, B, H, generator=g) * 0.5)
            ref, (_, c_ref) = net(x[:, None], st)
            out, (_, c_out) = lstm_step(net, x, st)
            diff = max(float((ref[:, 0] - out).abs().max()), float((c_ref - c_out).abs().max()))
            t_nn = per_call_us(lambda net=net, x=x, st=st: net(x[:, None], st), calls, repeat)
            t_step = per_call_us(lambda net=net, x=x, st=st: lstm_step(net, x, st), calls, repeat)
            rows.append({"net": name, "layers": L, "hidden": H, "input": net.input_size, "rows": B,
                         "nn_lstm_us": round(t_nn, 1), "lstm_step_us": round(t_step, 1),
                         "speedup": round(t_nn / t_step, 2), "max_abs_diff": diff})  # fmt: skip
    return rows


def block_rows(a: argparse.Namespace) -> list[dict[str, Any]]:
    from streamkit.eval.bench import rnnt_multilingual as bm
    from streamkit.train.rnnt_corpus import AsrCorpus, read_audio

    corpus = AsrCorpus(a.corpus)
    utts = bm.pick(corpus.split("test"), corpus.langs, a.limit)
    audio = {u.id: read_audio(u) for u in utts}
    base = dict(beam=a.beam, max_symbols_per_frame=3, utterance_mode="tags", lexicon=a.lexicon, word_penalty=a.word_penalty)
    if a.lexicon is None:
        base.pop("word_penalty")
    bm.run_stream(str(a.weights), utts[:1], audio, **base)  # warm-up (lexicon trie, numba, caches)
    rows: list[dict[str, Any]] = []
    keep = (rnnt_mod.STEP_FRAMES, rnnt_mod.STEP_ROWS)
    for tau, s_th in ((None, None), (30, 0.5)):
        texts: dict[str, list[str]] = {}
        for path in ("lstm_step", "nn.LSTM"):
            rnnt_mod.STEP_FRAMES, rnnt_mod.STEP_ROWS = keep if path == "lstm_step" else (0, 0)
            try:
                best: dict[str, Any] | None = None
                for _ in range(a.block_repeat):
                    finals, blk, secs = bm.run_stream(str(a.weights), utts, audio, tau_frames=tau, s_th=s_th, **base)
                    r = {"path": path, "tau": tau, "s_th": s_th, "audio_s": round(secs, 2),
                         "rt_block": blk.blk_cpu / secs, "rt_decoder": blk.dec_cpu / secs}  # fmt: skip
                    if best is None or r["rt_block"] < best["rt_block"]:
                        best = r
                assert best is not None
                texts[path] = [f.text if f is not None else "" for f in finals]
                rows.append(best)
            finally:
                rnnt_mod.STEP_FRAMES, rnnt_mod.STEP_ROWS = keep
        same = sum(x == y for x, y in zip(texts["lstm_step"], texts["nn.LSTM"]))
        for r in rows[-2:]:
            r["finals_equal"] = f"{same}/{len(utts)}"
    return rows


def _args_without_out(argv: list[str]) -> list[str]:
    """The command line without ``--out PATH`` (no machine paths in the results)."""
    out, skip = [], False
    for x in argv:
        if skip:
            skip = False
        elif x == "--out":
            skip = True
        elif not x.startswith("--out="):
            out.append(x)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", type=Path, default=WEIGHTS)
    ap.add_argument("--calls", type=int, default=300, help="calls per timed run (default 300)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per row; the best is reported (default 5)")
    ap.add_argument("--corpus", help="an ASR corpus: also time the whole block on its test split")
    ap.add_argument("--limit", type=int, default=3, help="test utterances per language for the block rows (default 3)")
    ap.add_argument("--block-repeat", type=int, default=2, help="block runs per row; the fastest is reported (default 2)")
    ap.add_argument("--beam", type=int, default=16)
    ap.add_argument("--lexicon", default="system", help="'system', a word-list directory, or 'none' (default system)")
    ap.add_argument("--word-penalty", type=float, default=3.0)
    ap.add_argument("--out", default=str(RESULTS / "rnnt_step.json"))
    a = ap.parse_args()
    if a.lexicon == "none":
        a.lexicon = None
    torch.set_num_threads(1)
    calls = call_rows(a.weights, a.calls, a.repeat)
    print(f"one LSTM time step, float32, 1 thread, best of {a.repeat} x {a.calls} calls ({a.weights.name})")
    hdr = f"{'net':<10} {'rows':>4} {'nn.LSTM us':>11} {'lstm_step us':>13} {'speed-up':>9} {'max |diff|':>11}"
    print(hdr)
    print("-" * len(hdr))
    for r in calls:
        print(f"{r['net']:<10} {r['rows']:>4} {r['nn_lstm_us']:>11.1f} {r['lstm_step_us']:>13.1f} {r['speedup']:>8.2f}x {r['max_abs_diff']:>11.1e}")
    blocks: list[dict[str, Any]] = []
    if a.corpus:
        blocks = block_rows(a)
        print(f"\nwhole block models.rnnt_asr, beam {a.beam}, lexicon {a.lexicon}, {a.limit} test utterances per language, 1 thread")
        hdr = f"{'LSTM path':<10} {'tau':>5} {'s_th':>5} {'RT block':>9} {'RT decoder':>11} {'finals equal':>13}"
        print(hdr)
        print("-" * len(hdr))
        for r in blocks:
            print(f"{r['path']:<10} {str(r['tau']):>5} {str(r['s_th']):>5} {r['rt_block']:>9.4f} {r['rt_decoder']:>11.4f} {r['finals_equal']:>13}")
    mi = machine_info()
    print(f"machine: {mi.get('cpu', '?')}, {mi['cpu_count']} cores, Python {mi['python']}, torch {mi.get('torch')}")
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text(out, json.dumps({
        "benchmark": "rnnt_step",
        "command": "python benchmarks/rnnt_step.py " + " ".join(_args_without_out(sys.argv[1:])),
        "weights": a.weights.name,
        "per_call": calls,
        "block": blocks,
        "block_settings": {"beam": a.beam, "lexicon": a.lexicon, "word_penalty": a.word_penalty, "limit_per_language": a.limit} if blocks else None,
        "machine": mi,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }, indent=2))  # fmt: skip
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
