"""Speech tags on the audio itself: the statistical SAD run as an audio pass-through.

:class:`~streamkit.dsp.stat_sad.StatSAD` outputs a score stream (31.25 Hz) and puts its
``sk:speech`` tags there. A block that consumes *audio* and needs to know where speech starts and
ends, sample-exactly (the streaming ASR, ``models.rnnt_asr``), needs the tags on the audio.
:class:`SpeechGate` runs the same analyser (same kernels, same parameters, same decisions) and
hands the audio on unchanged, held back until every tag that can fall on it is known, with
``SpeechBoundary`` tags at the segments' first and one-past-last samples.

Nothing is dropped or altered: the output equals the input item for item (only later), so the
block has rate ratio 1 and no index delay; its latency is the SAD's look-ahead.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from streamkit.core.block import GapPolicy, RateBlock, require_audio
from streamkit.core.context import Context
from streamkit.core.errors import ConfigError
from streamkit.core.events import ActivitySegment
from streamkit.core.registry import register
from streamkit.core.tags import SPEECH, Gap, SpeechBoundary
from streamkit.core.types import StreamSpec
from streamkit.dsp.kernels.minstat import DS_NOUT
from streamkit.dsp.stat_sad import DETECTOR, HOP, RATE, VAD_SEGMENT, WIN, StatSAD, _Analyzer, warm_up_analyzer

__all__ = ["SpeechGate"]


@register("dsp.speech_gate")
class SpeechGate(RateBlock):
    """The statistical SAD as an audio pass-through: the input audio, with ``sk:speech`` tags on it.

    Ports:
        in: float32 mono audio at 8000 Hz (anything else: ConfigError; put ``dsp.resample`` in front).
        out: the same items, unchanged, handed on once every tag that can fall on them is known.
    Parameters:
        Every parameter of :class:`~streamkit.dsp.stat_sad.StatSAD` (analysis, decision,
        ``backend``), with the same defaults and meaning: the decisions are the StatSAD's.
        events (True): emit ``vad.segment`` events (False when a ``dsp.stat_sad`` in the same graph
        already reports the segments).
    Tags:
        Input tags keep their offsets. Adds ``sk:speech``
        (:class:`~streamkit.core.tags.SpeechBoundary`, detector "stat"): ``start=True`` at the first
        sample of a segment's span, ``start=False`` at the sample after its last one; span of speech
        frames ``a..b-1`` = ``[origin + 256 a, origin + 256 (b - 1) + 512)`` as the StatSAD's
        ``vad.segment``. An end that would fall after the last item (a segment open at the end of
        the stream or at a gap) gets no end tag: the stream end / the ``sk:gap`` tag ends it.
    Events:
        ``vad.segment`` (detector "stat") when a segment ends (with ``events``), as ``dsp.stat_sad``.
    Latency:
        Output item ``i`` leaves once the decisions of every frame starting at or before ``i`` are
        made: ``512 + 12 * 256 = 3584`` items (448 ms) at most; at the start of the stream (and
        after a gap) the warm-up look-back holds the first ``512 + 22 * 256 = 6144`` items (768
        ms) until it is complete, so that speech from the first sample on is tagged.
    Gaps:
        ``on_gap`` RESET. Before the reset the runtime calls :meth:`drain`: the held-back audio
        before the loss goes out with its tags (the open segment is closed there, its event
        emitted), so a gap loses nothing but what the source lost.
    State:
        The analyser's state, the held-back items, the pending tags.
    """

    emits: ClassVar[tuple[str, ...]] = (VAD_SEGMENT,)
    on_gap: ClassVar[GapPolicy] = GapPolicy.RESET

    def __init__(self, *, name: str | None = None, events: bool = True, **params: Any) -> None:
        super().__init__(name=name)
        # StatSAD validates every parameter (and the backend) the same way
        self._proto = StatSAD(**params)
        if not isinstance(events, bool):
            raise ConfigError(f"events must be true or false, got {events!r}")
        self.events = events
        self.ratio = Fraction(1)
        self.delay = Fraction(0)
        self.length_slack = 0
        self._an: _Analyzer | None = None
        self._held = np.zeros((0, 1), np.float32)
        self._ctx: Context | None = None

    @property
    def nonfinite_samples(self) -> int:
        return self._nonfinite

    # -- description ---------------------------------------------------------------------------
    def algorithmic_latency(self) -> int:
        return WIN + self._proto.look * HOP

    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        spec = inputs["in"]
        require_audio(self.name, spec, RATE)
        return {"out": StreamSpec(spec.rate, 1, np.dtype(np.float32))}

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self, ctx: Context) -> None:
        p = self._proto
        self._ctx = ctx
        self._an = _Analyzer(p.analysis, p.backend)
        self._an.set_decision(p.threshold, p.threshold - p.hysteresis, p.vote_min, p.look)
        self._nonfinite = 0
        self._in_pos = 0  # absolute index of the next input item
        self._clear(0)
        warm_up_analyzer(p.analysis, p.backend, (p.threshold, p.threshold - p.hysteresis, p.vote_min, p.look), ctx.dummy_input("in", n=WIN + HOP))

    def _clear(self, at: int) -> None:
        assert self._an is not None
        self._an.reset()
        self._origin = at  # input index of frame 0
        self._out_pos = at  # absolute index of the next output item
        self._held = np.zeros((0, 1), np.float32)
        self._tags: list[tuple[int, SpeechBoundary]] = []
        self._start_tagged = False

    def work(self, x: np.ndarray, ctx: Context) -> np.ndarray | None:
        an = self._an
        assert an is not None
        n = x.shape[0]
        if n == 0:
            return None
        _, bad, _, ne = an.step(x.reshape(1, n, 1), True, 0, True)
        if bad:
            if self._nonfinite == 0:
                ctx.log.warning("%s: NaN/inf input samples replaced by 0 for the analysis (the audio is handed on as it came)", self.name)
            self._nonfinite += bad
        if ne:
            self._edges(ctx, an.edges[:ne])
        self._held = np.concatenate([self._held, np.asarray(x, np.float32).reshape(n, 1)]) if self._held.shape[0] else np.array(x, np.float32).reshape(n, 1)
        self._in_pos += n
        # every frame from nout on is undecided: a tag can still fall on samples >= origin + 256 * nout
        frontier = self._origin + HOP * int(an.dst[DS_NOUT])
        return self._release(ctx, min(frontier, self._in_pos))

    def drain(self, ctx: Context) -> np.ndarray | None:
        """Before a reset (gap): decide the pending frames and hand on everything held."""
        if self._an is None:
            return None
        _, ne = self._an.final()
        if self._an.late_bad:  # a stream or segment that ended inside the warm-up look-back
            self._nonfinite += self._an.late_bad
        if ne:
            self._edges(ctx, self._an.edges[:ne])
        return self._release(ctx, self._in_pos)

    def reset(self, cause: Gap | None = None) -> None:
        if self._an is None:
            return
        if self._held.shape[0]:  # drain() was not called (a runtime without it): the events still go out
            assert self._ctx is not None
            self.drain(self._ctx)
        self._clear(self._in_pos)

    def flush(self, ctx: Context) -> np.ndarray | None:
        if self._an is None:
            return None
        return self.drain(ctx)

    def stop(self) -> None:
        self._ctx = None

    def apply_params(self, changes: Mapping[str, Any]) -> None:
        """Only threshold and hysteresis may change while running (as ``dsp.stat_sad``)."""
        self._proto.apply_params(changes)
        p = self._proto
        if self._an is not None:
            self._an.set_decision(p.threshold, p.threshold - p.hysteresis, p.vote_min, p.look)

    # -- helpers ---------------------------------------------------------------------------------
    def _edges(self, ctx: Context, edges: np.ndarray) -> None:
        for _i, kind, score, a, e in edges.tolist():
            if kind:
                self._tags.append((self._origin + int(a) * HOP, SpeechBoundary(True, DETECTOR, float(score))))
                self._start_tagged = True
                continue
            lo, hi = self._origin + int(a) * HOP, self._origin + (int(e) - 1) * HOP + WIN
            if self._start_tagged:
                self._tags.append((hi, SpeechBoundary(False, DETECTOR, float(score))))
            self._start_tagged = False
            if self.events:
                ctx.emit(VAD_SEGMENT, ActivitySegment(DETECTOR, float(score), lo / RATE, hi / RATE), span=(lo, hi))

    def _release(self, ctx: Context, upto: int) -> np.ndarray | None:
        """Output the held items before absolute index ``upto`` with the tags that fall on them."""
        k = upto - self._out_pos
        if k <= 0:
            return None
        y = self._held[:k]
        self._held = self._held[k:]
        lo, hi = self._out_pos, upto
        keep = []
        for at, tag in self._tags:
            if lo <= at < hi:
                ctx.add_tag(at, SPEECH, tag)
            elif at >= hi and at < self._in_pos:
                keep.append((at, tag))
            # a tag at or after the last input item (stream end / gap) has no item to sit on
        self._tags = keep
        self._out_pos = upto
        return y

