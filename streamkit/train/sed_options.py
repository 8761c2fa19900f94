"""Options of ``streamkit train sed``: :class:`TrainOptions`, the checks that combine them, the model presets and
the command line (:func:`add_arguments`, :func:`options_from_args`, :func:`config_from_args`)."""

from __future__ import annotations

import argparse
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamkit.models.sed_crnn import SedConfig
from streamkit.models.sed_losses import METHODS, parse_method
from streamkit.models.sed_post import DEFAULT_THRESHOLD
from streamkit.train.sed_augment import MelAugment

__all__ = ["PRESETS", "PSEUDO_FROM", "PSEUDO_LEVELS", "TrainOptions", "add_arguments", "config_from_args", "file_sha256",
           "options_from_args"]  # fmt: skip

PSEUDO_LEVELS = ("frame", "clip", "positive")
#: tri-training: whose labelers F1/F2 make the pseudo-labels (``--pseudo-from``)
PSEUDO_FROM = ("weights", "ema")

#: model sizes; ``small`` is what fits the 2-core training budget (see the model card / docs/sed.md)
PRESETS: dict[str, dict[str, Any]] = {
    "paper": {},  # SedConfig defaults: DCASE 2020 layout, 7 blocks (16, 32, 64 x 5), BiGRU 2 x 64
    "small": dict(channels=(4, 16, 32, 32, 32, 32), pool_time=(2, 2, 1, 1, 1, 1), pool_freq=(4, 2, 2, 2, 2, 2), rnn_hidden=32),
    "tiny": dict(n_mels=32, channels=(4, 8, 8), pool_time=(2, 2, 1), pool_freq=(2, 4, 4), rnn_hidden=8, rnn_layers=1, domain_hidden=8),
}


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes (a teacher model's identity in the checkpoint fingerprint and the card)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


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
    detach_labelers: bool = False  #: tri-training: F1/F2 (and eq. 8) train on F's output through a stop-gradient (not the paper)
    pseudo_level: str = "frame"  #: tri-training: "frame" (the paper), "clip" (clip-level only) or "positive" (see positive_frames)
    ema: float | None = None  #: select and ship an exponential moving average of the weights with this decay (None: the weights)
    pseudo_from: str = "weights"  #: tri-training: F1/F2 of the "weights" (the paper) or of their moving average "ema" (needs ema)
    augment: MelAugment | None = None  #: perturb every training clip's log-mel from step 0 (see sed_augment; None: off)
    teacher: str | None = None  #: a trained model file whose Ft labels W and U once, used from step 0 (not tri-training methods)
    init: str | None = None  #: start from this model file's weights (fine-tuning; its normalisation too) instead of random ones
    extend: bool = False  #: resume a checkpoint of fewer --epochs (a finished run trained on; schedules that do not depend on the total)

    def pseudo_rule(self) -> dict[str, float]:
        """The pseudo-label thresholds (validated): ``{"positive": .., "negative": ..}``."""
        neg = 1.0 - self.pseudo_threshold if self.pseudo_negative is None else float(self.pseudo_negative)
        if not 0.0 < self.pseudo_threshold < 1.0:
            raise ValueError(f"--pseudo-threshold must be in (0, 1), got {self.pseudo_threshold}")
        if not 0.0 < neg <= self.pseudo_threshold:
            raise ValueError(f"--pseudo-negative must be in (0, --pseudo-threshold {self.pseudo_threshold:g}], got {neg:g}")
        return {"positive": float(self.pseudo_threshold), "negative": round(neg, 6)}

    def fingerprint(self) -> dict[str, Any]:
        """What a resumed run must share with the checkpoint (options that are off are left out, so older checkpoints
        stay resumable)."""
        fp = {k: getattr(self, k) for k in ("method", "epochs", "seed", "batch", "lr", "grl_schedule", "synthetic_holdout")}
        if self.detach_labelers:
            fp["detach_labelers"] = True  # changes the labeler stage
        if self.ema is not None:
            fp["ema"] = float(self.ema)  # the averaged weights are part of the checkpoint
        if self.augment is not None:
            fp["augment"] = self.augment.to_dict()  # from step 0
        if self.teacher is not None:  # from step 0: the teacher file's digest and the label rule
            fp["teacher"] = {"sha256": file_sha256(self.teacher), "rule": self.pseudo_rule(), "level": self.pseudo_level}
        if self.init is not None:  # the starting weights
            fp["init"] = file_sha256(self.init)
        return {**fp, "tri_epochs": self.final_epochs()}

    def final_epochs(self) -> int:
        """Epochs of the tri-training final stage (0 for the other methods)."""
        if not parse_method(self.method)[1]:
            return 0
        return self.epochs if self.tri_epochs is None else int(self.tri_epochs)

    def check(self) -> None:
        """Raise ``ValueError`` for a value out of range or options that do not go together."""
        adv, tri = parse_method(self.method)
        if self.epochs < 1:
            raise ValueError(f"--epochs must be >= 1, got {self.epochs}")
        if self.batch < 1:
            raise ValueError(f"--batch-size must be >= 1, got {self.batch}")
        if tri and self.final_epochs() < 1:
            raise ValueError(f"--tri-epochs must be >= 1, got {self.tri_epochs}")
        if tri or self.teacher is not None:
            self.pseudo_rule()
        if self.teacher is not None and tri:
            raise ValueError(f"--teacher labels W and U from step 0 for a method without tri-training, not {self.method!r}")
        if self.relabel_every < 0:
            raise ValueError(f"--relabel-every must be >= 0, got {self.relabel_every}")
        if self.relabel_every and not tri:
            raise ValueError(f"--relabel-every needs a tri-training method, not {self.method!r}")
        if self.pseudo_level not in PSEUDO_LEVELS:
            raise ValueError(f"--pseudo-level must be one of {', '.join(PSEUDO_LEVELS)}, got {self.pseudo_level!r}")
        if not tri and (self.detach_labelers or self.pseudo_level != "frame" and self.teacher is None):
            raise ValueError(f"--detach-labelers and --pseudo-level need a tri-training method (or --pseudo-level a --teacher), not {self.method!r}")
        if self.ema is not None and not 0.0 < self.ema < 1.0:
            raise ValueError(f"--ema must be in (0, 1), got {self.ema}")
        if self.pseudo_from not in PSEUDO_FROM:
            raise ValueError(f"--pseudo-from must be one of {', '.join(PSEUDO_FROM)}, got {self.pseudo_from!r}")
        if self.pseudo_from == "ema" and (not tri or self.ema is None):
            raise ValueError("--pseudo-from ema needs a tri-training method and --ema DECAY")
        if self.extend and adv is not None and self.grl_schedule != "const":
            raise ValueError(f"--extend trains a finished run for more epochs, as if started with them; {self.method!r} with --grl-schedule "
                             "ganin has a schedule that depends on the total (its ramp follows the total steps); train it anew")  # fmt: skip
        if self.teacher is not None and not Path(self.teacher).is_file():
            raise ValueError(f"--teacher {self.teacher}: no such file")
        if self.init is not None and not Path(self.init).is_file():
            raise ValueError(f"--init {self.init}: no such file")


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
    parser.add_argument(
        "--extend",
        action="store_true",
        help="continue a run's checkpoint, finished or not, to a larger --epochs (same other options): the result "
        "equals a run started with that many epochs. Adversarial methods only with --grl-schedule const; "
        "tri-training only from a checkpoint still in its labeler stage (e.g. its .labelers.ckpt copy), "
        "to more --epochs and any --tri-epochs",
    )
    parser.add_argument("--ckpt", default=None, metavar="PATH", help="checkpoint path (default <out stem>.ckpt beside --out)")
    parser.add_argument("--ckpt-minutes", type=float, default=d.ckpt_minutes, help=f"checkpoint interval (default {d.ckpt_minutes:g} min)")
    parser.add_argument("--cache", default=None, metavar="DIR", help="log-mel cache directory (default <corpus>/features)")
    parser.add_argument("--max-steps", type=int, default=None, help="stop after this step with a checkpoint (no weights); --resume goes on")
    parser.add_argument(
        "--tri-epochs",
        type=int,
        default=None,
        help="tri-training: epochs of the final (pseudo-label) stage, run after the --epochs labeler stage "
        "(default: as many as --epochs, Algorithm 1's two loops of `iter`)",
    )
    parser.add_argument(
        "--pseudo-threshold",
        type=float,
        default=d.pseudo_threshold,
        help=f"tri-training: a frame/clip is a pseudo-positive where F1 and F2 are both above this (default {d.pseudo_threshold:g}, the paper)",
    )
    parser.add_argument(
        "--pseudo-negative",
        type=float,
        default=None,
        help="tri-training: a pseudo-negative where both are below this (default 1 - --pseudo-threshold, the paper); lower "
        "leaves unsure frames unlabelled. Not part of the checkpoint fingerprint until the labels are made, so final "
        "stages with other thresholds can branch from one labeler-stage checkpoint (--max-steps at the switch)",
    )
    parser.add_argument(
        "--relabel-every",
        type=int,
        default=d.relabel_every,
        metavar="N",
        help="tri-training: remake the pseudo-labels every N epochs of the final stage, the labelers F1/F2 going on "
        "learning from the labelled data (S, W tags; eq. 8) while Ft learns from the pseudo-labels too, as in asymmetric "
        "tri-training (default 0: once at the switch, the paper's Algorithm 1). Like the thresholds, not part of the "
        "checkpoint fingerprint until the labels are made",
    )
    parser.add_argument(
        "--teacher",
        default=None,
        metavar="MODEL.pt",
        help="self-training from a trained model (not in the paper; a second round of tri-training when the teacher "
        "is an adv-*+tri model): its final classifier Ft labels the weak and unlabelled clips once, by "
        "--pseudo-threshold / --pseudo-negative and --pseudo-level, and this run (a method without tri-training) "
        "learns from those labels from the first step. The teacher's digest enters the checkpoint and the card",
    )
    parser.add_argument(
        "--init",
        default=None,
        metavar="WEIGHTS.pt",
        help="fine-tune: start from this model file's weights (all heads, and its input normalisation) instead of random "
        "ones, e.g. the shipped streamkit/models/weights/sed_crnn.pt; its config must be this run's (--preset and the "
        "size options). Its digest enters the checkpoint and the card",
    )
    parser.add_argument(
        "--detach-labelers",
        action="store_true",
        help="tri-training (not in the paper): F1 and F2 learn on F's output through a stop-gradient, so their "
        "losses and eq. 8 do not shape F, which learns from Ft (and D) only",
    )
    parser.add_argument(
        "--ema",
        type=float,
        default=None,
        metavar="DECAY",
        help="keep an exponential moving average of the weights (Polyak; e.g. 0.999) and select and ship it instead "
        "of the weights; training itself is unchanged (same steps, same random numbers; pseudo-labels come from "
        "the weights, unless --pseudo-from ema). Validation logs both; the weights' own best is written beside "
        "as <out stem>.weights.pt with its card",
    )
    parser.add_argument(
        "--pseudo-from",
        choices=PSEUDO_FROM,
        default=d.pseudo_from,
        help="tri-training: the pseudo-labels come from F1/F2 of the 'weights' (default, the paper) or of their "
        "moving average 'ema' (not in the paper; mean-teacher style, needs --ema). Like the thresholds, not part "
        "of the checkpoint fingerprint until the labels are made",
    )
    parser.add_argument(
        "--pseudo-level",
        choices=PSEUDO_LEVELS,
        default=d.pseudo_level,
        help="tri-training: 'frame' (default, the paper's rule on frames and clips) or 'clip' (not in the paper: "
        "only clip-level pseudo-labels of U, W keeps its tags; no frame pseudo-labels) or 'positive' (not in the paper: "
        "frame positives only inside the classes a clip holds, every frame of a class it lacks negative, no other "
        "frame negatives). Like the thresholds, "
        "not part of the checkpoint fingerprint until the labels are made",
    )
    parser.add_argument(
        "--augment",
        action="store_true",
        help="perturb every training clip's log-mel from the first step (not in the paper): a mel-bin shift in "
        "[-S, S] (--aug-shift), FilterAugment band gains in [-D, D] dB (--aug-filter-db) and a level change in "
        "[-G, G] dB (--aug-gain-db), drawn per clip and step from the seed; pseudo-labels are made on clean clips",
    )
    am = MelAugment()
    parser.add_argument("--aug-shift", type=int, default=am.shift, metavar="S", help=f"largest mel-bin shift (default {am.shift})")
    parser.add_argument(
        "--aug-filter-db", type=float, default=am.filter_db, metavar="D", help=f"largest FilterAugment band gain, dB (default {am.filter_db:g})"
    )
    parser.add_argument("--aug-gain-db", type=float, default=am.gain_db, metavar="G", help=f"largest level change, dB (default {am.gain_db:g})")
    parser.add_argument("--grl-schedule", choices=("ganin", "const"), default=d.grl_schedule, help="GRL factor schedule (default ganin)")
    parser.add_argument(
        "--synthetic-holdout",
        type=int,
        default=d.synthetic_holdout,
        help=f"last synthetic clips kept out of training as the synthetic-domain test set (default {d.synthetic_holdout})",
    )
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
    g.add_argument("--domain-hidden", type=int, default=None)
    g.add_argument("--dropout", type=float, default=None)
    g.add_argument("--grl-scale", type=float, default=None, help="alpha of paper eq. 5 (default 1)")
    return parser


def config_from_args(a: argparse.Namespace) -> SedConfig:
    kw = dict(PRESETS[a.preset])
    for name in ("n_mels", "channels", "pool_time", "pool_freq", "rnn_hidden", "rnn_layers", "head_hidden", "domain_hidden", "dropout", "grl_scale"):
        v = getattr(a, name, None)
        if v is not None:
            kw[name] = v
    return SedConfig(**kw)


def options_from_args(a: argparse.Namespace) -> TrainOptions:
    """The :class:`TrainOptions` of parsed ``streamkit train sed`` arguments."""
    return TrainOptions(method=a.method, epochs=a.epochs, minutes=a.minutes, seed=a.seed, batch=a.batch_size, lr=a.lr, threads=a.threads,
                        tri_epochs=a.tri_epochs, grl_schedule=a.grl_schedule, synthetic_holdout=a.synthetic_holdout, median_s=a.median_s,
                        threshold=a.threshold, ckpt_minutes=a.ckpt_minutes, max_steps=a.max_steps, psds=not a.no_psds,
                        pseudo_threshold=a.pseudo_threshold, pseudo_negative=a.pseudo_negative, relabel_every=a.relabel_every,
                        detach_labelers=a.detach_labelers, pseudo_level=a.pseudo_level, ema=a.ema, pseudo_from=a.pseudo_from,
                        augment=MelAugment(a.aug_shift, a.aug_filter_db, a.aug_gain_db) if a.augment else None,
                        teacher=a.teacher, init=a.init, extend=a.extend)  # fmt: skip
