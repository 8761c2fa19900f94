"""Training recipe of the SED CRNN: ``streamkit train sed --corpus DIR --method M --out PATH``.

The six methods of Park et al. (DCASE 2019 task 4; ``../shared/papers/sed-tri-training-adversarial.txt``,
Table 1) on a ``streamkit corpus sed`` corpus: ``baseline``, ``adv-whole``, ``adv-time``, ``tri``,
``adv-whole+tri``, ``adv-time+tri``. Model and losses: :mod:`streamkit.models.sed_crnn`,
:mod:`streamkit.models.sed_losses`; post-processing: :mod:`streamkit.models.sed_post`.

Data
----
* Subsets: ``synthetic`` (S, strong labels), ``weak`` (W, clip tags), ``unlabelled`` (U),
  ``validation`` (model selection) and ``eval`` (scored once, for the model card). The last
  ``--synthetic-holdout`` clips of S (default 200, by file name; every clip has its own random
  stream, so they are a random sample) are **not trained on**: they are the synthetic-domain test
  set that shows the synthetic-to-real gap.
* Features: 128-bin log-mel (:func:`streamkit.models.sed_crnn.log_mel`, 16 kHz, hop 256) computed
  **once** per corpus and feature config and cached as float16 ``.npy`` files (``--cache``, default
  ``<corpus>/features``) with a JSON sidecar (file names, sizes, feature config); a stale or
  foreign cache is rebuilt. Input normalisation: per-bin mean/std over the labelled training clips (S, W), the same for every method.
* Targets: S frames by :func:`events_to_frames` (frame centre inside an event) and S clips by the
  classes present; W clips by their tags; U nothing (``baseline`` and ``adv-*`` never see U's
  labels; tri-training gives it pseudo-labels).

Steps and methods
-----------------
Every step takes ``--batch-size`` clips from S and from W and, for methods that use U (the
adversarial ones, through D; the tri-training ones in their final stage), from U: each subset is
an endless sequence of permutations drawn from ``(seed, subset, round)``, so the data order is a
function of the step number only (exact ``--resume``). An epoch is ``len(S_train) // batch``
steps. Every method runs ``--epochs`` epochs of its first stage; the tri-training methods then
run ``--tri-epochs`` more (default as many) of their final stage, as Algorithm 1 runs both of its
loops for ``iter`` iterations. Their stage-1 Ft gets the baseline's data and steps (F also
learns from the labelers' losses and the orthogonality term), so a tri run shows what its
pseudo-label stage adds; compare it with a baseline given the same total steps
(``--epochs 2N``) as well as with the ``--epochs N`` one.

* ``baseline``: ``L_y`` of Ft on S (frame + clip) and W (clip) (paper eq. 1-3).
* ``adv-whole`` / ``adv-time``: + ``L_d`` (eq. 4) of D (one logit per clip / per frame) on S
  (synthetic) vs W and U (real), through the gradient reversal layer; the GRL factor follows
  Ganin and Lempitsky's schedule ``alpha_p = alpha (2 / (1 + exp(-10 p)) - 1)``, ``p`` the
  training progress (``--grl-schedule const`` keeps ``alpha``).
* ``tri`` (Algorithm 1): the ``--epochs`` labeler stage trains F, F1, F2,
  Ft (+ D) on S and W with the orthogonality regulariser (eq. 8, lambda 1); then F1 and F2
  pseudo-label W and U once (frames and classes where both are > 0.5 or both < 0.5; W keeps its
  tags as clip targets and frames of absent classes are negatives); the ``--tri-epochs`` epochs train
  F, Ft (+ D) on S, W with its pseudo-labels and U with its pseudo-labels. ``--pseudo-threshold P``
  and ``--pseudo-negative N`` change the rule to positive where both are > P, negative where both
  are < N, the rest unlabelled (not in the paper; the defaults are its rule). They enter the
  checkpoint when the labels are made, so one labeler-stage checkpoint (``--max-steps`` at the
  switch, copied per branch) can be resumed into final stages with different thresholds.
  ``--relabel-every N`` (not in the paper; asymmetric tri-training's refresh, Saito et al. 2017):
  in the final stage F1 and F2 go on learning from S and W's tags (eq. 8 included) while Ft learns
  from the pseudo-labels too, and the pseudo-labels are remade from F1 and F2 every N final-stage
  epochs, so they follow the changing F instead of staying those of the switch. Like the
  thresholds it enters the checkpoint when the labels are first made.
  ``--detach-labelers`` (not in the paper): F1 and F2 learn on F's output through a stop-gradient,
  so their losses and eq. 8 train the labelers only. With the ``small`` preset F's output has 64
  dimensions and the labelers are linear, so eq. 8 otherwise bends F towards holding two mutually
  orthogonal copies of the classes; detached, F and Ft follow the plain adversarial run exactly
  up to the switch (tested). ``--pseudo-level clip`` (not in the paper): only clip-level
  pseudo-labels of U are kept (W keeps only its tags), so the final stage adds pseudo-tagged
  clips and no frame targets. Like the thresholds it enters the checkpoint when the labels are made.
  ``--pseudo-level positive`` (not in the paper): frame targets only where they are likely right
  (:func:`positive_frames`): a frame is positive where F1 and F2 agree on it inside a class the
  clip holds (W: its tags; U: its clip pseudo-label), every frame of a class the clip lacks is
  negative, and the other frames stay unlabelled, so no frame inside a held class is taught "off".
* ``adv-*+tri``: tri-training with D trained in both stages.
* ``--consistency W`` (not in the paper; the mean teacher of the DCASE 2019 task 4 baseline,
  Tarvainen and Valpola 2017): with ``--ema``, add ``W`` times the mean squared difference of Ft's
  frame and clip probabilities to those of the moving average (eval mode, no gradient) on every clip
  of the batch, ramped up over ``--consistency-rampup`` epochs as ``exp(-5 (1 - t)^2)``. Baseline
  and adversarial methods: from the first step, and U joins the batch (no targets); tri-training: in
  the final stage only, so it branches from a labeler-stage checkpoint like the thresholds.
* ``--teacher MODEL.pt`` (not in the paper; self-training, a second round of tri-training when the
  teacher is an adv-*+tri model): a finished model's final classifier Ft labels the clean W and U
  once (:func:`teacher_label_all`, the rule and level of the options above, W gated by its tags) and
  a method without tri-training learns from those labels from the first step, as ``--oracle-labels``
  below does with the truth. The teacher file's SHA-256 is part of the checkpoint fingerprint.
* ``--oracle-labels`` (analysis, not a method): the generator's true frame labels of W and U
  (``<subset>/meta.json``, which the task withholds) replace the pseudo-labels of a tri-training
  final stage (the ceiling of any pseudo-labeller; branches from a labeler-stage checkpoint like the
  thresholds), or, for the other methods, are used from the first step (as if the real clips were
  strongly labelled: the ceiling of anything learnt from the real clips). The card says so, and the
  benchmarks report such models apart from their method's seeds.

Adam, lr 1e-3, betas (0.9, 0.999) (paper §4.2). ``--resume`` goes on from the checkpoint of the
same run; ``--extend`` goes on from a checkpoint of fewer ``--epochs`` (finished or not) and gives
the run that started with the larger number (batches and augmentation are drawn per step from the
seed, the learning rate is constant), so it is refused where a schedule follows the total steps:
the default GRL ramp, and tri-training past its stage switch. A tri-training checkpoint still in
its labeler stage (such as the ``<stem>.labelers.ckpt`` copy kept at the switch) may be extended
to more labeler ``--epochs`` and any ``--tri-epochs``: nothing before the switch depends on either.

Model selection and evaluation
------------------------------
At the end of every epoch Ft is scored on the validation set (real domain, strong labels): frame
probabilities, per-class median filter (``--median-s``, default 0.45 s = 7 frames), threshold
0.5, events (:func:`streamkit.models.sed_post.frames_to_events`), event-based macro F1 (sed_eval,
200 ms collars, offset collar max(200 ms, 20 %)). The best state by that F1 is kept (for the
tri-training methods among the final-stage epochs only, so the kept Ft has learnt from the
pseudo-labels; the labeler-stage scores are in the history). With ``--ema DECAY`` (not in the
paper) an exponential moving average of all weights and BN statistics is kept beside them
(Polyak averaging as in mean-teacher DCASE systems; warm-up ``min(DECAY, (1 + step) / (10 +
step))``); both are scored each epoch, and the average alone is selected and shipped. Training
is the same run with or without it (the same steps and random numbers; pseudo-labels come from the
weights, not the average). The weight file holds that state; the
model card (``<out>.json``) has the method, config, parameters, corpus command, steps, wall time,
history, and validation / eval / synthetic hold-out event F1, segment F1 (1 s) and PSDS
(scenario 1, sed_scores_eval). No absolute machine paths are written.

Budget (Table 1 runs, ``benchmarks/sed_table1.py``)
---------------------------------------------------
Preset ``small`` (128 mel bins as the paper; CNN channels 4, 16, 32 x 4, pooling time 2, 2, 1 ...,
frequency 4, 2, 2, 2, 2, 2; BiGRU 2 x 32; 106 k parameters, 99 k on the F -> Ft path), batch 6
clips per subset, 3 epochs (900 steps) for every method, 1 thread at nice 15 beside another
training on a 2-core machine: an epoch took about 2 min for the baseline (12 clips a step) and
3-3.5 min for the methods that also feed U (18 clips a step); the six runs took 6.7 to 11.1 min
each, 58.6 min in all. The ``paper`` preset (the DCASE 2020 layout, 484 k parameters) costs about
3 times as much per clip.

Checkpoints (model, optimiser, torch RNG, step, pseudo-labels, best state, history) are written
atomically every ``--ckpt-minutes`` and after every validation; ``--resume`` continues exactly
(the same weights as an uninterrupted run, single thread).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import math
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from streamkit.core.errors import ModelError
from streamkit.io.outputs import atomic_output, write_text
from streamkit.models.sed_crnn import SedConfig, SedModel, events_to_frames, load_model, log_mel, n_input_frames, n_params, save_model
from streamkit.models.sed_losses import METHODS, SedTargets, heads_for, parse_method, pseudo_label_batch, sed_loss, stages
from streamkit.models.sed_post import DEFAULT_THRESHOLD, frame_times, frames_to_events, median_frames
from streamkit.train.sed_augment import MelAugment, batch_rng
from streamkit.train.sed_mix import draw_mix, mix_features, mix_rng, mix_targets

__all__ = [
    "PRESETS",
    "CorpusError",
    "SedCorpus",
    "TrainOptions",
    "add_arguments",
    "config_from_args",
    "predict_frames",
    "predict_frames_and_clips",
    "run_from_args",
    "score_probs",
    "train",
]

CKPT_FORMAT = "streamkit-sed-train/1"
PSEUDO_LEVELS = ("frame", "clip", "positive")
#: tri-training: whose labelers F1/F2 make the pseudo-labels (``--pseudo-from``)
PSEUDO_FROM = ("weights", "ema")
CACHE_FORMAT = "streamkit-sed-features/1"
SUBSETS = ("synthetic", "weak", "unlabelled", "validation", "eval")

#: model sizes; ``small`` is what fits the 2-core training budget (see the model card / README)
PRESETS: dict[str, dict[str, Any]] = {
    "paper": {},  # SedConfig defaults: DCASE 2020 layout, 7 blocks (16, 32, 64 x 5), BiGRU 2 x 64
    "small": dict(channels=(4, 16, 32, 32, 32, 32), pool_time=(2, 2, 1, 1, 1, 1), pool_freq=(4, 2, 2, 2, 2, 2), rnn_hidden=32),
    "tiny": dict(n_mels=32, channels=(4, 8, 8), pool_time=(2, 2, 1), pool_freq=(2, 4, 4), rnn_hidden=8, rnn_layers=1, domain_hidden=8),
}


class CorpusError(ValueError):
    """A missing, incomplete or corrupt corpus (or feature cache)."""


# ------------------------------------------------------------------------------------------------
# corpus and feature cache
# ------------------------------------------------------------------------------------------------


def _feature_key(cfg: SedConfig) -> dict[str, Any]:
    return {"rate": cfg.rate, "n_mels": cfg.n_mels, "n_fft": cfg.n_fft, "hop": cfg.hop, "f_min": cfg.f_min, "f_max": cfg.f_max}


class SedCorpus:
    """A ``streamkit corpus sed`` directory: file lists, labels, cached features."""

    def __init__(self, root: str | Path, cache: str | Path | None = None) -> None:
        from streamkit.eval.sed import read_strong_tsv, read_weak_tsv

        self.root = Path(root)
        if not self.root.is_dir():
            raise CorpusError(f"corpus directory not found: {self.root} (make one with `streamkit corpus sed --out DIR`)")
        mpath = self.root / "manifest.json"
        if not mpath.is_file():
            raise CorpusError(f"{self.root}: no manifest.json; not a `streamkit corpus sed` corpus (or its generation did not finish)")
        try:
            self.manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise CorpusError(f"{mpath}: unreadable manifest: {e}") from None
        if not isinstance(self.manifest, dict) or not str(self.manifest.get("format", "")).startswith("streamkit-sed-corpus/"):
            raise CorpusError(f"{mpath}: not a `streamkit corpus sed` manifest (format {self.manifest.get('format')!r})")
        self.rate = int(self.manifest.get("rate", 16000))
        self.clip_s = float(self.manifest.get("clip_s", 10.0))
        self.cache = Path(cache) if cache is not None else self.root / "features"
        self.files: dict[str, list[str]] = {}
        self.strong: dict[str, dict[str, list[Any]]] = {}
        self.weak: dict[str, frozenset[str]] = {}
        for sub in SUBSETS:
            d = self.root / sub
            if not (d / "audio").is_dir():
                continue
            wavs = sorted(p.name for p in (d / "audio").glob("*.wav"))
            lab = d / "labels.tsv"
            if not lab.is_file():
                raise CorpusError(f"{d}: missing labels.tsv")
            try:
                if sub in ("synthetic", "validation", "eval"):
                    ev = read_strong_tsv(lab)
                    listed = set(ev)
                    self.strong[sub] = {f: ev.get(f, []) for f in wavs}
                elif sub == "weak":
                    self.weak = read_weak_tsv(lab)
                    listed = set(self.weak)
                else:
                    lines = [x.strip() for x in lab.read_text(encoding="utf-8").splitlines()[1:] if x.strip()]
                    listed = set(lines)
            except (ValueError, OSError) as e:
                raise CorpusError(f"corpus labels: {e}") from None
            missing = sorted(listed - set(wavs))
            if missing:
                raise CorpusError(f"{lab}: {len(missing)} labelled files missing from {d / 'audio'} (e.g. {missing[0]})")
            if sub in ("weak", "unlabelled") and set(wavs) - listed:
                extra = sorted(set(wavs) - listed)
                raise CorpusError(f"{lab}: {len(extra)} audio files without a label row (e.g. {extra[0]})")
            self.files[sub] = wavs

    def require(self, *subsets: str) -> None:
        for s in subsets:
            if not self.files.get(s):
                raise CorpusError(f"{self.root}: subset {s!r} is missing or empty")

    def generator_truth(self, subset: str) -> dict[str, list[tuple[str, float, float]]]:
        """The generator's strong truth of a subset (``<subset>/meta.json``): file -> [(label, onset, offset)].

        For analysis only (``streamkit train sed --oracle-labels``): a trainer of a real method never
        reads it, since the weak and unlabelled clips' truth is exactly what the task withholds.
        """
        p = self.root / subset / "meta.json"
        if not p.is_file():
            raise CorpusError(f"{p}: no generator record; --oracle-labels needs a corpus made by `streamkit corpus sed`")
        try:
            meta = json.loads(p.read_text(encoding="utf-8"))
            truth = {f"{c['id']}.wav": [(str(e["event_label"]), float(e["onset"]), float(e["offset"])) for e in c["events"]] for c in meta}
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise CorpusError(f"{p}: unreadable generator record: {type(e).__name__}: {e}") from None
        missing = [f for f in self.files.get(subset, []) if f not in truth]
        if missing:
            raise CorpusError(f"{p}: {len(missing)} clips of {subset!r} have no record (e.g. {missing[0]})")
        return truth

    def corpus_command(self) -> str | None:
        """The generating command with the output directory replaced by ``DIR`` (no machine paths)."""
        cmd = self.manifest.get("command")
        if not cmd:
            return None
        return re.sub(r"--out\s+\S+", "--out DIR", str(cmd))

    def n_frames(self, cfg: SedConfig) -> int:
        return n_input_frames(int(round(self.clip_s * cfg.rate)), cfg)

    def features(self, subset: str, cfg: SedConfig, *, progress: bool = True) -> np.ndarray:
        """(N, T, n_mels) float16 log-mel of a subset (cached; computed on first use)."""
        import soundfile as sf

        if cfg.rate != self.rate:
            raise CorpusError(f"model rate {cfg.rate} Hz differs from the corpus rate {self.rate} Hz")
        files = self.files.get(subset)
        if not files:
            raise CorpusError(f"{self.root}: subset {subset!r} is missing or empty")
        audio = self.root / subset / "audio"
        sizes = [(audio / f).stat().st_size for f in files]
        key = _feature_key(cfg)
        t_in = self.n_frames(cfg)
        digest = hashlib.sha1(json.dumps([key, files, sizes]).encode()).hexdigest()[:12]
        npy = self.cache / f"{subset}.mel{cfg.n_mels}.{digest}.npy"
        side = npy.with_suffix(".json")
        if npy.is_file() and side.is_file():
            try:
                meta = json.loads(side.read_text(encoding="utf-8"))
                arr = np.load(npy, mmap_mode="r")
                if meta.get("format") == CACHE_FORMAT and meta.get("files") == files and meta.get("sizes") == sizes and arr.shape == (len(files), t_in, cfg.n_mels):
                    return np.asarray(arr)
            except (OSError, ValueError):
                pass  # rebuilt below
        self.cache.mkdir(parents=True, exist_ok=True)
        out = np.zeros((len(files), t_in, cfg.n_mels), dtype=np.float16)
        it: Any = range(len(files))
        if progress:
            from tqdm import tqdm

            it = tqdm(it, desc=f"log-mel {subset}", file=sys.stderr, mininterval=1.0 if sys.stderr.isatty() else 30.0, leave=False)
        for i in it:
            p = audio / files[i]
            try:
                x, sr = sf.read(str(p), dtype="float32", always_2d=True)
            except Exception as e:  # noqa: BLE001 - soundfile raises several types for broken files
                raise CorpusError(f"{p}: unreadable audio: {type(e).__name__}: {e}") from None
            if sr != cfg.rate:
                raise CorpusError(f"{p}: {sr} Hz, expected {cfg.rate}")
            f = log_mel(torch.from_numpy(x.mean(axis=1)), cfg).numpy()
            n = min(t_in, f.shape[0])
            out[i, :n] = f[:n]
            if n < t_in:  # a shorter clip: repeat its quietest value (log floor) rather than zeros
                out[i, n:] = f.min() if f.size else np.log(1e-10)
        with atomic_output(npy, "wb") as fh:
            np.save(fh, out)
        write_text(side, json.dumps({"format": CACHE_FORMAT, "feature": key, "frames": t_in, "files": files, "sizes": sizes}))
        return out


# ------------------------------------------------------------------------------------------------
# options
# ------------------------------------------------------------------------------------------------


@dataclass
class TrainOptions:
    method: str = "baseline"
    epochs: int = 3
    minutes: float | None = None
    seed: int = 0
    batch: int = 6
    lr: float = 1e-3
    threads: int = 1
    tri_epochs: int | None = None  #: tri-training final-stage epochs after the --epochs labeler stage (None: as many)
    grl_schedule: str = "ganin"
    synthetic_holdout: int = 200
    median_s: float = 0.45
    threshold: float = DEFAULT_THRESHOLD
    ckpt_minutes: float = 3.0
    max_steps: int | None = None  #: stop (checkpoint, no weights) after this many steps: for tests and interrupted runs
    val_limit: int | None = None
    psds: bool = True
    pseudo_threshold: float = 0.5  #: tri-training: positive where F1 and F2 are both above (paper: 0.5)
    pseudo_negative: float | None = None  #: tri-training: negative where both are below (None: 1 - pseudo_threshold, the paper)
    relabel_every: int = 0  #: tri-training: remake the pseudo-labels every N final-stage epochs, F1/F2 trained on (0: once, the paper)
    oracle_labels: bool = False  #: analysis: the generator's true labels of W and U (tri: as the pseudo-labels; else: from step 0)
    detach_labelers: bool = False  #: tri-training: F1/F2 (and eq. 8) train on F's output through a stop-gradient (not the paper)
    pseudo_level: str = "frame"  #: tri-training: "frame" (the paper), "clip" (clip-level only) or "positive" (see positive_frames)
    ema: float | None = None  #: select and ship an exponential moving average of the weights with this decay (None: the weights)
    pseudo_from: str = "weights"  #: tri-training: F1/F2 of the "weights" (the paper) or of their moving average "ema" (needs ema)
    consistency: float = 0.0  #: mean-teacher consistency weight: MSE of Ft's probabilities to the EMA model's (needs ema; 0: off)
    consistency_rampup: int = 1  #: epochs over which the consistency weight ramps up, exp(-5 (1 - t)^2)
    augment: MelAugment | None = None  #: perturb every training clip's log-mel from step 0 (see sed_augment; None: off)
    teacher: str | None = None  #: a trained model file whose Ft labels W and U once, used from step 0 (not tri-training methods)
    extend: bool = False  #: resume a checkpoint of fewer --epochs (a finished run trained on; schedules that do not depend on the total)
    pseudo_mix: float = 0.0  #: mix a pseudo-labelled real clip into each synthetic clip with this probability (see sed_mix; 0: off)
    pseudo_mix_gain_db: float = 6.0  #: level range of the mixed-in real clip, +-dB

    def mix_rule(self) -> list[float]:
        """``[probability, gain range dB]`` of ``--pseudo-mix`` (``[0.0, 0.0]`` when off: the range then means nothing)."""
        return [float(self.pseudo_mix), float(self.pseudo_mix_gain_db)] if self.pseudo_mix else [0.0, 0.0]

    def pseudo_rule(self) -> dict[str, float]:
        """The pseudo-label thresholds (validated): ``{"positive": .., "negative": ..}``."""
        neg = 1.0 - self.pseudo_threshold if self.pseudo_negative is None else float(self.pseudo_negative)
        if not 0.0 < self.pseudo_threshold < 1.0:
            raise ValueError(f"--pseudo-threshold must be in (0, 1), got {self.pseudo_threshold}")
        if not 0.0 < neg <= self.pseudo_threshold:
            raise ValueError(f"--pseudo-negative must be in (0, --pseudo-threshold {self.pseudo_threshold:g}], got {neg:g}")
        return {"positive": float(self.pseudo_threshold), "negative": round(neg, 6)}

    def fingerprint(self) -> dict[str, Any]:
        """What a resumed run must share with the checkpoint."""
        fp = {k: getattr(self, k) for k in ("method", "epochs", "seed", "batch", "lr", "grl_schedule", "synthetic_holdout")}
        if self.oracle_labels and not parse_method(self.method)[1]:
            fp["oracle_labels"] = True  # from step 0 (tri-training: checked when the labels are made, so it can branch)
        if self.detach_labelers:
            fp["detach_labelers"] = True  # changes the labeler stage (absent when off: older checkpoints stay resumable)
        if self.ema is not None:
            fp["ema"] = float(self.ema)  # the averaged weights are part of the checkpoint (absent when off, as above)
        if self.consistency and not parse_method(self.method)[1]:
            fp["consistency"] = [float(self.consistency), int(self.consistency_rampup)]  # from step 0 (tri: checked at the switch)
        if self.augment is not None:
            fp["augment"] = self.augment.to_dict()  # from step 0 (absent when off, as above)
        if self.pseudo_mix and not parse_method(self.method)[1]:
            fp["pseudo_mix"] = self.mix_rule()  # from step 0 with --teacher / --oracle-labels (tri: checked at the switch)
        if self.teacher is not None:  # from step 0: the teacher file's digest and the label rule
            fp["teacher"] = {"sha256": file_sha256(self.teacher), "rule": self.pseudo_rule(), "level": self.pseudo_level}
        return {**fp, "tri_epochs": self.final_epochs()}

    def final_epochs(self) -> int:
        """Epochs of the tri-training final stage (0 for the other methods)."""
        if not parse_method(self.method)[1]:
            return 0
        return self.epochs if self.tri_epochs is None else int(self.tri_epochs)


def _ema_update(avg: dict[str, torch.Tensor], live: dict[str, torch.Tensor], decay: float) -> None:
    """``avg <- decay * avg + (1 - decay) * live`` for every floating entry (weights, BN statistics); others copied."""
    with torch.no_grad():
        for k, v in live.items():
            a = avg[k]
            if a.is_floating_point():
                a.lerp_(v, 1.0 - decay)
            else:
                a.copy_(v)


def _stream(seed: int, tag: int, n: int, start: int, count: int) -> np.ndarray:
    """Items ``start .. start+count-1`` of an endless sequence of permutations of ``range(n)``."""
    out = np.empty(count, dtype=np.int64)
    pos, k, perm_r, perm = start, 0, -1, None
    while k < count:
        r, i = divmod(pos, n)
        if r != perm_r:
            perm = np.random.default_rng(np.random.SeedSequence([seed, tag, r])).permutation(n)
            perm_r = r
        take = min(count - k, n - i)
        out[k : k + take] = perm[i : i + take]  # type: ignore[index]
        k += take
        pos += take
    return out


def _save_atomic(path: Path, obj: Any) -> None:
    with atomic_output(path, "wb") as f:
        torch.save(obj, f)


def _grl(schedule: str, alpha: float, progress: float) -> float:
    if schedule == "const":
        return alpha
    return alpha * (2.0 / (1.0 + math.exp(-10.0 * progress)) - 1.0)


# ------------------------------------------------------------------------------------------------
# prediction and scoring (shared with benchmarks/sed_table1.py)
# ------------------------------------------------------------------------------------------------


@torch.no_grad()
def predict_frames(model: SedModel, feats: np.ndarray, batch: int = 32, head: str = "ft", *, synthetic: bool = False) -> np.ndarray:
    """(N, T', K) frame probabilities of one head (eval mode) for (N, T, n_mels) features."""
    return predict_frames_and_clips(model, feats, batch, head, synthetic=synthetic)[0]


@torch.no_grad()
def predict_frames_and_clips(
    model: SedModel, feats: np.ndarray, batch: int = 32, head: str = "ft", *, synthetic: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """(N, T', K) frame and (N, K) clip-level (attention-pooled) probabilities of one head (eval mode).

    ``synthetic``: the clips are of the synthetic domain (a model with domain-specific batch norm,
    ``cfg.domain_bn``, then runs its synthetic batch norms; no effect on other models)."""
    was = model.training
    model.eval()
    frames, clips = [], []
    try:
        for i in range(0, feats.shape[0], batch):
            x = torch.from_numpy(np.asarray(feats[i : i + batch], dtype=np.float32))
            o = model(x, heads=(head,), synthetic_rows=x.shape[0] if synthetic else 0)[head]
            frames.append(o["frame"].numpy())
            clips.append(o["clip"].numpy())
    finally:
        model.train(was)
    if not frames:
        return np.zeros((0, 0, model.cfg.n_classes), np.float32), np.zeros((0, model.cfg.n_classes), np.float32)
    return np.concatenate(frames), np.concatenate(clips)


def score_probs(
    probs: np.ndarray,
    files: Sequence[str],
    reference: dict[str, list[Any]],
    cfg: SedConfig,
    *,
    median_s: float = 0.45,
    threshold: float = DEFAULT_THRESHOLD,
    clip_s: float = 10.0,
    psds: bool = False,
) -> dict[str, Any]:
    """Event-/segment-based macro F1 (%), error rates and optionally PSDS1 of frame probabilities."""
    from streamkit.eval.sed import Event, FrameScores, event_based, segment_based
    from streamkit.eval.sed import psds as psds_fn

    med = median_frames(median_s, cfg.frame_seconds)
    est: dict[str, list[Any]] = {}
    for f, p in zip(files, probs):
        est[f] = [Event(f, on, off, lab) for lab, on, off, _c in frames_to_events(p, cfg, median=med, threshold=threshold)]
    ref = {f: list(reference.get(f, [])) for f in files}
    ev = event_based(ref, est, classes=cfg.classes, files=files)
    seg = segment_based(ref, est, classes=cfg.classes, durations={f: clip_s for f in files}, files=files)
    out: dict[str, Any] = {
        "files": len(files),
        "event_f1": round(100 * ev.macro_f1, 2),
        "event_micro_f1": round(100 * ev.micro_f1, 2),
        "event_er": round(ev.error_rate, 4),
        "segment_f1": round(100 * seg.macro_f1, 2),
        "segment_micro_f1": round(100 * seg.micro_f1, 2),
        "segment_er": round(seg.error_rate, 4),
        "event_f1_per_class": {c: (round(100 * s.f1, 2) if s.f1 == s.f1 else None) for c, s in ev.per_class.items()},
        "post": {"median_frames": med, "median_s": round(med * cfg.frame_seconds, 3), "threshold": threshold},
    }
    if psds:
        start = float(frame_times(0, cfg)[0])
        scores = {f: FrameScores(p, hop=cfg.frame_seconds, classes=tuple(cfg.classes), start=start) for f, p in zip(files, probs)}
        try:
            r = psds_fn(ref, scores, classes=cfg.classes)
            out["psds1"] = round(r.psds, 4)
        except Exception as e:  # noqa: BLE001 - PSDS is an extra column; report why it is missing
            out["psds1"] = None
            out["psds1_error"] = f"{type(e).__name__}: {e}"
    return out


# ------------------------------------------------------------------------------------------------
# training
# ------------------------------------------------------------------------------------------------


class _Data:
    """Features and targets of the training subsets, validation set."""

    def __init__(self, corpus: SedCorpus, cfg: SedConfig, opts: TrainOptions, quiet: bool) -> None:
        corpus.require("synthetic", "weak", "validation")
        adv, tri = parse_method(opts.method)
        self.uses_u = adv is not None or tri or opts.oracle_labels or bool(opts.consistency) or opts.teacher is not None
        if self.uses_u:
            corpus.require("unlabelled")
        s_files = corpus.files["synthetic"]
        hold = int(opts.synthetic_holdout)
        if hold < 0 or hold >= len(s_files):
            raise CorpusError(f"--synthetic-holdout {hold} leaves no synthetic training clip ({len(s_files)} clips)")
        self.n_s = len(s_files) - hold
        if self.n_s < opts.batch:
            raise CorpusError(f"{self.n_s} synthetic training clips, fewer than --batch-size {opts.batch}")
        prog = not quiet
        s_all = corpus.features("synthetic", cfg, progress=prog)
        self.S = s_all[: self.n_s]
        self.W = corpus.features("weak", cfg, progress=prog)
        self.U = corpus.features("unlabelled", cfg, progress=prog) if self.uses_u else None
        vfiles = corpus.files["validation"][: opts.val_limit]
        self.V = corpus.features("validation", cfg, progress=prog)[: len(vfiles)]
        self.v_files = vfiles
        self.v_ref = corpus.strong["validation"]
        t_out = self.S.shape[1] // cfg.time_pool
        self.t_out = t_out
        k = cfg.n_classes
        index = {c: i for i, c in enumerate(cfg.classes)}
        self.s_frame = np.zeros((self.n_s, t_out, k), np.uint8)
        self.s_clip = np.zeros((self.n_s, k), np.float32)
        for i, f in enumerate(s_files[: self.n_s]):
            evs = [(e.event_label, e.onset, e.offset) for e in corpus.strong["synthetic"][f]]
            self.s_frame[i] = events_to_frames(evs, t_out, cfg).numpy().astype(np.uint8)
            for lab, _, _ in evs:
                self.s_clip[i, index[lab]] = 1.0
        self.w_clip = np.zeros((len(corpus.files["weak"]), k), np.float32)
        for i, f in enumerate(corpus.files["weak"]):
            for lab in corpus.weak.get(f, ()):
                self.w_clip[i, index[lab]] = 1.0

    def norm_stats(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-bin mean/std over the labelled training clips S and W (every 4th frame, float64): the same
        statistics for every method (the baseline never sees U)."""
        parts = [self.S, self.W]
        s = np.zeros(self.S.shape[2])
        s2 = np.zeros(self.S.shape[2])
        n = 0
        for a in parts:
            for i in range(0, a.shape[0], 256):
                x = np.asarray(a[i : i + 256, ::4], dtype=np.float64).reshape(-1, a.shape[2])
                s += x.sum(0)
                s2 += np.square(x).sum(0)
                n += x.shape[0]
        mean = s / n
        return mean, np.sqrt(np.maximum(s2 / n - mean**2, 1e-10))


def _pseudo_label_all(
    model: SedModel, feats: np.ndarray, tags: np.ndarray | None, batch: int = 32, rule: dict[str, float] | None = None,
    heads: tuple[str, str] = ("f1", "f2"),
) -> tuple[np.ndarray, np.ndarray]:
    """int8 frame (N, T', K) and clip (N, K) pseudo-labels of the labelers ``heads``: 1, 0 or -1 (no label)."""
    rule = rule or {"positive": 0.5, "negative": 0.5}
    frames, clips = [], []
    for i in range(0, feats.shape[0], batch):
        x = torch.from_numpy(np.asarray(feats[i : i + batch], dtype=np.float32))
        ct = None if tags is None else torch.from_numpy(tags[i : i + batch])
        pl = pseudo_label_batch(model, x, clip_tags=ct, threshold=rule["positive"], negative=rule["negative"], heads=heads)
        frames.append(torch.where(pl["frame_mask"] > 0, pl["frame"], torch.full_like(pl["frame"], -1)).to(torch.int8).numpy())
        clips.append(torch.where(pl["clip_mask"] > 0, pl["clip"], torch.full_like(pl["clip"], -1)).to(torch.int8).numpy())
    return np.concatenate(frames), np.concatenate(clips)


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes (a teacher model's identity in the checkpoint fingerprint and the card)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_teacher(path: str | Path, cfg: SedConfig) -> tuple[SedModel, dict[str, Any]]:
    """``--teacher``: a model file of ``streamkit train sed`` whose features and frame rate are this run's.

    Raises ``ValueError`` (missing or corrupt file, another feature front end or time pooling)."""
    try:
        model, meta = load_model(path)
    except (ModelError, OSError) as e:
        raise ValueError(f"--teacher {path}: {e}") from None
    mine, theirs = cfg.to_dict(), model.cfg.to_dict()
    keys = ("rate", "n_fft", "hop", "n_mels", "f_min", "f_max", "classes")
    diff = {k: (mine.get(k), theirs.get(k)) for k in keys if mine.get(k) != theirs.get(k)}
    if diff or model.cfg.time_pool != cfg.time_pool:
        diff["time_pool"] = (cfg.time_pool, model.cfg.time_pool)
        raise ValueError(f"--teacher {path}: another front end or frame rate (this run, teacher): {diff}")
    model.eval()
    return model, meta


def teacher_label_all(
    model: SedModel, feats: np.ndarray, tags: np.ndarray | None, rule: dict[str, float], batch: int = 32
) -> tuple[np.ndarray, np.ndarray]:
    """``--teacher``: the labels of :func:`_pseudo_label_all` with a finished model's final classifier Ft in both
    labeler roles (1 above ``positive``, 0 below ``negative``, -1 between; weak clips gated by their ``tags``)."""
    return _pseudo_label_all(model, feats, tags, batch, rule, heads=("ft", "ft"))


def consistency_ramp(step: int, rampup_steps: int) -> float:
    """Mean-teacher ramp-up factor in [0, 1]: ``exp(-5 (1 - t)^2)``, ``t = step / rampup_steps`` clipped (1 when no ramp-up)."""
    if rampup_steps <= 0:
        return 1.0
    t = min(max(step / rampup_steps, 0.0), 1.0)
    return float(np.exp(-5.0 * (1.0 - t) ** 2))


def consistency_loss(student: dict[str, torch.Tensor], teacher: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean-teacher consistency (Tarvainen and Valpola 2017, the DCASE 2019 task 4 baseline): mean squared
    difference of Ft's frame and clip probabilities to the teacher's (no gradient through the teacher)."""
    mse = torch.nn.functional.mse_loss
    return mse(student["frame"], teacher["frame"].detach()) + mse(student["clip"], teacher["clip"].detach())


def hysteresis_mask(high: np.ndarray, low: np.ndarray) -> np.ndarray:
    """Hysteresis along time (axis 1 of (N, T, K) bool arrays): the frames of each run of ``low`` that holds at least one
    ``high`` frame (``high`` frames outside ``low`` count as ``low``), so a confident frame grows into its whole
    less confident surroundings (in both directions of time, unlike the causal
    :func:`streamkit.models.sed_post.hysteresis` of the detector)."""
    if high.shape != low.shape or high.ndim != 3:
        raise ValueError(f"high {high.shape} and low {low.shape} must be equal (N, T, K) arrays")
    n, t, k = high.shape
    lo = np.zeros((n, k, t + 1), bool)  # (a False column after each series: runs never cross series)
    hi = np.zeros_like(lo)
    lo[:, :, :t] = np.moveaxis(low | high, 1, 2)
    hi[:, :, :t] = np.moveaxis(high, 1, 2)
    lo, hi = lo.ravel(), hi.ravel()
    start = lo & ~np.concatenate(([False], lo[:-1]))
    run = np.where(lo, np.cumsum(start), 0)
    has_high = np.zeros(int(run.max()) + 1, bool)
    has_high[run[hi]] = True
    has_high[0] = False
    keep = has_high[run].reshape(n, k, t + 1)[:, :, :t]
    return np.ascontiguousarray(np.moveaxis(keep, 2, 1))


def positive_frames(frame: np.ndarray, clip: np.ndarray) -> np.ndarray:
    """``--pseudo-level positive``: int8 frame labels (N, T', K) from frame and clip labels (1, 0 or -1 for none).

    1 where the frame is positive and its clip holds the class, 0 on every frame of a class the clip lacks, -1
    elsewhere: a frame where the labelers doubt an event of a class the clip holds is left out, not taught "off"
    (the 0.05 rule labels about a tenth of the true event frames of the real clips negative)."""
    if frame.ndim != 3 or clip.shape != (frame.shape[0], frame.shape[2]):
        raise ValueError(f"frame labels {frame.shape} and clip labels {clip.shape} do not match")
    held, lacks = (clip == 1)[:, None, :], (clip == 0)[:, None, :]
    out = np.where(held & (frame == 1), 1, np.where(lacks, 0, -1))
    return np.broadcast_to(out, frame.shape).astype(np.int8)


def _oracle_label_all(corpus: SedCorpus, subset: str, cfg: SedConfig, t_out: int) -> tuple[np.ndarray, np.ndarray]:
    """int8 frame (N, T', K) and clip (N, K) labels of a subset from the generator's truth, every one labelled."""
    truth = corpus.generator_truth(subset)
    files = corpus.files[subset]
    frames = np.zeros((len(files), t_out, cfg.n_classes), np.int8)
    for i, f in enumerate(files):
        frames[i] = events_to_frames(truth[f], t_out, cfg).numpy().astype(np.int8)
    index = {c: i for i, c in enumerate(cfg.classes)}
    clips = np.zeros((len(files), cfg.n_classes), np.int8)
    for i, f in enumerate(files):
        for lab, _on, _off in truth[f]:
            clips[i, index[lab]] = 1
    return frames, clips


def train(
    corpus_dir: str | Path,
    out: str | Path,
    opts: TrainOptions | None = None,
    *,
    cfg: SedConfig | None = None,
    resume: bool = False,
    ckpt: str | Path | None = None,
    cache: str | Path | None = None,
    quiet: bool = False,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
) -> dict[str, Any]:
    """Train (or continue) one method; unless stopped by ``max_steps``, write the weights and card.

    Returns ``{"state": summary, "card": card or None, "finished": bool}``.
    """
    opts = opts or TrainOptions()
    adv, tri = parse_method(opts.method)
    cfg = cfg or SedConfig(**PRESETS["small"])
    if opts.epochs < 1:
        raise ValueError(f"--epochs must be >= 1, got {opts.epochs}")
    if opts.batch < 1:
        raise ValueError(f"--batch-size must be >= 1, got {opts.batch}")
    if tri and opts.final_epochs() < 1:
        raise ValueError(f"--tri-epochs must be >= 1, got {opts.tri_epochs}")
    teach = opts.teacher is not None
    rule = opts.pseudo_rule() if tri or teach else None
    if teach and (tri or opts.oracle_labels):
        raise ValueError(f"--teacher labels W and U from step 0 for a method without tri-training, not {opts.method!r}"
                         f"{' with --oracle-labels' if opts.oracle_labels else ''}")  # fmt: skip
    if opts.relabel_every < 0:
        raise ValueError(f"--relabel-every must be >= 0, got {opts.relabel_every}")
    if opts.relabel_every and not tri:
        raise ValueError(f"--relabel-every needs a tri-training method, not {opts.method!r}")
    if opts.oracle_labels and opts.relabel_every:
        raise ValueError("--oracle-labels gives the true labels once; --relabel-every has nothing to remake")
    if opts.pseudo_level not in PSEUDO_LEVELS:
        raise ValueError(f"--pseudo-level must be one of {', '.join(PSEUDO_LEVELS)}, got {opts.pseudo_level!r}")
    if not tri and (opts.detach_labelers or opts.pseudo_level != "frame" and not teach):
        raise ValueError(f"--detach-labelers and --pseudo-level need a tri-training method (or --pseudo-level a --teacher), not {opts.method!r}")
    if opts.ema is not None and not 0.0 < opts.ema < 1.0:
        raise ValueError(f"--ema must be in (0, 1), got {opts.ema}")
    if opts.pseudo_from not in PSEUDO_FROM:
        raise ValueError(f"--pseudo-from must be one of {', '.join(PSEUDO_FROM)}, got {opts.pseudo_from!r}")
    if opts.pseudo_from == "ema" and (not tri or opts.ema is None or opts.oracle_labels):
        raise ValueError("--pseudo-from ema needs a tri-training method and --ema DECAY (and no --oracle-labels)")
    if opts.consistency < 0.0 or opts.consistency_rampup < 0:
        raise ValueError(f"--consistency and --consistency-rampup must be >= 0, got {opts.consistency}, {opts.consistency_rampup}")
    if opts.consistency and opts.ema is None:
        raise ValueError("--consistency needs --ema DECAY: the moving average is the teacher")
    if opts.extend and adv is not None and opts.grl_schedule != "const":
        raise ValueError(f"--extend trains a finished run for more epochs, as if started with them; {opts.method!r} with --grl-schedule "
                         "ganin has a schedule that depends on the total (its ramp follows the total steps); train it anew")  # fmt: skip
    if not 0.0 <= opts.pseudo_mix <= 1.0 or opts.pseudo_mix_gain_db < 0.0:
        raise ValueError(f"--pseudo-mix must be in [0, 1] and --pseudo-mix-gain-db >= 0, got {opts.pseudo_mix}, {opts.pseudo_mix_gain_db}")
    if opts.pseudo_mix and not (tri or teach or opts.oracle_labels):
        raise ValueError(f"--pseudo-mix mixes pseudo-labelled real clips: it needs a tri-training method, --teacher or --oracle-labels, not {opts.method!r}")
    relabel = bool(opts.relabel_every)
    source = "oracle" if opts.oracle_labels else ("averaged labelers" if opts.pseudo_from == "ema" else "labelers")
    out = Path(out)
    teacher_model = None
    if teach:
        if not Path(opts.teacher).is_file():  # type: ignore[arg-type]
            raise ValueError(f"--teacher {opts.teacher}: no such file")
        teacher_model, _meta = load_teacher(opts.teacher, cfg)  # type: ignore[arg-type]
        source = "teacher"
    ckpt_p = Path(ckpt) if ckpt is not None else out.with_name(out.stem + ".ckpt")
    torch.set_num_threads(int(opts.threads))
    corpus = SedCorpus(corpus_dir, cache)
    t_load = time.monotonic()
    data = _Data(corpus, cfg, opts, quiet)
    load_s = time.monotonic() - t_load

    steps_per_epoch = max(1, data.n_s // opts.batch)
    total_steps = steps_per_epoch * (opts.epochs + opts.final_epochs())
    switch_step = steps_per_epoch * opts.epochs if tri else None
    method_stages = stages(opts.method)

    torch.manual_seed(opts.seed)
    model = SedModel(cfg)
    model.F.set_normalisation(*map(torch.from_numpy, data.norm_stats()))
    optim = torch.optim.Adam(model.parameters(), lr=opts.lr, betas=(0.9, 0.999), eps=1e-8)
    st: dict[str, Any] = {"step": 0, "elapsed_s": 0.0, "history": [], "best_f1": -1.0, "best_step": None, "best_epoch": None,
                          "best_state": None, "validated_epochs": 0, "runs": 0, "pseudo": None, "pseudo_stats": None}  # fmt: skip
    fp = {**opts.fingerprint(), "config": cfg.to_dict(), "n_s": data.n_s}
    extended_from = None
    if (resume or opts.extend) and ckpt_p.is_file():
        try:
            ck = torch.load(ckpt_p, map_location="cpu", weights_only=False)
        except Exception as e:  # noqa: BLE001
            raise CorpusError(f"checkpoint {ckpt_p} is corrupt: {type(e).__name__}: {e}") from None
        if not isinstance(ck, dict) or ck.get("format") != CKPT_FORMAT:
            raise ValueError(f"{ckpt_p} is not a SED training checkpoint")
        ck_fp = ck["fingerprint"]
        if opts.extend:  # (the checkpoint's epochs may be fewer: the run goes on to this --epochs, as if started with it)
            ck_epochs = int(ck_fp.get("epochs", 0))
            if ck_epochs > opts.epochs:
                raise ValueError(f"{ckpt_p}: --extend goes on to --epochs {opts.epochs}, but the checkpoint's run has {ck_epochs}")
            grows = ck_epochs < opts.epochs
            if tri:  # the stage switch follows --epochs: only a checkpoint still in the labeler stage may move it
                at, ck_switch = int(ck["state"].get("step", 0)), steps_per_epoch * ck_epochs
                if ck["state"].get("pseudo") is not None or at > ck_switch:
                    raise ValueError(f"{ckpt_p}: --extend lengthens a tri-training run only in its labeler stage, and this checkpoint is at "
                                     f"step {at}, in its final stage (the switch is at step {ck_switch}); extend its labeler-stage copy "
                                     f"({labelers_ckpt_path(ckpt_p).name}, copied to {ckpt_p.name}) or train anew")  # fmt: skip
                grows = grows or int(ck_fp.get("tri_epochs", 0)) != opts.final_epochs()
                ck_fp = {**ck_fp, "tri_epochs": opts.final_epochs()}
            if grows:
                extended_from = ck_epochs
            ck_fp = {**ck_fp, "epochs": opts.epochs}
        if ck_fp != fp:
            diff = {k: (fp.get(k), ck_fp.get(k)) for k in fp if fp.get(k) != ck_fp.get(k)}
            if "config" in diff:  # name the model settings that differ, not two whole configs
                this, theirs = diff.pop("config")
                this, theirs = this or {}, theirs or {}
                diff.update({f"config.{k}": (this.get(k), theirs.get(k)) for k in sorted(set(this) | set(theirs)) if this.get(k) != theirs.get(k)})
            raise ValueError(f"{ckpt_p}: checkpoint of another run (this run, checkpoint): {diff}; drop --resume or use another --ckpt")
        made = ck["state"].get("pseudo_rule", {"positive": 0.5, "negative": 0.5}) if ck["state"].get("pseudo") is not None else None
        if made is not None and made != rule:
            raise ValueError(f"{ckpt_p}: its pseudo-labels were made with thresholds {made}, this run asks for {rule}; "
                             "resume with those (or from a checkpoint before the switch)")  # fmt: skip
        made_every = ck["state"].get("relabel_every", 0) if ck["state"].get("pseudo") is not None else None
        if made_every is not None and made_every != opts.relabel_every:
            raise ValueError(f"{ckpt_p}: its final stage runs with --relabel-every {made_every}, this run asks for {opts.relabel_every}; "
                             "resume with that (or from a checkpoint before the switch)")  # fmt: skip
        made_level = ck["state"].get("pseudo_level", "frame") if ck["state"].get("pseudo") is not None else None
        if made_level is not None and made_level != opts.pseudo_level:
            raise ValueError(f"{ckpt_p}: its pseudo-labels are {made_level}-level, this run asks for --pseudo-level {opts.pseudo_level}; "
                             "resume with that (or from a checkpoint before the switch)")  # fmt: skip
        made_cons = ck["state"].get("consistency", [0.0, 1]) if ck["state"].get("pseudo") is not None else None
        if tri and made_cons is not None and made_cons != [float(opts.consistency), int(opts.consistency_rampup)]:
            raise ValueError(f"{ckpt_p}: its final stage runs with --consistency {made_cons[0]:g} --consistency-rampup {made_cons[1]}, "
                             "this run asks for another; resume with those (or from a checkpoint before the switch)")  # fmt: skip
        made_mix = ck["state"].get("pseudo_mix", [0.0, 0.0]) if ck["state"].get("pseudo") is not None else None
        if tri and made_mix is not None and made_mix != opts.mix_rule():
            raise ValueError(f"{ckpt_p}: its final stage runs with --pseudo-mix {made_mix[0]:g} --pseudo-mix-gain-db {made_mix[1]:g}, "
                             "this run asks for another; resume with those (or from a checkpoint before the switch)")  # fmt: skip
        made_from = ck["state"].get("pseudo_source", "labelers") if ck["state"].get("pseudo") is not None else None
        if made_from is not None and made_from != source:
            raise ValueError(f"{ckpt_p}: its final stage learns from {made_from} labels, this run asks for {source} labels "
                             "(--oracle-labels); resume with that (or from a checkpoint before the switch)")  # fmt: skip
        model.load_state_dict(ck["model"])
        optim.load_state_dict(ck["optim"])
        torch.set_rng_state(ck["torch_rng"])
        st = ck["state"]
        if extended_from is not None:
            st["extended_from_epochs"] = [*st.get("extended_from_epochs", []), extended_from]
    elif opts.extend:
        raise ValueError(f"--extend: no checkpoint at {ckpt_p} to extend")
    elif resume and not quiet:
        print(f"no checkpoint at {ckpt_p}; starting from scratch", file=sys.stderr, flush=True)
    st["runs"] += 1
    ema_model, live = None, model.state_dict()  # (state_dict entries share the parameters' storage: updated in place)
    if opts.ema is not None:
        ema_model = copy.deepcopy(model)  # (a new SedModel would draw its initial weights from the training RNG)
        if st.get("ema") is not None:
            ema_model.load_state_dict(st["ema"])
        st["ema"] = ema_model.state_dict()  # the average lives in ema_model; the checkpoint saves these tensors

    def stage_at(step: int) -> str:
        return method_stages[0] if switch_step is None or step < switch_step else method_stages[1]

    def log(msg: str) -> None:
        if not quiet:
            if bar is not None:
                bar.write(msg, file=sys.stderr)
            else:
                print(msg, file=sys.stderr, flush=True)

    bar = None
    log(f"train sed {opts.method}: S {data.n_s} (+{opts.synthetic_holdout} held out), W {data.W.shape[0]}, "
        f"U {0 if data.U is None else data.U.shape[0]}{'' if data.uses_u else ' (not used)'}, val {len(data.v_files)}; "
        f"{n_params(model)} parameters; {opts.epochs + opts.final_epochs()} epochs x {steps_per_epoch} steps of {opts.batch} clips per subset; "
        f"stages {method_stages}{f' (switch at step {switch_step})' if switch_step else ''}; {opts.threads} thread(s); "
        f"features loaded in {load_s:.1f} s; checkpoint {ckpt_p.name}")  # fmt: skip

    t_run = time.monotonic()
    base = st["elapsed_s"]
    last_ckpt = time.monotonic()

    def elapsed() -> float:
        return base + time.monotonic() - t_run

    def save_ckpt() -> None:
        st["elapsed_s"] = elapsed()
        _save_atomic(ckpt_p, {"format": CKPT_FORMAT, "fingerprint": fp, "model": model.state_dict(), "optim": optim.state_dict(),
                              "torch_rng": torch.get_rng_state(), "state": st})  # fmt: skip

    def val_scores(m: SedModel) -> dict[str, Any]:
        probs = predict_frames(m, data.V)
        return score_probs(probs, data.v_files, data.v_ref, cfg, median_s=opts.median_s, threshold=opts.threshold, clip_s=corpus.clip_s)

    def validate(epoch: int) -> None:
        t0 = time.monotonic()
        sc = val_scores(model)
        stage = stage_at(st["step"] - 1)
        eligible = not tri or stage == "final"
        rec = {"epoch": epoch, "step": st["step"], "stage": stage, "val_event_f1": sc["event_f1"], "val_segment_f1": sc["segment_f1"],
               "loss": round(float(loss_avg), 4) if loss_avg is not None else None, "elapsed_s": round(elapsed(), 1)}  # fmt: skip
        chosen, chosen_state, ema_msg = sc, model.state_dict(), ""
        if ema_model is not None:  # the average is scored beside the weights; it alone is selected
            chosen, chosen_state = val_scores(ema_model), st["ema"]
            rec["ema_val_event_f1"], rec["ema_val_segment_f1"] = chosen["event_f1"], chosen["segment_f1"]
            ema_msg = f"; EMA {chosen['event_f1']:.2f} %, {chosen['segment_f1']:.2f} %"
        rec["val_s"] = round(time.monotonic() - t0, 1)
        st["history"].append(rec)
        if eligible and chosen["event_f1"] > st["best_f1"]:
            st["best_f1"] = chosen["event_f1"]
            st["best_step"] = st["step"]
            st["best_epoch"] = epoch
            st["best_state"] = {k: v.detach().clone() for k, v in chosen_state.items()}
        wb = st.get("weights_best")
        if ema_model is not None and eligible and (wb is None or sc["event_f1"] > wb["f1"]):  # the weights' own best, shipped beside
            st["weights_best"] = {"f1": sc["event_f1"], "step": st["step"], "epoch": epoch,
                                  "state": {k: v.detach().clone() for k, v in model.state_dict().items()}}  # fmt: skip
        st["validated_epochs"] = epoch
        log(f"epoch {epoch} ({stage}) step {st['step']}: loss {rec['loss']}, val event F1 {sc['event_f1']:.2f} %, segment F1 "
            f"{sc['segment_f1']:.2f} %{ema_msg} (best {st['best_f1']:.2f} @ epoch {st['best_epoch']}), {elapsed() / 60:.1f} min")  # fmt: skip

    model.train()
    loss_avg: float | None = None
    stopped = False
    budget = None if opts.minutes is None else opts.minutes * 60.0
    from tqdm import tqdm

    tty = sys.stderr.isatty()
    bar = tqdm(total=total_steps, initial=st["step"], desc=f"sed {opts.method}", file=sys.stderr, disable=quiet,
               mininterval=1.0 if tty else 60.0, dynamic_ncols=True)  # fmt: skip
    try:
        while st["step"] < total_steps:
            step = st["step"]
            stage = stage_at(step)
            refresh = (relabel and st["pseudo"] is not None and (step - switch_step) % (opts.relabel_every * steps_per_epoch) == 0
                       and st.get("pseudo_step") != step)  # fmt: skip
            if (tri and stage == "final" or (opts.oracle_labels or teach) and not tri) and (st["pseudo"] is None or refresh):
                t0 = time.monotonic()
                if teacher_model is not None:  # (clean features: the teacher labels what the clips are, not their perturbations)
                    wf, _wc = teacher_label_all(teacher_model, data.W, data.w_clip, rule)  # type: ignore[arg-type]
                    uf, uc = teacher_label_all(teacher_model, data.U, None, rule) if data.U is not None else (None, None)  # type: ignore[arg-type]
                elif opts.oracle_labels:
                    wf, _wc = _oracle_label_all(corpus, "weak", cfg, data.t_out)
                    uf, uc = _oracle_label_all(corpus, "unlabelled", cfg, data.t_out) if data.U is not None else (None, None)
                else:
                    teacher = ema_model if opts.pseudo_from == "ema" else model  # (mean-teacher style: the average's F1/F2)
                    wf, _wc = _pseudo_label_all(teacher, data.W, data.w_clip, rule=rule)
                    uf, uc = _pseudo_label_all(teacher, data.U, None, rule=rule) if data.U is not None else (None, None)
                if opts.pseudo_level == "clip":  # W keeps only its tags, U only its clip pseudo-labels: no frame targets
                    wf = np.full_like(wf, -1)
                    uf = None if uf is None else np.full_like(uf, -1)
                elif opts.pseudo_level == "positive":  # frame positives inside held classes, absent classes negative
                    wf = positive_frames(wf, data.w_clip.astype(np.int8))
                    uf = None if uf is None else positive_frames(uf, uc)
                st["pseudo"] = {"w_frame": wf, "u_frame": uf, "u_clip": uc}
                st["pseudo_source"] = source
                st["pseudo_level"] = opts.pseudo_level
                st["pseudo_rule"] = rule
                st["relabel_every"] = opts.relabel_every
                st["consistency"] = [float(opts.consistency), int(opts.consistency_rampup)]
                st["pseudo_mix"] = opts.mix_rule()
                st["pseudo_step"] = step
                cov = lambda a: float((a >= 0).mean()) if a is not None else None  # noqa: E731
                pos = lambda a: float((a == 1).mean()) if a is not None else None  # noqa: E731
                stats = {"w_frame_labelled": cov(wf), "w_frame_positive": pos(wf), "u_frame_labelled": cov(uf),
                         "u_frame_positive": pos(uf), "u_clip_labelled": cov(uc), "u_clip_positive": pos(uc),
                         "seconds": round(time.monotonic() - t0, 1)}  # fmt: skip
                if st.get("pseudo_stats") is None:
                    st["pseudo_stats"] = stats
                st.setdefault("pseudo_history", []).append({"step": step, **stats})
                log(f"pseudo-labels at step {step}: {json.dumps(stats)}")
                save_ckpt()
                last_ckpt = time.monotonic()
            pl = st["pseudo"] if stage == "final" or not tri else None  # (without tri-training: --oracle-labels or --teacher only)
            cons = bool(opts.consistency) and (not tri or stage == "final")
            use_u = data.U is not None and (adv is not None or pl is not None or cons)
            b = opts.batch
            i_s = _stream(opts.seed, 0, data.n_s, step * b, b)
            i_w = _stream(opts.seed, 1, data.W.shape[0], step * b, b)
            parts_x = [data.S[i_s], data.W[i_w]]
            t_out, k = data.t_out, cfg.n_classes
            frame = [torch.from_numpy(data.s_frame[i_s].astype(np.float32)), torch.zeros(b, t_out, k)]
            fmask = [torch.ones(b, t_out, k), torch.zeros(b, t_out, k)]
            clip = [torch.from_numpy(data.s_clip[i_s]), torch.from_numpy(data.w_clip[i_w])]
            cmask = [torch.ones(b, k), torch.ones(b, k)]
            dom = [torch.zeros(b), torch.ones(b)]
            lab = relabel and pl is not None  # the labelers keep learning from the labelled targets only
            if lab:
                lab_frame, lab_fmask, lab_clip, lab_cmask = list(frame), list(fmask), list(clip), list(cmask)
            if pl is not None:
                wf = torch.from_numpy(pl["w_frame"][i_w].astype(np.float32))
                frame[1] = wf.clamp_min(0.0)
                fmask[1] = (wf >= 0).float()
            if use_u:
                i_u = _stream(opts.seed, 2, data.U.shape[0], step * b, b)  # type: ignore[union-attr]
                parts_x.append(data.U[i_u])  # type: ignore[index]
                if pl is not None:
                    uf = torch.from_numpy(pl["u_frame"][i_u].astype(np.float32))
                    uc = torch.from_numpy(pl["u_clip"][i_u].astype(np.float32))
                    frame.append(uf.clamp_min(0.0))
                    fmask.append((uf >= 0).float())
                    clip.append(uc.clamp_min(0.0))
                    cmask.append((uc >= 0).float())
                else:
                    frame.append(torch.zeros(b, t_out, k))
                    fmask.append(torch.zeros(b, t_out, k))
                    clip.append(torch.zeros(b, k))
                    cmask.append(torch.zeros(b, k))
                if lab:
                    lab_frame.append(torch.zeros(b, t_out, k))
                    lab_fmask.append(torch.zeros(b, t_out, k))
                    lab_clip.append(torch.zeros(b, k))
                    lab_cmask.append(torch.zeros(b, k))
                dom.append(torch.ones(b))
            d_mask = None
            if opts.pseudo_mix and pl is not None and data.U is not None:  # (see sed_mix: synthetic clips in real scenes)
                which, gain = draw_mix(mix_rng(opts.seed, step), b, opts.pseudo_mix, opts.pseudo_mix_gain_db)
                if which.any():
                    sel = np.flatnonzero(which)
                    i_m = _stream(opts.seed, 3, data.U.shape[0], step * b, b)[sel]
                    xs = parts_x[0].astype(np.float32)  # (the features are cached as float16: mix at float32)
                    xs[sel] = mix_features(xs[sel], data.U[i_m], gain[sel])
                    parts_x[0] = xs
                    mt = mix_targets(data.s_frame[i_s[sel]], data.s_clip[i_s[sel]], pl["u_frame"][i_m], pl["u_clip"][i_m])
                    for lst, new in zip((frame, fmask, clip, cmask), mt):  # (new tensors: the labelers' lists share the old ones)
                        lst[0] = lst[0].clone()
                        lst[0][sel] = torch.from_numpy(new)
                    d_mask = torch.ones(sum(len(p) for p in parts_x))
                    d_mask[sel] = 0.0  # a mixture is neither domain
                    if lab:  # the labelers learn from labelled clips only
                        lab_fmask[0], lab_cmask[0] = lab_fmask[0].clone(), lab_cmask[0].clone()
                        lab_fmask[0][sel] = 0.0
                        lab_cmask[0][sel] = 0.0
            x_np = np.concatenate(parts_x).astype(np.float32)
            x_clean = None
            if opts.augment is not None:  # the targets hold for the perturbed clips; a teacher sees the clean ones
                x_clean = torch.from_numpy(x_np) if cons else None
                x_np = opts.augment(x_np, batch_rng(opts.seed, step))
            x = torch.from_numpy(x_np)
            t = SedTargets(frame=torch.cat(frame), frame_mask=torch.cat(fmask), clip=torch.cat(clip), clip_mask=torch.cat(cmask),
                           domain=torch.cat(dom), domain_mask=d_mask)  # fmt: skip
            if adv is not None:
                model.D.scale = _grl(opts.grl_schedule, cfg.grl_scale, step / total_steps)
            t_lab = None
            if lab:
                t_lab = SedTargets(frame=torch.cat(lab_frame), frame_mask=torch.cat(lab_fmask), clip=torch.cat(lab_clip),
                                   clip_mask=torch.cat(lab_cmask), domain=t.domain)  # fmt: skip
            syn_rows = b if cfg.domain_bn else 0  # (the batch's first b rows are the synthetic clips)
            o = model(x, heads=heads_for(opts.method, stage, relabel=lab), domain=adv, detach_labelers=opts.detach_labelers,
                      synthetic_rows=syn_rows)  # fmt: skip
            parts = sed_loss(opts.method, o, t, model=model, stage=stage, labeler_targets=t_lab)
            if cons:
                w_c = opts.consistency * consistency_ramp(step - (switch_step or 0), opts.consistency_rampup * steps_per_epoch)
                with torch.no_grad():
                    ema_model.eval()  # type: ignore[union-attr]
                    to = ema_model(x if x_clean is None else x_clean, synthetic_rows=syn_rows)["ft"]  # type: ignore[misc]
                parts["consistency"] = consistency_loss(o["ft"], to)
                parts["loss"] = parts["loss"] + w_c * parts["consistency"]
            optim.zero_grad(set_to_none=True)
            parts["loss"].backward()
            optim.step()
            st["step"] += 1
            if opts.ema is not None:
                _ema_update(st["ema"], live, min(opts.ema, (1.0 + st["step"]) / (10.0 + st["step"])))
            st["loss_sum"] = st.get("loss_sum", 0.0) + float(parts["loss"].detach())
            st["loss_n"] = st.get("loss_n", 0) + 1
            loss_avg = st["loss_sum"] / st["loss_n"]
            if on_step is not None:
                on_step(st["step"], {k2: float(v.detach()) for k2, v in parts.items()})
            bar.update(1)
            bar.set_postfix_str(f"{stage} loss {loss_avg:.4f}" + (f" d {float(parts['domain'].detach()):.3f}" if "domain" in parts else ""), refresh=False)
            if st["step"] % steps_per_epoch == 0:
                epoch = st["step"] // steps_per_epoch
                validate(epoch)
                st["loss_sum"], st["loss_n"] = 0.0, 0
                save_ckpt()
                last_ckpt = time.monotonic()
                if tri and st["step"] == switch_step:  # the end of the labeler stage, kept: final-stage variants branch from it
                    lab_p = labelers_ckpt_path(ckpt_p)
                    with open(ckpt_p, "rb") as src, atomic_output(lab_p, "wb") as dst:  # (a byte copy: no second serialisation)
                        shutil.copyfileobj(src, dst)
            elif time.monotonic() - last_ckpt > opts.ckpt_minutes * 60.0:
                save_ckpt()
                last_ckpt = time.monotonic()
            if opts.max_steps is not None and st["step"] >= opts.max_steps and st["step"] < total_steps:
                stopped = True
                break
            if budget is not None and elapsed() >= budget:
                log(f"--minutes {opts.minutes:g} reached at step {st['step']} of {total_steps}")
                break
    finally:
        bar.close()
    if not stopped and (not st["history"] or st["history"][-1]["step"] != st["step"]):
        validate(st["validated_epochs"] + 1 if st["step"] % steps_per_epoch else st["step"] // steps_per_epoch)
    save_ckpt()
    summary = {k: v for k, v in st.items() if k not in ("best_state", "pseudo", "ema", "weights_best")}
    if stopped:
        log(f"stopped at step {st['step']} (--max-steps); continue with --resume")
        return {"state": summary, "card": None, "finished": False}
    card = finalize(ckpt_p, out, corpus, opts=opts, quiet=quiet, load_s=load_s)
    return {"state": summary, "card": card, "finished": True}


def labelers_ckpt_path(ckpt: str | Path) -> Path:
    """The copy of a tri-training checkpoint at the end of the labeler stage, before any pseudo-label: ``<stem>.labelers.ckpt``.

    Copied to a new run's ``--ckpt`` and resumed (``--resume``) with other final-stage options (``--pseudo-threshold``,
    ``--pseudo-negative``, ``--pseudo-level``, ``--relabel-every``, ``--pseudo-from``, ``--oracle-labels``), it skips the
    labeler stage, which those options do not change."""
    ckpt = Path(ckpt)
    return ckpt.with_name(ckpt.stem + ".labelers" + ckpt.suffix)


def weights_path(out: str | Path) -> Path:
    """Where a ``--ema`` run writes the weights' own best state beside the shipped average: ``<stem>.weights.pt``."""
    out = Path(out)
    return out.with_name(out.stem + ".weights" + out.suffix)


def finalize(ckpt: Path, out: Path, corpus: SedCorpus, *, opts: TrainOptions, quiet: bool = False, load_s: float = 0.0) -> dict[str, Any]:
    """Write the best state of a checkpoint as the weight file and the model card; returns the card.

    A ``--ema`` run also writes the weights' own best state (selected on the same validation, same epochs) and its card
    at :func:`weights_path` (card ``training.ema`` None, ``training.ema_decay`` the run's): analysis, not shipped."""
    ck = torch.load(ckpt, map_location="cpu", weights_only=False)
    st = ck["state"]
    wb = st.get("weights_best") if opts.ema is not None else None
    if wb is not None:
        _write_model(ck, weights_path(out), corpus, opts=opts, quiet=quiet, load_s=load_s,
                     state=wb["state"], selected=(None, wb["epoch"], wb["f1"]))  # fmt: skip
    best = st["best_state"] if st.get("best_state") is not None else ck["model"]
    return _write_model(ck, out, corpus, opts=opts, quiet=quiet, load_s=load_s, state=best, selected=(opts.ema, st.get("best_epoch"), st.get("best_f1")))


def _write_model(ck: dict[str, Any], out: Path, corpus: SedCorpus, *, opts: TrainOptions, quiet: bool, load_s: float,
                 state: dict[str, torch.Tensor], selected: tuple[float | None, int | None, float | None]) -> dict[str, Any]:  # fmt: skip
    """Score ``state`` and write it with its card; ``selected``: (EMA decay it was averaged with or None, epoch, val F1)."""
    import platform

    st = ck["state"]
    sel_ema, best_epoch, best_f1 = selected
    cfg = SedConfig.from_dict(ck["fingerprint"]["config"])
    model = SedModel(cfg)
    model.load_state_dict(state)
    model.eval()
    t0 = time.monotonic()
    n_s = ck["fingerprint"]["n_s"]
    metrics: dict[str, Any] = {}
    for name, sub, sl in (("validation", "validation", slice(None)), ("eval", "eval", slice(None)), ("synthetic_holdout", "synthetic", slice(n_s, None))):
        if not corpus.files.get(sub):
            continue
        files = corpus.files[sub][sl]
        if not files:
            continue
        feats = corpus.features(sub, cfg, progress=not quiet)[sl]
        probs = predict_frames(model, feats, synthetic=sub == "synthetic")
        metrics[name] = score_probs(probs, files, corpus.strong[sub], cfg, median_s=opts.median_s, threshold=opts.threshold,
                                    clip_s=corpus.clip_s, psds=opts.psds)  # fmt: skip
        if not quiet:
            m = metrics[name]
            print(f"{name}: event F1 {m['event_f1']:.2f} %, segment F1 {m['segment_f1']:.2f} %, PSDS1 {m.get('psds1')}", file=sys.stderr, flush=True)
    adv, tri = parse_method(opts.method)
    rule = opts.pseudo_rule() if tri or opts.teacher is not None else None
    teacher = None
    if opts.teacher is not None:  # (its name and digest, and its own card's method, seed and scores when beside it)
        tp = Path(opts.teacher)
        teacher = {"file": tp.name, "sha256": ck["fingerprint"]["teacher"]["sha256"], "labels": "Ft frame and clip probabilities "
                   "of the clean clips, once before step 0: positive above pseudo_threshold, negative below pseudo_negative; "
                   "weak clips: clip labels are the tags, frames of absent classes negative"}  # fmt: skip
        try:
            tc = json.loads(tp.with_suffix(".json").read_text(encoding="utf-8"))
            teacher["card"] = {"file": tp.with_suffix(".json").name, "method": tc.get("method"), "seed": (tc.get("training") or {}).get("seed"),
                               "eval_event_f1": ((tc.get("metrics") or {}).get("eval") or {}).get("event_f1"),
                               "augment": (tc.get("training") or {}).get("augment") is not None}  # fmt: skip
        except (OSError, ValueError, AttributeError):
            teacher["card"] = None
    card = {
        "model": "streamkit.models.sed_crnn (CRNN: F = CNN + BiGRU, labelers F1/F2, final classifier Ft, domain classifier D behind a GRL)",
        "paper": "Park et al., Weakly labeled sound event detection using tri-training and adversarial learning (DCASE 2019 task 4)",
        "method": opts.method,
        "adversarial": adv,
        "tri_training": tri,
        "config": cfg.to_dict(),
        "parameters": n_params(model),
        "parameters_ft_path": n_params(model.F) + n_params(model.ft),
        "inference": "Ft frame probabilities; median filter per class, threshold, events (streamkit.models.sed_post)",
        "post_processing": {"median_s": opts.median_s, "median_frames": median_frames(opts.median_s, cfg.frame_seconds),
                            "threshold": opts.threshold, "frame_s": cfg.frame_seconds},  # fmt: skip
        "metrics": metrics,
        "metrics_note": "event-based (200 ms onset collar, offset max(200 ms, 20 %)) and segment-based (1 s) macro F1 in % via sed_eval; "
        "PSDS scenario 1 via sed_scores_eval on the median-free frame probabilities; validation: model selection set; eval: real "
        "domain, scored once; synthetic_holdout: the last synthetic clips, not trained on",
        "training": {
            "corpus_command": corpus.corpus_command(),
            "corpus_seed": corpus.manifest.get("seed"),
            "corpus_counts": corpus.manifest.get("counts"),
            "synthetic_train_clips": n_s,
            "synthetic_holdout": opts.synthetic_holdout,
            "seed": opts.seed,
            "epochs": opts.epochs,
            "extended_from_epochs": st.get("extended_from_epochs"),
            "steps": st["step"],
            "steps_per_epoch": max(1, n_s // opts.batch),
            "batch_per_subset": opts.batch,
            "lr": opts.lr,
            "optimiser": "Adam (0.9, 0.999), eps 1e-8",
            "grl_schedule": opts.grl_schedule if adv else None,
            "tri_epochs": opts.final_epochs() if tri else None,
            "orth_lambda": 1.0 if tri else None,
            "pseudo_threshold": rule["positive"] if rule else None,
            "pseudo_negative": rule["negative"] if rule else None,
            "pseudo_stats": st.get("pseudo_stats"),
            "relabel_every": opts.relabel_every if tri else None,
            "oracle_labels": bool(opts.oracle_labels),
            "detach_labelers": bool(opts.detach_labelers) if tri else None,
            "pseudo_level": opts.pseudo_level if tri or teacher else None,
            "teacher": teacher,
            "pseudo_history": st.get("pseudo_history"),
            "pseudo_from": opts.pseudo_from if tri else None,
            "consistency": ({"weight": opts.consistency, "rampup_epochs": opts.consistency_rampup, "stage": "final" if tri else "all",
                             "teacher": "EMA model (eval mode), Ft frame and clip probabilities, MSE"} if opts.consistency else None),
            "augment": ({**opts.augment.to_dict(), "what": "every training clip (S, W, U) from step 0: mel-bin shift, "
                         "FilterAugment (linear), level; pseudo-labels and consistency teachers see clean clips"}
                        if opts.augment is not None else None),
            "pseudo_mix": ({"probability": opts.pseudo_mix, "gain_db": opts.pseudo_mix_gain_db, "stage": "final" if tri else "all",
                            "what": "a pseudo-labelled real clip mixed into synthetic clips (streamkit.train.sed_mix)"}
                           if opts.pseudo_mix else None),
            "ema": sel_ema,
            "ema_decay": opts.ema,
            "selection": ("best validation event-based macro F1 at epoch ends" + (" of the final (pseudo-label) stage" if tri else "")
                          + (f" of the weights' moving average (decay {sel_ema:g}, warm-up min(decay, (1 + step) / (10 + step)))"
                             if sel_ema is not None else (" of the weights (the run also kept their moving average, "
                                                          f"decay {opts.ema:g})" if opts.ema is not None else ""))),  # fmt: skip
            "best_epoch": best_epoch,
            "best_val_event_f1": best_f1,
            "wall_time_s": round(st["elapsed_s"], 1),
            "feature_load_s": round(load_s, 1),
            "runs": st.get("runs", 1),
            "threads": opts.threads,
            "history": st["history"],
        },
        "final_eval_s": round(time.monotonic() - t0, 1),
        "torch": torch.__version__,
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    save_model(out, model, meta={"card": out.with_suffix(".json").name, "method": opts.method, "steps": st["step"], "seed": opts.seed,
                                 "post_processing": card["post_processing"]})  # fmt: skip
    write_text(out.with_suffix(".json"), json.dumps(card, indent=1) + "\n")
    if not quiet:
        print(f"wrote {out} and {out.with_suffix('.json').name}", file=sys.stderr, flush=True)
    return card


# ------------------------------------------------------------------------------------------------
# CLI
# ------------------------------------------------------------------------------------------------


def _ints(text: str) -> tuple[int, ...]:
    try:
        v = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not v:
        raise argparse.ArgumentTypeError("empty list")
    return v


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of ``streamkit train sed``."""
    d = TrainOptions()
    parser.add_argument("--corpus", required=True, metavar="DIR", help="a `streamkit corpus sed` directory")
    parser.add_argument("--method", choices=METHODS, default="baseline", help="paper Table 1 method (default baseline)")
    parser.add_argument("--out", required=True, metavar="PATH", help="weight file (.pt); the model card is written beside it (.json)")
    parser.add_argument("--epochs", type=int, default=d.epochs, help=f"epochs of len(S_train) // batch steps (default {d.epochs})")
    parser.add_argument("--minutes", type=float, default=None, help="also stop after this much training wall time (summed over resumes)")
    parser.add_argument("--seed", type=int, default=d.seed, help=f"seed of the weights, data order and dropout (default {d.seed})")
    parser.add_argument("--threads", type=int, default=d.threads, help=f"torch threads (default {d.threads})")
    parser.add_argument("--batch-size", type=int, default=d.batch, help=f"clips per subset (S, W, U) per step (default {d.batch})")
    parser.add_argument("--lr", type=float, default=d.lr, help=f"Adam learning rate (default {d.lr:g})")
    parser.add_argument("--resume", action="store_true", help="continue from the checkpoint (same options)")
    parser.add_argument("--extend", action="store_true",
                        help="continue a run's checkpoint, finished or not, to a larger --epochs (same other options): the result "
                        "equals a run started with that many epochs. Adversarial methods only with --grl-schedule const; "
                        "tri-training only from a checkpoint still in its labeler stage (e.g. its .labelers.ckpt copy), "
                        "to more --epochs and any --tri-epochs")
    parser.add_argument("--ckpt", default=None, metavar="PATH", help="checkpoint path (default <out stem>.ckpt beside --out)")
    parser.add_argument("--ckpt-minutes", type=float, default=d.ckpt_minutes, help=f"checkpoint interval (default {d.ckpt_minutes:g} min)")
    parser.add_argument("--cache", default=None, metavar="DIR", help="log-mel cache directory (default <corpus>/features)")
    parser.add_argument("--max-steps", type=int, default=None, help="stop after this step with a checkpoint (no weights); --resume goes on")
    parser.add_argument("--tri-epochs", type=int, default=None,
                        help="tri-training: epochs of the final (pseudo-label) stage, run after the --epochs labeler stage "
                        "(default: as many as --epochs, Algorithm 1's two loops of `iter`)")
    parser.add_argument("--pseudo-threshold", type=float, default=d.pseudo_threshold,
                        help=f"tri-training: a frame/clip is a pseudo-positive where F1 and F2 are both above this (default {d.pseudo_threshold:g}, the paper)")
    parser.add_argument("--pseudo-negative", type=float, default=None,
                        help="tri-training: a pseudo-negative where both are below this (default 1 - --pseudo-threshold, the paper); lower "
                        "leaves unsure frames unlabelled. Not part of the checkpoint fingerprint until the labels are made, so final "
                        "stages with other thresholds can branch from one labeler-stage checkpoint (--max-steps at the switch)")
    parser.add_argument("--relabel-every", type=int, default=d.relabel_every, metavar="N",
                        help="tri-training: remake the pseudo-labels every N epochs of the final stage, the labelers F1/F2 going on "
                        "learning from the labelled data (S, W tags; eq. 8) while Ft learns from the pseudo-labels too, as in asymmetric "
                        "tri-training (default 0: once at the switch, the paper's Algorithm 1). Like the thresholds, not part of the "
                        "checkpoint fingerprint until the labels are made")
    parser.add_argument("--oracle-labels", action="store_true",
                        help="analysis only: learn from the corpus generator's true frame labels of the weak and unlabelled clips "
                        "(<subset>/meta.json), which the task withholds. Tri-training methods: in the final stage instead of F1/F2's "
                        "pseudo-labels, the ceiling of any pseudo-labeller (like the thresholds, not part of the checkpoint fingerprint "
                        "until the labels are made). Other methods: from the first step, as if the real clips were strongly labelled")
    parser.add_argument("--teacher", default=None, metavar="MODEL.pt",
                        help="self-training from a trained model (not in the paper; a second round of tri-training when the teacher "
                        "is an adv-*+tri model): its final classifier Ft labels the weak and unlabelled clips once, by "
                        "--pseudo-threshold / --pseudo-negative and --pseudo-level, and this run (a method without tri-training) "
                        "learns from those labels from the first step. The teacher's digest enters the checkpoint and the card")
    parser.add_argument("--detach-labelers", action="store_true",
                        help="tri-training (not in the paper): F1 and F2 learn on F's output through a stop-gradient, so their "
                        "losses and eq. 8 do not shape F, which learns from Ft (and D) only")
    parser.add_argument("--ema", type=float, default=None, metavar="DECAY",
                        help="keep an exponential moving average of the weights (Polyak; e.g. 0.999) and select and ship it instead "
                        "of the weights; training itself is unchanged (same steps, same random numbers; pseudo-labels come from "
                        "the weights, unless --pseudo-from ema). Validation logs both; the weights' own best is written beside "
                        "as <out stem>.weights.pt with its card")
    parser.add_argument("--pseudo-from", choices=PSEUDO_FROM, default=d.pseudo_from,
                        help="tri-training: the pseudo-labels come from F1/F2 of the 'weights' (default, the paper) or of their "
                        "moving average 'ema' (not in the paper; mean-teacher style, needs --ema). Like the thresholds, not part "
                        "of the checkpoint fingerprint until the labels are made")
    parser.add_argument("--pseudo-level", choices=PSEUDO_LEVELS, default=d.pseudo_level,
                        help="tri-training: 'frame' (default, the paper's rule on frames and clips) or 'clip' (not in the paper: "
                        "only clip-level pseudo-labels of U, W keeps its tags; no frame pseudo-labels) or 'positive' (not in the paper: "
                        "frame positives only inside the classes a clip holds, every frame of a class it lacks negative, no other "
                        "frame negatives). Like the thresholds, "
                        "not part of the checkpoint fingerprint until the labels are made")
    parser.add_argument("--consistency", type=float, default=d.consistency, metavar="W",
                        help="mean-teacher consistency (not in the paper; the DCASE 2019 task 4 baseline's): add W x the mean squared "
                        "difference of Ft's frame and clip probabilities to those of the --ema model, on every clip of the batch "
                        "(S, W and U when used); from the first step, or in the final stage of tri-training (like the thresholds, "
                        "not part of the checkpoint fingerprint until the labels are made). Default 0: off")
    parser.add_argument("--consistency-rampup", type=int, default=d.consistency_rampup, metavar="EPOCHS",
                        help=f"epochs over which the consistency weight ramps up as exp(-5 (1 - t)^2) (default {d.consistency_rampup})")
    parser.add_argument("--pseudo-mix", type=float, default=d.pseudo_mix, metavar="P",
                        help="mix a pseudo-labelled real clip into each synthetic clip with probability P wherever real clips have "
                             "pseudo-labels (tri-training final stage, --teacher, --oracle-labels); targets from both (default 0: off)")
    parser.add_argument("--pseudo-mix-gain-db", type=float, default=d.pseudo_mix_gain_db, metavar="DB",
                        help=f"level range of the mixed-in real clip, +-dB (default {d.pseudo_mix_gain_db:g})")
    parser.add_argument("--augment", action="store_true",
                        help="perturb every training clip's log-mel from the first step (not in the paper): a mel-bin shift in "
                        "[-S, S] (--aug-shift), FilterAugment band gains in [-D, D] dB (--aug-filter-db) and a level change in "
                        "[-G, G] dB (--aug-gain-db), drawn per clip and step from the seed; pseudo-labels are made on clean clips")
    am = MelAugment()
    parser.add_argument("--aug-shift", type=int, default=am.shift, metavar="S", help=f"largest mel-bin shift (default {am.shift})")
    parser.add_argument("--aug-filter-db", type=float, default=am.filter_db, metavar="D",
                        help=f"largest FilterAugment band gain, dB (default {am.filter_db:g})")
    parser.add_argument("--aug-gain-db", type=float, default=am.gain_db, metavar="G", help=f"largest level change, dB (default {am.gain_db:g})")
    parser.add_argument("--grl-schedule", choices=("ganin", "const"), default=d.grl_schedule, help="GRL factor schedule (default ganin)")
    parser.add_argument("--synthetic-holdout", type=int, default=d.synthetic_holdout,
                        help=f"last synthetic clips kept out of training as the synthetic-domain test set (default {d.synthetic_holdout})")
    parser.add_argument("--median-s", type=float, default=d.median_s, help=f"median filter length in seconds (default {d.median_s:g})")
    parser.add_argument("--threshold", type=float, default=d.threshold, help=f"event threshold (default {d.threshold:g})")
    parser.add_argument("--no-psds", action="store_true", help="skip PSDS in the model card")
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    g = parser.add_argument_group("model size")
    g.add_argument("--preset", choices=tuple(PRESETS), default="small", help="model size preset (default small: the 2-core budget)")
    g.add_argument("--n-mels", type=int, default=None)
    g.add_argument("--channels", type=_ints, default=None, help="CNN channels per block, e.g. 4,16,32,32,32,32")
    g.add_argument("--pool-time", type=_ints, default=None, help="time pooling per block")
    g.add_argument("--pool-freq", type=_ints, default=None, help="frequency pooling per block")
    g.add_argument("--rnn-hidden", type=int, default=None)
    g.add_argument("--rnn-layers", type=int, default=None)
    g.add_argument("--head-hidden", type=int, default=None, help="hidden layer of F1, F2 and Ft (default 0: linear heads)")
    g.add_argument("--labeler-hidden", type=int, default=None, metavar="N",
                   help="hidden layer of F1 and F2 only (no dropout; F, Ft and D keep their initial weights)")
    g.add_argument("--domain-hidden", type=int, default=None)
    g.add_argument("--dropout", type=float, default=None)
    g.add_argument("--fast-dropout", action="store_true", default=None,
                   help="draw the CNN's dropout masks 4 per 64-bit random word (LaneDropout) instead of one Bernoulli draw per element: "
                        "a faster training step, other masks than a run without it (part of the run: a checkpoint resumes as it started)")
    g.add_argument("--grl-scale", type=float, default=None, help="alpha of paper eq. 5 (default 1)")
    g.add_argument("--domain-bn", action="store_true", default=None,
                   help="domain-specific batch norm: the CNN normalises synthetic and real clips with batch norms of their own; "
                        "inference runs the real domain's")
    return parser


def config_from_args(a: argparse.Namespace) -> SedConfig:
    kw = dict(PRESETS[a.preset])
    for name in ("n_mels", "channels", "pool_time", "pool_freq", "rnn_hidden", "rnn_layers", "head_hidden", "labeler_hidden", "domain_hidden", "dropout",
                 "fast_dropout", "grl_scale", "domain_bn"):
        v = getattr(a, name, None)
        if v is not None:
            kw[name] = v
    return SedConfig(**kw)


def run_from_args(a: argparse.Namespace) -> int:
    """``streamkit train sed``: errors in the options or the corpus give one ``error:`` line and exit code 2."""
    try:
        cfg = config_from_args(a)
        opts = TrainOptions(method=a.method, epochs=a.epochs, minutes=a.minutes, seed=a.seed, batch=a.batch_size, lr=a.lr, threads=a.threads,
                            tri_epochs=a.tri_epochs, grl_schedule=a.grl_schedule, synthetic_holdout=a.synthetic_holdout, median_s=a.median_s,
                            threshold=a.threshold, ckpt_minutes=a.ckpt_minutes, max_steps=a.max_steps, psds=not a.no_psds,
                            pseudo_threshold=a.pseudo_threshold, pseudo_negative=a.pseudo_negative,
                            relabel_every=a.relabel_every, oracle_labels=a.oracle_labels, detach_labelers=a.detach_labelers,
                            pseudo_level=a.pseudo_level, ema=a.ema, pseudo_from=a.pseudo_from, consistency=a.consistency,
                            consistency_rampup=a.consistency_rampup, pseudo_mix=a.pseudo_mix, pseudo_mix_gain_db=a.pseudo_mix_gain_db,
                            augment=MelAugment(a.aug_shift, a.aug_filter_db, a.aug_gain_db) if a.augment else None,
                            teacher=a.teacher, extend=a.extend)  # fmt: skip
        res = train(a.corpus, a.out, opts, cfg=cfg, resume=a.resume, ckpt=a.ckpt, cache=a.cache, quiet=a.quiet)
    except (CorpusError, ValueError, OSError) as e:
        print(f"error: {e}".replace("\n", " "), file=sys.stderr)
        return 2
    if res["card"] is not None and not a.quiet:
        m = res["card"]["metrics"]
        print(json.dumps({k: {x: m[k].get(x) for x in ("event_f1", "segment_f1", "psds1")} for k in m}))
    return 0
