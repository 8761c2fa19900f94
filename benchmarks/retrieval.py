"""The retrieval paper's table rebuilt: text-to-audio retrieval on held-out captions of new soundscapes, plus indexing and search cost.

Held-out set: the ``eval`` subset of a ``streamkit corpus sed`` corpus (soundscapes no model trained
on), each clip with two captions in the test wording (:mod:`streamkit.train.retrieval_captions`:
no clause, connective or modifier of the training wording). R@1, R@5, R@10 and mAP@10 (one
relevant clip per caption; ties at their expected rank) for:

* ``sed-posteriors``: the keyword/class baseline: the caption parsed to the SED classes
  (:mod:`streamkit.index.query`), clips ranked by the mean clip posterior of those classes from the
  shipped SED CRNN (``streamkit search``'s first embedder; a caption naming no class ranks at chance);
* each ``--model NAME=PT`` of ``streamkit train retrieval`` (frozen MiniLM; with ``--text-adapter``).

Costs: the RT factor of ``streamkit index build --embedder contrastive`` on ``--rt-seconds`` of the
eval audio (model loaded, one thread) and the search latency on a synthetic index of 24 hours of
10 stations (172,800 windows of 384 dims; median of 5 queries, one thread, the model loaded).

    streamkit corpus sed --out C --seed 57 --jobs 2 --clips-synthetic 1500 --clips-weak 1500 --clips-unlabelled 0 --clips-validation 0
    streamkit train retrieval --corpus C --out frozen.pt
    streamkit train retrieval --corpus C --out adapter.pt --text-adapter
    python benchmarks/retrieval.py --corpus C --model frozen=frozen.pt --model adapter=adapter.pt

``--real-eval REAL``: the same table on the eval split of a ``streamkit corpus real`` corpus (real
audio, no model trained on it; see :mod:`streamkit.train.retrieval_real`).

Writes benchmarks/results/retrieval.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from streamkit.eval.bench import RESULTS, machine_info, write_result
from streamkit.eval.retrieval import retrieval_scores
from streamkit.index.embed import SedPosteriorEmbedder, SedQueryEncoder
from streamkit.models import SED_WEIGHTS
from streamkit.models.retrieval import load_retrieval
from streamkit.train.retrieval import embed_frames, test_set
from streamkit.train.retrieval_data import read_subset, text_vectors

PAPER = {"system": "PaSST-N + RoBERTa-large, fine-tuned, GPT-augmented captions (best single model), ClothoV2 test", "R@1": 26.07, "R@5": 55.27,
         "R@10": 69.30, "mAP@10": 38.56}  # fmt: skip


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def baseline(corpus: Path, texts: list[str], target: np.ndarray, subset: str) -> tuple[dict[str, Any], float]:
    _meta, paths = read_subset(corpus, subset)
    return baseline_paths(paths, texts, target)


def _mono(path: Path, max_s: float | None = None) -> np.ndarray:
    import soundfile as sf

    x, rate = sf.read(str(path), dtype="float32", always_2d=True)
    if rate != 16000:
        raise ValueError(f"{path}: {rate} Hz, the SED model's clips are 16 kHz")
    x = x.mean(axis=1)
    return x if max_s is None else x[: int(max_s * rate)]


def baseline_paths(paths: list[Path], texts: list[str], target: np.ndarray, max_s: float | None = None) -> tuple[dict[str, Any], float]:
    emb = SedPosteriorEmbedder(SED_WEIGHTS)
    post = np.concatenate([emb.embed([_mono(p, max_s) for p in paths[i : i + 16]]) for i in range(0, len(paths), 16)])
    enc = SedQueryEncoder(emb.classes)
    q = np.zeros((len(texts), emb.dim), np.float32)
    parsed = 0
    for i, t in enumerate(texts):
        v, _ = enc.encode(t)
        if v is not None:
            q[i] = v
            parsed += 1
    return retrieval_scores(q @ post.T, target), parsed / len(texts)


def rt_factor(weights: Path, corpus: Path, subset: str, seconds: float) -> dict[str, Any]:
    """``index build --embedder contrastive`` on ``seconds`` of the subset's clips joined into one file."""
    import soundfile as sf

    from streamkit.index import build_index
    from streamkit.index.contrastive import ContrastiveEmbedder

    _meta, paths = read_subset(corpus, subset)
    n = max(1, int(round(seconds / 10.0)))
    x = np.concatenate([sf.read(str(p), dtype="float32")[0] for p in paths[:n]])
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "joined.wav"
        sf.write(str(wav), x, 16000, subtype="FLOAT")
        for name, emb in (("contrastive", ContrastiveEmbedder(weights)), ("sed-posteriors", SedPosteriorEmbedder(SED_WEIGHTS))):
            rep = build_index(wav, Path(tmp) / f"idx-{name}", embedder=emb)
            out[name] = {"audio_s": round(rep.audio_s, 1), "seconds": round(rep.seconds, 2), "rtf": round(rep.seconds / rep.audio_s, 4),
                         "windows": rep.windows}  # fmt: skip
            log(f"RT factor {name}: {out[name]}")
    return out


def latency(weights: Path, work: Path) -> list[dict[str, Any]]:
    """Median search time over a synthetic contrastive index of 24 h x 10 stations (random unit vectors)."""
    from streamkit.index import search
    from streamkit.index.contrastive import ContrastiveEmbedder
    from streamkit.index.store import IndexStore

    idx = work / "bigidx"
    shutil.rmtree(idx, ignore_errors=True)
    desc = ContrastiveEmbedder(weights).describe()
    st = IndexStore(idx, create=True)
    st.check_embedder(desc, 10.0, 5.0)
    rng = np.random.default_rng(0)
    t0 = 1_767_225_600_000_000_000
    for s in range(10):
        n = 17280
        ents = [{"kind": "window", "start": i * 60000, "end": i * 60000 + 120000, "utc_start_ns": t0 + i * 5 * 10**9, "utc_end_ns": t0 + (i * 5 + 10) * 10**9,
                 "events": [], "transcript": ("the weather forecast" if i % 500 == 0 else "")} for i in range(n)]  # fmt: skip
        v = rng.standard_normal((n, desc["dim"])).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        st.add_file({"path": f"/x/st{s}.wav", "size": 1, "mtime_ns": 1, "station": f"h-8073-{7000 + s}lsb", "freq_khz": 7000.0 + s, "mode": "lsb",
                     "rate": "12000", "file_rate": 12000, "items": n * 60000, "channels": 1}, ents, v)  # fmt: skip
    st.close()
    search("warm up", idx, top=10)  # loads MiniLM and the weights once, as a long-lived process would
    rows = []
    for q, kw, label in (("a dog barks while water runs", {}, "free text"), ("weather forecast", {}, "transcripts"),
                         ("an alarm is sounding", {"station": "7003"}, "--station 7003"),
                         ("a hound yelps", {"since": t0 + 12 * 3600 * 10**9}, "--since the last 12 h")):  # fmt: skip
        ts = []
        for _ in range(5):
            t = time.perf_counter()
            r = search(q, idx, top=10, **kw)
            ts.append(time.perf_counter() - t)
        rows.append({"query": q, "filter": label, "entries": r.candidates, "ms": round(1000 * sorted(ts)[2], 1)})
        log(f"latency {rows[-1]}")
    shutil.rmtree(idx, ignore_errors=True)
    return rows


def real_eval(real: Path, models: list[str], cache: Path) -> dict[str, Any]:
    """The table on the eval split of a real corpus (its event scenes and isolated clips, no model trained on them): two
    test-wording captions per clip (an isolated clip without duration or position words)."""
    from streamkit.train.retrieval import TEST_CAPTIONS, TEST_SEED
    from streamkit.train.retrieval_captions import captions
    from streamkit.train.retrieval_real import MAX_S, eval_clips, real_features

    clips, skipped = eval_clips(real)
    texts, target = [], []
    for i, c in enumerate(clips):
        for t in captions(c, "test", TEST_CAPTIONS, TEST_SEED, clip_s=c["clip_s"], timing=c["timing"]):
            texts.append(t)
            target.append(i)
    tgt = np.array(target)
    log(f"real eval: {len(texts)} captions of {len(clips)} clips (skipped {skipped})")
    base, parsed = baseline_paths([c["path"] for c in clips], texts, tgt, MAX_S)
    rows: list[dict[str, Any]] = [{"system": "sed-posteriors (keyword/class baseline)", **base, "captions_naming_a_class": round(100 * parsed, 1)}]
    frames, lengths = real_features(clips, SED_WEIGHTS, cache, log=log)
    minilm = text_vectors(texts, cache / "retrieval.minilm.npz", log=log)
    for spec in models:
        name, _, path = spec.partition("=")
        model, _meta = load_retrieval(path)
        audio = embed_frames(model, frames, lengths)
        with torch.no_grad():
            t = model.encode_text(torch.as_tensor(minilm)).numpy()
        rows.append({"system": f"contrastive {name}", "weights": Path(path).name, **retrieval_scores(t @ audio.T, tgt)})
        log(f"real eval {name}: {rows[-1]}")
    classes = sorted({e["event_label"] for c in clips for e in c["events"]})
    return {"clips": len(clips), "captions": len(texts), "classes": classes, "skipped": skipped, "table": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True, type=Path)
    ap.add_argument("--model", action="append", default=[], metavar="NAME=PT", help="a `streamkit train retrieval` weight file (repeatable)")
    ap.add_argument("--subset", default="eval")
    ap.add_argument("--rt-seconds", type=float, default=300.0, help="audio for the RT factor (default 300 s; 0 skips)")
    ap.add_argument("--latency", action="store_true", help="also time search on a synthetic 24 h x 10-station index")
    ap.add_argument("--real-eval", type=Path, default=None, metavar="REAL",
                    help="also score on the eval event clips of a `streamkit corpus real` corpus (real audio; test wording)")
    ap.add_argument("--out", type=Path, default=RESULTS / "retrieval.json")
    a = ap.parse_args()
    torch.set_num_threads(1)
    _meta, frames, lengths, texts, target = test_set(a.corpus, SED_WEIGHTS, subset=a.subset)
    log(f"{len(texts)} held-out captions of {frames.shape[0]} clips")
    rows: list[dict[str, Any]] = []
    base, parsed = baseline(a.corpus, texts, target, a.subset)
    rows.append({"system": "sed-posteriors (keyword/class baseline)", **base, "captions_naming_a_class": round(100 * parsed, 1)})
    log(f"baseline: {rows[-1]}")
    minilm = text_vectors(texts, a.corpus / "features" / "retrieval.minilm.npz", log=log)
    first_weights = None
    for spec in a.model:
        name, _, path = spec.partition("=")
        model, meta = load_retrieval(path)
        first_weights = first_weights or Path(path)
        audio = embed_frames(model, frames, lengths)
        with torch.no_grad():
            t = model.encode_text(torch.as_tensor(minilm)).numpy()
        card = meta.get("card") or {}
        rows.append({"system": f"contrastive {name}", "weights": Path(path).name, "text_adapter": model.cfg.text_adapter,
                     "command": card.get("command"), **retrieval_scores(t @ audio.T, target)})  # fmt: skip
        log(f"{name}: {rows[-1]}")
    result: dict[str, Any] = {
        "benchmark": "retrieval",
        "command": "python benchmarks/retrieval.py " + " ".join(sys.argv[1:]),
        "machine": machine_info(),
        "held_out": {"subset": a.subset, "clips": int(frames.shape[0]), "captions": len(texts), "wording": "test grammar (disjoint from training)"},
        "table": rows,
        "paper": PAPER,
        "paper_note": "the paper's figure is on ClothoV2 (real recordings, human captions): a different data set, not comparable",
    }
    if a.real_eval is not None:
        result["real_eval"] = real_eval(a.real_eval, a.model, a.corpus / "features")
    if first_weights is not None and a.rt_seconds > 0:
        result["load_before_rt"] = [round(x, 2) for x in os.getloadavg()]  # the machine is shared: its load, for the cost figures
        result["rt_factor"] = rt_factor(first_weights, a.corpus, a.subset, a.rt_seconds)
    if first_weights is not None and a.latency:
        result["load_before_latency"] = [round(x, 2) for x in os.getloadavg()]
        with tempfile.TemporaryDirectory() as tmp:
            result["latency"] = latency(first_weights, Path(tmp))
        result["load_after"] = [round(x, 2) for x in os.getloadavg()]
    return write_result(a.out, result)


if __name__ == "__main__":
    raise SystemExit(main())
