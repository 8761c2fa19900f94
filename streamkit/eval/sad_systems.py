"""Registry of speech activity detectors for offline scoring, with one interface.

Every system turns a whole signal (float32, mono, 8 kHz) into per-frame soft scores::

    score_file(x) -> (scores float32 (frames,), hop, win)

frame ``j`` covering samples ``[j*hop, j*hop + win)`` (the convention of
:func:`streamkit.eval.sad.frames_to_samples`); speech is ``score > threshold``. Scores lie in
[0, 1] so that one threshold sweep (:data:`streamkit.eval.sad.DEFAULT_THRESHOLDS`) fits all.

Systems:

* ``stat``: the statistical SAD (:func:`streamkit.dsp.stat_sad.stat_sad_scores`), hop 256, win 512,
  default threshold the block's (the tuned dev-EER threshold).
* ``stat-c``: the same on the C kernel (``native/stat_sad.c``), when the native library is built.
* ``energy``: the energy-VAD baseline (:mod:`streamkit.dsp.energy_vad`) as a soft score. Per 20 ms
  frame (160 samples, no overlap): ``snr_db = e_db - floor`` with the block's noise floor (minimum
  of the frame energies over the last 3 s, causal) and its absolute gate (frames under -70 dBFS
  score 0); the score is ``clip(snr_db / 30 dB, 0, 1)``, then a causal maximum over the last 15
  frames (the block's 300 ms hangover). The block's default start threshold (10 dB) is score 1/3,
  the default threshold here. Its ``min_speech_ms`` confirmation and start/stop hysteresis are not
  modelled (they need a decision, not a score).
* ``webrtcvad0`` .. ``webrtcvad3``: Google's WebRTC VAD (PyPI ``webrtcvad-wheels``, MIT wrapper
  around BSD-3 WebRTC code) at aggressiveness 0..3, 30 ms frames (240 samples) at 8 kHz; it gives
  binary decisions, so score = decision (0/1) and the ROC has a single point. Present only when the
  package is importable.
* ``silero``: silero-vad (PyPI ``silero-vad``, MIT; the JIT model shipped inside the package, no
  download) at 8 kHz, 256-sample frames, one torch thread, raw probabilities (threshold 0.5, its
  default). Present only when the package is importable.
* ``dnn``: the CNN-GRU SAD (:func:`streamkit.models.sad_dnn.dnn_scores`, the shipped weights): 10 ms
  frames (hop 80, win 200), scores after the 25-frame vote so that ``score > threshold`` is the
  block's decision; default threshold the weights' dev-EER threshold.

:func:`load_audio` reads any WAV/FLAC with soundfile, averages channels, and resamples to 8 kHz
with soxr (HQ); NaN/inf samples raise, naming the file.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from streamkit.core.errors import StreamkitError
from streamkit.models import SAD_DNN_WEIGHTS

RATE = 8000

ScoreFn = Callable[[np.ndarray], tuple[np.ndarray, int, int]]


class SystemUnavailable(StreamkitError):
    """A SAD system that is known but cannot run here (not implemented yet, package missing)."""


class AudioError(StreamkitError):
    """An audio file that cannot be scored (unreadable, NaN, empty)."""


@dataclass(frozen=True)
class SadSystem:
    """A named SAD: ``score_file(x float32 mono 8 kHz) -> (scores, hop, win)`` and its default threshold."""

    name: str
    score_file: ScoreFn
    threshold: float
    description: str


@dataclass
class LoadedAudio:
    x: np.ndarray  # float32 mono at RATE
    rate_in: int
    channels_in: int
    notes: list[str]


def load_audio(path: str | Path) -> LoadedAudio:
    """Read ``path`` as float32 mono at 8 kHz: channels averaged, any rate resampled (soxr HQ).

    Raises:
        AudioError: unreadable file, or NaN/inf samples (named with the file).
    """
    import soundfile as sf

    p = Path(path)
    try:
        data, rate = sf.read(str(p), dtype="float32", always_2d=True)
    except Exception as exc:  # soundfile raises its own LibsndfileError / RuntimeError
        raise AudioError(f"{p}: cannot read audio: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    notes: list[str] = []
    if not np.isfinite(data).all():
        raise AudioError(f"{p}: audio contains NaN or inf samples ({int(np.count_nonzero(~np.isfinite(data)))} of {data.size})")
    channels = int(data.shape[1])
    if channels > 1:
        x = data.mean(axis=1, dtype=np.float64).astype(np.float32)
        notes.append(f"{channels} channels averaged to mono")
    else:
        x = data[:, 0]
    if rate != RATE:
        import soxr

        x = soxr.resample(x, rate, RATE, quality="HQ").astype(np.float32, copy=False)
        notes.append(f"resampled {rate} Hz -> {RATE} Hz")
    return LoadedAudio(np.ascontiguousarray(x, dtype=np.float32), int(rate), channels, notes)


# --------------------------------------------------------------------------------------------
# systems
# --------------------------------------------------------------------------------------------


#: the ``stat`` systems score corpora with the start-up the published ``streamkit eval sad``
#: figures were measured with: no re-scoring of the warm-up frames (it changes only the first
#: 0.77 s of each file; ``streamkit sad`` on a file runs the block, which re-scores them)
EVAL_STAT_PARAMS: dict[str, Any] = {"warmup_rescore": False}


def _stat(x: np.ndarray) -> tuple[np.ndarray, int, int]:
    from streamkit.dsp.stat_sad import stat_sad_scores

    return stat_sad_scores(x, **EVAL_STAT_PARAMS)


def _stat_c(x: np.ndarray) -> tuple[np.ndarray, int, int]:
    from streamkit.dsp.stat_sad import stat_sad_scores

    return stat_sad_scores(x, backend="c", **EVAL_STAT_PARAMS)


def _dnn(x: np.ndarray) -> tuple[np.ndarray, int, int]:
    from streamkit.models.sad_dnn import dnn_scores

    return dnn_scores(x)


_DNN_WEIGHTS = SAD_DNN_WEIGHTS


def _dnn_threshold() -> float | None:
    """The shipped DNN SAD's default threshold, or None when its weights are missing.

    Read from the model card written next to the weights (``sad_dnn.json``), so that listing the
    systems does not import torch; without a card, from the weight file itself.
    """
    if not _DNN_WEIGHTS.is_file():
        return None
    try:
        return float(json.loads(_DNN_WEIGHTS.with_suffix(".json").read_text(encoding="utf-8"))["threshold"])
    except (OSError, ValueError, KeyError, TypeError):
        from streamkit.models.sad_dnn import default_threshold

        return float(default_threshold())


def _stat_threshold() -> float:
    from streamkit.dsp.stat_sad import DECISION_DEFAULTS

    return float(DECISION_DEFAULTS["threshold"])


def _have_native_stat_sad() -> bool:
    try:
        from streamkit.native import stat_sad_available
    except ImportError:
        return False
    return bool(stat_sad_available())


ENERGY_FRAME = 160  # 20 ms at 8 kHz (EnergyVAD frame_ms default)
ENERGY_WINDOW = 150  # 3 s noise-floor window in frames (noise_window_s default)
ENERGY_HANGOVER = 15  # 300 ms hangover in frames (hangover_ms default)
ENERGY_MIN_DBFS = -70.0  # min_level_dbfs default
ENERGY_SCALE_DB = 30.0  # SNR (dB) that maps to score 1
ENERGY_START_DB = 10.0  # EnergyVAD start_db default


def energy_scores(x: np.ndarray) -> tuple[np.ndarray, int, int]:
    """Soft score of the energy-VAD baseline: ``clip(snr_db / 30, 0, 1)``, gated, with hangover (module doc)."""
    a = np.asarray(x, dtype=np.float64).reshape(-1)
    k = len(a) // ENERGY_FRAME
    if k == 0:
        return np.zeros(0, np.float32), ENERGY_FRAME, ENERGY_FRAME
    power = np.square(a[: k * ENERGY_FRAME]).reshape(k, ENERGY_FRAME).mean(axis=1)
    e_db = 10.0 * np.log10(np.maximum(power, 1e-20))
    w = ENERGY_WINDOW
    floor = sliding_window_view(np.concatenate([np.full(w - 1, np.inf), e_db]), w).min(axis=1)
    snr = e_db - floor
    s = np.clip(snr / ENERGY_SCALE_DB, 0.0, 1.0)
    s[e_db < ENERGY_MIN_DBFS] = 0.0
    h = ENERGY_HANGOVER
    s = sliding_window_view(np.concatenate([np.zeros(h - 1), s]), h).max(axis=1)
    return s.astype(np.float32), ENERGY_FRAME, ENERGY_FRAME


WEBRTC_FRAME = 240  # 30 ms at 8 kHz


def _webrtc(mode: int) -> ScoreFn:
    def score(x: np.ndarray) -> tuple[np.ndarray, int, int]:
        import webrtcvad

        vad = webrtcvad.Vad(mode)
        a = np.asarray(x, dtype=np.float64).reshape(-1)
        k = len(a) // WEBRTC_FRAME
        pcm = (np.clip(a[: k * WEBRTC_FRAME], -1.0, 32767 / 32768) * 32768.0).round().astype("<i2")
        buf = pcm.tobytes()
        nb = 2 * WEBRTC_FRAME
        out = np.fromiter((vad.is_speech(buf[i * nb : (i + 1) * nb], RATE) for i in range(k)), dtype=np.float32, count=k)
        return out, WEBRTC_FRAME, WEBRTC_FRAME

    return score


SILERO_FRAME = 256  # silero-vad v5+ window at 8 kHz (32 ms); each call also sees 32 samples of context


def silero_scores(x: np.ndarray, threads: int = 1) -> tuple[np.ndarray, int, int]:
    """Speech probabilities of silero-vad (the JIT model its PyPI package ships) per 256-sample frame.

    The model is run frame by frame with its recurrent state carried (``audio_forward``), on
    ``threads`` torch threads (restored afterwards), under ``torch.inference_mode``. Raw
    probabilities are returned: silero's own post-processing (``get_speech_timestamps``: hysteresis,
    minimum durations, padding) is not applied, so the ROC sweep sees the model itself.
    """
    import torch

    model = _silero_model()
    a = np.asarray(x, dtype=np.float32).reshape(-1)
    k = len(a) // SILERO_FRAME
    if k == 0:
        return np.zeros(0, np.float32), SILERO_FRAME, SILERO_FRAME
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            model.reset_states()
            p = model.audio_forward(torch.from_numpy(a[: k * SILERO_FRAME].copy()), RATE)
    finally:
        torch.set_num_threads(old)
    return p.numpy().reshape(-1)[:k].astype(np.float32), SILERO_FRAME, SILERO_FRAME


_SILERO: list[Any] = []


def _silero_model() -> Any:
    if not _SILERO:
        import warnings

        from silero_vad import load_silero_vad

        with warnings.catch_warnings():  # its importlib.resources.path / torch.jit.load deprecations
            warnings.simplefilter("ignore", DeprecationWarning)
            _SILERO.append(load_silero_vad(onnx=False))
    return _SILERO[0]


def _have_silero() -> bool:
    import importlib.util

    return importlib.util.find_spec("silero_vad") is not None


def _have_webrtcvad() -> bool:
    try:
        import webrtcvad  # noqa: F401
    except ImportError:
        return False
    return True


def _build() -> dict[str, SadSystem]:
    systems = {
        "stat": SadSystem("stat", _stat, _stat_threshold(), "statistical SAD (multi-stage Wiener + minimum statistics), numba, hop 256 / win 512"),
        "energy": SadSystem(
            "energy",
            energy_scores,
            ENERGY_START_DB / ENERGY_SCALE_DB,
            "energy VAD baseline: clip(SNR over 3 s min floor / 30 dB, 0, 1), 300 ms hangover, 20 ms frames",
        ),  # fmt: skip
    }
    if _have_native_stat_sad():
        systems["stat-c"] = SadSystem("stat-c", _stat_c, _stat_threshold(), "the same statistical SAD on its C kernel (native/stat_sad.c)")
    dnn_thr = _dnn_threshold()
    if dnn_thr is not None:
        systems["dnn"] = SadSystem(
            "dnn", _dnn, dnn_thr, "CNN-GRU SAD (models.sad_dnn, shipped weights), 10 ms frames, 25-frame vote, numba streaming engine"
        )
    if _have_webrtcvad():
        for m in range(4):
            systems[f"webrtcvad{m}"] = SadSystem(f"webrtcvad{m}", _webrtc(m), 0.5, f"WebRTC VAD aggressiveness {m}, 30 ms frames, binary")
    if _have_silero():
        systems["silero"] = SadSystem(
            "silero", silero_scores, 0.5, "silero-vad (PyPI silero-vad, shipped JIT model), 8 kHz, 32 ms frames, one torch thread"
        )
    return systems


SYSTEMS: dict[str, SadSystem] = _build()

_UNAVAILABLE = {
    "dnn": "its weights are missing (streamkit/models/weights/sad_dnn.pt; train them with `streamkit train sad-dnn`)",
    "silero": "it needs the silero-vad package: pip install silero-vad (or streamkit[sad])",
}


def available() -> list[str]:
    return list(SYSTEMS)


def get_system(name: str) -> SadSystem:
    """The system called ``name``; :class:`SystemUnavailable` with the reason for a known missing one."""
    if name in SYSTEMS:
        return SYSTEMS[name]
    if name in _UNAVAILABLE:
        raise SystemUnavailable(f"SAD system {name!r} is not available: {_UNAVAILABLE[name]}")
    if name == "webrtcvad" or name.startswith("webrtcvad"):
        if not _have_webrtcvad():
            raise SystemUnavailable(f"SAD system {name!r} needs the webrtcvad package: pip install webrtcvad-wheels")
        raise SystemUnavailable(f"SAD system {name!r}: pick an aggressiveness, one of webrtcvad0, webrtcvad1, webrtcvad2, webrtcvad3")
    raise SystemUnavailable(f"unknown SAD system {name!r}; known: {', '.join([*SYSTEMS, *_UNAVAILABLE])}")


@dataclass
class Scored:
    scores: np.ndarray
    hop: int
    win: int
    n_samples: int
    seconds: float  # process time spent in score_file


def score_signal(system: SadSystem, x: np.ndarray) -> Scored:
    """Run ``system`` on ``x`` (float32 mono 8 kHz), timing it with the process clock."""
    t0 = time.process_time()
    scores, hop, win = system.score_file(x)
    dt = time.process_time() - t0
    scores = np.asarray(scores, dtype=np.float32)
    if np.isnan(scores).any():
        raise ValueError(f"SAD system {system.name} produced NaN scores")
    return Scored(scores, int(hop), int(win), len(x), dt)


def rt_factor(seconds: float, n_samples: int) -> float:
    """Process time over audio duration (NaN for no audio)."""
    return seconds / (n_samples / RATE) if n_samples else math.nan


def describe() -> dict[str, Any]:
    return {n: {"threshold": s.threshold, "description": s.description} for n, s in SYSTEMS.items()}
