"""Melodies for the synthetic singers: flamenco-like modes, phrases, personal motifs, ornaments.

A melody is a list of :class:`Phrase` objects, each a list of :class:`Note` objects (absolute
times in seconds, pitch in MIDI semitones, possibly fractional). :func:`compose` draws one
recording's melody for a singer (:class:`streamkit.data.singing.SingerProfile`):

* **Modes.** Notes are scale degrees of the Phrygian mode on the singer's tonic (the "mode of E"
  of flamenco) or of its flamenco variant with both thirds (the raised third of the Phrygian
  dominant is used on the way up, the minor third on the way down). Degree 0 is the tonic (the
  final of the cadence), degree -1 the leading tone from below (the seventh, a whole tone down).
* **Phrases** start on a degree the singer prefers (3-5), wander with the singer's step habit
  (mostly steps of one degree, sometimes thirds and leaps), carry 0-2 of the singer's **personal
  motifs** (fixed sequences of degree steps, 5-8 notes, with their own rhythm), and close with
  the descending Andalusian cadence material (degrees 3-2-1-0: A-G-F-E on E), shared by every
  singer, on a long final note.
* **Ornaments**: a note may become a melisma (a run of 3-6 short notes on one syllable, by
  steps of one degree) or carry a turn (upper neighbour, note, lower neighbour, note); each singer
  has its own probabilities.
* **Tempo and register** come from the profile (note base duration, tonic) and the recording
  (a transposition of -2..+2 semitones: a singer does not sing every recording in one key).

Every planted motif occurrence is recorded (``Phrase.motifs``: motif index, first and last note
index), so a motif miner can be scored against the truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from streamkit.data.singing import SingerProfile

__all__ = ["CADENCE", "MODES", "VOWELS", "Note", "Phrase", "compose", "degree_to_semitones", "random_motif"]

#: scale of each mode in semitones above the tonic, one octave (7 degrees)
MODES: dict[str, tuple[int, ...]] = {
    "phrygian": (0, 1, 3, 5, 7, 8, 10),
    "flamenco": (0, 1, 4, 5, 7, 8, 10),  # Phrygian dominant; see degree_to_semitones for the minor third on the way down
}
#: the Andalusian cadence descent in degrees (iv-III-II-I of the mode of E: A-G-F-E)
CADENCE = (3, 2, 1, 0)
VOWELS = ("a", "e", "i", "o", "u")
VOWEL_P = (0.35, 0.2, 0.1, 0.25, 0.1)


@dataclass
class Note:
    """One sung note: ``start``/``end`` in seconds, ``midi`` pitch (fractional allowed), ``vowel``,
    ``kind`` (``note``, ``melisma``, ``turn``, ``motif`` or ``cadence``)."""

    start: float
    end: float
    midi: float
    vowel: str
    kind: str = "note"

    def record(self) -> dict[str, Any]:
        return {"start": round(self.start, 4), "end": round(self.end, 4), "midi": round(self.midi, 3), "vowel": self.vowel, "kind": self.kind}


@dataclass
class Phrase:
    """A breath-to-breath phrase: its notes (contiguous, legato) and the planted motif occurrences
    ``(motif index, first note, last note)`` (note indices inclusive)."""

    notes: list[Note]
    motifs: list[tuple[int, int, int]] = field(default_factory=list)

    @property
    def start(self) -> float:
        return self.notes[0].start

    @property
    def end(self) -> float:
        return self.notes[-1].end

    def record(self) -> dict[str, Any]:
        return {
            "start": round(self.start, 4),
            "end": round(self.end, 4),
            "notes": [n.record() for n in self.notes],
            "motifs": [{"motif": m, "first_note": a, "last_note": b} for m, a, b in self.motifs],
        }


def degree_to_semitones(degree: int, mode: str, descending: bool = False) -> int:
    """Semitones above the tonic of scale ``degree`` (any integer; 7 is the octave). In the
    ``flamenco`` mode the third is major going up and minor going down (``descending``)."""
    scale = MODES[mode]
    octave, d = divmod(int(degree), 7)
    st = scale[d]
    if mode == "flamenco" and d == 2 and descending:
        st = 3
    return 12 * octave + st


def random_motif(rng: np.random.Generator) -> dict[str, list[float] | list[int]]:
    """A personal motif: 5-8 notes as degree steps between them (mostly ±1, some ±2, a leap
    allowed) and relative durations; never a constant run (it must show in a contour)."""
    n = int(rng.integers(5, 9))
    while True:
        steps = rng.choice([-3, -2, -1, 1, 2, 3], size=n - 1, p=[0.04, 0.14, 0.36, 0.3, 0.12, 0.04]).astype(int)
        if np.any(steps != steps[0]) and abs(int(np.sum(steps))) <= 4:
            break
    durs = rng.choice([0.5, 1.0, 1.0, 1.5, 2.0], size=n)
    return {"steps": [int(s) for s in steps], "durs": [float(d) for d in durs]}


def _vowel(rng: np.random.Generator) -> str:
    return str(VOWELS[int(rng.choice(len(VOWELS), p=VOWEL_P))])


def _phrase_degrees(p: SingerProfile, rng: np.random.Generator) -> tuple[list[tuple[int, float, str]], list[tuple[int, int, int]]]:
    """Degrees, relative durations and kinds of one phrase's skeleton, and its planted motifs."""
    seq: list[tuple[int, float, str]] = []
    motifs: list[tuple[int, int, int]] = []
    d = int(rng.choice(p.start_degrees))
    n_free = int(rng.integers(3, 9))
    n_motifs = int(rng.random() < p.motif_rate) + int(rng.random() < p.motif_rate * 0.4)
    slots = sorted(rng.choice(n_free + 1, size=n_motifs, replace=True).tolist()) if n_motifs else []
    steps_p = np.asarray(p.step_p, dtype=np.float64)
    for i in range(n_free + 1):
        while slots and slots[0] == i:
            slots.pop(0)
            k = int(rng.integers(len(p.motifs)))
            m = p.motifs[k]
            first = len(seq)
            seq.append((d, float(m["durs"][0]), "motif"))
            for s, du in zip(m["steps"], m["durs"][1:]):
                d += int(s)
                seq.append((d, float(du), "motif"))
            motifs.append((k, first, len(seq) - 1))
        if i < n_free:
            seq.append((d, float(rng.lognormal(0.0, 0.35)), "note"))
            step = int(rng.choice([-2, -1, 0, 1, 2, 3], p=steps_p))
            d = int(np.clip(d + step, -1, p.range_degrees))
            if d > p.range_degrees - 1 and step > 0:
                d -= 2
    # the cadence: from the nearest cadence degree below (or at) d, down to the tonic
    start = min(range(len(CADENCE)), key=lambda j: abs(CADENCE[j] - d))
    for j, c in enumerate(CADENCE[start:]):
        last = j == len(CADENCE) - start - 1
        seq.append((c, float(rng.uniform(*p.final_hold)) if last else float(rng.lognormal(0.0, 0.3)), "cadence"))
    return seq, motifs


def compose(p: SingerProfile, rng: np.random.Generator, duration_s: float, *, transpose: int = 0, mode: str | None = None,
            t0: float = 0.5) -> list[Phrase]:  # fmt: skip
    """One recording's melody: phrases separated by breaths (the singer's gap habit) from ``t0``
    until ``duration_s`` (the last phrase ends before ``duration_s - 0.3``, except a first phrase
    that is longer: there is always one). ``transpose`` shifts
    the singer's tonic in semitones; ``mode`` defaults to the singer's mode."""
    mode = mode or p.mode
    tonic = p.tonic_midi + transpose
    phrases: list[Phrase] = []
    t = float(t0)
    while True:
        skel, motifs = _phrase_degrees(p, rng)
        notes: list[Note] = []
        index_map: list[int] = []  # skeleton index -> first note index
        prev = None
        tt = t
        for deg, rel, kind in skel:
            descending = prev is not None and deg < prev
            midi = tonic + degree_to_semitones(deg, mode, descending)
            dur = p.note_s * rel
            vowel = _vowel(rng)
            index_map.append(len(notes))
            if kind == "note" and dur > 0.25 and rng.random() < p.melisma_rate:  # a melisma: a run on one vowel
                k = int(rng.integers(3, 7))
                dd = deg
                for _ in range(k):
                    sub = dur / k
                    notes.append(Note(tt, tt + sub, tonic + degree_to_semitones(dd, mode, False), vowel, "melisma"))
                    tt += sub
                    dd = int(np.clip(dd + int(rng.choice([-1, 1])), -1, p.range_degrees))
            elif kind == "note" and dur > 0.35 and rng.random() < p.turn_rate:  # a turn, then the note held
                orn = p.turn_note_s
                for dd in (deg + 1, deg, deg - 1):
                    notes.append(Note(tt, tt + orn, tonic + degree_to_semitones(dd, mode, dd < deg), vowel, "turn"))
                    tt += orn
                notes.append(Note(tt, tt + dur, midi, vowel, kind))
                tt += dur
            else:
                notes.append(Note(tt, tt + dur, midi, vowel, kind))
                tt += dur
            prev = deg
        index_map.append(len(notes))
        planted = [(k, index_map[a], index_map[b + 1] - 1) for k, a, b in motifs]
        if tt > duration_s - 0.3 and phrases:
            break
        phrases.append(Phrase(notes, planted))
        t = tt + float(rng.uniform(*p.breath_s))
        if tt > duration_s - 0.3:  # a first phrase longer than the recording: the recording grows
            break
    return phrases
