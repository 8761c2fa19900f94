"""Statistical SAD + multilingual streaming RNN-T over audio: :func:`transcribe_file`, :func:`transcribe_array`.

Per file the graph is the one the live monitor runs, streaming the file in bounded memory: the
audio (``io.file``; any rate and channel count, mixed to mono by ``dsp.mono`` and resampled to
8 kHz by ``dsp.resample``, soxr HQ, as ``streamkit sad``) -> ``dsp.speech_gate`` (the
statistical SAD; the audio passes with sample-exact speech tags) -> ``models.rnnt_asr`` (one beam
search per language in lockstep, LID shutoff). One dict per utterance: start_s, end_s, lang, text,
confidence, mean LID posteriors, the LID rule used, T_avg, words with their times. ``sad="none"``
decodes each file as one stream (cut every ``max_utterance_s``) without a SAD.
``streamkit transcribe`` (:mod:`streamkit.cli.files`) prints them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streamkit.core.errors import StreamkitError

# the option defaults are the block's (models.rnnt_asr): one source of truth for the CLI and graph files
from streamkit.models.rnnt_stream import DEFAULT_BEAM, DEFAULT_PRE_ROLL_S, DEFAULT_S_TH, DEFAULT_TAU_FRAMES

RATE = 8000


def default_weights() -> Path:
    from streamkit.models import RNNT_WEIGHTS

    return RNNT_WEIGHTS


def transcribe_array(x: Any, weights: str | Path, *, rate: Any = RATE, **kw: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Transcribe float32 audio ``x`` (``(n,)`` or ``(n, channels)``) at ``rate`` Hz (default 8 kHz):
    (one dict per utterance, runner stats).

    The graph of :func:`transcribe_file` with the array in place of ``io.file`` (channels
    averaged, another rate resampled to 8 kHz). Keyword arguments as :func:`transcribe_file`'s.
    """
    import numpy as np

    from streamkit.io.collect import VectorSource

    a = np.asarray(x, np.float32)
    return _transcribe(VectorSource(samples=a, rate=rate, sizes=max(1, len(a))), weights, **kw)


def transcribe_file(path: str | Path, weights: str | Path, **kw: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Transcribe an audio file as a stream (bounded memory, whatever its length).

    The graph: ``io.file`` (``chunk_s`` of audio per read) -> ``dsp.mono`` (several channels:
    their mean) -> ``dsp.resample`` (soxr HQ to 8 kHz, when the file has another rate) -> the
    SAD gate and the ASR of :func:`transcribe_array`, which sees the samples
    :func:`streamkit.eval.sad_systems.load_audio` would give (the resampler streams bit-exactly).
    Returns (one dict per utterance, runner stats; ``stats["samples_8k"]`` the samples at 8 kHz).
    """
    from streamkit.io.file_source import FileSource

    return _transcribe(FileSource(path=str(path)), weights, **kw)


def _transcribe(src: Any, weights: str | Path, *, sad: str = "stat", beam: int = DEFAULT_BEAM, tau: float | None = DEFAULT_TAU_FRAMES, s_th: float | None = DEFAULT_S_TH,
                languages: list[str] | None = None, lid_select: str = "auto", lid_score: str = "auto", lid_prior: Any = None, pre_roll_s: float = DEFAULT_PRE_ROLL_S, max_utterance_s: float = 30.0,
                threads: int = 1, lexicon: str | None = None, word_penalty: float = 0.0, chunk_s: float = 0.2) -> tuple[list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
    from streamkit.core.errors import ConfigError
    from streamkit.core.graph import Graph
    from streamkit.core.runtime import Runner
    from streamkit.dsp.front import mono_at
    from streamkit.dsp.speech_gate import SpeechGate
    from streamkit.models.rnnt_stream import ASR_FINAL, LID_RESULT, RnntAsr

    g = Graph("transcribe")
    try:
        chain, _ = mono_at(g, src, RATE)
    except ConfigError as exc:  # io.file: an unreadable or missing file
        raise StreamkitError(str(exc)) from None
    asr = RnntAsr(model=str(weights), beam=beam, tau_frames=tau, s_th=s_th, languages=languages, threads=threads, lid_select=lid_select,
                  lid_score=lid_score, lid_prior=lid_prior, utterance_mode="tags" if sad == "stat" else "always", pre_roll_s=pre_roll_s if sad == "stat" else 0.0,
                  max_utterance_s=max_utterance_s, lexicon=lexicon, word_penalty=word_penalty, name="asr")  # fmt: skip
    gate = SpeechGate(events=False) if sad == "stat" else None
    if gate is not None:
        chain.append(g.add(gate, name="sad"))
    chain.append(g.add(asr, name="asr"))
    g.chain(*chain)
    r = Runner(g, keep_events=True, threaded_events=False, stats_interval_s=0, chunk_s=chunk_s)
    st = r.run()
    errors = [e for e in r.events if e.kind == "block.error"]
    if errors:
        raise StreamkitError(f"{getattr(errors[0].payload, 'message', errors[0].payload)}")
    if gate is not None and gate.nonfinite_samples:
        raise StreamkitError(f"{getattr(src, 'path', 'audio')}: audio contains NaN or inf samples ({gate.nonfinite_samples} at {RATE} Hz)")
    st["samples_8k"] = int(r.metrics("asr").items_in)
    lids = {e.payload.utterance_id: e.payload for e in r.events if e.kind == LID_RESULT}
    out: list[dict[str, Any]] = []
    for e in r.events:
        if e.kind != ASR_FINAL:
            continue
        res = e.payload
        lo, hi = e.span
        lid = lids.get(res.utterance_id)
        out.append({
            "start_s": round(lo / RATE, 3), "end_s": round(hi / RATE, 3), "lang": res.lang, "text": res.text,
            "confidence": round(float(res.confidence), 4), "t_avg": round(float(res.t_avg), 3),
            "lid": {k: round(float(v), 4) for k, v in (lid.posteriors.items() if lid else [])}, "lid_method": lid.method if lid else "",
            "words": [{"word": w.text, "start_s": round(w.start / RATE, 3), "end_s": round(w.end / RATE, 3)} for w in res.words],
        })  # fmt: skip
    return out, st
