"""Block ``models.rnnt_asr``: streaming multilingual RNN-T ASR with LID-driven decoder shutoff.

The model (:mod:`streamkit.models.rnnt`) runs on 8 kHz audio: :class:`~streamkit.models.features.LogMelStream`
features (one stacked 640-dim vector per 30 ms), the encoder once per 30 ms frame for all languages,
and a :class:`~streamkit.models.rnnt_search.MultiDecoder` (one beam search per language in lockstep,
prediction network batched, paper §6.3 shutoff). Utterances come from the upstream SAD's
``sk:speech`` tags; the ASR does not run on non-speech.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from streamkit.core.block import GapPolicy, Sink, require_audio
from streamkit.core.context import Context
from streamkit.core.errors import ConfigError
from streamkit.core.params import integer, number, optional_number
from streamkit.core.registry import register
from streamkit.core.tags import GAP, SPEECH, Gap, SpeechBoundary
from streamkit.core.types import Chunk, StreamSpec

ASR_PARTIAL = "asr.partial"
ASR_FINAL = "asr.final"
LID_RESULT = "lid.result"
UNKNOWN = "unknown"  #: the open-set answer (the same as streamkit.models.rnnt_openset.UNKNOWN)

RATE = 8000
FRAME_SHIFT = 240  #: samples per 30 ms stacked frame
FRAME_SPAN = 760  #: samples covered by one stacked frame (8 x 10 ms frames of 25 ms)
MODES = ("tags", "always")
LID_SELECTS = ("mean", "last", "auto")  # rnnt_search.LID_SELECTS + "auto" (not imported: this module loads torch lazily)
LID_SCORES = ("sum", "last", "auto")  # rnnt_search.LID_SCORES + "auto"

# The defaults of the block are those of ``streamkit transcribe``, ``monitor --asr`` and ``mic --asr``
# (which pass only what their user chose): the LID shutoff at tau 30 frames / s_th 0.5, the LID rules
# picked for the model's head ("auto"), a 0.1 s pre-roll before each speech start.
DEFAULT_BEAM = 4
#: with a lexicon: the beam and word penalty chosen on the dev split (``benchmarks/rnnt_lexicon_grid.py``)
DEFAULT_LEXICON_BEAM = 16
DEFAULT_WORD_PENALTY = 3.0
DEFAULT_TAU_FRAMES = 30.0
DEFAULT_S_TH = 0.5
DEFAULT_PRE_ROLL_S = 0.1


@dataclass(frozen=True, slots=True)
class AsrWord:
    """A word of an ASR result; ``start``/``end`` are absolute input sample indices."""

    text: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class AsrResult:
    """Payload of ``asr.partial`` and ``asr.final``.

    Attributes:
        utterance_id: per block, from 0; partials and the final of an utterance share it.
        revision: partials count 0, 1, ...; the final carries the next number.
        final: True for ``asr.final`` (never superseded).
        lang: language name of the chosen decoder ("" when unknown).
        text: words joined by spaces.
        words: per word its text and sample span.
        confidence: posterior of the hypothesis within its beam, in (0, 1].
        score: its log-probability.
        frames: 30 ms frames decoded so far.
        t_avg: average number of decoders active per frame (paper eq. 2).
    """

    utterance_id: int
    revision: int
    final: bool
    lang: str
    text: str
    words: tuple[AsrWord, ...]
    confidence: float
    score: float
    frames: int
    t_avg: float


@dataclass(frozen=True, slots=True)
class LidResult:
    """Payload of ``lid.result`` (once per utterance, right after its ``asr.final``).

    Attributes:
        utterance_id: as the ``asr.final``.
        lang: the chosen language.
        method: ``"lid"`` (survivor with the highest average LID posterior), ``"lid-last"``
            (survivor with the highest last-frame LID posterior, ``lid_select="last"``), ``"score"`` (no LID
            head: the decoder whose best hypothesis scores highest), ``"fixed"`` (one language
            decoded) or ``"tokens"`` (vanilla: the language most tokens belong to); ``"+prior"``
            appended when a language prior weighed the shutoff and the choice (``lid_prior``).
        confidence: the chosen language's average (``"lid"``) or last-frame (``"lid-last"``) LID
            posterior, else the hypothesis confidence.
        posteriors: average LID posterior per language (empty without LID head).
        switched_off: per decoded language the frame at which its decoder was switched off (None:
            it survived).
        t_avg: paper eq. 2.
        frames: frames decoded.
        closed_set_lang: the model language the rules above chose; ``lang`` is ``"unknown"``
            instead when the open-set rule rejected it (else the same).
        open_set: the open-set rule's figures (``score``: its kind, ``value``: the lowest score at
            its checkpoints, ``threshold``, ``unknown_at``: the frame it answered unknown, or
            None), None when no rule is used (see ``unknown`` of :class:`RnntAsr`).
    """

    utterance_id: int
    lang: str
    method: str
    confidence: float
    posteriors: dict[str, float]
    switched_off: dict[str, int | None]
    t_avg: float
    frames: int
    closed_set_lang: str = ""
    open_set: dict[str, Any] | None = None


def symbol_tables(cfg: Any, meta: Mapping[str, Any]) -> list[list[str]]:
    """Per language its symbols (index 0 = blank) from the weight file's ``meta["symbols"]``.

    ``meta["symbols"]`` maps each language name to a list of ``vocab_sizes[l]`` strings (word-start
    symbols carry the paper's ``B_`` prefix). Without it, symbol ``i`` of language ``l`` is called
    ``B_<l>i`` (every token a word), so a model without tables still gives readable output.
    """
    tabs = meta.get("symbols")
    out: list[list[str]] = []
    for lg, v in zip(cfg.languages, cfg.vocab_sizes):
        if tabs is None:
            out.append(["<blank>"] + [f"B_<{lg}>{i}" for i in range(1, v)])
            continue
        if not isinstance(tabs, Mapping) or lg not in tabs:
            raise ConfigError(f"model meta 'symbols' has no table for language {lg!r}")
        t = [str(s) for s in tabs[lg]]
        if len(t) != v:
            raise ConfigError(f"model meta 'symbols' of {lg!r} has {len(t)} entries, the model {v}")
        out.append(t)
    return out


class _Mute:
    """A stand-in context for the warm-up: drops events."""

    log = logging.getLogger("streamkit.models.rnnt_asr")

    def emit(self, kind: str, payload: Any = None, span: tuple[int, int] | None = None, port: str | None = None) -> None:
        pass


def words_of(symbols: Sequence[str], frames: Sequence[int]) -> list[tuple[str, int, int]]:
    """Symbols (``B_`` = word start) to ``(word, first frame, last frame)``."""
    words: list[list[Any]] = []
    for s, f in zip(symbols, frames):
        if s.startswith("B_") or not words:
            words.append([s[2:] if s.startswith("B_") else s, f, f])
        else:
            words[-1][0] += s
            words[-1][2] = f
    return [(w, a, b) for w, a, b in words if w]


def parse_lid_prior(spec: str | None) -> str | dict[str, float] | None:
    """A ``--lid-prior`` value: ``none`` → None, ``train``, or ``en=10,hi=10,ta=1,gu=1`` → a mapping (ValueError if malformed)."""
    if spec is None or spec.strip() in ("", "none"):
        return None
    if spec.strip() == "train":
        return "train"
    out: dict[str, float] = {}
    for part in spec.split(","):
        k, sep, v = part.partition("=")
        try:
            w = float(v)
        except ValueError:
            w = math.nan
        if not sep or not k.strip() or not (0 < w < math.inf) or k.strip() in out:
            raise ValueError(f"language prior must be 'none', 'train' or LANG=WEIGHT,... with distinct languages and weights > 0, got {spec!r}")
        out[k.strip()] = w
    return out


def resolve_lid_prior(
    spec: str | Mapping[str, float] | None, cfg: Any, meta: Mapping[str, Any], file: str = "the weight file", who: str = "rnnt_asr"
) -> list[float] | None:
    """The language prior as one weight per model language (None: uniform); ConfigError when it does not fit the model."""
    if spec is None:
        return None
    if spec == "train":
        hours = meta.get("train_hours")
        if not isinstance(hours, Mapping):
            raise ConfigError(f"{who}: lid_prior='train' but {file} records no training hours (meta['train_hours']); give the weights per language")
        src, what = hours, "meta['train_hours']"
    elif isinstance(spec, Mapping):
        src, what = spec, "lid_prior"
    else:
        raise ConfigError(f"{who}: lid_prior must be None, 'train' or a mapping language -> weight, got {spec!r}")
    missing = [lg for lg in cfg.languages if lg not in src]
    extra = [k for k in src if k not in cfg.languages]
    if missing or extra:
        raise ConfigError(f"{who}: {what} must name exactly the model's languages {list(cfg.languages)}; missing {missing}, unknown {extra}")
    w = [float(src[lg]) for lg in cfg.languages]
    if not all(0 < x < math.inf for x in w):
        raise ConfigError(f"{who}: {what} weights must be positive and finite, got {w}")
    return w


@register("models.rnnt_asr")
class RnntAsr(Sink):
    """Streaming multilingual RNN-T ASR (multi-softmax LID model, paper §4 and §6.3).

    Ports:
        in: float32 mono audio at 8000 Hz carrying ``sk:speech``
            (:class:`~streamkit.core.tags.SpeechBoundary`) tags from an upstream SAD at audio
            sample offsets. A sink: only sinks see their input's tags in this runtime, so the
            block ends a branch (fan out the audio to it).
    Parameters (every default is what ``streamkit transcribe``, ``monitor --asr`` and ``mic --asr`` run with):
        model (None): RNN-T weight file (:func:`streamkit.models.rnnt.save_model`); symbol tables
            from its ``meta["symbols"]`` (see :func:`symbol_tables`). None: the shipped weights
            (``streamkit.models.RNNT_WEIGHTS``; a ConfigError when the graph is built if there are none).
        beam (None = 4, with a lexicon 16), max_symbols_per_frame (3): of every per-language beam
            search (beam 1: greedy).
        tau_frames (30), s_th (0.5): LID shutoff (paper §6.3): decoder ``l`` is switched off at
            frame ``t > tau_frames`` (0-based, 30 ms frames) when ``s_l(t) < s_max(t) - s_th``;
            None (or inf) for either: never (the paper's LID-free decoding).
        languages: names of the languages to decode (None: all; one name = known language).
        lid_select (``"auto"``): the final's language among the surviving decoders, highest average
            LID posterior (``"mean"``, the paper) or highest posterior of the utterance's last frame
            (``"last"``, for a recurrent LID head; see :mod:`streamkit.models.rnnt_search`);
            ``"auto"``: ``"last"`` when the model's LID head is recurrent (``lid_hidden > 0``, as
            the shipped model's), else ``"mean"``.
        lid_score (``"auto"``): the shutoff statistic, the cumulative log LID posterior
            ``s_l(t) = sum log P_t(l)`` (``"sum"``, paper eq. 1) or the latest frame's
            ``log P_t(l)`` (``"last"``: a recurrent head's posterior already conditions on the
            whole utterance so far; see :mod:`streamkit.models.rnnt_search`); ``"auto"``:
            ``"last"`` for a recurrent LID head, else ``"sum"``.
        lid_prior (None): language prior (Bayes' rule) for the shutoff, which compares
            ``s_l(t) + log prior_l``, and for the final's language choice (posterior x prior):
            None (uniform, the paper), ``"train"`` (the
            training hours per language recorded in the weight file's ``meta["train_hours"]``) or
            a mapping language name → weight (every model language, weights > 0), e.g. the
            expected mix of a monitored band. The LID head is trained language-balanced, so its
            posteriors carry no prior of their own.
        utterance_mode: ``"tags"`` (default): an utterance runs from a ``SpeechBoundary(start=True)``
            to the next ``start=False``; nothing is decoded in between. ``"always"``: no SAD, the
            stream is one utterance (cut every ``max_utterance_s``); speech tags are ignored.
        pre_roll_s (0.1): an utterance starts this much before its start tag (never before the
            previous utterance's end, a gap or the stream start).
        max_utterance_s (30.0): an utterance is finalised after this many seconds of frames and a
            new one starts at the end of its last frame (no sample is lost or decoded twice).
        partial_interval_s (0.3): an ``asr.partial`` goes out when the best hypothesis' text
            changed, at most once per this interval (checked every 30 ms frame, in frames of
            decoded audio, so the partials do not depend on the chunking).
        threads (1): ``torch.set_num_threads`` in ``start`` (process-wide).
        lexicon (None): restrict every decoder to word sequences of a word list
            (:mod:`streamkit.models.rnnt_lexicon`): ``"system"`` (the Debian dictionaries the
            corpus draws from), a directory of ``<lang>.words.txt`` files, or a mapping language
            name → word file; None: unconstrained spelling. Built in ``start`` (about 2.5 s for
            the four shipped languages' 260 000 words), once per process for the same files.
        word_penalty (None = 0, with a lexicon 3.0): with a lexicon, subtracted from the log-probability of each word start.
        unknown (``"auto"``): the open-set LID rule (:mod:`streamkit.models.rnnt_openset`): an
            utterance whose LID confidence is below a calibrated threshold at frame ``tau`` of the
            rule or at its end is answered ``lang: "unknown"`` with no text. ``"auto"``: the
            calibration file next to the weights (``X.openset.json`` beside ``X.pt``; the shipped
            model has one), none if there is none; a path: that file; None: closed set (always one
            of the model's languages). Used only when several languages are decoded by an LID head.
        unknown_stop (True): when the rule answers unknown at its checkpoint, switch every decoder
            off for the rest of the utterance (the shutoff's last step; T_avg falls accordingly).
    Events:
        ``asr.partial`` / ``asr.final`` (:class:`AsrResult`), span = the utterance's samples so far /
        in total; ``lid.result`` (:class:`LidResult`) after each final, same span. Word spans: a token
        emitted at frame ``k`` of an utterance starting at sample ``u0`` is dated to the frame's
        newest 30 ms ``[u0 + 240 k + 520, u0 + 240 k + 760)``; a word spans its tokens' frames.
        An utterance shorter than one frame (760 samples) gives no events.
    Gaps:
        A ``sk:gap`` ends the open utterance at the gap: it is finalised (``asr.final`` and
        ``lid.result`` for the audio before the loss), and decoding restarts only at the next
        speech start (``"always"``: right after the gap). The pre-roll never reaches across a gap.
    Exactness:
        Features are computed on a fixed 240-sample grid from each utterance's first sample and the
        encoder runs one frame per call, so every chunking gives bit-identical events.
    """

    emits: ClassVar[tuple[str, ...]] = (ASR_PARTIAL, ASR_FINAL, LID_RESULT)
    on_gap: ClassVar[GapPolicy] = GapPolicy.CONTINUE  # handled in consume(): the gap finalises

    def __init__(
        self,
        *,
        model: str | Path | None = None,
        beam: int | None = None,
        max_symbols_per_frame: int = 3,
        tau_frames: float | None = DEFAULT_TAU_FRAMES,
        s_th: float | None = DEFAULT_S_TH,
        languages: Sequence[str] | None = None,
        lid_select: str = "auto",
        lid_score: str = "auto",
        lid_prior: str | Mapping[str, float] | None = None,
        utterance_mode: str = "tags",
        pre_roll_s: float = DEFAULT_PRE_ROLL_S,
        max_utterance_s: float = 30.0,
        partial_interval_s: float = 0.3,
        threads: int = 1,
        lexicon: str | Path | Mapping[str, str | Path] | None = None,
        word_penalty: float | None = None,
        unknown: str | Path | None = "auto",
        unknown_stop: bool = True,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        if model is not None and (not isinstance(model, (str, Path)) or not str(model)):
            raise ConfigError(f"model must be a weight file path or None (the shipped weights), got {model!r}")
        self.shipped = model is None
        if model is None:
            import streamkit.models as _models  # looked up now: tests point it elsewhere

            model = _models.RNNT_WEIGHTS
        self.model = str(model)
        if beam is None:
            beam = DEFAULT_BEAM if lexicon is None else DEFAULT_LEXICON_BEAM
        if word_penalty is None:
            word_penalty = 0.0 if lexicon is None else DEFAULT_WORD_PENALTY
        self.beam = integer("beam", beam, 1, 1024)
        self.max_symbols_per_frame = integer("max_symbols_per_frame", max_symbols_per_frame, 1, 100)
        self.tau_frames = optional_number("tau_frames", tau_frames, 0.0, finite=False)
        self.s_th = optional_number("s_th", s_th, 0.0, finite=False)
        if languages is not None and (isinstance(languages, str) or not all(isinstance(x, str) for x in languages) or not languages):
            raise ConfigError(f"languages must be a non-empty list of language names or None, got {languages!r}")
        self.languages = None if languages is None else [str(x) for x in languages]
        if lid_select not in LID_SELECTS:
            raise ConfigError(f"lid_select must be one of {LID_SELECTS}, got {lid_select!r}")
        self.lid_select = lid_select
        if lid_score not in LID_SCORES:
            raise ConfigError(f"lid_score must be one of {LID_SCORES}, got {lid_score!r}")
        self.lid_score = lid_score
        if lid_prior is not None and lid_prior != "train":
            if not isinstance(lid_prior, Mapping) or not lid_prior:
                raise ConfigError(f"lid_prior must be None, 'train' or a mapping language -> weight, got {lid_prior!r}")
            for k, v in lid_prior.items():
                if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 < float(v) < math.inf):
                    raise ConfigError(f"lid_prior weights must be positive finite numbers keyed by language name, got {k!r}: {v!r}")
        self.lid_prior = lid_prior if lid_prior is None or lid_prior == "train" else {str(k): float(v) for k, v in lid_prior.items()}
        if utterance_mode not in MODES:
            raise ConfigError(f"utterance_mode must be one of {MODES}, got {utterance_mode!r}")
        self.utterance_mode = utterance_mode
        self.pre_roll_s = number("pre_roll_s", pre_roll_s, 0.0, finite=False)
        self.max_utterance_s = number("max_utterance_s", max_utterance_s, 0.1, finite=False)
        self.partial_interval_s = number("partial_interval_s", partial_interval_s, 0.0, finite=False)
        self.threads = integer("threads", threads, 1, 256)
        if lexicon is not None and not isinstance(lexicon, (str, Path, Mapping)):
            raise ConfigError(f"lexicon must be 'system', a directory, a mapping language -> word file or None, got {lexicon!r}")
        self.lexicon = lexicon
        self.word_penalty = number("word_penalty", word_penalty, 0.0, finite=False)
        if not math.isfinite(self.word_penalty):
            raise ConfigError(f"word_penalty must be finite, got {word_penalty!r}")
        if unknown is not None and (not isinstance(unknown, (str, Path)) or not str(unknown) or str(unknown) == "none"):
            if str(unknown) != "none":
                raise ConfigError(f"unknown must be 'auto', a calibration file path or None, got {unknown!r}")
            unknown = None
        self.unknown = unknown
        if not isinstance(unknown_stop, bool):
            raise ConfigError(f"unknown_stop must be true or false, got {unknown_stop!r}")
        self.unknown_stop = unknown_stop
        self.nonfinite_samples = 0
        self._ctx: Context | None = None
        self._m: Any = None
        self._dec: Any = None

    # -- lifecycle -----------------------------------------------------------------------------
    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        require_audio(self.name, inputs["in"], RATE)
        if self.shipped and not Path(self.model).is_file():
            raise ConfigError(f"{self.name}: no shipped RNN-T weights at {self.model} in this build: train them with "
                              "`streamkit train rnnt --variant lid` and pass model: PATH")  # fmt: skip
        return {}

    def algorithmic_latency(self) -> int:
        return FRAME_SPAN  # a token is decided when the frame covering it is complete

    def start(self, ctx: Context) -> None:
        import torch

        from streamkit.models.features import LogMelStream
        from streamkit.models.rnnt import load_model
        from streamkit.models.rnnt_search import MultiDecoder

        self._ctx = ctx
        torch.set_num_threads(self.threads)
        model, meta = load_model(self.model)
        cfg = model.cfg
        self._m = model
        self._symbols = symbol_tables(cfg, meta)
        recurrent = cfg.has_lid and cfg.lid_hidden > 0
        self._lid_select = self.lid_select if self.lid_select != "auto" else ("last" if recurrent else "mean")
        self._lid_score = self.lid_score if self.lid_score != "auto" else ("last" if recurrent else "sum")
        langs = None
        if self.languages is not None:
            unknown = [x for x in self.languages if x not in cfg.languages]
            if unknown:
                raise ConfigError(f"{self.name}: languages {unknown} not in the model's {list(cfg.languages)}")
            langs = [cfg.languages.index(x) for x in self.languages]
        prior = resolve_lid_prior(self.lid_prior, cfg, meta, Path(self.model).name, self.name)
        lexicons = None
        if self.lexicon is not None:
            from streamkit.models.rnnt_lexicon import cached_model_lexicons

            try:
                lexicons = cached_model_lexicons(cfg, self._symbols, self.lexicon, word_penalty=self.word_penalty)
            except ValueError as e:
                raise ConfigError(f"{self.name}: {e}") from e
        self._dec = MultiDecoder(
            model,
            beam=self.beam,
            max_symbols_per_frame=self.max_symbols_per_frame,
            tau=math.inf if self.tau_frames is None else self.tau_frames,
            s_th=math.inf if self.s_th is None else self.s_th,
            languages=langs,
            lid_select=self._lid_select,
            lexicons=lexicons,
            lid_score=self._lid_score,
            lid_prior=prior,
        )
        self._open_set = self._load_open_set(cfg)
        self._feat = LogMelStream()
        self._dtype = model.feat_mean.dtype
        self._onehot = torch.arange(cfg.n_lang) if cfg.variant == "onehot" else None
        self._max_frames = max(1, int(round(self.max_utterance_s * RATE / FRAME_SHIFT)))
        self._partial_every = int(round(self.partial_interval_s * RATE / FRAME_SHIFT))
        self._pre_roll = int(round(self.pre_roll_s * RATE))
        self._next_id = 0
        self._clear()
        self._warm_up()

    def _load_open_set(self, cfg: Any) -> Any:
        """The open-set tracker of ``unknown`` (None: closed set)."""
        from streamkit.models import rnnt_openset as osr

        if self.unknown is None:
            return None
        path = osr.sidecar(self.model) if self.unknown == "auto" else Path(self.unknown)
        if self.unknown == "auto" and not path.is_file():
            return None
        if not (cfg.has_lid and len(self._dec.searches) > 1):
            if self.unknown == "auto":
                return None
            raise ConfigError(f"{self.name}: unknown={str(path)!r} needs an LID model decoding several languages")
        try:
            return osr.OpenSetTracker(osr.load(path))
        except osr.OpenSetError as e:
            raise ConfigError(f"{self.name}: {e}") from e

    def _warm_up(self) -> None:
        """Run one short utterance of noise through the whole path (features, encoder, beam search,
        lexicon, result and LID) with its events dropped, so that torch's first calls and any JIT
        happen here and not on the first live utterance; then forget it."""
        mute = _Mute()
        noise = (np.random.default_rng(0).standard_normal(FRAME_SPAN + 8 * FRAME_SHIFT) * 0.01).astype(np.float32)
        self._open(0, mute)  # type: ignore[arg-type]
        self._feed(noise, 0, mute)  # type: ignore[arg-type]
        self._finalise(mute)  # type: ignore[arg-type]
        self._feat.reset()
        self._dec.reset()
        self._enc_state = None
        self._next_id = 0
        self._clear()

    def _clear(self) -> None:
        self._utt: dict[str, Any] | None = None
        self._hist = np.zeros(0, np.float32)  # recent non-speech samples (for the pre-roll)
        self._hist_end: int | None = None

    def reset(self, cause: Gap | None = None) -> None:
        """Drop the open utterance without events (error recovery); the next speech start begins anew."""
        if self._dec is not None:
            self._clear()

    def flush(self, ctx: Context) -> np.ndarray | None:
        if self._utt is not None:
            self._finalise(ctx)
        return None

    def stop(self) -> None:
        self._ctx = None

    def apply_params(self, changes: Mapping[str, Any]) -> None:
        raise ConfigError(f"{self.name}: {sorted(changes)} cannot change while running; build a new graph")

    # -- data ----------------------------------------------------------------------------------
    def consume(self, chunk: Chunk, ctx: Context) -> None:
        x = chunk.samples[:, 0]
        if not np.isfinite(x).all():
            x = np.array(x, dtype=np.float32)
            bad = ~np.isfinite(x)
            if self.nonfinite_samples == 0:
                ctx.log.warning("%s: NaN/inf input samples replaced by 0", self.name)
            self.nonfinite_samples += int(np.count_nonzero(bad))
            x[bad] = 0.0
        start = pos = chunk.start
        stop = chunk.stop
        marks = []
        for t in chunk.tags:
            if t.key == GAP:
                marks.append((t.offset, 0, t))
            elif t.key == SPEECH and isinstance(t.value, SpeechBoundary) and self.utterance_mode == "tags":
                marks.append((t.offset, 1 if not t.value.start else 2, t))  # at one offset: gap, end, start
        marks.sort(key=lambda m: (m[0], m[1]))
        for off, kind, _ in marks:
            off = min(max(off, pos), stop)
            if off > pos:
                self._feed(x[pos - start : off - start], pos, ctx)
                pos = off
            if kind == 0:  # gap: finalise what came before it
                if self._utt is not None:
                    self._finalise(ctx)
                self._hist = np.zeros(0, np.float32)
                self._hist_end = None
            elif kind == 1:
                if self._utt is not None:
                    self._finalise(ctx)
            elif self._utt is None:
                self._open(off, ctx)
        if stop > pos:
            self._feed(x[pos - start :], pos, ctx)

    def _feed(self, seg: np.ndarray, at: int, ctx: Context) -> None:
        if self._utt is None and self.utterance_mode == "always":
            self._open(at, ctx)
        u = self._utt
        if u is None:  # non-speech: only remembered for the pre-roll
            if self._pre_roll:
                h = self._hist if self._hist_end == at else np.zeros(0, np.float32)
                self._hist = np.concatenate([h, seg])[-self._pre_roll :]
                self._hist_end = at + seg.shape[0]
            return
        u["pend"].append(np.array(seg, dtype=np.float32))
        u["npend"] += seg.shape[0]
        self._run(ctx)

    def _open(self, at: int, ctx: Context) -> None:
        pre = np.zeros(0, np.float32)
        if self._pre_roll and self._hist_end == at and self._hist.shape[0]:
            pre = self._hist[-self._pre_roll :]
        self._hist = np.zeros(0, np.float32)
        self._hist_end = None
        self._feat.reset()
        self._dec.reset()
        if self._open_set is not None:
            self._open_set.reset()
        self._enc_state = None
        self._utt = {
            "id": self._next_id,
            "origin": at - pre.shape[0],
            "pend": [pre] if pre.shape[0] else [],
            "npend": pre.shape[0],
            "fed": 0,
            "rev": 0,
            "last_text": "",
            "last_partial": 0,
        }
        self._next_id += 1

    def _run(self, ctx: Context, final: bool = False) -> None:
        """Push the pending samples on the 240-sample grid (all of them when ``final``) and decode the new frames."""
        u = self._utt
        assert u is not None
        while u["npend"] >= FRAME_SHIFT or (final and u["npend"]):
            buf = np.concatenate(u["pend"]) if len(u["pend"]) != 1 else u["pend"][0]
            n = FRAME_SHIFT if buf.shape[0] >= FRAME_SHIFT else buf.shape[0]
            piece, rest = buf[:n], buf[n:]
            u["pend"] = [rest] if rest.shape[0] else []
            u["npend"] = rest.shape[0]
            u["fed"] += n
            feats = self._feat.push(piece)
            for k in range(feats.shape[0]):
                self._frame(feats[k], ctx)
            if not final and self._dec.t >= self._max_frames:
                # cut a long utterance at the end of its last frame; the samples after it (the
                # pushed ones no frame used yet, and the pending ones) start a new utterance
                used = FRAME_SHIFT * (self._dec.t - 1) + FRAME_SPAN
                extra = u["fed"] - used
                assert 0 <= extra <= piece.shape[0]
                carry = ([piece[piece.shape[0] - extra :]] if extra else []) + u["pend"]
                u["fed"] = used
                at = u["origin"] + used
                npend = u["npend"] + extra
                self._finalise(ctx, run=False)
                self._open(at, ctx)
                u = self._utt
                assert u is not None
                u["pend"], u["npend"] = carry, npend

    def _frame(self, feat: Any, ctx: Context) -> None:
        import torch

        with torch.no_grad():
            x = feat.to(self._dtype)[None, None, :]
            if self._onehot is not None:
                x = x.expand(self._onehot.shape[0], 1, x.shape[2])
            enc, self._enc_state = self._m.encoder_step(x, self._enc_state, self._onehot)
        self._dec.advance(enc[:, 0] if self._onehot is not None else enc[0, 0])
        e = enc[0, 0].double().numpy() if self._open_set is not None and self._open_set.rule.score == "probe" else None
        if self._open_set is not None and self._open_set.update(self._dec.lid.post_last, e) and self.unknown_stop:
            self._dec.lid.switch_off_all()
        u = self._utt
        assert u is not None
        t = self._dec.t
        if t - u["last_partial"] >= max(self._partial_every, 1):
            res = self._dec.result()
            text, words = self._text(res, u)
            if text != u["last_text"]:
                ctx.emit(ASR_PARTIAL, self._payload(res, u, text, words, final=False), span=(u["origin"], u["origin"] + u["fed"]))
                u["rev"] += 1
                u["last_text"] = text
                u["last_partial"] = t

    def _text(self, res: Any, u: Mapping[str, Any]) -> tuple[str, tuple[AsrWord, ...]]:
        cfg = self._m.cfg
        if cfg.multi:
            syms = [self._symbols[res.lang][t] for t in res.tokens]
        else:  # union ids
            import torch

            lg, loc = self._m.from_union(torch.tensor(res.tokens, dtype=torch.long))
            syms = [self._symbols[int(a)][int(b)] for a, b in zip(lg.tolist(), loc.tolist())]
        o = u["origin"]
        end = o + u["fed"]
        words = tuple(
            AsrWord(w, min(o + FRAME_SHIFT * a + FRAME_SPAN - FRAME_SHIFT, end), min(o + FRAME_SHIFT * b + FRAME_SPAN, end))
            for w, a, b in words_of(syms, res.frames)
        )
        return " ".join(w.text for w in words), words

    def _lang_name(self, lang: int) -> str:
        return self._m.cfg.languages[lang] if lang >= 0 else ""

    def _payload(self, res: Any, u: Mapping[str, Any], text: str, words: tuple[AsrWord, ...], final: bool) -> AsrResult:
        return AsrResult(
            utterance_id=int(u["id"]),
            revision=int(u["rev"]),
            final=final,
            lang=self._lang_name(res.lang),
            text=text,
            words=words,
            confidence=float(res.confidence),
            score=float(res.score),
            frames=int(res.frames_total),
            t_avg=float(res.t_avg),
        )

    def _finalise(self, ctx: Context, run: bool = True) -> None:
        u = self._utt
        assert u is not None
        if run:
            self._run(ctx, final=True)
        self._utt = None
        if self._dec.t == 0:
            return
        res = self._dec.result()
        text, words = self._text(res, u)
        span = (int(u["origin"]), int(u["origin"] + u["fed"]))
        closed = self._lang_name(res.lang)
        unknown = self._open_set is not None and self._open_set.finish()
        payload = self._payload(res, u, text, words, final=True)
        if unknown:  # no text: the decoders spell only the model's languages (see docs/asr.md)
            payload = AsrResult(payload.utterance_id, payload.revision, True, UNKNOWN, "", (), 0.0, payload.score, payload.frames, payload.t_avg)
        ctx.emit(ASR_FINAL, payload, span=span)
        cfg = self._m.cfg
        dec = self._dec
        names = cfg.languages
        decoded = [s.lang for s in dec.searches]
        if cfg.variant == "vanilla":
            method, conf = "tokens", float(res.confidence)
        elif len(decoded) == 1:
            method, conf = "fixed", float(res.confidence)
        elif dec.use_lid and self._lid_select == "last":
            method, conf = "lid-last", float(res.lid_last[res.lang])
        elif dec.use_lid:
            method, conf = "lid", float(res.lid_posterior[res.lang])
        else:
            method, conf = "score", float(res.confidence)
        if dec.use_lid and len(decoded) > 1 and dec.lid.log_prior is not None:
            method += "+prior"
        posts = {names[i]: float(p) for i, p in enumerate(res.lid_posterior)} if res.lid_posterior is not None else {}
        off = {} if cfg.variant == "vanilla" else {names[int(lg)]: res.off_frame[int(lg)] for lg in decoded}
        summary = dict(self._open_set.summary()) if self._open_set is not None else None
        lang = UNKNOWN if unknown else closed
        ctx.emit(LID_RESULT, LidResult(int(u["id"]), lang, method, conf, posts, off, float(res.t_avg), int(res.frames_total), closed, summary), span=span)
