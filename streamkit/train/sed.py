"""Training recipe of the SED CRNN: ``streamkit train sed --corpus DIR --method M --out PATH``.

The six methods of Park et al. (DCASE 2019 task 4, Table 1) on a ``streamkit corpus sed`` corpus: ``baseline``, ``adv-whole``, ``adv-time``, ``tri``,
``adv-whole+tri``, ``adv-time+tri``. Model and losses: :mod:`streamkit.models.sed_crnn`,
:mod:`streamkit.models.sed_losses`; post-processing: :mod:`streamkit.models.sed_post`.

Data
----
* Subsets: ``synthetic`` (S, strong labels), ``weak`` (W, clip tags), ``unlabelled`` (U),
  ``validation`` (model selection) and ``eval`` (scored once, for the model card). The last
  ``--synthetic-holdout`` clips of S (default 200, by file name; every clip has its own random
  stream, so they are a random sample) are **not trained on**: they are the synthetic-domain test
  set that shows the synthetic-to-real gap.
* Features: 128-bin log-mel cached once per corpus (:mod:`streamkit.train.sed_corpus`, ``--cache``).
  Input normalisation: per-bin mean/std over the labelled training clips (S, W), the same for every method.
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
* ``--init WEIGHTS.pt`` (fine-tuning, any method): the run starts from a model file's weights (every
  head and its input normalisation, :func:`streamkit.train.sed_labels.load_init`) instead of random
  ones; the file's SHA-256 is part of the checkpoint fingerprint and the card.
* ``--teacher MODEL.pt`` (not in the paper; self-training, a second round of tri-training when the
  teacher is an adv-*+tri model): a finished model's final classifier Ft labels the clean W and U
  once (:func:`teacher_label_all`, the rule and level of the options above, W gated by its tags) and
  a method without tri-training learns from those labels from the first step. The teacher file's
  SHA-256 is part of the checkpoint fingerprint.

Variants that were tried and removed (oracle labels, consistency loss, pseudo-label mixing,
domain-specific batch norm, labelers of their own width, lane dropout) are listed with their
figures in docs/experiments.md.

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

Budget (Table 1 runs, ``benchmarks/sed_table1.py``; the shipped weights: docs/sed.md)
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
import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from streamkit.io.outputs import atomic_output
from streamkit.models.sed_crnn import SedConfig, SedModel, n_params
from streamkit.models.sed_losses import heads_for, parse_method, sed_loss, stages
from streamkit.train.sed_card import finalize, weights_path
from streamkit.train.sed_corpus import CorpusError, SedCorpus
from streamkit.train.sed_labels import load_init, load_teacher, make_labels, positive_frames, teacher_label_all
from streamkit.train.sed_options import PRESETS, TrainOptions, add_arguments, config_from_args, file_sha256, options_from_args
from streamkit.train.sed_score import predict_frames, predict_frames_and_clips, score_probs
from streamkit.train.sed_steps import CKPT_FORMAT, TrainData, assemble_batch, ema_update, grl_factor, labelers_ckpt_path, restore, save_atomic

__all__ = [
    "PRESETS",
    "CorpusError",
    "SedCorpus",
    "TrainOptions",
    "add_arguments",
    "config_from_args",
    "file_sha256",
    "labelers_ckpt_path",
    "load_teacher",
    "positive_frames",
    "predict_frames",
    "predict_frames_and_clips",
    "run_from_args",
    "score_probs",
    "teacher_label_all",
    "train",
    "weights_path",
]


class _Run:
    """One training run's model, optimiser, weight average, checkpoint and state, and the steps of :func:`train`."""

    def __init__(self, corpus: SedCorpus, data: TrainData, cfg: SedConfig, opts: TrainOptions, ckpt_p: Path, quiet: bool) -> None:
        self.corpus, self.data, self.cfg, self.opts, self.ckpt_p, self.quiet = corpus, data, cfg, opts, ckpt_p, quiet
        self.adv, self.tri = parse_method(opts.method)
        self.steps_per_epoch = max(1, data.n_s // opts.batch)
        self.total_steps = self.steps_per_epoch * (opts.epochs + opts.final_epochs())
        self.switch_step = self.steps_per_epoch * opts.epochs if self.tri else None
        self.method_stages = stages(opts.method)
        self.rule = opts.pseudo_rule() if self.tri or opts.teacher is not None else None
        self.teacher: SedModel | None = None
        self.source = "averaged labelers" if opts.pseudo_from == "ema" else "labelers"
        if opts.teacher is not None:
            self.teacher, _meta = load_teacher(opts.teacher, cfg)
            self.source = "teacher"
        torch.manual_seed(opts.seed)
        self.model = SedModel(cfg)
        self.model.F.set_normalisation(*map(torch.from_numpy, data.norm_stats()))
        if opts.init is not None:  # fine-tuning: the file's weights and normalisation replace the fresh ones
            self.model.load_state_dict(load_init(opts.init, cfg))
        self.optim = torch.optim.Adam(self.model.parameters(), lr=opts.lr, betas=(0.9, 0.999), eps=1e-8)
        self.st: dict[str, Any] = {"step": 0, "elapsed_s": 0.0, "history": [], "best_f1": -1.0, "best_step": None, "best_epoch": None,
                                   "best_state": None, "validated_epochs": 0, "runs": 0, "pseudo": None, "pseudo_stats": None}  # fmt: skip
        self.fp = {**opts.fingerprint(), "config": cfg.to_dict(), "n_s": data.n_s}
        self.ema_model: SedModel | None = None
        self.bar: Any = None
        self.loss_avg: float | None = None
        self.t_run, self.base = time.monotonic(), 0.0

    def resume(self, resume: bool) -> None:
        """Go on from the checkpoint (``--resume``, ``--extend``), then set up the weight average (``--ema``)."""
        opts = self.opts
        if (resume or opts.extend) and self.ckpt_p.is_file():
            self.st = restore(self.ckpt_p, opts, self.fp, steps_per_epoch=self.steps_per_epoch, rule=self.rule, source=self.source,
                              model=self.model, optim=self.optim)  # fmt: skip
        elif opts.extend:
            raise ValueError(f"--extend: no checkpoint at {self.ckpt_p} to extend")
        elif resume and not self.quiet:
            print(f"no checkpoint at {self.ckpt_p}; starting from scratch", file=sys.stderr, flush=True)
        self.st["runs"] += 1
        if opts.ema is not None:
            self.ema_model = copy.deepcopy(self.model)  # (a new SedModel would draw its initial weights from the training RNG)
            if self.st.get("ema") is not None:
                self.ema_model.load_state_dict(self.st["ema"])
            self.st["ema"] = self.ema_model.state_dict()  # the average lives in ema_model; the checkpoint saves these tensors
        self.t_run, self.base = time.monotonic(), self.st["elapsed_s"]

    def stage_at(self, step: int) -> str:
        return self.method_stages[0] if self.switch_step is None or step < self.switch_step else self.method_stages[1]

    def log(self, msg: str) -> None:
        if not self.quiet:
            if self.bar is not None:
                self.bar.write(msg, file=sys.stderr)
            else:
                print(msg, file=sys.stderr, flush=True)

    def elapsed(self) -> float:
        return self.base + time.monotonic() - self.t_run

    def save_ckpt(self) -> None:
        self.st["elapsed_s"] = self.elapsed()
        save_atomic(self.ckpt_p, {"format": CKPT_FORMAT, "fingerprint": self.fp, "model": self.model.state_dict(),
                                  "optim": self.optim.state_dict(), "torch_rng": torch.get_rng_state(), "state": self.st})  # fmt: skip

    def val_scores(self, m: SedModel) -> dict[str, Any]:
        d, o = self.data, self.opts
        return score_probs(
            predict_frames(m, d.V), d.v_files, d.v_ref, self.cfg, median_s=o.median_s, threshold=o.threshold, clip_s=self.corpus.clip_s
        )

    def validate(self, epoch: int) -> None:
        """Score the weights (and their average) on validation; keep the best eligible state (tri-training: final stage only)."""
        st, t0 = self.st, time.monotonic()
        sc = self.val_scores(self.model)
        stage = self.stage_at(st["step"] - 1)
        eligible = not self.tri or stage == "final"
        rec = {"epoch": epoch, "step": st["step"], "stage": stage, "val_event_f1": sc["event_f1"], "val_segment_f1": sc["segment_f1"],
               "loss": round(float(self.loss_avg), 4) if self.loss_avg is not None else None, "elapsed_s": round(self.elapsed(), 1)}  # fmt: skip
        chosen, chosen_state, ema_msg = sc, self.model.state_dict(), ""
        if self.ema_model is not None:  # the average is scored beside the weights; it alone is selected
            chosen, chosen_state = self.val_scores(self.ema_model), st["ema"]
            rec["ema_val_event_f1"], rec["ema_val_segment_f1"] = chosen["event_f1"], chosen["segment_f1"]
            ema_msg = f"; EMA {chosen['event_f1']:.2f} %, {chosen['segment_f1']:.2f} %"
        rec["val_s"] = round(time.monotonic() - t0, 1)
        st["history"].append(rec)
        if eligible and chosen["event_f1"] > st["best_f1"]:
            st["best_f1"], st["best_step"], st["best_epoch"] = chosen["event_f1"], st["step"], epoch
            st["best_state"] = {k: v.detach().clone() for k, v in chosen_state.items()}
        wb = st.get("weights_best")
        if self.ema_model is not None and eligible and (wb is None or sc["event_f1"] > wb["f1"]):  # the weights' own best, shipped beside
            st["weights_best"] = {"f1": sc["event_f1"], "step": st["step"], "epoch": epoch,
                                  "state": {k: v.detach().clone() for k, v in self.model.state_dict().items()}}  # fmt: skip
        st["validated_epochs"] = epoch
        self.log(f"epoch {epoch} ({stage}) step {st['step']}: loss {rec['loss']}, val event F1 {sc['event_f1']:.2f} %, segment F1 "
                 f"{sc['segment_f1']:.2f} %{ema_msg} (best {st['best_f1']:.2f} @ epoch {st['best_epoch']}), {self.elapsed() / 60:.1f} min")  # fmt: skip

    def labels_due(self, step: int) -> bool:
        """Pseudo-labels are made at the tri-training switch (or before step 0 with ``--teacher``) and remade every
        ``--relabel-every`` final-stage epochs."""
        st, o = self.st, self.opts
        if not (self.tri and self.stage_at(step) == "final" or self.teacher is not None and not self.tri):
            return False
        if st["pseudo"] is None:
            return True
        return bool(o.relabel_every and (step - self.switch_step) % (o.relabel_every * self.steps_per_epoch) == 0  # type: ignore[operator]
                    and st.get("pseudo_step") != step)  # fmt: skip

    def make_labels(self, step: int) -> None:
        labelers = self.ema_model if self.opts.pseudo_from == "ema" else self.model  # (mean-teacher style: the average's F1/F2)
        pseudo, stats = make_labels(self.data, self.opts, self.rule, labelers, self.teacher)  # type: ignore[arg-type]
        st = self.st
        st.update(pseudo=pseudo, pseudo_source=self.source, pseudo_level=self.opts.pseudo_level, pseudo_rule=self.rule,
                  relabel_every=self.opts.relabel_every, pseudo_step=step)  # fmt: skip
        if st.get("pseudo_stats") is None:
            st["pseudo_stats"] = stats
        st.setdefault("pseudo_history", []).append({"step": step, **stats})
        self.log(f"pseudo-labels at step {step}: {json.dumps(stats)}")
        self.save_ckpt()

    def train_step(self, step: int) -> dict[str, torch.Tensor]:
        """One optimiser step on step ``step``'s batch; updates the weight average; returns the loss terms."""
        stage, o, st = self.stage_at(step), self.opts, self.st
        pl = st["pseudo"] if stage == "final" or not self.tri else None  # (without tri-training: --teacher only)
        use_u = self.data.U is not None and (self.adv is not None or pl is not None)
        lab = bool(o.relabel_every) and pl is not None  # the labelers keep learning from the labelled targets only
        x, t, t_lab = assemble_batch(self.data, o, self.cfg, step, pl, use_u, lab)
        if self.adv is not None:
            self.model.D.scale = grl_factor(o.grl_schedule, self.cfg.grl_scale, step / self.total_steps)
        out = self.model(x, heads=heads_for(o.method, stage, relabel=lab), domain=self.adv, detach_labelers=o.detach_labelers)
        parts = sed_loss(o.method, out, t, model=self.model, stage=stage, labeler_targets=t_lab)
        self.optim.zero_grad(set_to_none=True)
        parts["loss"].backward()
        self.optim.step()
        st["step"] += 1
        if self.ema_model is not None:
            ema_update(st["ema"], self.model.state_dict(), min(o.ema, (1.0 + st["step"]) / (10.0 + st["step"])))  # type: ignore[type-var]
        st["loss_sum"] = st.get("loss_sum", 0.0) + float(parts["loss"].detach())
        st["loss_n"] = st.get("loss_n", 0) + 1
        self.loss_avg = st["loss_sum"] / st["loss_n"]
        return parts

    def end_of_epoch(self) -> None:
        """Validate, checkpoint, and at the tri-training switch keep a copy of the labeler-stage checkpoint (final-stage
        variants branch from it)."""
        st = self.st
        self.validate(st["step"] // self.steps_per_epoch)
        st["loss_sum"], st["loss_n"] = 0.0, 0
        self.save_ckpt()
        if self.tri and st["step"] == self.switch_step:
            with open(self.ckpt_p, "rb") as src, atomic_output(labelers_ckpt_path(self.ckpt_p), "wb") as dst:  # (a byte copy)
                shutil.copyfileobj(src, dst)


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
    cfg = cfg or SedConfig(**PRESETS["small"])
    opts.check()
    out = Path(out)
    ckpt_p = Path(ckpt) if ckpt is not None else out.with_name(out.stem + ".ckpt")
    torch.set_num_threads(int(opts.threads))
    corpus = SedCorpus(corpus_dir, cache)
    t_load = time.monotonic()
    data = TrainData(corpus, cfg, opts, quiet)
    load_s = time.monotonic() - t_load
    run = _Run(corpus, data, cfg, opts, ckpt_p, quiet)
    run.resume(resume)
    st = run.st
    run.log(f"train sed {opts.method}: S {data.n_s} (+{opts.synthetic_holdout} held out), W {data.W.shape[0]}, "
            f"U {0 if data.U is None else data.U.shape[0]}{'' if data.uses_u else ' (not used)'}, val {len(data.v_files)}; "
            f"{n_params(run.model)} parameters; {opts.epochs + opts.final_epochs()} epochs x {run.steps_per_epoch} steps of {opts.batch} "
            f"clips per subset; stages {run.method_stages}{f' (switch at step {run.switch_step})' if run.switch_step else ''}; "
            f"{opts.threads} thread(s); features loaded in {load_s:.1f} s; checkpoint {ckpt_p.name}")  # fmt: skip
    run.model.train()
    stopped = False
    budget = None if opts.minutes is None else opts.minutes * 60.0
    last_ckpt = time.monotonic()
    from tqdm import tqdm

    run.bar = tqdm(total=run.total_steps, initial=st["step"], desc=f"sed {opts.method}", file=sys.stderr, disable=quiet,
                   mininterval=1.0 if sys.stderr.isatty() else 60.0, dynamic_ncols=True)  # fmt: skip
    try:
        while st["step"] < run.total_steps:
            step = st["step"]
            if run.labels_due(step):
                run.make_labels(step)
                last_ckpt = time.monotonic()
            parts = run.train_step(step)
            if on_step is not None:
                on_step(st["step"], {k: float(v.detach()) for k, v in parts.items()})
            run.bar.update(1)
            run.bar.set_postfix_str(f"{run.stage_at(step)} loss {run.loss_avg:.4f}"
                                    + (f" d {float(parts['domain'].detach()):.3f}" if "domain" in parts else ""), refresh=False)  # fmt: skip
            if st["step"] % run.steps_per_epoch == 0:
                run.end_of_epoch()
                last_ckpt = time.monotonic()
            elif time.monotonic() - last_ckpt > opts.ckpt_minutes * 60.0:
                run.save_ckpt()
                last_ckpt = time.monotonic()
            if opts.max_steps is not None and opts.max_steps <= st["step"] < run.total_steps:
                stopped = True
                break
            if budget is not None and run.elapsed() >= budget:
                run.log(f"--minutes {opts.minutes:g} reached at step {st['step']} of {run.total_steps}")
                break
    finally:
        run.bar.close()
    if not stopped and (not st["history"] or st["history"][-1]["step"] != st["step"]):
        run.validate(st["validated_epochs"] + 1 if st["step"] % run.steps_per_epoch else st["step"] // run.steps_per_epoch)
    run.save_ckpt()
    summary = {k: v for k, v in st.items() if k not in ("best_state", "pseudo", "ema", "weights_best")}
    if stopped:
        run.log(f"stopped at step {st['step']} (--max-steps); continue with --resume")
        return {"state": summary, "card": None, "finished": False}
    card = finalize(ckpt_p, out, corpus, opts=opts, quiet=quiet, load_s=load_s)
    return {"state": summary, "card": card, "finished": True}


def run_from_args(a: argparse.Namespace) -> int:
    """``streamkit train sed``: errors in the options or the corpus give one ``error:`` line and exit code 2."""
    try:
        cfg = config_from_args(a)
        res = train(a.corpus, a.out, options_from_args(a), cfg=cfg, resume=a.resume, ckpt=a.ckpt, cache=a.cache, quiet=a.quiet)
    except (CorpusError, ValueError, OSError) as e:
        print(f"error: {e}".replace("\n", " "), file=sys.stderr)
        return 2
    if res["card"] is not None and not a.quiet:
        m = res["card"]["metrics"]
        print(json.dumps({k: {x: m[k].get(x) for x in ("event_f1", "segment_f1", "psds1")} for k in m}))
    return 0
