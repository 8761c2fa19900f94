"""``streamkit align`` (a reception against its transmission) and ``streamkit corpus transmission``.

The work is done in :mod:`streamkit.data.transmission` (the transmission and its schedule) and
:mod:`streamkit.data.alignment` (markers, sanity checks, SRO, GCC-PHAT); this module reads and
checks the files, prints the summary, and turns every bad input (a missing file, a WAV that cannot
be read, a schedule of the wrong shape, a bad option) into one ``streamkit: error:`` line and
exit status 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from streamkit.cli.common import add_command


def add_parsers(sub: Any) -> None:
    add_command(sub, "align", help="align a reception with its transmission (markers, SRO, GCC-PHAT): a real parallel corpus",
                description="Align a recording of a transmission made by `streamkit corpus transmission` with its reference: find the chirp "
                "markers, check them (all found, in order, spacing as scheduled), estimate and compensate the sampling-rate offset, refine "
                "each sequence's delay with GCC-PHAT, and write per utterance the aligned received audio, the clean reference and the "
                "labels, plus report.json (rejected sequences and why).",
                arguments=add_align_arguments, run=run_align)  # fmt: skip


# --------------------------------------------------------------------------- corpus transmission
def add_transmission_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--utterances", required=True, metavar="DIR", help="directory of utterances (*.wav, *.flac; sorted by name; <stem>.rttm = its labels)"
    )
    p.add_argument("--out", required=True, metavar="WAV", help="transmission audio; the schedule goes to <stem>.json, the labels to <stem>.rttm")
    p.add_argument("--rate", type=int, default=8000, help="sample rate of the transmission (default 8000)")
    p.add_argument("--per-sequence", type=int, default=5, help="utterances per sequence between two markers (default 5, as in the paper)")
    p.add_argument("--gap", default="2", metavar="MIN[:MAX]", help="silence after each utterance in seconds, or a random range (default 2)")
    p.add_argument("--first-marker", type=int, default=0, help="id of the first marker (default 0); give each transmission its own markers")
    p.add_argument("--seed", type=int, default=0, help="seed of the random gaps (default 0)")


def _gap(text: str) -> tuple[float, float]:
    lo_s, _, hi_s = text.partition(":")
    try:
        lo = float(lo_s)
        hi = float(hi_s) if hi_s else lo
    except ValueError:
        raise ValueError(f"--gap must be MIN[:MAX] seconds, got {text!r}") from None
    return lo, hi


def run_transmission(ns: argparse.Namespace) -> int:
    from streamkit.data.transmission import build, load_utterances, write_transmission

    if not 1000 <= ns.rate <= 192000:
        raise ValueError(f"--rate must be in 1000..192000 Hz, got {ns.rate}")
    if ns.rate < 5600:
        raise ValueError(f"--rate must be at least 5600 Hz for the markers (up to 2600 Hz), got {ns.rate}")
    utts = load_utterances(ns.utterances, ns.rate)
    out = Path(ns.out)
    audio, sched = build(utts, ns.rate, per_sequence=ns.per_sequence, gap_s=_gap(ns.gap), first_marker=ns.first_marker, seed=ns.seed,
                         audio_name=out.name)  # fmt: skip
    paths = write_transmission(out, audio, sched)
    n_utt = sum(len(s) for s in sched.sequences)
    print(f"{out}: {sched.samples / sched.rate:.1f} s at {sched.rate} Hz, {len(sched.markers)} markers "
          f"(ids {sched.markers[0].id}..{sched.markers[-1].id}), {len(sched.sequences)} sequences, {n_utt} utterances")  # fmt: skip
    print(f"schedule {paths['schedule']}, labels {paths['rttm']}")
    return 0


# --------------------------------------------------------------------------- align
def add_align_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reference", required=True, metavar="JSON", help="the transmission's schedule (written by `streamkit corpus transmission`)")
    p.add_argument(
        "--received", required=True, metavar="WAV", help="the recording (its <WAV>.json sidecar, when present, gives the exact rate and the gaps)"
    )
    p.add_argument("--out", required=True, metavar="DIR", help="output directory: audio/, clean/, labels.rttm, report.json")
    p.add_argument("--rate", type=float, default=None, help="true sample rate of the recording in Hz (default: the sidecar's, else the WAV header's)")
    p.add_argument(
        "--nominal-rate", type=float, default=None, help="rate the SRO is stated against (default: the recording's rate); 12000 for a KiwiSDR"
    )
    p.add_argument("--threshold", type=float, default=0.3, help="marker score to accept a detection (0..1, default 0.3; noise scores ~0.12)")
    p.add_argument("--tol-ms", type=float, default=2.0, help="largest distance of a marker from the fitted clock line (default 2 ms)")
    p.add_argument("--channel", type=int, default=0, help="channel of a multi-channel recording (default 0)")


def _read_received(path: Path, channel: int) -> tuple[Any, float, list[tuple[int, int]]]:
    import soundfile as sf

    if not path.is_file():
        raise ValueError(f"--received {path}: no such file")
    try:
        x, fs = sf.read(str(path), dtype="float64", always_2d=True)
    except Exception as exc:  # soundfile's own error types
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"--received {path}: cannot read audio ({msg})") from None
    if not 0 <= channel < x.shape[1]:
        raise ValueError(f"--channel {channel}: the recording has {x.shape[1]} channel(s)")
    rate = float(fs)
    gaps: list[tuple[int, int]] = []
    side = Path(str(path) + ".json")
    if side.is_file():
        from streamkit.io.wav_sink import read_sidecar

        try:
            d = read_sidecar(path)
            rate = float(d["rate"])
            for t in d.get("tags", []):
                if t.get("key") == "sk:gap":
                    gaps.append((int(t["offset"]), int(t.get("lost") or 0)))
        except (ValueError, KeyError, TypeError, ZeroDivisionError) as exc:
            raise ValueError(f"--received {side}: bad sidecar ({exc})") from None
    return x[:, channel], rate, gaps


def run_align(ns: argparse.Namespace) -> int:
    import numpy as np
    import soundfile as sf

    from streamkit.data.alignment import AlignOptions, align, write_outputs
    from streamkit.data.transmission import load_schedule

    sched, audio_path = load_schedule(ns.reference)
    try:
        ref, ref_rate = sf.read(str(audio_path), dtype="float32", always_2d=True)
    except Exception as exc:  # soundfile's own error types
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"--reference: cannot read the transmission audio {audio_path} ({msg})") from None
    if ref_rate != sched.rate or ref.shape[0] != sched.samples:
        raise ValueError(
            f"--reference: {audio_path} is {ref.shape[0]} samples at {ref_rate} Hz, the schedule says {sched.samples} at {sched.rate} Hz"
        )
    rx, rate, gaps = _read_received(Path(ns.received), ns.channel)
    if ns.rate is not None:
        rate = float(ns.rate)
    if not (np.isfinite(rate) and rate > 0):
        raise ValueError(f"--rate must be > 0, got {rate}")
    if not 0.0 < ns.threshold < 1.0:
        raise ValueError(f"--threshold must be in (0, 1), got {ns.threshold}")
    opts = AlignOptions(threshold=ns.threshold, tol_ms=ns.tol_ms, nominal_rate=ns.nominal_rate)
    t0 = time.perf_counter()
    res = align(sched, ref[:, 0], rx, rate, gaps=gaps, options=opts)
    wall = time.perf_counter() - t0
    res.report["wall_s"] = round(wall, 3)
    res.report["real_time_factor"] = round(wall / max(len(rx) / rate, 1e-9), 5)
    rp = write_outputs(ns.out, res, sched.rate)
    _print_summary(res.report, rp)
    return 0


def _print_summary(r: dict[str, Any], report_path: Path) -> None:
    from streamkit.io.textsafe import printable

    ok = sum(1 for m in r["markers"] if m["status"] == "ok")
    print(f"markers: {ok}/{len(r['markers'])} ok", end="")
    bad = [f"{m['id']} {m['status']}" for m in r["markers"] if m["status"] != "ok"]
    print(f" ({', '.join(bad)})" if bad else "")
    c = r["clock"]
    if c:
        print(
            f"clock: SRO {c['sro_ppm']:+.2f} ppm vs {c['nominal_rate']:g} Hz, marker residual {c['residual_ms']:.3f} ms over {c['markers_used']} markers"
        )
    acc = [s for s in r["sequences"] if s["status"] == "accepted"]
    print(f"sequences: {len(acc)}/{len(r['sequences'])} accepted")
    for s in r["sequences"]:
        if s["status"] == "accepted":
            print(f"  {s['index']}: {len(s['utterances'])} utterances, GCC-PHAT median {s['gcc_median_ms']} ms, applied {s['delay_applied_ms']} ms")
        else:
            print(f"  {s['index']}: rejected: {printable('; '.join(s['reasons']))}")
    print(f"real-time factor {r['real_time_factor']:.4f}; report {report_path}", file=sys.stderr)
