"""``dsp.marker_detect``: find a transmission's chirp markers in a running stream.

The block renders the markers it looks for at the stream's own rate (the chirps are analytic, so a
KiwiSDR's 12001.188 Hz needs no resampling) and runs the offline detector incrementally
(:mod:`streamkit.dsp.align.detect`): each new STFT frame (about 16 ms windows, ``hop_s`` hops, on
the absolute item grid) is normalised over the voice band and added into the scores of every
marker start it belongs to (one matrix-vector product per frame), so the score of a start is
complete one marker length after it. A start whose score reaches ``threshold`` and stays the best
for the following 2 s is a detection; it is then located to a fraction of a sample on the
buffered waveform (up/down chirp split, so mistuning does not bias it) and emitted.

Results do not depend on the chunking: frames sit on the absolute grid and every frame is
processed alone, in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from streamkit.core.block import GapPolicy, SyncBlock
from streamkit.core.context import Context
from streamkit.core.errors import ConfigError
from streamkit.core.registry import register
from streamkit.core.tags import Gap
from streamkit.core.types import StreamSpec
from streamkit.dsp.align.detect import SpecGrid, marker_mask, refine
from streamkit.dsp.markers import MAX_MARKERS, marker_length

MARKER_FOUND = "marker.found"


@dataclass(frozen=True, slots=True)
class MarkerFound:
    """A detected marker.

    Attributes:
        marker_id: which marker.
        sample: stream index of the marker's first sample (fractional: sub-sample position).
        score: STFT mask score in [0, 1] (noise ~0.12, another marker <= ~0.3, clean 1).
        quality: waveform correlation in [0, 1].
        freq_offset_hz: frequency offset of the reception (+ = heard higher).
        sro_ppm: running sampling-rate offset of the stream against the reference (None until two
            scheduled markers were found, or without a reference schedule).
    """

    marker_id: int
    sample: float
    score: float
    quality: float
    freq_offset_hz: float
    sro_ppm: float | None


@register("dsp.marker_detect")
class MarkerDetect(SyncBlock):
    """Pass audio through; emit ``marker.found`` for each chirp marker found.

    Ports:
        in, out: float32 mono audio at any rate >= 5600 Hz (out == in, unchanged).
    Parameters:
        markers: marker ids to look for (default: those of ``reference``, else 0..3).
        reference: path of a transmission schedule (``corpus transmission``'s JSON): its marker
            ids and positions, for the running SRO estimate.
        threshold: score needed for a detection (default 0.4).
        hop_s: STFT hop in seconds (default 0.008).
    Events:
        ``marker.found`` (:class:`MarkerFound`), span = the marker's items; about 2 s after the
        marker's end.
    State:
        The scores of the last marker length of starts, a few seconds of audio, the pending
        candidate per marker and the markers found (for the SRO). A gap resets all but the markers
        found.
    """

    emits: ClassVar[tuple[str, ...]] = (MARKER_FOUND,)
    on_gap: ClassVar[GapPolicy] = GapPolicy.RESET

    def __init__(
        self, *, markers: Any = None, reference: str | None = None, threshold: float = 0.4, hop_s: float = 0.008, name: str | None = None
    ) -> None:
        super().__init__(name=name)
        self.ref_starts: dict[int, int] = {}
        self.ref_rate: float | None = None
        if reference is not None:
            from streamkit.data.transmission import load_schedule

            try:
                sched, _ = load_schedule(reference)
            except ValueError as exc:
                raise ConfigError(f"dsp.marker_detect: {exc}") from None
            self.ref_starts = {m.id: m.start for m in sched.markers}
            self.ref_rate = float(sched.rate)
        ids = list(markers) if markers is not None else (list(self.ref_starts) or [0, 1, 2, 3])
        if not ids or not all(isinstance(i, int) and 0 <= i < MAX_MARKERS for i in ids):
            raise ConfigError(f"dsp.marker_detect: markers must be ids in 0..{MAX_MARKERS - 1}, got {markers!r}")
        if not 0.0 < float(threshold) < 1.0 or not 0.001 <= float(hop_s) <= 0.05:
            raise ConfigError("dsp.marker_detect: threshold must be in (0, 1) and hop_s in [0.001, 0.05]")
        self.ids = ids
        self.threshold = float(threshold)
        self.hop_s = float(hop_s)

    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        spec = inputs["in"]
        if spec.dtype != np.float32 or spec.channels != 1:
            raise ConfigError(f"{self.name}: needs float32 mono audio, got {spec.dtype} x {spec.channels}")
        if float(spec.rate) < 5600:
            raise ConfigError(f"{self.name}: needs a rate >= 5600 Hz (markers reach 2600 Hz), got {float(spec.rate)}")
        return {"out": spec}

    def start(self, ctx: Context) -> None:
        self.rate = float(ctx.input_spec("in").rate)
        self.grid = SpecGrid.for_rate(self.rate, self.hop_s)
        masks = [marker_mask(i, self.grid).astype(np.float64) for i in self.ids]
        self.T = masks[0].shape[1]
        self.F = masks[0].shape[0]
        # W[(m, tau), f] = mask_m[f, tau]
        self.W = np.concatenate([m.T for m in masks], axis=0)
        self.win = np.hanning(self.grid.n_fft + 2)[1:-1]
        self.band = self.grid.band_bins()
        self.L = marker_length(self.rate)
        self.found: list[tuple[int, float]] = []  # (reference start, stream sample)
        self._reset_state(None)

    def _reset_state(self, origin: int | None) -> None:
        self.origin = origin  # stream index of frame 0
        self.buf = np.zeros(0, dtype=np.float64)
        self.buf_start = origin or 0  # stream index of buf[0]
        self.next_frame = 0
        self.acc = np.zeros((len(self.ids), self.T))  # acc[:, c]: start frame next_frame - T + c
        self.cand: list[tuple[float, int] | None] = [None] * len(self.ids)

    def work(self, x: np.ndarray, ctx: Context) -> np.ndarray:
        if self.origin is None:
            self._reset_state(ctx.position)
        self.buf = np.concatenate([self.buf, x[:, 0].astype(np.float64)])
        n_fft, hop = self.grid.n_fft, self.grid.hop
        while True:
            a = self.origin + self.next_frame * hop - self.buf_start
            if a + n_fft > self.buf.size:
                break
            self._frame(self.buf[a : a + n_fft], ctx)
        keep_from = self.origin + (self.next_frame - 2 * self.T) * hop - 4 * hop  # audio for refining pending candidates
        drop = keep_from - self.buf_start
        if drop > 0:
            self.buf = self.buf[drop:]
            self.buf_start += drop
        return x

    def _frame(self, seg: np.ndarray, ctx: Context) -> None:
        spec = np.fft.rfft(seg * self.win)[self.band]
        p = spec.real**2 + spec.imag**2
        total = float(p.sum())
        p = p / total if total > 1e-12 * self.grid.n_fft**2 else np.zeros_like(p)
        contrib = (self.W @ p).reshape(len(self.ids), self.T)
        self.acc = np.roll(self.acc, -1, axis=1)
        self.acc[:, -1] = 0.0
        self.acc += contrib[:, ::-1]
        f = self.next_frame
        self.next_frame += 1
        s = f - self.T + 1  # the start whose score is now complete
        if s < 0:
            return
        scores = self.acc[:, 0] / self.T
        for m in range(len(self.ids)):
            sc = float(scores[m])
            c = self.cand[m]
            if sc >= self.threshold and (c is None or sc > c[0]):
                self.cand[m] = c = (sc, s)
            if c is not None and s - c[1] > self.T // 2:
                self._confirm(m, c, ctx)
                self.cand[m] = None

    def _confirm(self, m: int, c: tuple[float, int], ctx: Context) -> None:
        hop = self.grid.hop
        coarse = self.origin + c[1] * hop - self.buf_start
        fine = refine(self.buf, coarse, self.ids[m], self.rate, 2 * hop)
        if fine is None:
            return
        sample = self.buf_start + fine.position
        mid = self.ids[m]
        sro = None
        if mid in self.ref_starts and self.ref_rate:
            self.found.append((self.ref_starts[mid], sample))
            if len({k for k, _ in self.found}) >= 2:
                k, j = np.array(self.found).T
                ratio = float(np.polyfit(k, j, 1)[0])
                sro = round((ratio * self.ref_rate / self.rate - 1.0) * 1e6, 3)
        payload = MarkerFound(mid, round(float(sample), 3), round(c[0], 4), round(fine.quality, 4), round(fine.freq_offset_hz, 3), sro)
        lo = int(np.floor(sample))
        ctx.emit(MARKER_FOUND, payload, span=(lo, lo + self.L))

    def reset(self, cause: Gap | None = None) -> None:
        self._reset_state(None)

    def flush(self, ctx: Context) -> np.ndarray | None:
        for m, c in enumerate(self.cand):
            if c is not None:
                self._confirm(m, c, ctx)
                self.cand[m] = None
        return None
