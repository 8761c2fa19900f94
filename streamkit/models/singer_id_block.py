"""Block ``models.singer_id``: who is singing, while the audio flows (``singer.id`` events)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from streamkit.core.block import GapPolicy, SyncBlock, require_audio
from streamkit.core.context import Context
from streamkit.core.errors import ConfigError
from streamkit.core.params import number
from streamkit.core.registry import register
from streamkit.core.tags import Gap
from streamkit.core.types import StreamSpec

SINGER_ID = "singer.id"
RATE = 16000
HOP = 160


class _Window:
    """A growing array with cheap appends at the end and drops at the front: ``view()`` is
    ``buf[lo:hi]``; the live part is moved to the front (and the buffer doubled when needed) only
    when an append does not fit, so the cost per item is amortised O(1)."""

    def __init__(self, tail: tuple[int, ...], size: int = 1 << 12) -> None:
        self._buf = np.zeros((size, *tail))
        self._lo = self._hi = 0

    def __len__(self) -> int:
        return self._hi - self._lo

    def view(self) -> np.ndarray:
        return self._buf[self._lo : self._hi]

    def append(self, v: np.ndarray) -> None:
        n = v.shape[0]
        if self._hi + n > self._buf.shape[0]:
            live = len(self)
            size = self._buf.shape[0]
            while live + n > size // 2:
                size *= 2
            buf = np.zeros((size, *self._buf.shape[1:])) if size != self._buf.shape[0] else self._buf
            buf[:live] = self._buf[self._lo : self._hi]
            self._buf, self._lo, self._hi = buf, 0, live
        self._buf[self._hi : self._hi + n] = v
        self._hi += n

    def drop(self, n: int) -> None:
        self._lo = min(self._hi, self._lo + max(n, 0))


@dataclass(frozen=True)
class SingerId:
    """Payload of ``singer.id``: the singer (or ``unknown``), the cosine score, the best enrolled
    name whatever the threshold, the motifs heard (interval codes), the seconds of the window
    (from the stream's start) and its voiced seconds."""

    name: str
    confidence: float
    best: str
    motifs: tuple[tuple[int, ...], ...]
    start_s: float
    end_s: float
    voiced_s: float


@register("models.singer_id")
class SingerIdBlock(SyncBlock):
    """Singer identification on a stream: audio passes through, ``singer.id`` events come out.

    Ports:
        in / out: float32 mono audio at 16000 Hz, passed through unchanged.
    Parameters:
        gallery: the gallery file (``streamkit singers enroll``); required.
        weights: the embedding: a singer net (``.pt``, ``streamkit train singer-id --model
            crnn|blstm``; default in motif mode: the shipped CRNN on MFCC) or a pooled-statistics
            transform (``.npz``; default in clip mode: the shipped one); the gallery must have been
            enrolled with the same weights.
        every_s: a decision every ``every_s`` seconds of voiced audio (default 5).
        window_s: the decision looks at the last ``window_s`` seconds of audio (default 30):
            its melody is mined for motifs, their clips are embedded and averaged (the voiced
            rows of the whole window when no motif is found yet).
        threshold: open-set threshold (default: the gallery's).
    Events:
        ``singer.id`` (:class:`SingerId`), span = the window's input items.
    Latency:
        The melody's (0.348 s) after the ``every_s``-th voiced second; at the end of the stream
        (or at a gap) a last decision on the remaining voiced audio when it is at least 1 s.
    State:
        The pYIN extractor, the last ``window_s`` of audio and rows. ``on_gap`` RESET: the
        evidence before the gap is decided as at the end of a stream, then dropped.
    Exactness:
        The same events for any chunking (decisions fall on melody rows, not on chunk edges).
    """

    emits: ClassVar[tuple[str, ...]] = (SINGER_ID,)
    on_gap: ClassVar[GapPolicy] = GapPolicy.RESET

    def __init__(self, *, gallery: str, weights: str | None = None, every_s: float = 5.0, window_s: float = 30.0,
                 threshold: float | None = None, name: str | None = None) -> None:  # fmt: skip
        super().__init__(name=name)
        from streamkit.core.errors import ModelError
        from streamkit.dsp.melody import make_extractor
        from streamkit.models.singer_gallery import Gallery
        from streamkit.models.singer_nets import load_embedder

        try:
            self.gallery = Gallery.load(gallery)
            self.embedder = load_embedder(self.gallery.mode, weights)
        except (ValueError, ModelError) as exc:
            raise ConfigError(f"models.singer_id: {exc}") from None
        if not self.gallery.singers:
            raise ConfigError(f"models.singer_id: gallery {gallery} has no singers")
        if self.embedder.dim != self.gallery.dim:
            raise ConfigError(f"models.singer_id: gallery {gallery} holds {self.gallery.dim}-dim embeddings, the embedder makes {self.embedder.dim}")
        try:
            self.gallery.check_embedder(self.embedder.identity)
        except ValueError as exc:
            raise ConfigError(f"models.singer_id: {exc}") from None
        self.every_s = number("every_s", every_s, 0.5, 3600.0)
        self.window_s = number("window_s", window_s, self.every_s, 3600.0)
        self.threshold = None if threshold is None else number("threshold", threshold, -1.0, 1.0)
        self._ex = make_extractor("pyin")
        self._ctx: Context | None = None
        self._clear()

    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        require_audio(self.name, inputs["in"], RATE)
        return {"out": inputs["in"]}

    def algorithmic_latency(self) -> int:
        return 0  # the audio passes through at once; the events come later

    def start(self, ctx: Context) -> None:
        self._ctx = ctx
        self._ex.reset()
        self._clear()

    def _clear(self) -> None:
        self._origin: int | None = None  # input index of row 0 of this segment
        self._abuf = _Window(())  # the window's audio (amortised appends: no copy of the window per chunk)
        self._a0 = 0  # segment sample index of the window's first sample
        self._rbuf = _Window((3,))  # the window's melody rows
        self._r0 = 0  # segment row index of the first row
        self._voiced_since = 0

    def work(self, x: np.ndarray, ctx: Context) -> np.ndarray:
        if self._origin is None:
            self._origin = ctx.position
        v = np.nan_to_num(np.asarray(x[:, 0], dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
        self._abuf.append(v)
        self._rows_in(ctx, self._ex.push(v))
        return x

    def _rows_in(self, ctx: Context, rows: np.ndarray, final: bool = False) -> None:
        every = int(round(self.every_s * 100))
        while rows.shape[0]:
            nv = int(np.count_nonzero(rows[:, 1] > 0.5))
            if self._voiced_since + nv < every:  # the common case: no decision in these rows
                self._rbuf.append(rows)
                self._voiced_since += nv
                break
            cv = np.cumsum(rows[:, 1] > 0.5)
            hit = int(np.searchsorted(cv, every - self._voiced_since))  # first row completing every_s
            self._rbuf.append(rows[: hit + 1])
            self._decide(ctx)
            rows = rows[hit + 1 :]
        if final and self._voiced_since >= 100:
            self._decide(ctx)
        self._trim(self._r0 + len(self._rbuf) - int(round(self.window_s * 100)))

    def _trim(self, lo_row: int) -> None:
        """Forget rows (and their audio) before segment row ``lo_row``."""
        if lo_row <= self._r0:
            return
        self._rbuf.drop(lo_row - self._r0)
        self._r0 = lo_row
        self._abuf.drop(lo_row * HOP - self._a0)
        self._a0 = lo_row * HOP

    def _decide(self, ctx: Context) -> None:
        end_row = self._r0 + len(self._rbuf)
        lo_row = max(self._r0, end_row - int(round(self.window_s * 100)))
        rows = self._rbuf.view()[lo_row - self._r0 :]
        x = self._abuf.view()[lo_row * HOP - self._a0 : end_row * HOP - self._a0]
        e = self.embedder.embed(x, rows)
        self._voiced_since = 0
        if e.vector is None:
            return
        d = self.gallery.score(e.vector, self.threshold)
        origin = self._origin or 0
        lo, hi = origin + lo_row * HOP, origin + end_row * HOP
        ctx.emit(SINGER_ID, SingerId(d.name, round(d.score, 4), d.best, e.motifs, lo / RATE, hi / RATE, round(e.voiced_s, 2)), span=(lo, hi))

    def _finish(self, ctx: Context) -> None:
        if self._origin is not None:
            self._rows_in(ctx, self._ex.finish(), final=True)
        self._ex.reset()
        self._clear()

    def reset(self, cause: Gap | None = None) -> None:
        if self._ctx is not None:
            self._finish(self._ctx)

    def flush(self, ctx: Context) -> np.ndarray | None:
        self._finish(ctx)
        return None

    def stop(self) -> None:
        self._ctx = None

    def apply_params(self, changes: Mapping[str, Any]) -> None:
        bad = set(changes) - {"threshold"}
        if bad:
            raise ConfigError(f"{self.name}: {sorted(bad)} cannot change while running; build a new graph")
        self.threshold = number("threshold", changes["threshold"], -1.0, 1.0)
