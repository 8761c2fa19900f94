"""Pseudo-label mixing: strong labels in the real domain's acoustic scenes (not in the paper).

``streamkit train sed --pseudo-mix P`` overlays, with probability ``P`` per synthetic clip of a
batch, an unlabelled *real* clip on the synthetic one, wherever pseudo-labels of the real clips exist
(the tri-training final stage; ``--teacher`` and ``--oracle-labels`` runs from step 0). The question
it asks: the real domain's false alarms are mostly of classes a clip does not hold at all (the
distractor sounds, backgrounds; ``benchmarks/sed_gap_anatomy.py``), and its onsets sit in real
rooms. A real clip whose pseudo-labels say it lacks class ``c`` gives, mixed with a strongly
labelled synthetic clip, frame targets for ``c`` that hold exactly (the synthetic clip's) wherever that
pseudo-label is right, heard through the real clip's distractors and background. Classes the real clip may hold keep only what is
known: the synthetic clip's events (on is on, whatever the other clip holds) and the real clip's own
frame pseudo-labels; the rest is left unlabelled.

The mixture is a sum of powers: on natural-log mel energies ``log(exp(x_s) + exp(x_u + g))``, with
the real clip's level changed by ``g``, uniform in ``[-gain_db, gain_db]`` dB. A mixed clip is
neither domain, so the domain classifier does not see it, and labelers that keep learning in the
final stage (``--relabel-every``) learn from the labelled clips alone, not from mixtures.
"""

from __future__ import annotations

import numpy as np

from streamkit.train.sed_augment import DB_TO_LN

__all__ = ["mix_features", "mix_targets", "mix_rng", "draw_mix"]


def mix_rng(seed: int, step: int) -> np.random.Generator:
    """The mixing draws of one training step (which clips, levels): a function of the run's seed and the step only."""
    return np.random.default_rng([int(seed), 0x313E, int(step)])


def draw_mix(rng: np.random.Generator, n: int, prob: float, gain_db: float) -> tuple[np.ndarray, np.ndarray]:
    """``(which, gain)``: a bool (n,) choice of the clips to mix (each with ``prob``) and their level changes in natural-log
    energy units, uniform in ``[-gain_db, gain_db]`` dB (drawn for all n clips, so the draws do not depend on the choice)."""
    if not 0.0 <= prob <= 1.0:
        raise ValueError(f"mixing probability must be in [0, 1], got {prob}")
    if gain_db < 0:
        raise ValueError(f"mixing gain range must be >= 0 dB, got {gain_db}")
    which = rng.random(n) < prob
    gain = rng.uniform(-gain_db, gain_db, n) * DB_TO_LN
    return which, gain


def mix_features(x_s: np.ndarray, x_u: np.ndarray, gain_ln: np.ndarray) -> np.ndarray:
    """(B, T, M) natural-log mel energies of the sum of two clips' powers, the second scaled by ``exp(gain_ln)`` (B,)."""
    x_s, x_u = np.asarray(x_s, np.float32), np.asarray(x_u, np.float32)
    if x_s.shape != x_u.shape or x_s.ndim != 3:
        raise ValueError(f"clips to mix must be equal (B, T, M) arrays, got {x_s.shape} and {x_u.shape}")
    g = np.asarray(gain_ln, np.float32).reshape(-1, 1, 1)
    if g.shape[0] != x_s.shape[0]:
        raise ValueError(f"{g.shape[0]} gains for {x_s.shape[0]} clips")
    return np.logaddexp(x_s, x_u + g).astype(np.float32)


def mix_targets(
    s_frame: np.ndarray, s_clip: np.ndarray, u_frame: np.ndarray, u_clip: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Targets of synthetic + real mixtures: ``(frame, frame_mask, clip, clip_mask)`` float32, (B, T, K) and (B, K).

    ``s_frame`` (B, T, K) / ``s_clip`` (B, K): the synthetic clips' strong labels (0/1). ``u_frame`` / ``u_clip``: the
    real clips' pseudo-labels (1, 0 or -1 for none). A frame is on where either clip's event is (synthetic, or a real
    frame pseudo-label of 1), off where the synthetic clip is off and the real clip is known off (its frame label 0, or
    every frame of a class its clip label says it lacks), unlabelled otherwise; the clip label likewise."""
    s_frame, s_clip = np.asarray(s_frame), np.asarray(s_clip)
    u_frame, u_clip = np.asarray(u_frame), np.asarray(u_clip)
    if s_frame.shape != u_frame.shape or s_frame.ndim != 3 or s_clip.shape != u_clip.shape or s_clip.shape != (s_frame.shape[0], s_frame.shape[2]):
        raise ValueError(f"labels do not match: synthetic {s_frame.shape} / {s_clip.shape}, real {u_frame.shape} / {u_clip.shape}")
    u_eff = np.where(u_clip[:, None, :] == 0, 0, u_frame)
    on = (s_frame == 1) | (u_eff == 1)
    frame_mask = on | (u_eff == 0)
    clip_on = (s_clip == 1) | (u_clip == 1)
    clip_mask = clip_on | (u_clip == 0)
    f32 = np.float32
    return on.astype(f32), frame_mask.astype(f32), clip_on.astype(f32), clip_mask.astype(f32)
