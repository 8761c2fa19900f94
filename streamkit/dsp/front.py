"""The input chain of the file commands and the one-call API: ``source -> [dsp.mono] -> [dsp.resample]``.

``streamkit sad``, ``streamkit transcribe``, :mod:`streamkit.api` put the same two blocks between a
source (a file, an array) and a model that takes mono audio at one rate: the channels' mean when
there are several, soxr HQ resampling when the rate differs.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from streamkit.core.block import Block
from streamkit.core.graph import Graph
from streamkit.dsp.passthrough import Mono
from streamkit.dsp.resample import Resample


def mono_at(g: Graph, src: Block, rate: Any, *, name: str = "src") -> tuple[list[Block], list[str]]:
    """Add ``src`` (as ``name``) and what turns its output into mono at ``rate`` Hz to ``g``.

    Returns the blocks in order (chain a model after the last one) and notes for the user
    (``"2 channels averaged to mono"``, ``"resampled 16000 Hz -> 8000 Hz"``).
    """
    spec = src.negotiate({})["out"]
    notes: list[str] = []
    chain = [g.add(src, name=name)]
    if spec.channels > 1:
        chain.append(g.add(Mono(), name="mono"))
        notes.append(f"{spec.channels} channels averaged to mono")
    if spec.rate != Fraction(rate):
        chain.append(g.add(Resample(to_hz=rate, quality="HQ"), name="resample"))
        notes.append(f"resampled {float(spec.rate):g} Hz -> {float(rate):g} Hz")
    return chain, notes
