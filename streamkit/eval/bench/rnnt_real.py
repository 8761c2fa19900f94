"""The LID RNN-T on real English beside pocketsphinx, and the synthetic split's shutoff figures, one run.

Usage::

    .venv/bin/python benchmarks/rnnt_real.py --cache DEBS [--corpus C] [--model streamkit/models/weights/rnnt_lid.pt]
        [--work DIR] [--sweep-limit 1000] [--skip-pocketsphinx]

* **Real English, held out** (evaluation-only packages, :mod:`streamkit.data.real_packages`,
  fetched into ``--cache`` and unpacked under ``--work``, never committed): the five LibriVox
  sentences and five card-game commands of ``pocketsphinx-testdata`` with the package's own
  transcription files, and the single-word prompts of ``asterisk-core-sounds-en-wav`` whose text
  follows from the file name (``digits/``: numbers, ordinals, months, weekdays, a few words;
  ``phonetic/``: the NATO alphabet). The Debian package has no prompt texts
  (upstream's ``core-sounds-en.txt`` is not in it), so the multi-word prompts, whose names are
  abbreviations, are left out rather than guessed.
* **Our model** through the path ``streamkit transcribe`` takes
  (:func:`streamkit.models.transcribe.transcribe_array`: statistical SAD gate, streaming block,
  the CLI's defaults), once free-spelling (beam 4) and once with ``--lexicon system`` (beam 16,
  word penalty 3). A file's hypothesis is its utterances' texts in order; its language is that of
  its longest utterance (no utterance, or ``unknown``: wrong).
* **Peer**: pocketsphinx's ``en-us`` model (``pip install pocketsphinx``; the model ships in the
  wheel), one utterance per file, 16 kHz (the 8 kHz prompts resampled up with soxr).
* **Synthetic test split** (``--corpus``, a ``streamkit corpus asr`` corpus): the streaming block
  on the split through :func:`streamkit.eval.bench.rnnt_multilingual.measure`, the headline's
  protocol (lexicon, beam 16, word penalty 3, last-frame rules, oracle boundaries) with no shutoff
  and at tau 30 / s_th 0.5: LID accuracy, T_avg, decoder CPU and RT factor.

WER and CER: jiwer, word-weighted over the files of a set. One thread (torch, BLAS). Writes
``benchmarks/results/rnnt_real.json`` (``--out``) and prints the real-speech ASR goals with pass/miss.
"""

from __future__ import annotations

import argparse
import re
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.eval.bench import RESULTS, machine_info, write_result

PACKAGES = ("pocketsphinx-testdata", "asterisk-core-sounds-en-wav")

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
         "seventeen eighteen nineteen").split()  # fmt: skip
_TENS = {20: "twenty", 30: "thirty", 40: "forty", 50: "fifty", 60: "sixty", 70: "seventy", 80: "eighty", 90: "ninety"}
_ORD = ("zeroth first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth fourteenth "
        "fifteenth sixteenth seventeenth eighteenth nineteenth").split()  # fmt: skip
_ORD_TENS = {n: w[:-1] + "ieth" for n, w in _TENS.items()}
_MONTHS = "january february march april may june july august september october november december".split()
_DAYS = "sunday monday tuesday wednesday thursday friday saturday".split()
_DIGIT_WORDS = ("billion dollars hundred million minus pound star thousand today tomorrow yesterday oh at").split()
_NATO = dict(zip("abcdefghijklmnopqrstuvwxyz", ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
                                                "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()))  # fmt: skip
_SPHINX_LINE = re.compile(r"^\s*(?:<s>)?\s*(.*?)\s*(?:</s>)?\s*\(([^()\s]+)\)\s*$")


def norm_text(s: str) -> str:
    """Lower case, apostrophes dropped, every other non-letter a space, spaces collapsed (both sides of WER)."""
    s = unicodedata.normalize("NFC", s).lower().replace("'", "").replace("\u2019", "")
    return " ".join("".join(c if c.isalpha() else " " for c in s).split())


def sphinx_transcripts(text: str) -> dict[str, str]:
    """``{utterance id: text}`` of a Sphinx transcription file (``<s> words </s> (id)`` per line)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        m = _SPHINX_LINE.match(line)
        if m is None:
            raise ValueError(f"not a Sphinx transcription line: {line!r}")
        out[m.group(2)] = norm_text(m.group(1))
    return out


def asterisk_reference(rel: str) -> str | None:
    """The words of an Asterisk prompt whose text follows from its path (``.../digits/h-3.wav`` ->
    ``third``), else None (a multi-word prompt: its name does not give its text)."""
    parts = Path(rel).with_suffix("").parts
    if len(parts) < 2:
        return None
    folder, name = parts[-2], parts[-1]
    if folder == "phonetic":
        m = re.fullmatch(r"([a-z])_p", name)
        return _NATO[m.group(1)] if m else ("niner" if name in ("9_p", "niner") else None)
    if folder != "digits":
        return None
    if name.isdigit():
        n = int(name)
        return _ONES[n] if n < 20 else _TENS.get(n)
    if m := re.fullmatch(r"h-(\d+)", name):
        n = int(m.group(1))
        return _ORD[n] if 0 < n < 20 else _ORD_TENS.get(n)
    if m := re.fullmatch(r"h-(hundred|thousand|million|billion)", name):
        return m.group(1) + "th"
    if m := re.fullmatch(r"mon-(\d+)", name):
        return _MONTHS[int(m.group(1))] if int(m.group(1)) < 12 else None
    if m := re.fullmatch(r"day-(\d)", name):
        return _DAYS[int(m.group(1))] if int(m.group(1)) < 7 else None
    return name if name in _DIGIT_WORDS else None


@dataclass(frozen=True)
class RealUtt:
    source: str  # librivox | cards | asterisk
    id: str
    rate: int
    ref: str
    x: np.ndarray  # float32 mono, native rate


def real_english(cache: Path, work: Path) -> list[RealUtt]:
    """The held-out real English utterances with a reference text (module docstring)."""
    from streamkit.data import real_corpus as rc
    from streamkit.data.real_packages import check_roles, fetch, pin, unpack

    check_roles("eval", PACKAGES)
    out: list[RealUtt] = []
    for pkg in PACKAGES:
        p = pin(pkg)
        root = unpack(fetch(p, cache), work / pkg, p)
        refs: dict[str, str] = {}
        if pkg == "pocketsphinx-testdata":
            data = root / "usr/share/pocketsphinx/test/data"
            for src, f in (("librivox", "librivox/transcription"), ("cards", "cards/cards.transcription")):
                refs |= {f"{src}/{k}": v for k, v in sphinx_transcripts((data / f).read_text(encoding="utf-8")).items()}
        for s in rc.inventory(pkg, root):
            if s.cls != "speech":
                continue
            if pkg == "pocketsphinx-testdata":
                m = re.search(r"/(librivox|cards)/([^/]+)\.wav$", s.path)
                key = f"{m.group(1)}/{m.group(2)}" if m else None
                ref, source = (refs.get(key), m.group(1)) if key else (None, "")
            else:
                ref, source = asterisk_reference(s.path), "asterisk"
            if ref:
                x, sr = rc.load(root, s, None)
                out.append(RealUtt(source, s.path.rsplit("/", 2)[-2] + "/" + Path(s.path).stem, sr, ref, np.array(x, np.float32)))
    return out


def file_answer(utts: list[dict[str, Any]]) -> tuple[str, str]:
    """(hypothesis, language) of one file from ``transcribe``'s utterance dicts: texts in order,
    the language of the longest utterance (``none`` without any)."""
    if not utts:
        return "", "none"
    longest = max(utts, key=lambda u: u["end_s"] - u["start_s"])
    return " ".join(u["text"] for u in utts if u["text"]), longest["lang"]


def wer_cer(refs: list[str], hyps: list[str]) -> dict[str, float]:
    """WER and CER in % over a set (jiwer, counts pooled over its files)."""
    import jiwer

    hyps = [norm_text(h) for h in hyps]
    w = jiwer.process_words(refs, hyps)
    c = jiwer.process_characters(refs, hyps)
    return {"wer": round(100 * w.wer, 2), "cer": round(100 * c.cer, 2)}


def _pocketsphinx() -> Callable[[np.ndarray, int], str]:
    import soxr
    from pocketsphinx import Decoder

    dec = Decoder(samprate=16000, loglevel="FATAL")

    def run(x: np.ndarray, sr: int) -> str:
        y = x if sr == 16000 else soxr.resample(x, sr, 16000, quality="HQ")
        pcm = (np.clip(y, -1.0, 32767 / 32768) * 32768).astype("<i2")
        dec.start_utt()
        dec.process_raw(pcm.tobytes(), full_utt=True)
        dec.end_utt()
        h = dec.hyp()
        return h.hypstr if h is not None else ""

    return run


def real_rows(utts: list[RealUtt], systems: dict[str, Callable[[RealUtt], tuple[str, str | None]]]) -> dict[str, Any]:
    """Per system and source (and ``all``): WER, CER, LID accuracy (``en``), CPU per audio second."""
    res: dict[str, Any] = {}
    for name, fn in systems.items():
        hyps: list[str] = []
        langs: list[str | None] = []
        cpu = 0.0
        fn(utts[0])  # untimed warm-up: model load, lexicon tries, numba compilation
        for u in utts:
            t0 = time.process_time()
            h, lg = fn(u)
            cpu += time.process_time() - t0
            hyps.append(h)
            langs.append(lg)
        rows: dict[str, Any] = {}
        for src in [*dict.fromkeys(u.source for u in utts), "all"]:
            ix = [i for i, u in enumerate(utts) if src in ("all", u.source)]
            row = {"files": len(ix), "words": sum(len(utts[i].ref.split()) for i in ix), **wer_cer([utts[i].ref for i in ix], [hyps[i] for i in ix])}
            if langs[0] is not None:
                row["lid_en_pct"] = round(100 * float(np.mean([langs[i] == "en" for i in ix])), 2)
                row["languages"] = {lg: sum(langs[i] == lg for i in ix) for lg in sorted({str(langs[i]) for i in ix})}
            rows[src] = row
        audio_s = sum(len(u.x) / u.rate for u in utts)
        rows["all"]["cpu_per_audio_s"] = round(cpu / audio_s, 4)
        rows["examples"] = [{"id": u.id, "ref": u.ref, "hyp": norm_text(h)} for u, h in list(zip(utts, hyps))[:3] + list(zip(utts, hyps))[-2:]]
        res[name] = rows
    return res


def synthetic_rows(corpus: Path, model: str, limit: int | None) -> list[dict[str, Any]]:
    """The headline protocol on ``corpus``'s test split: no shutoff, then tau 30 / s_th 0.5."""
    from streamkit.eval.bench.rnnt_multilingual import measure, pick
    from streamkit.train.rnnt_corpus import AsrCorpus, read_audio

    c = AsrCorpus(corpus)
    utts = pick(c.split("test"), c.langs, limit)
    audio = {u.id: read_audio(u) for u in utts}
    base = {"beam": 16, "max_symbols_per_frame": 3, "utterance_mode": "tags", "lexicon": "system", "word_penalty": 3.0,
            "lid_select": "last", "lid_score": "last"}  # fmt: skip
    rows = []
    for tau, sth in ((None, None), (30, 0.5)):
        rows.append(measure("lid", "sweep", model, utts, audio, c.langs, **base, tau_frames=tau, s_th=sth))
        r = rows[-1]
        print(f"  synthetic tau {tau} s_th {sth}: LID {r['lid_acc_utt']} %, T_avg {r['t_avg']}, WER {r['wer_avg']}, "
              f"decoder CPU {r['decoder_cpu_per_audio_s']}, RT {r['rt_cpu']}", flush=True)  # fmt: skip
    return rows


def goals(res: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    """(goal, target, measured, met) rows of the real-speech ASR goals that this run measures (None: not measured / no target)."""
    out: list[tuple[str, str, str, bool | None]] = []
    lid_real = res.get("real", {}).get("ours", {}).get("all", {}).get("lid_en_pct")
    if lid_real is not None:
        out.append(("real English identified as en", ">= 90 %", f"{lid_real:.1f} %", lid_real >= 90))
    for name in ("ours", "ours_lexicon", "pocketsphinx"):
        a = res.get("real", {}).get(name, {}).get("all")
        if a:
            out.append((f"real English WER / CER, {name}", "(reported)", f"{a['wer']:.1f} / {a['cer']:.1f} %", None))
    syn = res.get("synthetic")
    if syn:
        free, shut = syn[0], syn[1]
        cut = 100 * (1 - shut["decoder_cpu_per_audio_s"] / free["decoder_cpu_per_audio_s"])
        out += [("synthetic LID, no shutoff", ">= 95 %", f"{free['lid_acc_utt']:.2f} %", free["lid_acc_utt"] >= 95),
                ("synthetic LID, tau 30 / s_th 0.5", ">= 95 %", f"{shut['lid_acc_utt']:.2f} %", shut["lid_acc_utt"] >= 95),
                ("T_avg at tau 30 / s_th 0.5", "<= 1.8", f"{shut['t_avg']:.3f}", shut["t_avg"] <= 1.8),
                ("decoder CPU, shutoff vs none", "-40 %", f"{-cut:+.1f} %", cut >= 40),
                ("RT factor at tau 30 / s_th 0.5", "<= 0.15", f"{shut['rt_cpu']:.3f}", shut["rt_cpu"] <= 0.15)]  # fmt: skip
    return out


def fmt_goals(rows: list[tuple[str, str, str, bool | None]]) -> str:
    w = max(len(r[0]) for r in rows) if rows else 4
    lines = [f"{'goal':<{w}}  {'target':<10}  {'measured':<18}  result", "-" * (w + 40)]
    lines += [f"{g:<{w}}  {t:<10}  {m:<18}  {'' if ok is None else ('pass' if ok else 'MISS')}" for g, t, m, ok in rows]
    return "\n".join(lines)


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "(not installed)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", required=True, help="directory of the pinned Debian packages (downloaded there when missing)")
    ap.add_argument("--work", default=None, help="where the packages are unpacked (default CACHE/unpacked)")
    ap.add_argument("--model", default=None, help="LID RNN-T weights (default: the shipped rnnt_lid.pt)")
    ap.add_argument("--corpus", default=None, help="a `streamkit corpus asr` corpus: also run its test split (synthetic figures)")
    ap.add_argument("--sweep-limit", type=int, default=1000, help="synthetic test utterances per language (default 1000: all)")
    ap.add_argument("--skip-pocketsphinx", action="store_true", help="leave out the peer")
    ap.add_argument("--out", default=str(RESULTS / "rnnt_real.json"))
    a = ap.parse_args(argv)
    import torch

    from streamkit.models.rnnt_stream import DEFAULT_BEAM, DEFAULT_LEXICON_BEAM, DEFAULT_WORD_PENALTY
    from streamkit.models.transcribe import default_weights, transcribe_array

    torch.set_num_threads(1)
    t0 = time.monotonic()
    weights = a.model or str(default_weights())
    cache = Path(a.cache)
    utts = real_english(cache, Path(a.work) if a.work else cache / "unpacked")
    print(f"real English: {len(utts)} files ({', '.join(f'{s} {sum(u.source == s for u in utts)}' for s in dict.fromkeys(u.source for u in utts))}), "
          f"{sum(len(u.x) / u.rate for u in utts):.0f} s", flush=True)  # fmt: skip

    def ours(**kw: Any) -> Callable[[RealUtt], tuple[str, str | None]]:
        return lambda u: file_answer(transcribe_array(u.x, weights, rate=u.rate, threads=1, **kw)[0])

    systems: dict[str, Callable[[RealUtt], tuple[str, str | None]]] = {
        "ours": ours(beam=DEFAULT_BEAM),
        "ours_lexicon": ours(beam=DEFAULT_LEXICON_BEAM, lexicon="system", word_penalty=DEFAULT_WORD_PENALTY),
    }
    if not a.skip_pocketsphinx:
        ps = _pocketsphinx()
        systems["pocketsphinx"] = lambda u: (ps(u.x, u.rate), None)
    res: dict[str, Any] = {"benchmark": "benchmarks/rnnt_real.py", "model": Path(weights).name, "real": real_rows(utts, systems)}
    for name, rows in res["real"].items():
        print(f"  {name:<13} " + "; ".join(f"{s} WER {r['wer']} CER {r['cer']}" + (f" en {r['lid_en_pct']} %" if "lid_en_pct" in r else "")
                                       for s, r in rows.items() if s != "examples"), flush=True)  # fmt: skip
    if a.corpus:
        from streamkit.train.rnnt_corpus import AsrCorpus

        res["synthetic"] = synthetic_rows(Path(a.corpus), weights, a.sweep_limit)
        res["synthetic_corpus_command"] = AsrCorpus(Path(a.corpus)).command
    res["goals"] = [{"goal": g, "target": t, "measured": m, "met": ok} for g, t, m, ok in goals(res)]
    print()
    print(fmt_goals(goals(res)))
    res["decoding"] = {"ours": f"streamkit transcribe defaults: stat SAD gate, beam {DEFAULT_BEAM}, tau 30 / s_th 0.5, auto rules",
                       "ours_lexicon": f"the same with --lexicon system: beam {DEFAULT_LEXICON_BEAM}, word penalty {DEFAULT_WORD_PENALTY:g}",
                       "pocketsphinx": f"pocketsphinx {_version('pocketsphinx')} en-us (PyPI wheel) defaults, 16 kHz, one utterance per file",
                       "threads": 1}  # fmt: skip
    res["seconds"] = round(time.monotonic() - t0, 1)
    res["machine"] = machine_info()
    res["command"] = "python benchmarks/rnnt_real.py " + " ".join(argv if argv is not None else __import__("sys").argv[1:])
    res["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return write_result(Path(a.out), res)
