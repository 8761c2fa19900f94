"""SAD on generated HF radio: every system in one run, one thread, the HF paper's protocol.

Usage::

    .venv/bin/python benchmarks/sad_hf.py [--corpus DIR] [--systems stat,stat-c,dnn,...] [--chunk-ms 100]

``--corpus`` defaults to ``benchmarks/.cache/hfc2h``, generated on first use with
``streamkit corpus hf --hours 2 --seed 1`` (a 2-hour corpus; about 30 s).

What is measured, per system, in this one process (numba, torch and BLAS limited to one thread):

* **R, P, F1, DCF on eval** at the threshold of dev's equal error rate (the paper's Table 2
  setting) and at dev's best-F1 threshold: frame scores spread to samples, 0.5 s no-score collar
  around reference speech (fgnt mode), 201 thresholds, counts summed over files
  (:mod:`streamkit.eval.sad`, the same code as ``streamkit eval sad``).
* **RT factor offline**: process time of the whole-file scorer over dev + eval audio.
* **RT factor streaming**: for systems that exist as a streaming block (``stat`` =
  ``dsp.stat_sad`` with the numba kernels, ``stat-c`` = the same block on the C kernel,
  ``dnn`` = ``models.sad_dnn``), the block's own RT factor (its busy time over the audio it
  consumed, first call excluded) when the eval files are pushed through it in ``--chunk-ms``
  chunks by the streamkit runtime; and the block's algorithmic latency.
* **F1 per channel condition** on eval: by fading profile (quiet / moderate / disturbed, ITU-R
  F.1487 as drawn by the simulator) and by SNR bin (the simulator's wideband SNR), at the same
  dev-EER threshold; n = files in the bin (the 2-hour corpus has only a few eval files per bin, so
  these are indicative). Plotted to ``benchmarks/results/sad_hf_conditions.png``.
* The paper's Table 2 rows (real HF recordings, Xeon E3-1240 v6) are printed for reference; they
  are not measured on this corpus.

Writes ``benchmarks/results/sad_hf.json`` (rows, per-condition figures, ROC curves, the machine) and
prints the tables.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from streamkit.eval import sad_systems as ss  # noqa: E402
from streamkit.eval.bench import machine_info, portable_paths  # noqa: E402
from streamkit.eval.sad import Counts, RocCurve, best_f1_point, eer_point  # noqa: E402
from streamkit.eval.sad_files import PAPER_TABLE2, score_split, split_files  # noqa: E402
from streamkit.io.outputs import atomic_output, write_text  # noqa: E402

DEFAULT_CORPUS = ROOT / "benchmarks" / ".cache" / "hfc2h"
RESULTS = ROOT / "benchmarks" / "results"
SNR_BINS = ((-np.inf, 5.0), (5.0, 10.0), (10.0, 15.0), (15.0, np.inf))


def _bin_name(lo: float, hi: float) -> str:
    if lo == -np.inf:
        return f"SNR < {hi:g} dB"
    if hi == np.inf:
        return f"SNR >= {lo:g} dB"
    return f"SNR {lo:g}-{hi:g} dB"


def ensure_corpus(path: Path) -> Path:
    if (path / "manifest.json").is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "streamkit", "corpus", "hf", "--out", str(path), "--hours", "2", "--seed", "1", "--jobs", str(os.cpu_count() or 1)]
    print("generating the corpus:", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT)
    return path


# ------------------------------------------------------------------------------------------
# streaming blocks of the systems that have one
# ------------------------------------------------------------------------------------------


def _stat_block(backend: str) -> Callable[[], Any]:
    def make() -> Any:
        from streamkit.dsp.stat_sad import StatSAD

        return StatSAD(backend=backend) if backend != "numba" else StatSAD()

    return make


def _dnn_block() -> Any:
    from streamkit.core.registry import lookup

    return lookup("models.sad_dnn")(threads=1)


BLOCKS: dict[str, Callable[[], Any]] = {"stat": _stat_block("numba"), "stat-c": _stat_block("c"), "dnn": _dnn_block}


def streaming_rt(name: str, files: list[tuple[str, Path, Path]], chunk: int) -> dict[str, Any] | None:
    """The block's own RT factor over ``files`` pushed in ``chunk``-sample chunks (None: no block)."""
    if name not in BLOCKS:
        return None
    from streamkit.testing import run_block

    busy_ns = 0
    items = 0
    latency = None
    for _fid, apath, _r in files:
        x = ss.load_audio(apath).x
        block = BLOCKS[name]()
        run = run_block(block, x, rate=ss.RATE, sizes=chunk, chunk=chunk)
        assert run.stats["blocks"][block.name or "dut"]["calls"] <= -(-len(x) // chunk) + 1, "chunks smaller than asked"
        m = run.stats["blocks"][block.name or "dut"]
        busy_ns += int((m["busy_ms"] + m["first_call_ms"]) * 1e6)  # first call kept in: the JIT is warm by now
        items += int(m["items_in"])
        lat = getattr(block, "algorithmic_latency", None)
        latency = lat() if callable(lat) else lat
    return {"rt_factor": (busy_ns / 1e9) / (items / ss.RATE), "chunk_samples": chunk,
            "latency_ms": None if latency is None else 1000.0 * float(latency) / ss.RATE}  # fmt: skip


# ------------------------------------------------------------------------------------------
# per-condition breakdown
# ------------------------------------------------------------------------------------------


def conditions(corpus: Path, fids: list[str]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for fid in fids:
        lab = json.loads((corpus / "eval" / "labels" / f"{fid}.json").read_text())
        ch = lab.get("channel", {})
        snr = float(ch.get("snr_db", np.nan))
        snr_bin = next((_bin_name(lo, hi) for lo, hi in SNR_BINS if lo <= snr < hi), "SNR n/a")
        out[fid] = {"profile": str(ch.get("profile", "n/a")), "snr_bin": snr_bin}
    return out


def by_condition(per_file: dict[str, dict[str, RocCurve]], cond: dict[str, dict[str, str]], thr_index: dict[str, int]) -> list[dict[str, Any]]:
    rows = []
    for key in ("profile", "snr_bin"):
        groups: dict[str, list[str]] = {}
        for fid, c in cond.items():
            groups.setdefault(c[key], []).append(fid)
        for gname in sorted(groups):
            fids = groups[gname]
            for system, idx in thr_index.items():
                tot = sum((per_file[f][system].counts(idx) for f in fids), Counts())
                rows.append({"by": key, "condition": gname, "files": len(fids), "system": system, "f1": 100 * tot.f1, "recall": 100 * tot.recall,
                             "precision": 100 * tot.precision})  # fmt: skip
    return rows


def plot_conditions(rows: list[dict[str, Any]], systems: list[str], path: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    for ax, key, title in zip(axes, ("profile", "snr_bin"), ("fading profile (ITU-R F.1487)", "wideband SNR")):
        conds = sorted({r["condition"] for r in rows if r["by"] == key})
        width = 0.8 / max(1, len(systems))
        for i, s in enumerate(systems):
            vals = [next((r["f1"] for r in rows if r["by"] == key and r["condition"] == c and r["system"] == s), np.nan) for c in conds]
            ax.bar(np.arange(len(conds)) + i * width, np.nan_to_num(vals), width, label=s)
        nfiles = [next(r["files"] for r in rows if r["by"] == key and r["condition"] == c) for c in conds]
        ax.set_xticks(np.arange(len(conds)) + 0.4 - width / 2, [f"{c}\n(n={n})" for c, n in zip(conds, nfiles)], fontsize=8)
        ax.set_title(f"eval F1 at the dev-EER threshold, by {title}", fontsize=9)
        ax.set_ylim(0, 100)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("F1 %")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(systems), 9), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    with atomic_output(path, "wb") as fh:
        fig.savefig(fh, dpi=90, format="png")
    plt.close(fig)
    return path


# ------------------------------------------------------------------------------------------


def _f(x: float | None, nd: int = 2) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.{nd}f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--systems", default="", help="comma-separated (default: every available system, plus stat-c and dnn when present)")
    ap.add_argument("--chunk-ms", type=float, default=100.0, help="chunk size of the streaming RT measurement (default 100 ms)")
    ap.add_argument("--out", type=Path, default=RESULTS / "sad_hf.json")
    ap.add_argument("--plot", type=Path, default=RESULTS / "sad_hf_conditions.png")
    a = ap.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    try:
        import numba

        numba.set_num_threads(1)
    except Exception:
        pass
    corpus = ensure_corpus(a.corpus)
    names = [n.strip() for n in a.systems.split(",") if n.strip()] or ss.available()
    systems = []
    for n in dict.fromkeys(names):
        try:
            systems.append(ss.get_system(n))
        except ss.SystemUnavailable as exc:
            print(f"skipping {n}: {exc}", file=sys.stderr)
    dev_files = split_files(corpus, "dev")
    eval_files = split_files(corpus, "eval")
    t0 = time.time()
    dev, dev_s, dev_n = score_split(systems, dev_files, 0.5, "fgnt")
    per_file: dict[str, dict[str, RocCurve]] = {}
    ev, ev_s, ev_n = score_split(systems, eval_files, 0.5, "fgnt", per_file=per_file)
    chunk = int(round(a.chunk_ms * ss.RATE / 1000))
    rows: list[dict[str, Any]] = []
    thr_index: dict[str, int] = {}
    for s in systems:
        rt_off = ss.rt_factor(dev_s[s.name] + ev_s[s.name], dev_n + ev_n)
        stream = streaming_rt(s.name, eval_files, chunk)
        for op in (eer_point(dev[s.name]), best_f1_point(dev[s.name])):
            c = ev[s.name].counts(op.index)
            rows.append({"system": s.name, "operating_point": op.rule, "threshold": op.threshold, "recall": 100 * c.recall,
                         "precision": 100 * c.precision, "f1": 100 * c.f1, "dcf": 100 * c.dcf, "rt_offline": rt_off,
                         "rt_streaming": None if stream is None else stream["rt_factor"],
                         "latency_ms": None if stream is None else stream["latency_ms"], "description": s.description})  # fmt: skip
            if op.rule == "dev-EER":
                thr_index[s.name] = op.index
    cond_rows = by_condition(per_file, conditions(corpus, sorted(per_file)), thr_index)
    wall = time.time() - t0

    hdr = "| system | threshold (dev-EER) | R % | P % | F1 % | DCF % | RT offline | RT streaming | latency ms |"
    lines = [hdr, "|" + " --- |" * 9]
    for r in rows:
        if r["operating_point"] != "dev-EER":
            continue
        lines.append(f"| {r['system']} | {r['threshold']:.3f} | {_f(r['recall'])} | {_f(r['precision'])} | {_f(r['f1'])} | {_f(r['dcf'])} | "
                     f"{_f(r['rt_offline'], 5)} | {_f(r['rt_streaming'], 5)} | {_f(r['latency_ms'], 0)} |")  # fmt: skip
    for p in PAPER_TABLE2:
        lines.append(f"| {p['system']} (real HF data, Xeon E3-1240 v6) | n/a | {p['recall']:.2f} | {p['precision']:.2f} | {p['f1']:.2f} | n/a | "
                     f"{p['rt_factor']:.4f} | n/a | n/a |")  # fmt: skip
    print(f"\nSAD on {corpus} (eval {ev_n / ss.RATE / 60:.1f} min, {len(eval_files)} files; thresholds from dev, {dev_n / ss.RATE / 60:.1f} min), "
          f"one thread, streaming in {a.chunk_ms:g} ms chunks\n")  # fmt: skip
    print("\n".join(lines))
    bf = [r for r in rows if r["operating_point"] == "dev-best-F1"]
    print("\nAt the dev-best-F1 threshold: " + ", ".join(f"{r['system']} F1 {_f(r['f1'])}" for r in bf))
    if "stat" in thr_index and "stat-c" in thr_index:
        rs = next(r for r in rows if r["system"] == "stat")
        rc = next(r for r in rows if r["system"] == "stat-c")
        print(f"numba / C RT ratio: offline {rs['rt_offline'] / rc['rt_offline']:.2f}x, streaming "
              f"{(rs['rt_streaming'] or np.nan) / (rc['rt_streaming'] or np.nan):.2f}x (target <= 1.5x)")  # fmt: skip
    print("\nF1 % per eval channel condition (dev-EER threshold):\n")
    sysnames = list(thr_index)
    print("| condition | files | " + " | ".join(sysnames) + " |")
    print("|" + " --- |" * (2 + len(sysnames)))
    seen = []
    for r in cond_rows:
        key = (r["by"], r["condition"])
        if key in seen:
            continue
        seen.append(key)
        vals = [next(q["f1"] for q in cond_rows if (q["by"], q["condition"]) == key and q["system"] == s) for s in sysnames]
        print(f"| {r['condition']} | {r['files']} | " + " | ".join(_f(v, 1) for v in vals) + " |")
    png = plot_conditions(cond_rows, sysnames, a.plot)
    manifest = json.loads((corpus / "manifest.json").read_text())
    out = {
        "benchmark": "sad_hf",
        "command": "python benchmarks/sad_hf.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "corpus": {"command": manifest.get("command"), "seed": manifest.get("seed"), "dev_minutes": dev_n / ss.RATE / 60,
                   "eval_minutes": ev_n / ss.RATE / 60, "dev_files": len(dev_files), "eval_files": len(eval_files)},  # fmt: skip
        "protocol": {"collar_s": 0.5, "mode": "fgnt", "thresholds": 201, "threads": 1, "chunk_ms": a.chunk_ms},
        "rows": rows,
        "by_condition": cond_rows,
        "paper_table2": list(PAPER_TABLE2),
        "roc_dev": {k: v.to_dict() for k, v in dev.items()},
        "roc_eval": {k: v.to_dict() for k, v in ev.items()},
        "wall_s": wall,
        "machine": machine_info(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    write_text(a.out, json.dumps(portable_paths(out), indent=1, default=float))
    print(f"\nwrote {a.out.relative_to(ROOT) if a.out.is_relative_to(ROOT) else a.out}" + (f" and {png.name}" if png else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
