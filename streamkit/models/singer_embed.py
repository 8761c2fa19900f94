"""Singer embeddings that need no long training: pooled voice statistics, whitened.

A clip of 16 kHz mono audio becomes a fixed vector:

* its melody (:func:`streamkit.dsp.melody.melody_f0`, pYIN, 10 ms rows) marks the voiced rows;
* per voiced row, 40 log-mel energies (25 ms Hann window centred on the row, 50-8000 Hz, HTK mel)
  minus the row's mean log-mel (so the recording level drops out);
* the raw vector: mean and standard deviation of those 40 over the voiced rows (80), and four pitch
  habits: median pitch and pitch spread (cents / 1200), vibrato depth (cents / 100: RMS of the
  contour minus its 0.25 s moving average) and vibrato rate (Hz / 10: zero crossings of that
  residual);
* the fitted transform (:class:`Whitening`): standardise, rotate so that the within-singer
  scatter of the training clips is white (shrunk toward the identity), centre, length-normalise.
  Cosine similarity of two embeddings then weights each direction by how much singers differ
  along it compared with how much one singer varies.

Two modes (:class:`SingerEmbedder`):

* ``"clip"``: the whole clip pooled (the "x-vector-like" pooled baseline);
* ``"motif"``: the clip's melody is simplified, coded and mined for closed motifs
  (:func:`streamkit.dsp.motifs.motifs_of_contour`); every motif occurrence clip (cut at level
  boundaries) is embedded and the embeddings are averaged. With no motif (short evidence, or
  fewer than 3 phrases) the voiced rows of the whole clip are used and ``motifs`` is empty.

The interface (``embed(x) -> Embedding``, ``dim``) is what a trained network (the CRNN or the
residual BLSTM of the singer-ID paper) would implement to replace it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.dsp.motifs import Clip, motifs_of_contour

RATE = 16000
HOP = 160  #: samples per melody row / log-mel frame
WIN = 400  #: 25 ms
N_FFT = 512
N_MELS = 40
RAW_DIM = 2 * N_MELS + 4
MIN_VOICED = 10  #: voiced rows (0.1 s) a clip needs
MODES = ("clip", "motif")
WEIGHTS = Path(__file__).parent / "weights" / "singer_embed.npz"

_FB: list[np.ndarray] = []


def _fbank() -> np.ndarray:
    if not _FB:
        from streamkit.models.features import mel_filterbank

        _FB.append(mel_filterbank(N_MELS, N_FFT, RATE, 50.0, 8000.0))
    return _FB[0]


def log_mel_rows(x: np.ndarray, n_rows: int) -> np.ndarray:
    """(n_rows, 40) log-mel of the 25 ms window centred on sample ``160 j`` (zeros outside ``x``),
    each row minus its own mean."""
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    pad = np.concatenate([np.zeros(WIN // 2), x, np.zeros(WIN + HOP * max(0, n_rows - len(x) // HOP))])
    fr = np.lib.stride_tricks.sliding_window_view(pad, WIN)[: n_rows * HOP : HOP][:n_rows]
    spec = np.abs(np.fft.rfft(fr * np.hanning(WIN + 1)[:WIN], N_FFT)) ** 2
    lm = np.log(np.maximum(spec @ _fbank(), 1e-10))
    return lm - lm.mean(axis=1, keepdims=True)


def _pitch_habits(cents: np.ndarray, voiced: np.ndarray) -> np.ndarray:
    c = cents[voiced]
    med = float(np.median(c))
    spread = float(np.percentile(c, 90) - np.percentile(c, 10))
    res: list[np.ndarray] = []
    edges = np.flatnonzero(np.diff(np.concatenate([[0], voiced.astype(np.int8), [0]])))
    for a, b in zip(edges[::2], edges[1::2], strict=True):
        if b - a >= 30:
            seg = cents[a:b]
            k = np.ones(25) / 25
            res.append((seg - np.convolve(np.pad(seg, 12, mode="edge"), k, mode="valid"))[12:-12])
    if res and sum(len(r) for r in res) > 20:
        r = np.concatenate(res)
        depth = float(np.sqrt(np.mean(r**2)))
        crossings = sum(int(np.count_nonzero(np.diff(np.signbit(q)))) for q in res)
        rate = crossings / (2 * sum(len(q) for q in res) * 0.01)
    else:
        depth, rate = 0.0, 0.0
    return np.array([med / 1200.0, spread / 1200.0, depth / 100.0, rate / 10.0])


def raw_vector(x: np.ndarray, rows: np.ndarray, lo: int = 0, hi: int | None = None) -> np.ndarray | None:
    """The raw 84-dim statistics of rows ``[lo, hi)`` of ``x`` (melody ``rows`` of all of ``x``);
    None when fewer than :data:`MIN_VOICED` rows are voiced."""
    hi = rows.shape[0] if hi is None else min(hi, rows.shape[0])
    v = rows[lo:hi, 1] > 0.5
    if int(np.count_nonzero(v)) < MIN_VOICED:
        return None
    seg = x[lo * HOP : hi * HOP + WIN]
    lm = log_mel_rows(seg, hi - lo)[v]
    return np.concatenate([lm.mean(axis=0), lm.std(axis=0), _pitch_habits(rows[lo:hi, 0], v)])


@dataclass(frozen=True)
class Embedding:
    """One clip's embedding: the vector (None: no voiced evidence), the motifs heard (their interval
    codes) and the clips used (seconds from the clip's start)."""

    vector: np.ndarray | None
    motifs: tuple[tuple[int, ...], ...]
    clips: tuple[tuple[float, float], ...]
    voiced_s: float


class Whitening:
    """Standardise, within-class whiten (shrunk), centre, length-normalise: fitted on labelled raw vectors."""

    def __init__(self, mu: np.ndarray, sd: np.ndarray, w: np.ndarray, centre: np.ndarray, meta: dict[str, Any] | None = None) -> None:
        self.mu, self.sd, self.w, self.centre = mu, sd, w, centre
        self.meta = dict(meta or {})

    @property
    def dim(self) -> int:
        return int(self.w.shape[1])

    @classmethod
    def identity(cls) -> Whitening:
        return cls(np.zeros(RAW_DIM), np.ones(RAW_DIM), np.eye(RAW_DIM), np.zeros(RAW_DIM))

    @classmethod
    def fit(cls, raw: np.ndarray, labels: np.ndarray, *, shrink: float = 0.1) -> Whitening:
        raw = np.asarray(raw, dtype=np.float64)
        labels = np.asarray(labels)
        classes = np.unique(labels)
        if len(classes) < 2 or raw.shape[0] < 2 * len(classes):
            raise ValueError(f"whitening needs >= 2 singers and >= 2 clips each, got {len(classes)} singers, {raw.shape[0]} clips")
        mu = raw.mean(axis=0)
        sd = raw.std(axis=0) + 1e-6
        z = (raw - mu) / sd
        sw = np.zeros((z.shape[1], z.shape[1]))
        for c in classes:
            zc = z[labels == c]
            zc = zc - zc.mean(axis=0)
            sw += zc.T @ zc
        sw /= z.shape[0]
        sw = (1 - shrink) * sw + shrink * np.eye(sw.shape[0]) * np.trace(sw) / sw.shape[0]
        val, vec = np.linalg.eigh(sw)
        w = vec / np.sqrt(np.maximum(val, 1e-9))
        centre = (z @ w).mean(axis=0)
        return cls(mu, sd, w, centre, {"shrink": shrink, "singers": len(classes), "clips": int(raw.shape[0])})

    def __call__(self, raw: np.ndarray) -> np.ndarray:
        e = ((np.asarray(raw, dtype=np.float64) - self.mu) / self.sd) @ self.w - self.centre
        return e / (np.linalg.norm(e, axis=-1, keepdims=True) + 1e-12)

    def save(self, path: str | Path) -> None:
        np.savez(Path(path), mu=self.mu, sd=self.sd, w=self.w, centre=self.centre, meta=np.array(json.dumps(self.meta)))

    @classmethod
    def load(cls, path: str | Path) -> Whitening:
        p = Path(path)
        try:
            with np.load(p, allow_pickle=False) as z:
                t = cls(z["mu"], z["sd"], z["w"], z["centre"], json.loads(str(z["meta"])))
        except (OSError, KeyError, ValueError) as exc:
            raise ValueError(f"{p}: not a singer embedding transform ({exc})") from None
        if t.mu.shape != (RAW_DIM,) or t.w.shape[0] != RAW_DIM:
            raise ValueError(f"{p}: transform for {t.mu.shape[0]} raw dims, this embedder makes {RAW_DIM}")
        return t


class SingerEmbedder:
    """``embed(x)`` -> :class:`Embedding` of 16 kHz mono audio, in mode ``clip`` or ``motif``."""

    def __init__(self, mode: str = "motif", transform: Whitening | str | Path | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode = mode
        if transform is None:
            transform = WEIGHTS if WEIGHTS.exists() else None
        self.transform = Whitening.identity() if transform is None else transform if isinstance(transform, Whitening) else Whitening.load(transform)

    @property
    def dim(self) -> int:
        return self.transform.dim

    def embed(self, x: np.ndarray, rows: np.ndarray | None = None) -> Embedding:
        """Embed ``x`` (its melody ``rows`` are computed when not given)."""
        x = np.nan_to_num(np.asarray(x, dtype=np.float64).reshape(-1))
        if rows is None:
            from streamkit.dsp.melody import melody_f0

            rows = melody_f0(x)
        voiced_s = float(np.count_nonzero(rows[:, 1] > 0.5)) * 0.01
        if self.mode == "motif":
            motifs, clips, _ = motifs_of_contour(rows)
            raws = [r for r in (raw_vector(x, rows, *_rows_of(c)) for c in clips) if r is not None]
            if raws:
                e = self.transform(np.array(raws)).mean(axis=0)
                return Embedding(e / (np.linalg.norm(e) + 1e-12), tuple(m.pattern for m in motifs),
                                 tuple((c.start_s, c.end_s) for c in clips), voiced_s)  # fmt: skip
        r = raw_vector(x, rows)
        return Embedding(None if r is None else self.transform(r), (), (), voiced_s)

    def embed_clips(self, x: np.ndarray, rows: np.ndarray, clips: list[Clip]) -> list[np.ndarray]:
        """One embedding per clip (the clips with too little voicing are left out)."""
        raws = [r for r in (raw_vector(x, rows, *_rows_of(c)) for c in clips) if r is not None]
        return list(self.transform(np.array(raws))) if raws else []


def _rows_of(c: Clip) -> tuple[int, int]:
    return int(round(c.start_s / 0.01)), int(round(c.end_s / 0.01))


def read_audio(path: str | Path) -> np.ndarray:
    """A sound file as 16 kHz mono float64 (channels averaged, resampled with soxr);
    ValueError naming the file when it cannot be read or holds no samples."""
    import soundfile as sf

    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{p}: no such audio file")
    try:
        x, rate = sf.read(str(p), dtype="float64", always_2d=True)
    except (RuntimeError, sf.LibsndfileError, TypeError) as exc:
        raise ValueError(f"{p}: cannot read audio ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
    if x.shape[0] == 0:
        raise ValueError(f"{p}: no samples")
    y = x.mean(axis=1)
    if rate != RATE:
        import soxr

        y = soxr.resample(y, rate, RATE)
    return np.asarray(y, dtype=np.float64)
