"""Peak memory of the file commands against the file's duration: streamed files stay bounded.

Makes two test files in a temporary directory (``--short-min`` minutes, default 10, and
``--long-h`` hours, default 2): synthetic speech-like audio (harmonic bursts with syllable-rate
AM, 0.6-2 s, pauses 0.8-2.5 s, in pink-ish noise at 10 dB SNR), mono 16 kHz PCM-16, written in
10 s chunks with soundfile (the generator never holds a whole file either). Then each command
runs on each file in its own subprocess, one at a time::

    python -m streamkit sad FILE --system stat --out DIR
    python -m streamkit sad FILE --system dnn --out DIR
    python -m streamkit transcribe FILE
    python -m streamkit sed FILE --out FILE.tsv

and its peak resident set size is read from ``os.wait4`` (``ru_maxrss`` of that child alone), with
its CPU time (user + system) and wall time. The table: command, peak RSS on the short and the
long file, their ratio (1.0 = independent of duration), and the RT factor (CPU time / audio
duration, the long file; it includes start-up: imports, JIT cache loads, model loading). Goal:
every command under 600 MB on the 2 h file, ratio ~1.

    python benchmarks/file_memory.py [--short-min 10] [--long-h 2] [--commands sad-stat,sad-dnn,transcribe,sed]

Run from the repository root (the subprocesses run ``python -m streamkit`` there). Writes
benchmarks/results/file_memory.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.core.machine import machine_info
from streamkit.testing.signals import speechlike

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "file_memory.json"
RATE = 16000
BLOCK_S = 10

COMMANDS: dict[str, list[str]] = {
    "sad-stat": ["sad", "{file}", "--system", "stat", "--out", "{tmp}/sad_stat"],
    "sad-dnn": ["sad", "{file}", "--system", "dnn", "--out", "{tmp}/sad_dnn"],
    "transcribe": ["transcribe", "{file}"],
    "sed": ["sed", "{file}", "--out", "{tmp}/sed.tsv"],
}


def _speechlike(n: int, rng: np.random.Generator) -> np.ndarray:
    return speechlike(n, rng, rate=RATE, harmonics=29)


def _pinkish(n: int, rng: np.random.Generator) -> np.ndarray:
    w = np.fft.rfft(rng.standard_normal(n))
    f = np.arange(w.shape[0], dtype=np.float64)
    f[0] = 1.0
    y = np.fft.irfft(w / np.sqrt(f), n)
    return y / y.std()


def make_file(path: Path, seconds: float, seed: int = 0) -> None:
    """Write ``seconds`` of speech-like audio at 10 dB SNR in BLOCK_S blocks (bursts may span blocks)."""
    import soundfile as sf

    rng = np.random.default_rng(seed)
    bank = [_speechlike(int(rng.uniform(0.6, 2.0) * RATE), rng) for _ in range(24)]  # bursts reused: generating is the slow part
    n_total = int(seconds * RATE)
    blk = BLOCK_S * RATE
    carry = np.zeros(0)
    gap = int(rng.uniform(0.8, 2.5) * RATE)
    with sf.SoundFile(str(path), "w", RATE, 1, subtype="PCM_16") as f:
        done = 0
        while done < n_total:
            k = min(blk, n_total - done)
            s = np.zeros(k)
            m = min(carry.shape[0], k)
            s[:m] = carry[:m]
            carry = carry[m:]
            pos = m + gap if m else gap
            while pos < k:
                b = bank[int(rng.integers(len(bank)))] * rng.uniform(0.5, 1.0)
                e = min(k, pos + b.shape[0])
                s[pos:e] = b[: e - pos]
                carry = b[e - pos :]
                pos += b.shape[0] + int(rng.uniform(0.8, 2.5) * RATE)
            gap = max(pos - k, 0)
            noise = _pinkish(k, rng) * 0.02
            y = s * 0.02 * np.sqrt(10.0) / 0.35 + noise  # ~10 dB over the active part
            f.write(np.clip(y, -1, 1).astype(np.float32))
            done += k


def measure(name: str, file: Path, tmp: Path, timeout: float) -> dict[str, Any]:
    """Run one command in its own subprocess: peak RSS (MB), CPU and wall seconds, exit code."""
    args = [a.format(file=file, tmp=tmp) for a in COMMANDS[name]]
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "streamkit", *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = t0 + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            p.kill()
            pid, status, ru = os.wait4(p.pid, 0)
            break
        time.sleep(0.2)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    rc = os.waitstatus_to_exitcode(status)
    return {"rss_mb": ru.ru_maxrss / 1024.0, "cpu_s": ru.ru_utime + ru.ru_stime, "wall_s": wall, "rc": rc,
            "stderr_tail": err.strip().splitlines()[-1:] if rc else []}  # fmt: skip


def machine() -> dict[str, Any]:
    """:func:`streamkit.core.machine.machine_info` and the memory size."""
    info = machine_info()
    try:
        info["mem_total_gb"] = round(int(Path("/proc/meminfo").read_text().split()[1]) / 1024**2, 1)
    except (OSError, ValueError, IndexError):
        pass
    return info


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--short-min", type=float, default=10.0, help="short file, minutes (default 10)")
    ap.add_argument("--long-h", type=float, default=2.0, help="long file, hours (default 2)")
    ap.add_argument("--commands", default=",".join(COMMANDS), help=f"comma-separated, of {', '.join(COMMANDS)}")
    ap.add_argument("--timeout", type=float, default=3 * 3600, help="seconds per command (default 3 h)")
    ap.add_argument("--out", default=str(RESULT), help="result JSON")
    a = ap.parse_args()
    names = [c for c in a.commands.split(",") if c]
    unknown = set(names) - set(COMMANDS)
    if unknown:
        ap.error(f"unknown command(s) {sorted(unknown)}")
    mi = machine()
    print(f"machine: {mi.get('cpu', '?')}, {mi['cpu_count']} cores, {mi.get('mem_total_gb', '?')} GB, Python {mi['python']}", flush=True)
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="file_memory_") as td:
        tmp = Path(td)
        durations = {"short": a.short_min * 60.0, "long": a.long_h * 3600.0}
        files = {}
        for key, secs in durations.items():
            files[key] = tmp / f"{key}.wav"
            t0 = time.perf_counter()
            make_file(files[key], secs, seed=1)
            print(f"made {key} file: {secs / 60:.0f} min, {files[key].stat().st_size / 1e6:.0f} MB ({time.perf_counter() - t0:.0f} s)", flush=True)
        for name in names:
            rows[name] = {}
            for key in ("short", "long"):
                r = measure(name, files[key], tmp, a.timeout)
                r["rt_factor"] = r["cpu_s"] / durations[key]
                rows[name][key] = r
                print(f"  {name} {key}: {r['rss_mb']:.0f} MB, CPU {r['cpu_s']:.1f} s, wall {r['wall_s']:.1f} s, rc {r['rc']} {r['stderr_tail']}", flush=True)
    hdr = f"| command | peak RSS, {a.short_min:g} min | peak RSS, {a.long_h:g} h | ratio | RT factor ({a.long_h:g} h, CPU) | exit |"
    print()
    print(hdr)
    print("|---|---|---|---|---|---|")
    for name, r in rows.items():
        s, lg = r["short"], r["long"]
        print(f"| {name} | {s['rss_mb']:.0f} MB | {lg['rss_mb']:.0f} MB | {lg['rss_mb'] / s['rss_mb']:.2f} | {lg['rt_factor']:.4f} | {s['rc']}/{lg['rc']} |")
    result = {
        "benchmark": "file_memory",
        "what": "peak RSS (os.wait4 ru_maxrss) of each file command in its own subprocess, short vs long synthetic 16 kHz mono file",
        "short_s": durations["short"], "long_s": durations["long"], "rate": RATE,
        "commands": {n: " ".join(COMMANDS[n]) for n in names},
        "results": rows,
        "machine": mi, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }  # fmt: skip
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}", file=sys.stderr)
    return 0 if all(r[k]["rc"] == 0 for r in rows.values() for k in r) else 1


if __name__ == "__main__":
    raise SystemExit(main())
