"""Long fuzz run of the sans-I/O KiwiSDR client: >= 1,000,000 mutated server messages of every kind.

Messages come from :mod:`streamkit.protocols.kiwi_fuzz` (the generator of the suite's bounded
property test, tests/protocols/test_kiwi_fuzz.py): ``SND`` frames (ADPCM, PCM, IQ) with plausible,
jumping, duplicate and wrapping sequence numbers, ``MSG`` with known and unknown keys and hostile
values, ``W/F``/``EXT``/``DAT``/``CLI``, unknown tags, text messages and messages shorter than a tag;
about half of them damaged (bit flips, truncation, extension, a random header byte, splices of two
messages, a one-byte cut). Each goes through :meth:`KiwiClientProtocol.receive_message` and
:meth:`tick` of a session that went through a successful handshake (a new session after every
terminal event, and every ``--session-frames`` messages), and what came out is audited
(:func:`~streamkit.protocols.kiwi_fuzz.audit`: documented event types only, no internal error
caught by the parser's last-resort guard, every audio frame exactly as long as its payload, every
gap consistent) together with the session counters (decoded samples and lost frames equal the
events' sums).

Escaped exceptions and audit problems must be 0 (exit status 1 otherwise). One process, one
thread; seeded, so a run is replayed exactly by its seed.

    python benchmarks/fuzz_kiwi.py [--frames 1000000] [--seed 0] [--mutate 0.5]

Writes benchmarks/results/fuzz_kiwi.json.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from _bench import write_result  # benchmarks/_bench.py: the script's directory is on sys.path

from streamkit.core.machine import machine_info
from streamkit.protocols.adpcm import warmup
from streamkit.protocols.kiwi import AudioFrame, GapReason, KiwiClientProtocol, ProtocolViolation, SequenceGap, State, Terminal
from streamkit.protocols.kiwi_fuzz import KINDS, MUTATIONS, FuzzSession, audit, handshake, make_message, mutate

_EXAMPLES = 10


def new_session(n: int) -> tuple[KiwiClientProtocol, FuzzSession]:
    p = KiwiClientProtocol(7100.0, "iq" if n % 5 == 4 else "lsb", stall_timeout=10.0)
    p.connection_made(0.0)
    handshake(p)
    return p, FuzzSession()


def check_counters(p: KiwiClientProtocol, delivered: int, lost_frames: int) -> str | None:
    if p.counters.samples != delivered or p.counters.lost_frames != lost_frames:
        return f"counters {p.counters.samples} samples / {p.counters.lost_frames} lost frames, events {delivered} / {lost_frames}"
    return None


def run(frames: int, seed: int, p_mutate: float, session_frames: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    rows = {k: Counter() for k in KINDS}
    events_by_type: Counter[str] = Counter()
    terminals: Counter[str] = Counter()
    mutations: Counter[str] = Counter()
    escaped: list[str] = []
    problems: list[str] = []
    n_escaped = n_problems = 0
    sessions = 0
    p, session = new_session(sessions)
    in_session = delivered = lost_frames = 0
    last: bytes | str = b""
    now = 0.0
    t0 = time.perf_counter()
    for i in range(frames):
        if p.state is State.CLOSED or in_session >= session_frames:
            msg = check_counters(p, delivered, lost_frames)
            if msg is not None:
                n_problems += 1
                problems.append(f"session {sessions}: {msg}")
            sessions += 1
            p, session = new_session(sessions)
            in_session = delivered = lost_frames = 0
            now = 0.0
        kind = KINDS[int(rng.integers(len(KINDS)))]
        row = rows[kind]
        m = make_message(kind, rng, session)
        if rng.random() < p_mutate:
            mut = MUTATIONS[int(rng.integers(len(MUTATIONS)))]
            m = mutate(m, rng, mut, other=last if isinstance(last, bytes) else None)
            mutations[mut] += 1
            row["mutated"] += 1
        last = m
        row["frames"] += 1
        in_session += 1
        now += 0.01
        try:
            p.receive_message(m, now)
            p.tick(now)
            events = p.events_received()
            p.data_to_send()
        except Exception as exc:  # the count this benchmark exists for: must stay 0
            n_escaped += 1
            row["escaped"] += 1
            if len(escaped) < _EXAMPLES:
                escaped.append(f"frame {i} ({kind}): {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}")
            p.close()
            continue
        found = audit(m, events)
        if found:
            n_problems += len(found)
            row["audit_problems"] += len(found)
            problems.extend(f"frame {i} ({kind}): {x}" for x in found[: max(0, _EXAMPLES - len(problems))])
        for ev in events:
            events_by_type[type(ev).__name__] += 1
            if isinstance(ev, AudioFrame):
                row["audio_frames"] += 1
                delivered += ev.samples.shape[0]
            elif isinstance(ev, SequenceGap) and ev.reason is GapReason.LOST:
                lost_frames += ev.lost_frames
            elif isinstance(ev, ProtocolViolation):
                row["violations"] += 1
            elif isinstance(ev, Terminal):
                row["terminals"] += 1
                terminals[ev.kind.value] += 1
    wall = time.perf_counter() - t0
    msg = check_counters(p, delivered, lost_frames)
    if msg is not None:
        n_problems += 1
        problems.append(f"last session: {msg}")
    table = [
        {"kind": k, **{c: int(rows[k][c]) for c in ("frames", "mutated", "audio_frames", "violations", "terminals", "audit_problems", "escaped")}}
        for k in KINDS
    ]
    return {
        "frames": frames,
        "seed": seed,
        "mutate_probability": p_mutate,
        "session_frames": session_frames,
        "sessions": sessions + 1,
        "wall_s": round(wall, 3),
        "frames_per_s": round(frames / wall, 1),
        "escaped_exceptions": n_escaped,
        "audit_problems": n_problems,
        "per_kind": table,
        "mutations": dict(sorted(mutations.items())),
        "events_by_type": dict(events_by_type.most_common()),
        "terminals": dict(terminals.most_common()),
        "escaped_examples": escaped,
        "problem_examples": problems[:_EXAMPLES],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=1_000_000, help="messages to feed (default 1,000,000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mutate", type=float, default=0.5, help="probability that a message is damaged (default 0.5)")
    ap.add_argument("--session-frames", type=int, default=5000, help="start a new session after this many messages (default 5000)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "fuzz_kiwi.json"))
    a = ap.parse_args()
    warmup()  # numba kernels compiled (or loaded) before the clock starts
    res = run(a.frames, a.seed, a.mutate, a.session_frames)
    cols = ("frames", "mutated", "audio_frames", "violations", "terminals", "audit_problems", "escaped")
    print(f"KiwiSDR client fuzz: {res['frames']:,} messages, seed {res['seed']}, {res['sessions']:,} sessions, {res['wall_s']:.1f} s")
    print(f"{'kind':<12}" + "".join(f"{c:>15}" for c in cols))
    for r in res["per_kind"]:
        print(f"{r['kind']:<12}" + "".join(f"{r[c]:>15,}" for c in cols))
    print(f"{'total':<12}" + "".join(f"{sum(r[c] for r in res['per_kind']):>15,}" for c in cols))
    print(f"frames/s: {res['frames_per_s']:,.0f}; escaped exceptions: {res['escaped_exceptions']}; audit problems: {res['audit_problems']}")
    print(f"terminals: {res['terminals']}")
    for x in res["escaped_examples"] + res["problem_examples"]:
        print(f"  {x}")
    mi = machine_info()
    print(f"machine: {mi.get('cpu', '?')}, {mi['cpu_count']} cores, Python {mi['python']}, numpy {mi['numpy']}, numba {mi.get('numba')}")
    write_result(a.out, {
        "benchmark": "fuzz_kiwi", **res, "machine": mi, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": "python benchmarks/fuzz_kiwi.py " + " ".join(sys.argv[1:]),
    })  # fmt: skip
    return 1 if res["escaped_exceptions"] or res["audit_problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
