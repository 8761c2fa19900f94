"""Captions for the contrastive audio-text model, written from a ``streamkit corpus sed`` clip's ground truth.

A caption says which events the clip holds (a clause per event: "a dog barks"), their order or
overlap ("while", "then"), how loud one is (its SNR: "loudly", "in the distance"), how long or
when a lone event is, and the background of a real-domain clip (babble, mains hum). Two grammars
with disjoint wordings: :data:`TRAIN` for training and :data:`TEST` for the held-out captions, so
that a test caption never reuses a training clause, connective or modifier ("a dog barks" /
"barking can be heard", "then" / "and later", "loudly" / "right next to the microphone").
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["GRAMMARS", "TEST", "TRAIN", "Grammar", "caption", "captions"]

LOUD_DB = 18.0  #: an event at this SNR or more is "loud"
QUIET_DB = 5.0  #: below this, "quiet"
OVERLAP = 0.3  #: two events overlap when they share this fraction of the shorter one


@dataclass(frozen=True)
class Grammar:
    """The wordings of one split: clauses per class and the words that join and qualify them."""

    clauses: Mapping[str, Sequence[str]]
    together: Sequence[str]  #: "{a} while {b}"
    then: Sequence[str]  #: "{a}, then {b}"
    loud: Sequence[str]
    quiet: Sequence[str]
    short: Sequence[str]
    long: Sequence[str]
    early: Sequence[str]
    late: Sequence[str]
    babble: Sequence[str]
    hum: Sequence[str]
    list_end: Sequence[str]  #: the joint before the last of three or more


TRAIN = Grammar(
    clauses={
        "Alarm_bell_ringing": ["an alarm bell rings", "a bell is ringing", "an alarm goes off", "a beeper beeps"],
        "Blender": ["a blender whirs", "a blender is running", "someone blends food", "a blender spins"],
        "Cat": ["a cat meows", "a cat is meowing", "a kitten mews", "a cat miaows"],
        "Dishes": ["dishes clatter", "plates clink together", "someone washes the dishes", "cutlery rattles on plates"],
        "Dog": ["a dog barks", "a dog is barking", "a puppy yaps", "a dog growls and barks"],
        "Electric_shaver_toothbrush": ["an electric shaver buzzes", "someone shaves with an electric razor",
                                       "an electric toothbrush hums", "a shaver is buzzing"],
        "Frying": ["food sizzles in a pan", "something is frying", "oil crackles in a frying pan", "a pan sizzles"],
        "Running_water": ["water runs from a tap", "water is running", "a faucet is left on", "water flows into a basin"],
        "Speech": ["a person speaks", "someone is talking", "a man says something", "a voice speaks a few words"],
        "Vacuum_cleaner": ["a vacuum cleaner runs", "someone is vacuuming", "a vacuum cleaner roars", "a vacuum cleaner is switched on"],
    },
    together=["{a} while {b}", "{a} as {b}", "{a} and at the same time {b}"],
    then=["{a}, then {b}", "{a} and afterwards {b}", "first {a}, then {b}"],
    loud=["loudly", "nearby"],
    quiet=["quietly", "in the distance"],
    short=["briefly", "for a second"],
    long=["for a long time", "continuously"],
    early=["at the beginning", "at the start"],
    late=["near the end", "at the end"],
    babble=["with people murmuring in the background", "with a crowd in the background"],
    hum=["with an electrical hum", "over a humming noise"],
    list_end=["and", "and finally"],
)

TEST = Grammar(
    clauses={
        "Alarm_bell_ringing": ["an alarm is sounding", "a buzzer sounds", "a warning tone repeats"],
        "Blender": ["a food processor grinds", "a kitchen mixer whirls", "a blender motor spins up"],
        "Cat": ["a kitty cries", "a feline yowls", "a cat mews plaintively"],
        "Dishes": ["crockery and cutlery clank", "cups and plates are stacked", "kitchenware clinks"],
        "Dog": ["a hound yelps", "barking can be heard", "a dog woofs"],
        "Electric_shaver_toothbrush": ["a razor hums", "a beard trimmer drones", "a toothbrush whirrs"],
        "Frying": ["bacon sizzles", "cooking oil spits", "something fries on the stove"],
        "Running_water": ["a tap is running", "water splashes into a sink", "a stream of water pours"],
        "Speech": ["people are chatting", "a voice can be heard", "a woman is speaking"],
        "Vacuum_cleaner": ["the floor is being hoovered", "a hoover drones", "a vacuum whines"],
    },
    together=["{a} whilst {b}", "{a} and simultaneously {b}", "{a}; meanwhile {b}"],
    then=["{a} and later {b}", "{a} before {b}", "{a}; after that {b}"],
    loud=["right next to the microphone", "very clearly"],
    quiet=["faintly", "far away"],
    short=["for a moment", "very shortly"],
    long=["throughout", "for most of the clip"],
    early=["straight away", "early on"],
    late=["late in the clip", "towards the close"],
    babble=["over the chatter of a crowd", "amid background conversation"],
    hum=["over a mains buzz", "with a low electric drone behind it"],
    list_end=["and also", "plus"],
)

GRAMMARS = {"train": TRAIN, "test": TEST}


def _overlaps(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    inter = min(a["offset"], b["offset"]) - max(a["onset"], b["onset"])
    return inter > OVERLAP * max(1e-3, min(a["offset"] - a["onset"], b["offset"] - b["onset"]))


def _clause(ev: Mapping[str, Any], g: Grammar, rng: random.Random, *, alone: bool, clip_s: float, timing: bool = True) -> str:
    text = rng.choice(list(g.clauses[ev["event_label"]]))
    mods = []
    snr = ev.get("snr_db")
    if snr is not None and rng.random() < 0.7:
        if snr >= LOUD_DB:
            mods.append(rng.choice(list(g.loud)))
        elif snr < QUIET_DB:
            mods.append(rng.choice(list(g.quiet)))
    if alone and timing and rng.random() < 0.6:
        dur = ev["offset"] - ev["onset"]
        if dur < 1.5:
            mods.append(rng.choice(list(g.short)))
        elif dur > 0.6 * clip_s:
            mods.append(rng.choice(list(g.long)))
        if dur <= 0.6 * clip_s:
            mid = 0.5 * (ev["onset"] + ev["offset"])
            if mid < 0.3 * clip_s:
                mods.append(rng.choice(list(g.early)))
            elif mid > 0.7 * clip_s:
                mods.append(rng.choice(list(g.late)))
    return " ".join([text, *mods])


def caption(clip: Mapping[str, Any], split: str = "train", rng: random.Random | None = None, *, clip_s: float = 10.0,
            timing: bool = True) -> str:  # fmt: skip
    """One caption of ``clip`` (an entry of a corpus subset's ``meta.json``) in the wording of ``split`` (``train``/``test``).

    Events of the same class are named once; ``timing=False``: no duration or position words (an isolated clip). A clip without events is "nothing but background noise" (train) or
    "only background noise" (test)."""
    g = GRAMMARS[split]
    rng = rng or random.Random(0)
    evs = sorted(clip.get("events") or [], key=lambda e: e["onset"])
    seen: dict[str, dict[str, Any]] = {}
    for e in evs:
        if e["event_label"] in g.clauses and e["event_label"] not in seen:
            seen[e["event_label"]] = dict(e)
    evs = list(seen.values())
    if not evs:
        text = "nothing but background noise" if split == "train" else "only background noise"
    elif len(evs) == 1:
        text = _clause(evs[0], g, rng, alone=True, clip_s=clip_s, timing=timing)
    elif len(evs) == 2:
        a, b = (_clause(e, g, rng, alone=False, clip_s=clip_s) for e in evs)
        form = rng.choice(list(g.together if _overlaps(evs[0], evs[1]) else g.then))
        text = form.format(a=a, b=b)
    else:
        parts = [_clause(e, g, rng, alone=False, clip_s=clip_s) for e in evs]
        text = ", ".join(parts[:-1]) + f" {rng.choice(list(g.list_end))} " + parts[-1]
    bg = clip.get("background") or {}
    if clip.get("domain") == "real" and rng.random() < 0.7:
        if bg.get("babble_db") is not None:
            text += " " + rng.choice(list(g.babble))
        elif bg.get("hum_hz") is not None:
            text += " " + rng.choice(list(g.hum))
    return text[0].upper() + text[1:]


def captions(clip: Mapping[str, Any], split: str, n: int, seed: int, *, clip_s: float = 10.0, timing: bool = True) -> list[str]:
    """``n`` captions of ``clip`` (distinct where the grammar allows), drawn with ``seed``."""
    rng = random.Random(f"{seed}:{clip.get('id')}")
    out: list[str] = []
    for _ in range(8 * n):
        c = caption(clip, split, rng, clip_s=clip_s, timing=timing)
        if c not in out:
            out.append(c)
        if len(out) == n:
            break
    while len(out) < n:
        out.append(out[-1])
    return out
