"""``streamkit sad`` on a file as a stream: the graph's blocks, in bounded memory.

For the systems that exist as blocks (``stat``, ``stat-c``, ``dnn``) a file is not loaded whole:
it is run through the graph the live monitor would run::

    io.file -> [dsp.mono] -> [dsp.resample to 8 kHz, soxr HQ] -> dsp.stat_sad | models.sad_dnn

in :class:`~streamkit.core.clock.FreeRun` (as fast as the blocks go), reading ``chunk_s`` of audio
at a time. The segments are the block's ``vad.segment`` events (hysteresis, the 25-frame vote and,
for ``stat``, the warm-up re-scoring of the stream start): the same segments a graph gives on the
same file, and with them the RTTM (:func:`sad_array`: the same graph on audio in memory, used
by :func:`streamkit.detect_speech`). Memory holds the blocks' state, one chunk and the per-frame
scores (4 bytes per frame: 0.9 MB per hour for ``stat``, 1.4 MB per hour for ``dnn``), whatever
the file's length.

The mono mix (mean in float64, rounded once) and the streaming resampler (bit-identical to
``soxr.resample`` on the whole signal) give the samples :func:`streamkit.eval.sad_systems.load_audio`
gives, so the frame scores equal the whole-signal functions' (``stat_sad_scores``,
``dnn_raw_scores``) on the loaded file.

The other systems (energy, webrtcvad*, silero) have no block and are scored on the whole loaded
file by :mod:`streamkit.eval.sad_systems`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.core.errors import ConfigError, StreamkitError
from streamkit.eval.sad_systems import RATE, AudioError

#: systems run as blocks: name -> (block name, block parameters)
STREAMED: dict[str, tuple[str, dict[str, Any]]] = {
    "stat": ("dsp.stat_sad", {}),
    "stat-c": ("dsp.stat_sad", {"backend": "c"}),
    "dnn": ("models.sad_dnn", {}),
}

#: seconds of audio per source read (bounds the memory of one step of the graph)
CHUNK_S = 0.5


@dataclass
class FileSad:
    """What :func:`sad_file` returns: speech intervals and frame scores at 8 kHz."""

    intervals: np.ndarray  # (k, 2) int64 half-open sample ranges at RATE: the block's segments
    scores: np.ndarray  # float32 per frame: the block's output items (dnn: after the vote, see sad_file)
    hop: int
    win: int
    n_samples: int  # samples at RATE that reached the SAD
    seconds: float  # process time of the whole run (decoding, resampling, the SAD)
    notes: list[str] = field(default_factory=list)
    segment_scores: list[float] = field(default_factory=list)  # each segment's mean frame score (the event's)

    @property
    def speech_fraction(self) -> float:
        return float((self.intervals[:, 1] - self.intervals[:, 0]).sum() / self.n_samples) if self.n_samples else 0.0


def streamed(system: str) -> bool:
    """Whether ``streamkit sad --system NAME`` runs ``NAME`` as a block over a streamed file."""
    return system in STREAMED


def _block(system: str, threshold: float | None) -> Any:
    from streamkit.core.registry import lookup

    name, params = STREAMED[system]
    kw = dict(params)
    if threshold is not None:
        kw["threshold"] = float(threshold)
    return lookup(name)(**kw)


def sad_file(path: str | Path, system: str, threshold: float | None = None, *, chunk_s: float | None = None) -> FileSad:
    """Run the SAD ``system`` (one of :data:`STREAMED`) over the audio file ``path`` as a stream.

    ``threshold`` (None: the block's default) is the block's decision threshold; ``chunk_s``
    (None: :data:`CHUNK_S`) the seconds of audio per read. The scores are
    the block's output items; for ``dnn`` they go through the vote's rank filter
    (:func:`streamkit.eval.sad.majority_filter`, as the ``dnn`` system's ``score_file``), so that
    ``score > threshold`` is the block's frame decision; for ``stat`` the decision also has the
    block's hysteresis (the segments are the truth, the scores are for sweeps).

    Raises:
        AudioError: unreadable file, a read failure, or NaN/inf samples (named with the file).
    """
    from streamkit.io.file_source import FileSource

    p = Path(path)
    src = FileSource(path=str(p))
    try:
        src.negotiate({})
    except ConfigError as exc:
        reason = str(exc).split(": ", 2)[-1] if str(exc).startswith("io.file: cannot open") else str(exc)
        raise AudioError(f"{p}: cannot read audio: {reason}") from None
    return _sad_source(src, str(p), system, threshold, chunk_s)


def sad_array(samples: np.ndarray, rate: Any, system: str, threshold: float | None = None, *, chunk_s: float | None = None) -> FileSad:
    """:func:`sad_file` on audio in memory: ``samples`` ``(n,)`` or ``(n, channels)`` float32 at ``rate`` Hz.

    The same graph with :class:`~streamkit.io.collect.VectorSource` in place of ``io.file``, so
    the same samples give the same segments as the file would.
    """
    from streamkit.io.collect import VectorSource

    src = VectorSource(samples=samples, rate=rate, sizes=max(1, len(samples)), utc_ns=None)
    return _sad_source(src, "audio", system, threshold, chunk_s)


def _sad_source(src: Any, label: str, system: str, threshold: float | None, chunk_s: float | None) -> FileSad:
    """The graph ``src -> [dsp.mono] -> [dsp.resample to 8 kHz] -> SAD block`` run to the end;
    ``label`` names the audio in errors."""
    from streamkit.core.graph import Graph
    from streamkit.core.runtime import Runner
    from streamkit.dsp.front import mono_at
    from streamkit.io.collect import CollectSink

    g = Graph("sad")
    chain, notes = mono_at(g, src, RATE, name="file")
    sad = _block(system, threshold)
    sink = CollectSink()
    chain += [g.add(sad, name="sad"), g.add(sink, name="scores")]
    g.chain(*chain)
    runner = Runner(g, keep_events=True, threaded_events=False, stats_interval_s=0, chunk_s=CHUNK_S if chunk_s is None else chunk_s)
    t0 = time.process_time()
    try:
        runner.run()
    except StreamkitError as exc:
        raise AudioError(f"{label}: {str(exc).splitlines()[0]}") from None
    seconds = time.process_time() - t0
    errors = [e for e in runner.events if e.kind == "block.error"]
    if errors:
        msg = str(getattr(errors[0].payload, "message", errors[0].payload)).splitlines()[0]
        raise AudioError(msg if label in msg else f"{label}: {msg}")
    bad = int(getattr(sad, "nonfinite_samples", 0))
    if bad:
        raise AudioError(f"{label}: audio contains NaN or inf samples ({bad} reached the SAD at {RATE} Hz)")
    segs = [e for e in runner.events if e.kind == "vad.segment"]
    intervals = np.array([e.span for e in segs], dtype=np.int64).reshape(-1, 2)
    scores = sink.samples[:, 0].astype(np.float32, copy=False)
    hop, win = (80, 200) if system == "dnn" else (256, 512)
    if system == "dnn":
        from streamkit.eval.sad import majority_filter

        scores = majority_filter(scores, sad.vote_window, sad.vote_min).astype(np.float32)
    n = int(runner.metrics("sad").items_in)
    return FileSad(intervals, scores, hop, win, n, seconds, notes, [float(e.payload.score) for e in segs])
