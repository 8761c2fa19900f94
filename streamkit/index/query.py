"""Free-text queries for the SED-posterior baseline: the words that name a SED class, and the words
matched against ASR transcripts.

:data:`SYNONYMS` maps words (and a few two-word phrases) to the ten DCASE classes of the shipped
SED model; a class's own name (``running water``, ``vacuum cleaner``) always counts. Words are
compared lower-case, with a plural or verb ``s`` and an ``ing`` ending removed. What the table does
not hold is not understood: no negation ("no dog" still names Dog), no order or time ("after",
"then"), no loudness; those are the contrastive model's job (docs/search.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["STOPWORDS", "SYNONYMS", "content_words", "parse_classes", "words"]

#: word or phrase -> SED class (DCASE 2019 task 4 names)
_TABLE = {
    "Alarm_bell_ringing": "alarm bell ring ringing siren beep beeper buzzer chime telephone phone doorbell klaxon",
    "Blender": "blender mixer blend smoothie|food processor",
    "Cat": "cat meow miaow kitten purr",
    "Dishes": "dish dishes plate cutlery clink clatter crockery glass cup spoon",
    "Dog": "dog bark puppy woof howl yelp growl",
    "Electric_shaver_toothbrush": "shaver razor toothbrush shave trimmer|electric shaver",
    "Frying": "fry frying sizzle pan cook cooking",
    "Running_water": "water tap faucet shower pour splash sink stream trickle|running water",
    "Speech": "speech speak talk voice people person shout conversation man woman say word announcer announcement chat yell spoken",
    "Vacuum_cleaner": "vacuum hoover|vacuum cleaner",
}
#: word or phrase -> SED class (DCASE 2019 task 4 names); after ``|``: two-word phrases
SYNONYMS: dict[str, str] = {w: cls for cls, spec in _TABLE.items() for w in spec.split("|")[0].split() + spec.split("|")[1:]}

STOPWORDS = frozenset(
    "a an the and or of in on at to with while when where as is are was were be been being some someone something there here "
    "then after before during from by for into over under this that these those it its his her their our your my".split()
)

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


def words(text: str) -> list[str]:
    """Lower-case words of ``text`` (letters only)."""
    return _WORD.findall(text.lower())


def _stem(w: str) -> str:
    if len(w) > 5 and w.endswith("ing"):
        w = w[:-3]
        if len(w) > 3 and w[-1] == w[-2]:  # running -> run
            w = w[:-1]
    if len(w) > 3 and w.endswith("es") and w[:-2] in SYNONYMS:
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    return w


def parse_classes(text: str, classes: Sequence[str]) -> list[str]:
    """The classes of ``classes`` that ``text`` names, in the order it names them (each once)."""
    ws = words(text)
    table = dict(SYNONYMS)
    for c in classes:
        table[" ".join(words(c.replace("_", " ")))] = c
    found: list[str] = []
    i = 0
    while i < len(ws):
        two = f"{ws[i]} {ws[i + 1]}" if i + 1 < len(ws) else None
        hit = None
        if two is not None:
            hit = table.get(two) or table.get(f"{_stem(ws[i])} {_stem(ws[i + 1])}")
        if hit is not None:
            i += 2
        else:
            hit = table.get(ws[i]) or table.get(_stem(ws[i]))
            i += 1
        if hit is not None and hit in classes and hit not in found:
            found.append(hit)
    return found


def content_words(text: str) -> list[str]:
    """The words of ``text`` worth matching against a transcript: no stop words, each once, in order."""
    out: list[str] = []
    for w in words(text):
        if w not in STOPWORDS and w not in out:
            out.append(w)
    return out
