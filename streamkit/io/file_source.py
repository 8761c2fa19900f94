"""FileSource: read an audio file (WAV, FLAC, OGG/Vorbis, anything libsndfile opens) as a stream.

The file is decoded with :mod:`soundfile` (libsndfile) into float32 items at the file's own rate,
taken exactly from the header (an integer for every format libsndfile writes, so ``11025`` stays
``Fraction(11025)``). Resample downstream if the graph needs another rate.

It is a non-live source: in ``FreeRun`` the runner reads it as fast as the graph consumes, in
``Paced``/``RealTime`` at (a multiple of) real time; a full graph simply pauses it.

Time: item 0 gets ``TimeAnchor(source="file")``. Files carry no reliable capture time, so the
anchor assumes the file was written when the recording *ended*: ``utc(item 0) = mtime - frames /
rate`` (+ ``start_s``). That is right for files written by a recorder and closed at the end
(``WavSink``, kiwirecorder, arecord) and is marked with an uncertainty equal to the file's duration
so nobody mistakes it for a device or GPS time. Pass ``utc_ns`` to set the time of item 0 yourself.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from streamkit.core import events as E
from streamkit.core.block import Source, SourceRead
from streamkit.core.errors import ConfigError, SourceError
from streamkit.core.registry import register
from streamkit.core.tags import TIME, TimeAnchor
from streamkit.core.types import StreamSpec, Tag, as_fraction
from streamkit.io.wav_header import wav_truncation

if TYPE_CHECKING:
    import soundfile

    from streamkit.core.context import Context

__all__ = ["FileSource"]

log = logging.getLogger("streamkit.io.file")

#: frames per soundfile.read call; a failure loses at most this much of what was decoded
_PIECE = 8192


def _one_line(exc: BaseException) -> str:
    msg = str(exc).strip().replace("\n", " ") or type(exc).__name__
    return msg


@register("io.file")
class FileSource(Source):
    """Stream the items of an audio file.

    Ports:
        out: float32, the file's rate (exact, from the header), the file's channel count.
    Parameters:
        path: the file (WAV, FLAC, OGG/Vorbis, AIFF, ... whatever libsndfile reads).
        start_s: skip this many seconds at the start (>= 0, less than the file's length).
        duration_s: play at most this many seconds from ``start_s`` (None: to the end).
        loop: when the segment ends, start it again (an endless stream; bound it with the
            runner's ``duration``). The index just continues; no gap or anchor is added at the wrap.
        utc_ns: UTC of the first item delivered; None derives it from the file's mtime (see the
            module docstring).
    Tags:
        ``sk:time`` TimeAnchor(source="file") at item 0. No gaps (a file loses nothing).
    Events:
        ``source.state`` ``warning`` once, with the first items, for a WAV file shorter than its
        header says (cut short): how much is missing; what is there is processed (also logged).
        A read failure is raised as :class:`SourceError` *after* the items decoded
        before it were delivered; the runtime turns it into ``block.error`` + ``stream.end``.
    Latency:
        0 items.
    State:
        The open file and its position; ``start()`` (re)opens it at ``start_s``; ``stop()`` closes it.

    Raises:
        ConfigError: from ``negotiate()`` if the file is missing or not a readable audio file, or if
            ``start_s`` lies beyond its end; one line with the path and libsndfile's reason.
    """

    emits = (E.SOURCE_STATE,)

    def __init__(
        self,
        *,
        path: str | os.PathLike[str],
        start_s: float = 0.0,
        duration_s: float | None = None,
        loop: bool = False,
        utc_ns: int | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self.path = os.fspath(path)
        if not self.path:
            raise ConfigError("path must not be empty")
        self.start_s = float(start_s)
        if not math.isfinite(self.start_s) or self.start_s < 0:
            raise ConfigError(f"start_s must be >= 0, got {start_s!r}")
        self.duration_s = None if duration_s is None else float(duration_s)
        if self.duration_s is not None and (not math.isfinite(self.duration_s) or self.duration_s <= 0):
            raise ConfigError(f"duration_s must be > 0 (or None for the whole file), got {duration_s!r}")
        self.loop = bool(loop)
        self.utc_ns = None if utc_ns is None else int(utc_ns)
        self._sf: soundfile.SoundFile | None = None
        self._info: dict[str, Any] | None = None
        self._pending_error: SourceError | None = None

    # -- lifecycle --------------------------------------------------------------------------------
    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        info = self._probe()
        return {"out": StreamSpec(as_fraction(info["rate"]), int(info["channels"]), np.dtype(np.float32))}

    def start(self, ctx: Context | None) -> None:
        info = self._info or self._probe()
        self.stop()
        self._sf = self._open()
        rate = int(info["rate"])
        frames = int(info["frames"])
        self._seg_start = int(round(self.start_s * rate))
        seg_end = frames if frames > 0 else None
        if self.duration_s is not None:
            want = int(round(self.duration_s * rate))
            seg_end = self._seg_start + want if seg_end is None else min(seg_end, self._seg_start + want)
        self._seg_end = seg_end  # None: unknown length (not seekable); read to EOF
        self._seek(self._seg_start)
        self._file_pos = self._seg_start
        self._out = 0
        self._pending_error = None
        self._eof = False
        self._truncation_told = False
        if self.utc_ns is not None:
            self._utc0 = self.utc_ns
        else:
            mtime_ns = int(info["mtime_ns"])
            self._utc0 = mtime_ns - int(round(frames * 1e9 / rate)) + int(round(self._seg_start * 1e9 / rate))
        self._utc_unc = int(round(max(frames, 0) * 1e9 / rate)) if self.utc_ns is None else 0

    def read(self, max_items: int, ctx: Context | None) -> SourceRead | None:
        if self._pending_error is not None:
            err, self._pending_error = self._pending_error, None
            self._eof = True
            raise err
        if self._sf is None:
            if self._eof:
                return None
            self.start(ctx)
        if self._eof:
            return None
        assert self._sf is not None
        want = max(0, int(max_items))
        if not self.loop and self._seg_end is not None:
            left = self._seg_end - self._file_pos
            if left <= 0 and want > 0:
                self._eof = True
                return None
            want = min(want, left)  # never allocate past the end of the segment
        ch = int(self._info["channels"]) if self._info else 1
        out = np.empty((want, ch), dtype=np.float32)
        got = 0
        while got < want:
            seg_left = None if self._seg_end is None else self._seg_end - self._file_pos
            if seg_left is not None and seg_left <= 0:
                if self.loop and self._seg_end is not None and self._seg_end > self._seg_start:
                    self._seek(self._seg_start)
                    self._file_pos = self._seg_start
                    continue
                self._eof = True
                break
            n = min(want - got, _PIECE) if seg_left is None else min(want - got, _PIECE, seg_left)
            try:
                y = self._sf.read(n, dtype="float32", always_2d=True)
            except Exception as exc:  # libsndfile reports decode/seek failures as RuntimeErrors
                err = SourceError(f"{self.path}: read error at {self._file_pos / self._rate():.3f} s (frame {self._file_pos}): {_one_line(exc)}")
                if got == 0:
                    self._eof = True
                    raise err from exc
                self._pending_error = err  # deliver what was decoded first, fail on the next read
                break
            k = y.shape[0]
            out[got : got + k] = y
            got += k
            self._file_pos += k
            if k < n:  # end of file before the expected end
                expected = self._seg_end
                if expected is not None and self._file_pos < expected and not self._approximate_length():
                    self._pending_error = SourceError(
                        f"{self.path}: file ends at frame {self._file_pos}, header says {expected} (truncated or corrupt?)"
                    )
                    break
                if self.loop and self._file_pos > self._seg_start:
                    self._seg_end = self._file_pos  # the real length, now known
                    continue
                self._eof = True
                break
        if got == 0 and self._pending_error is not None:
            err, self._pending_error = self._pending_error, None
            self._eof = True
            raise err
        if not self.loop and self._seg_end is not None and self._file_pos >= self._seg_end:
            self._eof = True  # say so with the last items rather than on an extra empty read
        tags: list[Tag] = []
        if self._out == 0 and got:
            tags.append(Tag(0, TIME, TimeAnchor(self._utc0, "file", self._utc_unc)))
            self._tell_truncation(ctx)
        self._out += got
        end = self._eof and self._pending_error is None
        return SourceRead(out[:got], tags, end=end)

    def stop(self) -> None:
        f, self._sf = self._sf, None
        if f is not None:
            try:
                f.close()
            except Exception:  # never raise from stop()
                log.debug("%s: close failed", self.path, exc_info=True)

    # -- helpers ----------------------------------------------------------------------------------
    def _tell_truncation(self, ctx: Context | None) -> None:
        """Once per run: a WAV file cut short (libsndfile plays what is there without a word)."""
        tr = (self._info or {}).get("truncation")
        if tr is None or self._truncation_told:
            return
        self._truncation_told = True
        rate = self._rate()
        msg = (f"{self.path}: truncated: the header says {tr.declared_frames / rate:.3f} s ({tr.declared_frames} frames), "
               f"the file holds {tr.present_frames / rate:.3f} s; {tr.missing_frames / rate:.3f} s ({tr.missing_frames} frames) missing at the end")  # fmt: skip
        log.warning("%s", msg)
        if ctx is not None:
            ctx.emit(E.SOURCE_STATE, E.SourceState("warning", msg), span=(0, 0))

    def _rate(self) -> float:
        return float(self._info["rate"]) if self._info else 1.0

    def _approximate_length(self) -> bool:
        # MPEG frame counts from libsndfile are estimates; a short file there is not an error
        return bool(self._info and str(self._info.get("format", "")).upper() in ("MP3", "MPEG"))

    def _probe(self) -> dict[str, Any]:
        """Read the header (rate, channels, frames). ConfigError with the path and reason."""
        p = Path(self.path)
        if not p.exists():
            raise ConfigError(f"io.file: cannot open {self.path}: no such file")
        if p.is_dir():
            raise ConfigError(f"io.file: cannot open {self.path}: is a directory")
        try:
            import soundfile as sf
        except (ImportError, OSError) as exc:  # OSError: libsndfile missing
            raise ConfigError(
                f"io.file: soundfile/libsndfile unavailable ({_one_line(exc)}); install it with `pip install soundfile` (and `apt-get install libsndfile1`)"
            ) from None
        try:
            with sf.SoundFile(self.path) as f:
                info = {"rate": int(f.samplerate), "channels": int(f.channels), "frames": int(f.frames) if f.seekable() else -1,
                        "format": f.format, "subtype": f.subtype, "seekable": f.seekable()}  # fmt: skip
        except Exception as exc:  # LibsndfileError: "Error opening '...': Format not recognised."
            reason = _one_line(exc)
            prefix = f"Error opening {self.path!r}: "
            if reason.startswith(prefix):
                reason = reason[len(prefix) :]
            raise ConfigError(f"io.file: cannot open {self.path}: {reason}") from None
        if info["rate"] <= 0 or info["channels"] <= 0:
            raise ConfigError(f"io.file: cannot open {self.path}: header says rate={info['rate']}, channels={info['channels']}")
        info["truncation"] = wav_truncation(self.path) if str(info["format"]).upper() in ("WAV", "WAVEX", "RF64") else None
        try:
            info["mtime_ns"] = p.stat().st_mtime_ns
        except OSError:
            info["mtime_ns"] = time.time_ns()
        frames = info["frames"]
        start = int(round(self.start_s * info["rate"]))
        if frames >= 0 and start >= max(frames, 1):
            raise ConfigError(f"io.file: {self.path}: start_s={self.start_s} is beyond the end ({frames / info['rate']:.3f} s)")
        if self.start_s > 0 and not info["seekable"]:
            raise ConfigError(f"io.file: {self.path}: start_s needs a seekable file")
        if self.loop and not info["seekable"]:
            raise ConfigError(f"io.file: {self.path}: loop needs a seekable file")
        self._info = info
        return info

    def _open(self) -> soundfile.SoundFile:
        import soundfile as sf

        try:
            return sf.SoundFile(self.path)
        except Exception as exc:
            raise SourceError(f"{self.path}: cannot open: {_one_line(exc)}") from exc

    def _seek(self, frame: int) -> None:
        assert self._sf is not None
        if frame == 0 and not (self._info or {}).get("seekable", True):
            return  # a fresh non-seekable stream is already at frame 0
        try:
            self._sf.seek(frame)
        except Exception as exc:
            raise SourceError(f"{self.path}: cannot seek to frame {frame}: {_one_line(exc)}") from exc
