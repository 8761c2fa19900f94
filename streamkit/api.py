"""One call per task: speech segments, transcripts and sound events of a file or an array.

Each function runs the streaming graph its command runs (``streamkit sad``, ``streamkit
transcribe``, ``streamkit sed``): the audio is read in bounded chunks, several channels are
averaged, any rate is resampled (soxr HQ) to the model's, so a file gives what the command writes
for it, and an array gives what its file would.

``audio`` is a path (WAV, FLAC, OGG: anything libsndfile reads; its rate comes from the header, so
``rate`` stays None) or an array with its ``rate`` in Hz: numpy float (``(n,)`` mono or
``(n, channels)``, values in [-1, 1]), numpy int16 (scaled by 1/32768, as libsndfile reads 16-bit
files), or a torch tensor of either (moved to the CPU; torch is never imported for you). Bad input
is a :class:`~streamkit.core.errors.ConfigError` that says what is wrong (NaN or inf samples, no
samples, more than two dimensions, ``(channels, n)`` order, a missing rate, an unknown system); a
missing file is a :class:`FileNotFoundError`, an unreadable one a
:class:`~streamkit.core.errors.StreamkitError` naming it.

Results are small frozen dataclasses that unpack like tuples of their first fields
(``for start, end in detect_speech(...)``), with times in seconds from the first sample (their
repr rounds; the attributes keep every digit):

* :func:`detect_speech` -> :class:`Segment` ``(start, end)`` (+ ``score``)
* :func:`transcribe` -> :class:`Utterance` ``(start, end, lang, confidence, text)`` (+ ``words``, ``lid``)
* :func:`detect_events` -> :class:`SoundEvent` ``(onset, offset, label, confidence)``

and for a graph of your own, :func:`collect` runs it and returns its events
(:class:`~streamkit.io.collect.EventCollector` is the event sink it subscribes).

Example (speech made with espeak-ng; its times depend on the espeak-ng version)::

    >>> import numpy as np, streamkit
    >>> from streamkit.data.tts import synthesize  # espeak-ng, float32 at 8 kHz
    >>> x = np.concatenate([np.zeros(8000), synthesize("Good morning, this is a test.", "en-us")])
    >>> [(round(s, 1), round(e, 1)) for s, e in streamkit.detect_speech(x, rate=8000)]
    [(0.9, 2.7)]
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.core.errors import ConfigError, StreamkitError
from streamkit.core.events import Event
from streamkit.io.collect import EventCollector

__all__ = ["EventCollector", "Segment", "SoundEvent", "Utterance", "collect", "detect_events", "detect_speech", "transcribe"]

#: the SAD systems :func:`detect_speech` runs (the ones that are blocks; ``streamkit sad`` also
#: scores the benchmark baselines energy, webrtcvad0-3 and silero)
SPEECH_SYSTEMS = ("stat", "stat-c", "dnn")

Audio = Any  # str | os.PathLike | numpy array | torch tensor


# ------------------------------------------------------------------------------------------------
# results
# ------------------------------------------------------------------------------------------------


def _r(v: float, digits: int = 4) -> float:
    """``v`` rounded for a repr (the attribute keeps every digit)."""
    return round(float(v), digits)


@dataclass(frozen=True, slots=True)
class Segment:
    """A speech segment: ``[start, end)`` in seconds; unpacks as ``start, end``.

    ``score`` is the detector's mean frame score over the segment (the ``vad.segment`` event's).
    """

    start: float
    end: float
    score: float = math.nan

    def __iter__(self) -> Iterator[float]:
        return iter((self.start, self.end))

    def __repr__(self) -> str:
        return f"Segment(start={_r(self.start)}, end={_r(self.end)}, score={_r(self.score, 3)})"


@dataclass(frozen=True, slots=True)
class Utterance:
    """A transcribed utterance; unpacks as ``start, end, lang, confidence, text``.

    Times in seconds (3 decimals, as ``streamkit transcribe --json``); ``lang`` the language the
    LID chose (``""`` when unknown); ``confidence`` the hypothesis' posterior within its beam;
    ``words`` the words as ``(text, start, end)``; ``lid`` the mean LID posterior per language.
    """

    start: float
    end: float
    lang: str
    confidence: float
    text: str
    words: tuple[tuple[str, float, float], ...] = ()
    lid: Mapping[str, float] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.start, self.end, self.lang, self.confidence, self.text))

    def __repr__(self) -> str:
        return f"Utterance(start={_r(self.start)}, end={_r(self.end)}, lang={self.lang!r}, confidence={_r(self.confidence, 3)}, text={self.text!r})"


@dataclass(frozen=True, slots=True)
class SoundEvent:
    """A sound event: ``[onset, offset)`` in seconds of class ``label``; unpacks as
    ``onset, offset, label, confidence``.

    ``confidence`` is the mean (median-filtered) frame probability over the event, ``peak`` its
    maximum; ``open_start`` / ``open_end``: the event touches the start / end of the audio.
    """

    onset: float
    offset: float
    label: str
    confidence: float
    peak: float = math.nan
    open_start: bool = False
    open_end: bool = False

    def __iter__(self) -> Iterator[Any]:
        return iter((self.onset, self.offset, self.label, self.confidence))

    def __repr__(self) -> str:
        return f"SoundEvent(onset={_r(self.onset)}, offset={_r(self.offset)}, label={self.label!r}, confidence={_r(self.confidence, 3)})"


# ------------------------------------------------------------------------------------------------
# input
# ------------------------------------------------------------------------------------------------


def _as_path(audio: Audio, rate: Any) -> Path | None:
    """The file ``audio`` names (None for an array); FileNotFoundError when it does not exist."""
    if not isinstance(audio, (str, os.PathLike)):
        return None
    p = Path(audio)
    if rate is not None:
        raise ConfigError(f"rate is for arrays; {p}'s rate comes from its header (leave rate=None)")
    if not p.is_file():
        raise FileNotFoundError(f"audio file not found: {p}")
    return p


def _as_array(audio: Audio, rate: Any) -> tuple[np.ndarray, Any]:
    """``(float32 (n,) or (n, channels), rate)`` from an array, or a ConfigError saying what is wrong."""
    torch = sys.modules.get("torch")  # a tensor can only come from a program that imported torch
    if torch is not None and isinstance(audio, torch.Tensor):
        audio = audio.detach().cpu().numpy()
    if not isinstance(audio, np.ndarray):
        raise ConfigError(f"audio must be a file path or an array (numpy, or a torch tensor), got {type(audio).__name__}")
    if rate is None:
        raise ConfigError("an array needs its sample rate: pass rate=... in Hz")
    try:
        ok = isinstance(rate, (int, float, np.integer, np.floating)) and not isinstance(rate, bool) and 0 < float(rate) < math.inf
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ConfigError(f"rate must be a positive number of Hz, got {rate!r}")
    a = audio
    if a.dtype == np.int16:
        a = a.astype(np.float32) / np.float32(32768.0)
    elif a.dtype.kind != "f":
        raise ConfigError(f"audio must be float (values in [-1, 1]) or int16, got dtype {a.dtype}")
    if a.ndim not in (1, 2):
        raise ConfigError(f"audio must be (n,) or (n, channels), got shape {a.shape}")
    if a.shape[0] == 0 or a.size == 0:
        raise ConfigError(f"audio has no samples (shape {a.shape})")
    if a.ndim == 2 and a.shape[1] > a.shape[0]:
        raise ConfigError(f"audio of shape {a.shape} looks like (channels, n); pass (n, channels), e.g. audio.T")
    bad = int(np.count_nonzero(~np.isfinite(a)))
    if bad:
        raise ConfigError(f"audio contains NaN or inf samples ({bad} of {a.size})")
    return np.ascontiguousarray(a, dtype=np.float32), (int(rate) if float(rate).is_integer() else float(rate))


def _one_of(name: str, value: Any, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    return str(value)


# ------------------------------------------------------------------------------------------------
# speech activity
# ------------------------------------------------------------------------------------------------


def detect_speech(audio: Audio, rate: Any = None, *, system: str = "stat", threshold: float | None = None) -> list[Segment]:
    """Speech segments of ``audio``: what ``streamkit sad --system SYSTEM`` writes as RTTM.

    Args:
        audio: a file path, or an array with its ``rate`` (see the module's docstring).
        rate: the array's sample rate in Hz (None for a file).
        system: ``"stat"`` (the statistical SAD, no model file, default), ``"stat-c"`` (the same
            on its C kernel, when built) or ``"dnn"`` (the CNN-GRU SAD, shipped weights; imports
            torch).
        threshold: the block's decision threshold (None: the system's default, as the CLI).

    Returns:
        :class:`Segment` per speech segment, in order: ``[start, end)`` in seconds from the first
        sample (at 8 kHz: multiples of 1/8000 s), after the block's hysteresis and 25-frame vote.

    Example (a stereo 16 kHz file, the DNN SAD)::

        >>> import os, tempfile, soundfile as sf
        >>> from streamkit.data.tts import synthesize
        >>> x = np.concatenate([np.zeros(16000), synthesize("Good morning, this is a test.", "en-us", out_rate=16000)])
        >>> with tempfile.TemporaryDirectory() as d:
        ...     path = os.path.join(d, "speech.wav")
        ...     sf.write(path, np.stack([x, x], axis=1), 16000)
        ...     segs = detect_speech(path, system="dnn")
        >>> [(round(s.start, 1), round(s.end, 1), s.score > 0.5) for s in segs]
        [(0.9, 2.7, True)]
        >>> start, end = segs[0]
    """
    from streamkit.eval import sad_stream

    _one_of("system", system, SPEECH_SYSTEMS)
    if system == "stat-c":
        from streamkit.eval.sad_systems import get_system

        get_system("stat-c")  # SystemUnavailable (a StreamkitError) without the C kernel
    if threshold is not None and not (isinstance(threshold, (int, float)) and math.isfinite(threshold)):
        raise ConfigError(f"threshold must be a finite number or None, got {threshold!r}")
    path = _as_path(audio, rate)
    if path is not None:
        r = sad_stream.sad_file(path, system, threshold)
    else:
        x, fs = _as_array(audio, rate)
        r = sad_stream.sad_array(x, fs, system, threshold)
    rate8 = sad_stream.RATE
    scores = r.segment_scores or [math.nan] * len(r.intervals)
    return [Segment(int(a) / rate8, int(b) / rate8, float(s)) for (a, b), s in zip(r.intervals.tolist(), scores)]


# ------------------------------------------------------------------------------------------------
# transcription
# ------------------------------------------------------------------------------------------------


def transcribe(
    audio: Audio,
    rate: Any = None,
    *,
    lexicon: str | os.PathLike[str] | None = None,
    languages: Sequence[str] | None = None,
    weights: str | os.PathLike[str] | None = None,
    sad: str = "stat",
    beam: int | None = None,
    word_penalty: float | None = None,
    tau: float = 30.0,
    s_th: float = 0.5,
    lid_select: str = "auto",
    lid_score: str = "auto",
    lid_prior: str | Mapping[str, float] | None = None,
    pre_roll_s: float = 0.1,
    max_utterance_s: float = 30.0,
    threads: int = 1,
) -> list[Utterance]:
    """Transcribe ``audio`` with language identification: what ``streamkit transcribe --json`` prints.

    The statistical SAD cuts the audio into utterances; each is decoded by the multilingual
    streaming RNN-T (English, Hindi, Tamil, Gujarati for the shipped weights), one beam search per
    language with the LID shutoff. The defaults are the CLI's.

    Args:
        audio, rate: a file path, or an array with its rate (see the module's docstring).
        lexicon: ``"system"`` (the Debian word lists the model was trained from) or a directory of
            ``<lang>.words.txt`` files: decode only words of the list (None: free spelling).
        languages: decode only these (None: all of the model's).
        weights: an RNN-T weight file (None: the shipped model).
        sad: ``"stat"`` (default) or ``"none"`` (the whole audio as one stream, cut every
            ``max_utterance_s``).
        beam: beam width per language (None: 4, with a lexicon 16).
        word_penalty: with a lexicon, log-probability subtracted per word (None: 3.0).
        tau, s_th: the LID shutoff's frames and margin (``math.inf``: never switch a decoder off).
        lid_select, lid_score: ``"auto"``, ``"mean"``/``"sum"`` or ``"last"`` (as the CLI's options).
        lid_prior: ``"train"``, ``{lang: weight}`` or ``"en=10,hi=1,..."`` (None: uniform).
        pre_roll_s, max_utterance_s, threads: as the CLI's options.

    Returns:
        :class:`Utterance` per utterance, in order.

    Example (the shipped model on espeak-ng speech: the language is right, the spelling rough)::

        >>> from streamkit.data.tts import synthesize
        >>> x = np.concatenate([np.zeros(8000), synthesize("Please check the antenna.", "en-us"), np.zeros(8000)])
        >>> [(u.lang, u.start < 1.2 < u.end) for u in transcribe(x, rate=8000)]
        [('en', True)]
    """
    from streamkit.models import transcribe as tr
    from streamkit.models.rnnt_stream import DEFAULT_BEAM, DEFAULT_LEXICON_BEAM, DEFAULT_WORD_PENALTY

    _one_of("sad", sad, ("stat", "none"))
    _one_of("lid_select", lid_select, ("auto", "mean", "last"))
    _one_of("lid_score", lid_score, ("auto", "sum", "last"))
    w = Path(weights) if weights is not None else tr.default_weights()
    if not w.is_file():
        raise ConfigError(f"no RNN-T weights at {w}")
    if beam is None:
        beam = DEFAULT_LEXICON_BEAM if lexicon is not None else DEFAULT_BEAM
    if word_penalty is not None and lexicon is None:
        raise ConfigError("word_penalty needs a lexicon")
    penalty = (0.0 if lexicon is None else DEFAULT_WORD_PENALTY) if word_penalty is None else float(word_penalty)
    checks = {
        "beam": isinstance(beam, int) and beam >= 1,
        "threads": isinstance(threads, int) and threads >= 1,
        "max_utterance_s": 0 < max_utterance_s < math.inf,
        "pre_roll_s": 0 <= pre_roll_s < math.inf,
        "tau": tau >= 0,
        "s_th": s_th >= 0,
        "word_penalty": 0 <= penalty < math.inf,
    }
    bad = [k for k, ok in checks.items() if not ok]
    if bad:
        raise ConfigError(f"out of range: {', '.join(bad)} (beam and threads >= 1, max_utterance_s > 0, pre_roll_s, tau, s_th, word_penalty >= 0)")
    if isinstance(lid_prior, str):
        from streamkit.models.rnnt_stream import parse_lid_prior

        try:
            lid_prior = parse_lid_prior(lid_prior)
        except ValueError as exc:
            raise ConfigError(f"lid_prior: {exc}") from None
    kw: dict[str, Any] = dict(sad=sad, beam=beam, tau=None if math.isinf(tau) else float(tau), s_th=None if math.isinf(s_th) else float(s_th),
                              languages=list(languages) if languages is not None else None, lid_select=lid_select, lid_score=lid_score,
                              lid_prior=lid_prior, pre_roll_s=pre_roll_s, max_utterance_s=max_utterance_s, threads=threads,
                              lexicon=None if lexicon is None else str(lexicon), word_penalty=penalty)  # fmt: skip
    path = _as_path(audio, rate)
    if path is not None:
        utts, _ = tr.transcribe_file(path, w, **kw)
    else:
        x, fs = _as_array(audio, rate)
        utts, _ = tr.transcribe_array(x, w, rate=fs, **kw)
    return [
        Utterance(
            u["start_s"],
            u["end_s"],
            u["lang"],
            u["confidence"],
            u["text"],
            tuple((d["word"], d["start_s"], d["end_s"]) for d in u["words"]),
            dict(u["lid"]),
        )
        for u in utts
    ]


# ------------------------------------------------------------------------------------------------
# sound events
# ------------------------------------------------------------------------------------------------


def detect_events(
    audio: Audio,
    rate: Any = None,
    *,
    weights: str | os.PathLike[str] | None = None,
    window_s: float = 10.0,
    hop_s: float = 1.0,
    median_s: Any = None,
    threshold_high: Any = None,
    threshold_low: Any = None,
    post: str = "auto",
    clip_gate: Any = None,
    threads: int = 1,
) -> list[SoundEvent]:
    """Sound events of ``audio`` (10 DCASE classes for the shipped weights): what ``streamkit sed`` writes.

    The graph ``audio -> [dsp.mono] -> [dsp.resample to 16 kHz] -> models.sed``; the parameters are
    the ``models.sed`` block's (and ``streamkit sed``'s ``--window --hop --median --high --low
    --post --clip-gate --threads``), with its defaults: the weight file's tuned per-class median
    windows, thresholds and clip gates.

    Returns:
        :class:`SoundEvent` per event, in the order they ended (sort by ``onset`` for a timeline).

    Example (espeak-ng speech)::

        >>> from streamkit.data.tts import synthesize
        >>> x = np.concatenate([np.zeros(8000), synthesize("Good morning, this is a test.", "en-us"), np.zeros(8000)])
        >>> [(e.label, e.onset < 1.2 < e.offset) for e in detect_events(x, rate=8000)]
        [('Speech', True)]
    """
    from streamkit.core.graph import Graph
    from streamkit.dsp.front import mono_at
    from streamkit.io.collect import VectorSource
    from streamkit.io.file_source import FileSource
    from streamkit.models.sed_stream import RATE, SED_DETECTION, SedBlock

    sed = SedBlock(weights=None if weights is None else str(weights), window_s=window_s, hop_s=hop_s, median_s=median_s, threshold_high=threshold_high,
                   threshold_low=threshold_low, post=post, clip_gate=clip_gate, threads=threads)  # fmt: skip
    path = _as_path(audio, rate)
    if path is not None:
        src: Any = FileSource(path=str(path))
        label = str(path)
    else:
        x, fs = _as_array(audio, rate)
        src = VectorSource(samples=x, rate=fs, sizes=len(x), utc_ns=None)
        label = "audio"
    g = Graph("sed")
    try:
        chain, _ = mono_at(g, src, RATE)
    except ConfigError as exc:
        raise StreamkitError(f"{label}: cannot read audio: {str(exc).splitlines()[0]}") from None
    chain.append(g.add(sed, name="sed"))
    g.chain(*chain)
    events = collect(g, [SED_DETECTION, "block.error"], chunk_s=1.0)
    errors = [e for e in events if e.kind == "block.error"]
    if errors:
        msg = str(getattr(errors[0].payload, "message", errors[0].payload)).splitlines()[0]
        raise StreamkitError(msg if label in msg else f"{label}: {msg}")
    if sed.nonfinite_samples:
        raise StreamkitError(f"{label}: audio contains NaN or inf samples ({sed.nonfinite_samples} at {RATE} Hz)")
    out = []
    for e in events:
        d = e.payload
        out.append(SoundEvent(d.onset_s, d.offset_s, d.label, float(d.confidence), float(d.peak), bool(d.open_start), bool(d.open_end)))
    return out


# ------------------------------------------------------------------------------------------------
# graphs
# ------------------------------------------------------------------------------------------------


def collect(graph: Any, kinds: Sequence[str] | None = None, *, duration: float | None = None, mode: Any = None, chunk_s: float = 0.02) -> list[Event]:
    """Run ``graph`` to its end (or ``duration`` seconds of stream) and return its events, in order.

    ``kinds``: patterns of the kinds to keep (``["vad.*", "sed.detection"]``; None: all, with the
    runtime's ``stream.*``, ``block.error`` and ``graph.*`` events). ``mode``:
    :class:`~streamkit.core.clock.FreeRun` (default: as fast as the blocks go), ``Paced`` or
    ``RealTime``; ``chunk_s``: seconds of audio per source read. The graph's own event sinks run as
    usual; the collector (:class:`~streamkit.io.collect.EventCollector`) is unsubscribed after the
    run. To watch events while a live graph runs, subscribe an ``EventCollector`` yourself.

    Example (the built-in demo signal: noise with two speech-like bursts, 2.42-4.64 s and 7.26-10.94 s)::

        >>> from streamkit import Graph
        >>> from streamkit.dsp import StatSAD
        >>> from streamkit.io import DemoSignal
        >>> g = Graph("demo")
        >>> g.chain(g.add(DemoSignal(rate=8000, duration_s=12, seed=1)), g.add(StatSAD(), name="sad"))
        >>> [(e.source, e.payload.start_s, e.payload.end_s) for e in collect(g, ["vad.segment"])]
        [('sad', 2.4, 4.832), ('sad', 7.232, 11.168)]
    """
    from streamkit.core.runtime import Runner

    c = graph.subscribe(EventCollector(), kinds)
    try:
        Runner(graph, mode, duration=duration, threaded_events=False, stats_interval_s=0, chunk_s=chunk_s).run()
    finally:
        graph.subscriptions[:] = [s for s in graph.subscriptions if s.sink is not c]
    return list(c.events)
