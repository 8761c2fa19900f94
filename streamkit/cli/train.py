"""``streamkit train WHAT``: the recipes of the shipped weight files.

The options and the runner of each trainer live next to its training loop (``add_arguments`` /
``run_from_args`` of its module); they are imported only when that trainer is parsed, since they
import torch.
"""

from __future__ import annotations

import argparse
from typing import Any

from streamkit.cli.common import add_command, commands

#: trainer -> (module, options function, runner, description)
TRAINERS = {
    "sad-dnn": (
        "streamkit.models.train_sad_dnn",
        "add_train_arguments",
        "run_from_args",
        "Train the CNN-GRU SAD on a `streamkit corpus hf` corpus (channel augmentation per epoch, best checkpoint by dev loss, "
        "resumable); writes the weights and a model card JSON.",
    ),
    "rnnt": (
        "streamkit.train.rnnt",
        "add_arguments",
        "run_from_args",
        "Train a multilingual streaming RNN-T (vanilla, onehot, multisoftmax, lsp, lid) on a `streamkit corpus asr` corpus "
        "(resumable checkpoints, model card JSON).",
    ),
    "rnnt-lid": (
        "streamkit.train.rnnt_lid",
        "add_arguments",
        "run_from_args",
        "Second stage of the lid RNN-T: refit its LID head on the frozen encoder with language-balanced data (the rest of "
        "the model stays bit-for-bit); writes weights and a model card JSON.",
    ),
    "sed": (
        "streamkit.train.sed",
        "add_arguments",
        "run_from_args",
        "Train the SED CRNN on a `streamkit corpus sed` corpus with one of the paper's methods (baseline, adversarial, "
        "tri-training); resumable, writes weights and a model card JSON.",
    ),
    "sed-post": (
        "streamkit.train.sed_tune",
        "add_arguments",
        "run_from_args",
        "Fit the SED post-processing per class (median window, threshold) on a corpus' validation subset; writes a copy "
        "of the weight file with them in its meta (models.sed post='tuned', streamkit sed --post tuned).",
    ),
    "retrieval": (
        "streamkit.train.retrieval",
        "add_arguments",
        "run_from_args",
        "Train the contrastive audio-text model (frozen SED CRNN trunk + projection into all-MiniLM-L6-v2's space, NT-Xent "
        "with in-batch negatives) on a `streamkit corpus sed` corpus with generated captions; writes weights and a model card JSON.",
    ),
    "singer-id": (
        "streamkit.train.singer_id",
        "add_arguments",
        "run_from_args",
        "On a `streamkit corpus singers` corpus: fit the pooled singer embedding's whitening (--model embed) or train the "
        "singer-ID paper's CRNN or residual BLSTM on motif clips of log-mel, MFCC or STFT frames (--model crnn|blstm "
        "--features mel|mfcc|stft) on its train split, calibrate the open-set threshold on its dev split; writes the "
        "transform (.npz) or the weights (.pt) and a model card JSON.",
    ),
}

HELP = {
    "sad-dnn": "the CNN-GRU SAD (models.sad_dnn)",
    "rnnt": "the multilingual streaming RNN-T (models.rnnt_asr)",
    "rnnt-lid": "refit a lid RNN-T's LID head on its frozen encoder",
    "sed": "the sound event detection CRNN (models.sed)",
    "sed-post": "fit its per-class median windows and thresholds on the validation clips",
    "retrieval": "the contrastive audio-text model of `streamkit search` (index --embedder contrastive)",
    "singer-id": "a singer embedding: pooled-statistics whitening or the CRNN / residual BLSTM (streamkit singers, models.singer_id)",
}


def add_parsers(sub: Any) -> None:
    add_command(sub, "train", help="train a model: sad-dnn (CNN-GRU SAD), rnnt (multilingual RNN-T), rnnt-lid (its LID head), sed (SED CRNN), "
                "sed-post (its per-class post-processing), retrieval (audio-text model), singer-id (singer embedding)",
                description="Train a model. `streamkit train WHAT --help` lists the options.", arguments=add_trainers)  # fmt: skip


def add_trainers(tr: argparse.ArgumentParser) -> None:
    sub = commands(tr, "what", metavar="WHAT", required=True)
    for what, (module, add_name, run_name, description) in TRAINERS.items():
        add_command(sub, what, help=HELP[what], description=description, arguments=f"{module}:{add_name}", run=f"{module}:{run_name}")
