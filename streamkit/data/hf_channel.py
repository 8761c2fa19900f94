"""HF SSB channel simulator: clean 8 kHz speech in, KiwiSDR-like received audio out, time-aligned.

Usable offline (:func:`simulate`, for corpus generation) and as a streaming block
(:class:`HFChannel`, registry name ``data.hf_channel``). Both run the same frame engine
(:class:`~streamkit.data.hf_channel_engine.ChannelEngine`, fixed frames of :data:`FRAME` samples on
the absolute sample grid), so the block's output is **bit-identical** to
``simulate(..., apply_rate_offset=False)`` for any chunking.

The code: the parameters in :mod:`streamkit.data.hf_channel_params`, the stages (compressor, SSB
filters, fading, shifts, AGC) in :mod:`streamkit.data.hf_channel_stages`, the frame engine and
:func:`simulate` in :mod:`streamkit.data.hf_channel_engine`, the block here.

Signal chain (everything at 8 kHz; the radio part in complex baseband)::

    clean x ── [TX compressor] ── SSB filter (LSB, 300-2700 Hz) ──┬─ path 1 (-delay/2) × g1[n] ─┐
                                                                  └─ path 2 (+delay/2) × g2[n] ─┴─ × mistune
      + band noise + atmospheric impulses + heterodyne carriers + interferer (own SSB + fading + offset)
      ── RX filter (LSB, 300-2700 Hz) ── Kiwi/CuteSDR AGC ── Re{} ── clip ±1
      ── [sampling-rate offset: resample by (1 + ppm·1e-6), centred]          (offline only)

Conventions (choices, documented):

* **LSB in baseband.** The transmitted baseband signal is the *conjugate* analytic signal of the
  band-limited audio: audio frequency ``f`` sits at baseband ``-f``. The SSB filter is a complex
  FIR, ``h(t) = 2·h_lp(t)·exp(-j2π·1500·t/fs)`` (``h_lp`` a Kaiser-windowed sinc, -6 dB edges
  at 250/2750 Hz, so 300-2700 Hz is passband within 1 dB and < 120 Hz / > 2880 Hz is > 50 dB
  down): this *is* the filter method of an SSB exciter, and ``Re{x * h} = x`` band-passed.
  Demodulation is ``Re{·}`` of the RX-filtered baseband (the same filter with gain 1).
* **Audio-frequency sign.** ``mistune_hz > 0`` raises every received audio frequency by
  ``mistune_hz`` (a voice sounds higher); heterodyne ``freq_hz`` and ``interferer_offset_hz``
  are audio frequencies as heard.
* **Fading (Watterson, ITU-R F.1487).** Two equal-power paths (power 1/2 each, mean total gain 1),
  each tap a complex Gaussian process with a Gaussian Doppler spectrum of standard deviation
  ``doppler_hz / 2`` (F.1487 / CCIR 520 define the "frequency spread" as twice the standard
  deviation of the Doppler power spectrum). Each tap is a sum of ``K = 32`` complex sinusoids with
  Gaussian-distributed frequencies and uniform phases (Monte-Carlo sum-of-sinusoids), evaluated by
  closed formula at absolute grid points every ``M`` samples and linearly interpolated: chunk-
  and frame-independent. Tap correlation ``R(τ) = exp(-2π²σ²τ²)``; the envelope-power
  correlation ``exp(-4π²σ²τ²)`` falls to 1/e at ``τ = 1/(2πσ) = 1/(π·doppler_hz)``.
  The paths sit at ``∓delay_ms/2`` around the reference time (fractional delays built into the
  two SSB FIRs), so the channel's mean delay is zero and labels computed on the clean signal fit.
* **Level and SNR.** ``speech_level_db`` is the *active level* (10·log10 of the mean square, full
  scale ±1) of the band-limited transmitted audio ``Re{x_c * h_tx}`` (after TX compression):
  the mean power of the 20 ms frames whose power exceeds ``L1·10^(-15.9/10)``, where ``L1`` is the
  mean power of frames above ``max - 50 dB`` (a two-step P.56-like rule). ``None`` means "measure
  it from the clean input" (offline); the resolved value is recorded in ``SimResult.params``.
  ``snr_db`` is the **mean** (fading-averaged) speech-to-noise ratio at the receiver, in the
  300-2700 Hz RX passband, in the demodulated audio before the AGC: active speech level over the
  power of the RX-filtered Gaussian noise. (Paths have mean total power 1, so the received mean
  speech level equals the transmitted one; a deep fade lowers the short-term SNR, as on air.)
  Impulse, carrier and interferer levels are also in dB relative to the active speech level.
* **AGC** (:func:`~streamkit.data.hf_channel_stages.agc_kernel`): the CuteSDR algorithm the KiwiSDR uses (agc.cpp): log10 of
  ``max(|I|,|Q|)`` of the RX-filtered baseband, 18 ms sliding peak, an attack averager (rise
  ``attack_ms``, fall 2.5×attack_ms; CuteSDR 2 ms / 5 ms) and a decay averager (rise
  0.3·decay_ms, fall decay_ms; or, with ``hang_ms > 0``, hold for ``hang_ms`` then release with
  50 ms), the larger of the two sets the gain: below the knee a fixed gain, above it
  ``10^(target_db/20)·10^(mag·(slope/100 - 1))``; the signal goes through a 15 ms delay line
  (look-ahead), which this module compensates together with the FIR delays. The knee is
  ``speech_level_db + threshold_db``. So the AGC pumps: a loud marker or speech burst drops the
  gain within milliseconds and the noise floor then recovers with ``decay_ms``.
  Kiwi defaults (kiwiclient/streamkit ``SET agc``): AGC on, hang off, slope 6, decay 1000 ms.
* **Randomness.** Each component draws from its own ``numpy`` Generator seeded by
  ``SeedSequence([seed, component_id(, frame)])``: changing one component's parameters never
  changes another's draws, and noise/impulses are generated per fixed frame of the absolute
  sample grid, so they do not depend on chunking.
* **Sampling-rate offset (offline only).** A KiwiSDR really samples at e.g. 12001.188 Hz while a
  recorder assumes 12000 Hz (+99 ppm; the paper corrected 56 ppm). :func:`simulate` resamples the
  8 kHz result by ``1 + rate_offset_ppm·1e-6`` with libsoxr (HQ) and keeps the *centre* of the
  file aligned (integer shift ``round(n·ε/2)``): the misalignment runs linearly from
  ``+n·ε/2`` samples (output early) at the start to ``-n·ε/2`` (late) at the end, i.e.
  ``|ppm|·1e-6·T/2``: 3.0 ms at 100 ppm on a 60 s file, < 10 ms for ``T < 2e4/|ppm|`` s (200 s at
  100 ppm). Output length == input length. The streaming block leaves this step out: a SyncBlock
  cannot change the item count, and a live graph fed by a real Kiwi carries its real offset.

Speed: ``python -c "from streamkit.data.hf_channel import _bench; print(_bench())"`` (x real time
on 60 s with every component on, best of 5): ~500x on one core (taskset -c 0), ~650x without the
interferer. (Not a ``__main__`` entry point: run as a script, the numba cache would import the
module a second time and register the block twice.)
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from streamkit.core.block import GapPolicy, RateBlock
from streamkit.core.context import Context
from streamkit.core.errors import ConfigError
from streamkit.core.registry import register
from streamkit.core.tags import Gap
from streamkit.core.types import StreamSpec
from streamkit.data.hf_channel_engine import ChannelEngine, SimResult, simulate
from streamkit.data.hf_channel_params import NOMINAL_SPEECH_LEVEL_DB, PROFILES, RATE, AgcParams, ChannelParams
from streamkit.data.hf_channel_stages import FRAME, active_level_db, agc_kernel, compress_kernel

__all__ = [
    "AgcParams",
    "ChannelParams",
    "FRAME",
    "HFChannel",
    "NOMINAL_SPEECH_LEVEL_DB",
    "PROFILES",
    "RATE",
    "SimResult",
    "active_level_db",
    "simulate",
]


# ------------------------------------------------------------------------------------------------
# streaming block
# ------------------------------------------------------------------------------------------------
@register("data.hf_channel")
class HFChannel(RateBlock):
    """HF SSB channel as a streaming block (the offline :func:`simulate` without the clock offset).

    Ports:
        in, out: float32 mono audio at 8000 Hz.
    Parameters:
        params: a :class:`ChannelParams` dict (``ChannelParams.to_dict()``). ``speech_level_db``
            None means the nominal -26 dB (a stream cannot be measured ahead); pass
            ``simulate(...).params`` to reproduce an offline run. ``rate_offset_ppm`` is ignored.
        interferer: optional interfering audio (array, 8 kHz) starting at item 0; not
            JSON-describable, so only for graphs built in Python.
    Output:
        ``out[i] == simulate(x, params, interferer, apply_rate_offset=False).received[i]``
        bit for bit, whatever the chunking (same frame engine, same absolute grid). Formally a
        :class:`RateBlock` with ``ratio = 1`` and ``delay = 0``: item ``i`` out is the channel at
        clean item ``i`` (time-aligned, tags keep their offsets), but it comes out with a lag
        (up to ``FRAME + delay`` ≈ 0.56 s) because the engine works on fixed frames and
        compensates the SSB filters' and the AGC look-ahead's delay; :meth:`flush` drains it, so
        total output == total input.
    Tags:
        Forwarded at the same offsets (ratio 1, delay 0); the runtime holds them until the output
        reaches them.
    Events:
        None.
    Latency:
        ``FRAME - 1 + delay`` items (frame buffering + compensated filter/AGC delay).
    State:
        Fading/noise index, FIR histories, compressor and AGC state, the input/output buffers;
        ``reset()`` restarts the engine from scratch (output after a reset is shorter by the lag
        it held). Gaps are ignored (``on_gap`` CONTINUE: the ionosphere does not reset).
        Non-finite input samples are replaced by 0 before they reach any state (counted in
        ``nonfinite_items``), so a NaN chunk never poisons the filters or the AGC.
    """

    on_gap: ClassVar[GapPolicy] = GapPolicy.CONTINUE

    def __init__(self, *, params: Mapping[str, Any] | None = None, interferer: Any = None, name: str | None = None) -> None:
        super().__init__(name=name)
        try:
            self.channel = ChannelParams.from_dict(params) if params is not None else ChannelParams()
        except TypeError as exc:
            raise ConfigError(f"bad params: {exc}") from None
        self.interferer = None if interferer is None else np.asarray(interferer, dtype=np.float64).reshape(-1)
        if self.interferer is not None and not np.all(np.isfinite(self.interferer)):
            raise ConfigError("interferer contains non-finite samples")
        self.ratio = Fraction(1)
        self.delay = Fraction(0)
        self.nonfinite_items = 0
        self._eng: ChannelEngine | None = None

    def algorithmic_latency(self) -> int:
        return FRAME - 1 + ChannelEngine(self.channel, None).delay

    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        spec = inputs["in"]
        if spec.dtype != np.float32:
            raise ConfigError(f"{self.name}: needs float32 audio, got {spec.dtype}")
        if spec.channels != 1:
            raise ConfigError(f"{self.name}: needs mono audio, got {spec.channels} channels")
        if spec.rate != RATE:
            raise ConfigError(f"{self.name}: needs {RATE} Hz audio, got {spec.rate} (resample first)")
        self.ratio = Fraction(1)
        self.delay = Fraction(0)
        return {"out": spec}

    def start(self, ctx: Context) -> None:
        self._restart()
        # JIT warm-up on scratch state (both kernels; the engine's own state is untouched)
        compress_kernel(np.zeros(4), 1.0, 0.1, 0.1, np.zeros(1))
        e = self._eng
        assert e is not None
        agc_kernel(np.zeros(4, np.complex128), *e.agc_args, e.agc_st.copy(), e.agc_mag.copy(), e.agc_dl.copy(), np.empty(0))

    def _restart(self) -> None:
        self._eng = ChannelEngine(self.channel, self.interferer)
        self._inbuf = np.zeros(FRAME, np.float64)
        self._fill = 0
        self._skip = self._eng.delay  # engine output items still to drop
        self._n_in = 0
        self._n_out = 0

    def _run_frame(self) -> np.ndarray:
        assert self._eng is not None
        a = self._eng.process(self._inbuf.copy())
        self._fill = 0
        if self._skip:
            d = min(self._skip, a.shape[0])
            self._skip -= d
            a = a[d:]
        return a

    def work(self, x: np.ndarray, ctx: Context) -> np.ndarray:
        if self._eng is None:
            self._restart()
        v = np.asarray(x, dtype=np.float64).reshape(-1)
        bad = ~np.isfinite(v)
        if bad.any():
            self.nonfinite_items += int(bad.sum())
            v = np.where(bad, 0.0, v)
        self._n_in += v.shape[0]
        outs: list[np.ndarray] = []
        i = 0
        while i < v.shape[0]:
            take = min(FRAME - self._fill, v.shape[0] - i)
            self._inbuf[self._fill : self._fill + take] = v[i : i + take]
            self._fill += take
            i += take
            if self._fill == FRAME:
                outs.append(self._run_frame())
        y = np.concatenate(outs) if outs else np.zeros(0, np.float32)
        self._n_out += y.shape[0]
        return y.reshape(-1, 1)

    def reset(self, cause: Gap | None = None) -> None:
        if self._eng is not None:
            self._restart()

    def flush(self, ctx: Context) -> np.ndarray | None:
        if self._eng is None:
            return None
        outs: list[np.ndarray] = []
        while self._n_out < self._n_in:
            self._inbuf[self._fill :] = 0.0
            a = self._run_frame()
            a = a[: self._n_in - self._n_out]
            self._n_out += a.shape[0]
            outs.append(a)
        return np.concatenate(outs).reshape(-1, 1).astype(np.float32) if outs else None

    def stop(self) -> None:
        self._eng = None


# ------------------------------------------------------------------------------------------------
def _bench(seconds: float = 60.0, repeats: int = 5) -> dict[str, float]:
    """Time :func:`simulate` on ``seconds`` of speech-like audio with every component on."""
    import time

    rng = np.random.default_rng(1)
    n = int(seconds * RATE)
    x = (rng.standard_normal(n) * 0.1 * (np.sin(np.arange(n) / RATE * 2 * np.pi * 0.3) > 0)).astype(np.float32)
    itf = (rng.standard_normal(n) * 0.05).astype(np.float32)
    p = ChannelParams(profile="disturbed", delay_ms=2.0, doppler_hz=1.0, snr_db=5.0, mistune_hz=23.0, tx_compression_db=10.0,
                      impulse_rate_hz=5.0, impulse_db=6.0, carriers=((1234.0, -10.0),), interferer_db=-6, interferer_offset_hz=1800,
                      rate_offset_ppm=99.0, seed=7)  # fmt: skip
    simulate(x[:FRAME], p, itf[:FRAME])  # JIT / cache load
    best = {"all": 1e9, "no_interferer": 1e9}
    for _ in range(repeats):
        t0 = time.perf_counter()
        simulate(x, p, itf)
        best["all"] = min(best["all"], time.perf_counter() - t0)
        t0 = time.perf_counter()
        simulate(x, p)
        best["no_interferer"] = min(best["no_interferer"], time.perf_counter() - t0)
    return {k: seconds / v for k, v in best.items()}
