"""Singer identification on a synthetic singers corpus, split by recording: whole-clip vs motif-clip embeddings.

The transform is fitted on the train split and the thresholds calibrated on dev
(:func:`streamkit.train.singer_id.fit`); every known singer is enrolled from its train recordings.
On the test split:

* long evidence: each test recording of a known singer, whole (closed-set accuracy, macro F1);
* short evidence (<= 1 s): ``motif`` mode: every motif-occurrence clip of <= 1 s cut from the
  recording's own melody; ``clip`` mode (the pooled baseline): every 1 s window with >= 0.5 s
  voiced;
* open set (long evidence): share of the unknown singers' recordings rejected, and of the known
  singers' recordings accepted and named right, at the dev threshold;
* RT factor of the ``models.singer_id`` block on one test recording (20 ms chunks, one thread).

    streamkit corpus singers --singers 8 --hours 0.5 --out DIR
    python benchmarks/singer_id.py --corpus DIR

Writes benchmarks/results/singer_id.json.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.eval.bench import RESULTS, machine_info, write_result
from streamkit.eval.bench.singer_table2 import closed, enrol_and_embed_test, open_set, short_windows
from streamkit.models.singer_embed import MODES, SingerEmbedder
from streamkit.models.singer_gallery import Gallery
from streamkit.train.singer_id import analyse, fit, read_corpus


def short_vectors(emb: SingerEmbedder, x: np.ndarray, rows: np.ndarray) -> list[np.ndarray]:
    if emb.mode == "motif":
        from streamkit.dsp.motifs import motifs_of_contour

        _, clips, _ = motifs_of_contour(rows)
        return emb.embed_clips(x, rows, [c for c in clips if c.end_s - c.start_s <= 1.0])
    return short_windows(emb, x, rows)


def block_rt(emb: Any, threshold: float, weights: str, recs: list[dict[str, str]], data: dict[str, Any], x: np.ndarray, singer: str,
             out: Path) -> dict[str, Any]:  # fmt: skip
    """RT factor (wall and CPU) of ``models.singer_id`` on ``x`` (20 ms chunks), every train recording enrolled with ``emb``."""
    from streamkit.models.singer_id_block import SingerIdBlock
    from streamkit.testing import run_block

    gpath = out.with_name("singer_id_gallery.tmp.json")
    g = Gallery("motif", emb.dim, threshold)
    for r in recs:
        if r["split"] == "train":
            v = emb.embed(*data[r["id"]]).vector
            if v is not None:
                g.enroll(r["singer"], r["id"], v)
    g.save(gpath)
    run_block(SingerIdBlock(gallery=str(gpath), weights=weights), x[:32000], rate=16000, sizes=320)  # numba compiled before timing
    tb, cb = time.perf_counter(), time.process_time()
    run = run_block(SingerIdBlock(gallery=str(gpath), weights=weights), x, rate=16000, sizes=320)
    dt, dc = time.perf_counter() - tb, time.process_time() - cb
    gpath.unlink()
    ev = run.events_of("singer.id")
    return {"audio_s": round(len(x) / 16000, 2), "rt_factor": round(dt / (len(x) / 16000), 4), "rt_factor_cpu": round(dc / (len(x) / 16000), 4),
            "load_avg_1min": round(os.getloadavg()[0], 2), "events": len(ev), "events_naming_the_singer": sum(e.payload.name == singer for e in ev),
            "events_best_is_the_singer": sum(e.payload.best == singer for e in ev)}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", default=str(RESULTS / "singer_id.json"))
    a = ap.parse_args()
    import torch

    torch.set_num_threads(1)  # one thread, as every RT figure of the project
    t0 = time.perf_counter()
    t, cal = fit(a.corpus)
    recs = read_corpus(a.corpus)
    data = {r["id"]: analyse(a.corpus, r) for r in recs if r["split"] in ("train", "test")}
    res: dict[str, Any] = {"corpus": str(a.corpus), "machine": machine_info(), "calibration": cal, "modes": {}}
    for mode in MODES:
        emb = SingerEmbedder(mode, t)
        g, known, long_v, unk_v = enrol_and_embed_test(emb, cal[mode]["threshold"], recs, data)
        short_v = [(r["singer"], v) for r in known for v in short_vectors(emb, *data[r["id"]])]
        res["modes"][mode] = {"long": closed(g, long_v), "short_1s": closed(g, short_v) if short_v else {"n": 0}, "open_set": open_set(g, long_v, unk_v)}
        print(mode, res["modes"][mode])
    # RT factor of the block on one test recording: with this run's pooled transform, and with the shipped net (the default)
    from streamkit.models.singer_nets import DEFAULT_NET, load_embedder

    x = data[known[0]["id"]][0].astype(np.float32)[:, None]
    tpath = Path(a.out).with_name("singer_id_transform.tmp.npz")
    t.save(tpath)
    res["block"] = block_rt(SingerEmbedder("motif", t), cal["motif"]["threshold"], str(tpath), recs, data, x, known[0]["singer"], Path(a.out))
    res["block"]["note"] = ("this run's pooled transform; includes pYIN, motif mining every 5 voiced s over a 30 s window; rt_factor is wall "
                            "time (depends on the other jobs on the machine), rt_factor_cpu this process's CPU time")  # fmt: skip
    tpath.unlink()
    if DEFAULT_NET.is_file():
        net = load_embedder("motif")
        res["block_net"] = block_rt(net, float(net.meta["thresholds"]["motif"]), str(DEFAULT_NET), recs, data, x, known[0]["singer"], Path(a.out))
        res["block_net"]["note"] = f"the shipped net {DEFAULT_NET.name} (the default), same recording"
    print(res["block"], res.get("block_net"))
    res["seconds"] = round(time.perf_counter() - t0, 1)
    return write_result(a.out, res)


if __name__ == "__main__":
    raise SystemExit(main())
