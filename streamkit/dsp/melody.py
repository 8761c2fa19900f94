"""Predominant f0 (melody) of a mono stream: cents above 55 Hz and voicing every 10 ms.

Two extractors behind one interface (:class:`F0Extractor`: ``push`` samples, get the frames it
could decide; ``finish`` at the end of the stream; ``reset``):

* ``"pyin"`` (default, MIT, ours): probabilistic YIN with an HMM decoded by a fixed-lag Viterbi,
  kernels in :mod:`streamkit.dsp.kernels.pyin`. Frame ``j`` covers input items
  ``[160 j - 256, 160 j + 768)`` (zeros before the stream): its 512-item YIN window is centred on
  item ``160 j``.
* ``"melodia"`` (optional): essentia's ``PredominantPitchMelodia`` (Salamon and Gomez), run on
  consecutive segments of ``segment_s`` seconds. essentia is AGPL-3.0 and never a dependency of
  streamkit: install it yourself (``pip install 'streamkit[melodia]'``); without it this extractor
  is a ConfigError naming the extra.

:func:`melody_f0` runs an extractor on a whole signal; the ``dsp.melody`` block's output equals it
row for row whatever the chunking.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, ClassVar, Protocol

import numpy as np

from streamkit.core.block import GapPolicy, RateBlock, TagPolicy, require_audio
from streamkit.core.context import Context
from streamkit.core.errors import ConfigError
from streamkit.core.params import integer, number
from streamkit.core.registry import register
from streamkit.core.tags import Gap
from streamkit.core.types import StreamSpec
from streamkit.dsp.kernels.pyin import (
    MAX_CAND,
    hz_to_cents,
    log_transition,
    pyin_finish,
    pyin_frames,
    threshold_prior,
    yin_cmnd_batch,
)

RATE = 16000  #: the only input rate (put dsp.resample in front)
HOP = 160  #: 10 ms per output row
FRAME = 1024  #: 64 ms analysis frame (YIN window 512, lags up to 512)
PAD = FRAME // 4  #: zeros in front: the YIN window of frame j is centred on input item j * HOP
#: output channels: cents above 55 Hz (the decided pitch; meaningful where voiced), voiced 0/1,
#: voiced probability (sum of the frame's pYIN candidate probabilities; Melodia: its confidence)
CHANNELS = ("cents", "voiced", "voiced_prob")

PYIN_DEFAULTS: dict[str, Any] = {
    "fmin": 65.0,  # Hz, lowest f0 (C2)
    "fmax": 1050.0,  # Hz, highest f0 (about C6)
    "bins_per_semitone": 5,  # pitch states: 20 cents apart (the output is refined to the candidate)
    "max_step_semitones": 4,  # per 10 ms frame (pYIN/librosa allow ~36 octaves/s = 4.3 st per 10 ms)
    "p_switch": 0.01,  # voiced <-> unvoiced transition probability per frame
    "p_abs": 0.01,  # mass given to the global minimum when no trough is below a threshold
    "prior_mean": 0.1,  # mean of the beta prior over YIN thresholds (beta(2, 18))
    "lag_s": 0.3,  # fixed Viterbi lag: a frame is final 0.3 s after it
}


class F0Extractor(Protocol):
    """A streaming predominant-f0 extractor at 16 kHz; rows are (cents, voiced, voiced_prob)."""

    #: frames between an input item and its final row (output latency in hops, besides FRAME/2)
    lag_frames: int

    def push(self, x: np.ndarray) -> np.ndarray:
        """Samples (n,) float; returns the newly decided rows (k, 3) float64."""
        ...

    def finish(self) -> np.ndarray:
        """End of stream: the remaining rows; the extractor is then empty (as after ``reset``)."""
        ...

    def reset(self) -> None:
        """Drop all state; the next sample starts a new stream (frame 0 centred on it)."""
        ...


class _Framer:
    """Framing: frame j = padded[j*HOP : j*HOP + FRAME] with ``PAD`` zeros in front, so the YIN
    window (the first ``FRAME // 2`` items of the frame) is centred on input item ``j * HOP``."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.buf = np.zeros(PAD)
        self.n_in = 0  # real samples seen
        self.n_frames = 0  # frames handed out

    def push(self, x: np.ndarray) -> np.ndarray:
        self.buf = np.concatenate([self.buf, x])
        self.n_in += x.shape[0]
        k = (self.buf.shape[0] - FRAME) // HOP + 1 if self.buf.shape[0] >= FRAME else 0
        return self._take(k)

    def finish(self) -> np.ndarray:
        """The last frames (centres < n_in), zero-padded at the end."""
        want = -(-self.n_in // HOP) - self.n_frames
        if want <= 0:
            return np.zeros((0, FRAME))
        self.buf = np.concatenate([self.buf, np.zeros(FRAME)])
        return self._take(want)

    def _take(self, k: int) -> np.ndarray:
        if k <= 0:
            return np.zeros((0, FRAME))
        frames = np.lib.stride_tricks.sliding_window_view(self.buf, FRAME)[: k * HOP : HOP].copy()
        self.buf = self.buf[k * HOP :]
        self.n_frames += k
        return frames


class PyinExtractor:
    """pYIN with a fixed-lag Viterbi (see :mod:`streamkit.dsp.kernels.pyin`)."""

    def __init__(self, **params: Any) -> None:
        unknown = set(params) - set(PYIN_DEFAULTS)
        if unknown:
            raise ConfigError(f"pyin: unknown parameter(s) {sorted(unknown)}; known: {sorted(PYIN_DEFAULTS)}")
        p = {**PYIN_DEFAULTS, **params}
        fmin = number("fmin", p["fmin"], RATE / (FRAME // 2 - 1))
        fmax = number("fmax", p["fmax"], fmin * 1.06, RATE / 4)
        bps = integer("bins_per_semitone", p["bins_per_semitone"], 1, 20)
        step = number("max_step_semitones", p["max_step_semitones"], 0.1, 48)
        p_sw = number("p_switch", p["p_switch"], 1e-6, 0.5)
        p_abs = number("p_abs", p["p_abs"], 0.0, 1.0)
        mean = number("prior_mean", p["prior_mean"], 0.01, 0.9)
        lag_s = number("lag_s", p["lag_s"], 0.0, 5.0)
        self.params = {**p, "fmin": fmin, "fmax": fmax}
        tau_min = max(2, int(math.floor(RATE / fmax)))
        tau_max = min(FRAME // 2 - 1, int(math.ceil(RATE / fmin)))
        c_min = float(hz_to_cents(fmin))
        n_bins = int(math.ceil((float(hz_to_cents(fmax)) - c_min) / 100.0 * bps)) + 1
        max_step = max(1, int(round(step * bps)))
        self.lag_frames = int(round(lag_s * RATE / HOP))
        self._par = np.array([RATE, FRAME // 2, tau_min, tau_max, c_min, bps / 100.0, n_bins, max_step,
                              math.log(1.0 - p_sw), math.log(p_sw), p_abs, self.lag_frames], dtype=np.float64)  # fmt: skip
        self._prior = threshold_prior(mean)
        self._ltrans = log_transition(n_bins, max_step)
        self._n = n_bins
        self._framer = _Framer()
        self.reset()

    def reset(self) -> None:
        r, n = self.lag_frames + 1, self._n
        self._ring_c = np.zeros((r, MAX_CAND))
        self._ring_p = np.zeros((r, MAX_CAND))
        self._ring_pv = np.zeros(r)
        self._psi = np.zeros((r, 2 * n), dtype=np.int32)
        self._delta = np.zeros(2 * n)
        self._newd = np.zeros(2 * n)
        self._scal = np.zeros(2, dtype=np.int64)
        self._framer.reset()

    def _run(self, frames: np.ndarray) -> np.ndarray:
        out = np.zeros((frames.shape[0], 3))
        if frames.shape[0] == 0:
            return out
        cmnds = yin_cmnd_batch(frames, FRAME // 2, int(self._par[3]))
        k = pyin_frames(cmnds, self._par, self._prior, self._ltrans, self._ring_c, self._ring_p, self._ring_pv,
                        self._psi, self._delta, self._scal, self._newd, out)  # fmt: skip
        return out[:k]

    def push(self, x: np.ndarray) -> np.ndarray:
        return self._run(self._framer.push(np.asarray(x, dtype=np.float64)))

    def finish(self) -> np.ndarray:
        head = self._run(self._framer.finish())
        tail = np.zeros((self.lag_frames + 1, 3))
        m = pyin_finish(self._par, self._ring_c, self._ring_p, self._ring_pv, self._psi, self._delta, self._scal, tail)
        self.reset()
        return np.concatenate([head, tail[:m]])


class MelodiaExtractor:
    """essentia's Melodia on consecutive ``segment_s`` segments (optional extra ``melodia``)."""

    def __init__(self, segment_s: float = 5.0, **params: Any) -> None:
        try:
            import essentia.standard as es  # type: ignore[import-not-found]
        except ImportError:
            raise ConfigError("extractor='melodia' needs essentia (AGPL-3.0, not a streamkit dependency): "
                              "pip install 'streamkit[melodia]', or use extractor='pyin'") from None  # fmt: skip
        self._algo = es.PredominantPitchMelodia(sampleRate=RATE, hopSize=HOP, frameSize=FRAME * 2, **params)
        self._seg = int(round(number("segment_s", segment_s, 0.5, 600.0) * RATE / HOP)) * HOP
        self.lag_frames = self._seg // HOP
        self.reset()

    def reset(self) -> None:
        self._buf = np.zeros(0, dtype=np.float32)

    def _segment(self, x: np.ndarray) -> np.ndarray:
        k = -(-x.shape[0] // HOP)
        f0, conf = self._algo(np.ascontiguousarray(x, dtype=np.float32))
        f0 = np.resize(np.asarray(f0, dtype=np.float64), k) if len(f0) else np.zeros(k)
        conf = np.resize(np.asarray(conf, dtype=np.float64), k) if len(conf) else np.zeros(k)
        voiced = f0 > 0
        cents = np.where(voiced, hz_to_cents(np.where(voiced, f0, 55.0)), 0.0)
        return np.stack([cents, voiced.astype(np.float64), conf], axis=1)

    def push(self, x: np.ndarray) -> np.ndarray:
        self._buf = np.concatenate([self._buf, np.asarray(x, dtype=np.float32)])
        rows = []
        while self._buf.shape[0] >= self._seg:
            rows.append(self._segment(self._buf[: self._seg]))
            self._buf = self._buf[self._seg :]
        return np.concatenate(rows) if rows else np.zeros((0, 3))

    def finish(self) -> np.ndarray:
        out = self._segment(self._buf) if self._buf.shape[0] else np.zeros((0, 3))
        self.reset()
        return out


EXTRACTORS = {"pyin": PyinExtractor, "melodia": MelodiaExtractor}


def make_extractor(extractor: str = "pyin", **params: Any) -> F0Extractor:
    """An extractor by name (ConfigError for an unknown one, or melodia without essentia)."""
    cls = EXTRACTORS.get(extractor)
    if cls is None:
        raise ConfigError(f"dsp.melody: unknown extractor {extractor!r}; known: {sorted(EXTRACTORS)}")
    return cls(**params)  # type: ignore[no-any-return]


def melody_f0(x: np.ndarray, extractor: str = "pyin", **params: Any) -> np.ndarray:
    """Rows (ceil(n / 160), 3): cents above 55 Hz, voiced 0/1, voiced probability, of 16 kHz mono ``x``."""
    ex = make_extractor(extractor, **params)
    x = np.nan_to_num(np.asarray(x, dtype=np.float64).reshape(-1), nan=0.0, posinf=0.0, neginf=0.0)
    return np.concatenate([ex.push(x), ex.finish()])


@register("dsp.melody")
class Melody(RateBlock):
    """Predominant f0 every 10 ms: cents above 55 Hz, voicing, voiced probability.

    Ports:
        in: float32 mono audio at 16000 Hz (anything else: ConfigError; put ``dsp.resample`` in front).
        out: float32, 3 channels (cents, voiced 0/1, voiced_prob) at 100 Hz; row ``j`` is the frame
            (its YIN window) centred on input item ``origin + 160 j`` (origin: the start of the stream or of the
            segment after a reset); ``ceil(n / 160)`` rows for ``n`` items. Equal to
            :func:`melody_f0`. The cents channel holds the decided pitch also where unvoiced (pYIN's
            unvoiced states carry a pitch; Melodia: 0): read it where ``voiced`` is 1.
    Parameters:
        extractor: "pyin" (default) or "melodia" (needs essentia, the optional extra ``melodia``).
        pyin: fmin (65 Hz), fmax (1050 Hz), bins_per_semitone (5), max_step_semitones (4 per
            frame), p_switch (0.01), p_abs (0.01), prior_mean (0.1), lag_s (0.3 s).
        melodia: segment_s (5 s) and essentia's own parameters.
    Tags:
        Not forwarded (``tag_policy`` CUSTOM).
    Latency:
        pyin: 768 items (the frame's end after its centre) + ``lag_s`` (0.3 s = 30 frames): 0.348 s
        from an item to its final row; the last rows come with ``flush``. melodia: up to ``segment_s``.
    State:
        The pending samples of the current frame, the Viterbi scores and ``lag_s`` of back pointers
        and candidates. ``on_gap`` RESET: at a gap ``drain()`` returns the rows of the segment before
        it (as at the end of a stream) and ``reset()`` starts a new segment, so the output is
        ``melody_f0`` of each segment, concatenated.
    Bad input:
        NaN/inf samples are replaced by 0 and counted in ``nonfinite_samples`` (a warning once).
    """

    emits: ClassVar[tuple[str, ...]] = ()
    on_gap: ClassVar[GapPolicy] = GapPolicy.RESET
    tag_policy: ClassVar[TagPolicy] = TagPolicy.CUSTOM

    def __init__(self, *, extractor: str = "pyin", name: str | None = None, **params: Any) -> None:
        super().__init__(name=name)
        self.extractor = extractor
        self._ex = make_extractor(extractor, **params)  # ConfigError now
        self.ratio = Fraction(1, HOP)
        self.delay = Fraction(0)
        self.length_slack = 1
        self.nonfinite_samples = 0
        self._ctx: Context | None = None

    def algorithmic_latency(self) -> int:
        return FRAME - PAD + self._ex.lag_frames * HOP

    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        require_audio(self.name, inputs["in"], RATE)
        return {"out": StreamSpec(Fraction(RATE, HOP), len(CHANNELS), np.dtype(np.float32))}

    def start(self, ctx: Context) -> None:
        self._ctx = ctx
        self.length_slack = 1
        self._ex.reset()

    def work(self, x: np.ndarray, ctx: Context) -> np.ndarray | None:
        if x.shape[0] == 0:
            return None
        v = x[:, 0]
        bad = int(np.count_nonzero(~np.isfinite(v)))
        if bad:
            if self.nonfinite_samples == 0:
                ctx.log.warning("%s: NaN/inf input samples replaced by 0", self.name)
            self.nonfinite_samples += bad
            v = np.nan_to_num(v, nan=0.0, posinf=0.0, neginf=0.0)
        rows = self._ex.push(v)
        return rows.astype(np.float32) if rows.shape[0] else None

    def drain(self, ctx: Context) -> np.ndarray | None:
        """At a gap: the rows of the segment before it, decided as at the end of a stream."""
        rows = self._ex.finish()
        return rows.astype(np.float32) if rows.shape[0] else None

    def reset(self, cause: Gap | None = None) -> None:
        # the next segment starts a fresh frame grid (ceil(n / 160) rows per segment)
        self.length_slack += 1
        self._ex.reset()

    def flush(self, ctx: Context) -> np.ndarray | None:
        rows = self._ex.finish()
        return rows.astype(np.float32) if rows.shape[0] else None

    def stop(self) -> None:
        self._ctx = None
