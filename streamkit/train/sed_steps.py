"""The steps of ``streamkit train sed`` (:func:`streamkit.train.sed.train`): the training data, the data order,
one step's batch, the weight average, and restoring a checkpoint with the checks that keep a resumed run the same run."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from streamkit.io.outputs import atomic_output
from streamkit.models.sed_crnn import SedConfig, SedModel, events_to_frames
from streamkit.models.sed_losses import SedTargets, parse_method
from streamkit.train.sed_augment import batch_rng
from streamkit.train.sed_corpus import CorpusError, SedCorpus
from streamkit.train.sed_options import TrainOptions

__all__ = ["CKPT_FORMAT", "TrainData", "assemble_batch", "ema_update", "grl_factor", "labelers_ckpt_path", "restore", "save_atomic", "stream"]

CKPT_FORMAT = "streamkit-sed-train/1"


class TrainData:
    """Features and targets of the training subsets, validation set."""

    def __init__(self, corpus: SedCorpus, cfg: SedConfig, opts: TrainOptions, quiet: bool) -> None:
        corpus.require("synthetic", "weak", "validation")
        adv, tri = parse_method(opts.method)
        self.uses_u = adv is not None or tri or opts.teacher is not None
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


def ema_update(avg: dict[str, torch.Tensor], live: dict[str, torch.Tensor], decay: float) -> None:
    """``avg <- decay * avg + (1 - decay) * live`` for every floating entry (weights, BN statistics); others copied."""
    with torch.no_grad():
        for k, v in live.items():
            a = avg[k]
            if a.is_floating_point():
                a.lerp_(v, 1.0 - decay)
            else:
                a.copy_(v)


def stream(seed: int, tag: int, n: int, start: int, count: int) -> np.ndarray:
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


def save_atomic(path: Path, obj: Any) -> None:
    with atomic_output(path, "wb") as f:
        torch.save(obj, f)


def grl_factor(schedule: str, alpha: float, progress: float) -> float:
    if schedule == "const":
        return alpha
    return alpha * (2.0 / (1.0 + math.exp(-10.0 * progress)) - 1.0)


def labelers_ckpt_path(ckpt: str | Path) -> Path:
    """The copy of a tri-training checkpoint at the end of the labeler stage, before any pseudo-label: ``<stem>.labelers.ckpt``.

    Copied to a new run's ``--ckpt`` and resumed (``--resume``) with other final-stage options (``--pseudo-threshold``,
    ``--pseudo-negative``, ``--pseudo-level``, ``--relabel-every``, ``--pseudo-from``), it skips the labeler stage, which
    those options do not change."""
    ckpt = Path(ckpt)
    return ckpt.with_name(ckpt.stem + ".labelers" + ckpt.suffix)


def assemble_batch(
    data: TrainData, opts: TrainOptions, cfg: SedConfig, step: int, pl: dict[str, Any] | None, use_u: bool, lab: bool
) -> tuple[torch.Tensor, SedTargets, SedTargets | None]:
    """Step ``step``'s inputs and targets: ``--batch-size`` clips of S, of W and (``use_u``) of U, drawn from the seed and
    the step alone. ``pl``: the real clips' pseudo-labels (None: W has its tags only, U no target); ``lab``: the labelers
    keep learning (``--relabel-every``) from the labelled targets alone, returned third. ``--augment`` perturbs the inputs."""
    b = opts.batch
    i_s = stream(opts.seed, 0, data.n_s, step * b, b)
    i_w = stream(opts.seed, 1, data.W.shape[0], step * b, b)
    parts_x = [data.S[i_s], data.W[i_w]]
    t_out, k = data.t_out, cfg.n_classes
    frame = [torch.from_numpy(data.s_frame[i_s].astype(np.float32)), torch.zeros(b, t_out, k)]
    fmask = [torch.ones(b, t_out, k), torch.zeros(b, t_out, k)]
    clip = [torch.from_numpy(data.s_clip[i_s]), torch.from_numpy(data.w_clip[i_w])]
    cmask = [torch.ones(b, k), torch.ones(b, k)]
    dom = [torch.zeros(b), torch.ones(b)]
    labelled = (list(frame), list(fmask), list(clip), list(cmask))  # (before the pseudo-labels)
    if pl is not None:
        wf = torch.from_numpy(pl["w_frame"][i_w].astype(np.float32))
        frame[1] = wf.clamp_min(0.0)
        fmask[1] = (wf >= 0).float()
    if use_u:
        assert data.U is not None
        i_u = stream(opts.seed, 2, data.U.shape[0], step * b, b)
        parts_x.append(data.U[i_u])
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
        for lst, zero in zip(labelled, (torch.zeros(b, t_out, k), torch.zeros(b, t_out, k), torch.zeros(b, k), torch.zeros(b, k))):
            lst.append(zero)
        dom.append(torch.ones(b))
    x_np = np.concatenate(parts_x).astype(np.float32)
    if opts.augment is not None:  # the targets hold for the perturbed clips; pseudo-labels were made on the clean ones
        x_np = opts.augment(x_np, batch_rng(opts.seed, step))
    t = SedTargets(frame=torch.cat(frame), frame_mask=torch.cat(fmask), clip=torch.cat(clip), clip_mask=torch.cat(cmask),
                   domain=torch.cat(dom))  # fmt: skip
    t_lab = None
    if lab and pl is not None:
        lf, lfm, lc, lcm = (torch.cat(x) for x in labelled)
        t_lab = SedTargets(frame=lf, frame_mask=lfm, clip=lc, clip_mask=lcm, domain=t.domain)
    return torch.from_numpy(x_np), t, t_lab


def _made(st: dict[str, Any], key: str, default: Any) -> Any:
    """A final-stage setting recorded in the checkpoint when its labels were made (None before the switch)."""
    return st.get(key, default) if st.get("pseudo") is not None else None


def restore(
    ckpt_p: Path,
    opts: TrainOptions,
    fp: dict[str, Any],
    *,
    steps_per_epoch: int,
    rule: dict[str, float] | None,
    source: str,
    model: SedModel,
    optim: torch.optim.Optimizer,
) -> dict[str, Any]:
    """Load a checkpoint of this run (``--resume``) or of the same run with fewer epochs (``--extend``) into ``model``
    and ``optim`` and restore torch's RNG; returns the training state. ``ValueError`` for a checkpoint of another run,
    or one whose final stage was made with other pseudo-label settings."""
    tri = parse_method(opts.method)[1]
    try:
        ck = torch.load(ckpt_p, map_location="cpu", weights_only=False)
    except Exception as e:  # noqa: BLE001
        raise CorpusError(f"checkpoint {ckpt_p} is corrupt: {type(e).__name__}: {e}") from None
    if not isinstance(ck, dict) or ck.get("format") != CKPT_FORMAT:
        raise ValueError(f"{ckpt_p} is not a SED training checkpoint")
    ck_fp = ck["fingerprint"]
    extended_from = None
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
        diff.update({k: (None, ck_fp[k]) for k in ck_fp if k not in fp})  # (e.g. a removed experiment's setting)
        if "config" in diff:  # name the model settings that differ, not two whole configs
            this, theirs = diff.pop("config")
            this, theirs = this or {}, theirs or {}
            diff.update({f"config.{k}": (this.get(k), theirs.get(k)) for k in sorted(set(this) | set(theirs)) if this.get(k) != theirs.get(k)})
        raise ValueError(f"{ckpt_p}: checkpoint of another run (this run, checkpoint): {diff}; drop --resume or use another --ckpt")
    st = ck["state"]
    made = _made(st, "pseudo_rule", {"positive": 0.5, "negative": 0.5})
    if made is not None and made != rule:
        raise ValueError(f"{ckpt_p}: its pseudo-labels were made with thresholds {made}, this run asks for {rule}; "
                         "resume with those (or from a checkpoint before the switch)")  # fmt: skip
    made_every = _made(st, "relabel_every", 0)
    if made_every is not None and made_every != opts.relabel_every:
        raise ValueError(f"{ckpt_p}: its final stage runs with --relabel-every {made_every}, this run asks for {opts.relabel_every}; "
                         "resume with that (or from a checkpoint before the switch)")  # fmt: skip
    made_level = _made(st, "pseudo_level", "frame")
    if made_level is not None and made_level != opts.pseudo_level:
        raise ValueError(f"{ckpt_p}: its pseudo-labels are {made_level}-level, this run asks for --pseudo-level {opts.pseudo_level}; "
                         "resume with that (or from a checkpoint before the switch)")  # fmt: skip
    removed = [k for k in ("consistency", "pseudo_mix") if (_made(st, k, [0.0]) or [0.0])[0]]
    if removed:  # (final-stage settings of experiments removed from streamkit)
        raise ValueError(f"{ckpt_p}: its final stage runs with {', '.join(removed)}, an experiment removed from streamkit; train anew")
    made_from = _made(st, "pseudo_source", "labelers")
    if made_from is not None and made_from != source:
        raise ValueError(f"{ckpt_p}: its final stage learns from {made_from} labels, this run asks for {source} labels; "
                         "resume with that (or from a checkpoint before the switch)")  # fmt: skip
    model.load_state_dict(ck["model"])
    optim.load_state_dict(ck["optim"])
    torch.set_rng_state(ck["torch_rng"])
    if extended_from is not None:
        st["extended_from_epochs"] = [*st.get("extended_from_epochs", []), extended_from]
    return st
