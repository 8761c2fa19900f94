"""Why the vanilla RNN-T (one softmax over the union of symbols) stays on the plateau: a probe.

Usage::

    .venv/bin/python benchmarks/rnnt_vanilla_probe.py --corpus C3 --ckpt rnnt_vanilla_c3.ckpt \\
        --reference lid=streamkit/models/weights/rnnt_lid.pt --steps 100

Three measurements on a vanilla training checkpoint (``<out>.ckpt`` of ``streamkit train rnnt
--variant vanilla``; it holds the training-only auxiliary CTC head, the weight file does not):

1. **Does the encoder carry the labels?** Greedy symbol error rate (edit distance over union
   symbol ids / reference symbols) of the auxiliary CTC head on the encoder output, against the
   greedy RNN-T search of the same model, on ``--dev-utts`` dev utterances per language.
2. **Where is the plateau?** The RNN-T loss of the checkpoint on ``--probe-utts`` dev utterances
   of ``--lang``, beside the same loss of the ``--reference`` weight files.
3. **Can a fresh joint learn from that encoder?** The encoder is frozen; a new embedding,
   prediction LSTM and joint are trained with the RNN-T loss on ``--lang`` alone (``--train-utts``
   training utterances, batches of ``--batch`` drawn with seed 0, Adam ``--lr``, gradient norm
   clipped at 5), once with the language's own output (its ``V_l`` symbols, the multi-softmax
   case) and once with the union output (the vanilla case; the targets mapped to union ids). The
   dev loss is printed every ``--eval-every`` steps. One thread.

Writes ``benchmarks/results/rnnt_vanilla_probe.json`` (``--out``); no absolute paths.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from benchmarks._bench import write_result  # noqa: E402
from streamkit.core.machine import machine_info  # noqa: E402
from streamkit.models.rnnt import Joint, RnntConfig, RnntModel, load_model  # noqa: E402
from streamkit.models.rnnt_loss import rnnt_loss  # noqa: E402
from streamkit.train import rnnt as T  # noqa: E402


def load_ckpt(path: Path) -> tuple[RnntModel, T.CtcHeads | None, int]:
    """Model, auxiliary CTC heads (None if the run had none) and step of a training checkpoint."""
    try:
        ck = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # noqa: BLE001 - torch/pickle errors of a corrupt or foreign file
        raise SystemExit(f"{path.name}: unreadable checkpoint ({type(exc).__name__})") from None
    if not isinstance(ck, dict) or "model" not in ck or "config" not in ck:
        raise SystemExit(f"{path.name}: not an RNN-T training checkpoint")
    cfg = RnntConfig.from_dict(T._ckpt_config(ck["config"]))
    model = RnntModel(cfg)
    model.load_state_dict(ck["model"])
    model.eval()
    ctc = None
    if ck.get("ctc"):
        ctc = T.CtcHeads(cfg)
        ctc.load_state_dict(ck["ctc"])
        ctc.eval()
    return model, ctc, int(ck.get("state", {}).get("step", -1))


def collapse(seq: list[int]) -> list[int]:
    """CTC greedy output: repeats merged, blanks dropped."""
    out, prev = [], 0
    for k in seq:
        if k != prev and k != 0:
            out.append(k)
        prev = k
    return out


@torch.inference_mode()
def encoder_probe(model: RnntModel, ctc: T.CtcHeads | None, corpus: T.AsrCorpus, dev: list[T.Utt], n: int) -> list[dict[str, Any]]:
    rows = []
    for lg, name in enumerate(corpus.langs):
        us = [u for u in dev if u.lang == lg][:n]
        x, fl, _, _ = T.collate(us, T.compute_logmel(us))
        enc = model.encode(x, torch.full((len(us),), lg))
        hyps = T.greedy_decode(model, enc, fl, lg)
        am = None if ctc is None else ctc.heads[lg if model.cfg.multi else 0](enc).argmax(-1)
        ctc_e = rnnt_e = ref_n = nonblank = 0
        for b, u in enumerate(us):
            ref = torch.from_numpy(u.targets)[None]
            ref = (ref if model.cfg.multi else model.to_union(ref, lg))[0].tolist()
            rnnt_e += T._edits(ref, hyps[b])[0]
            ref_n += len(ref)
            if am is not None:
                seq = am[b, : int(fl[b])].tolist()
                ctc_e += T._edits(ref, collapse(seq))[0]
                nonblank += sum(1 for k in seq if k != 0)
        rows.append(
            {
                "lang": name,
                "utterances": len(us),
                "ctc_greedy_ser": None if am is None else round(100 * ctc_e / ref_n, 2),
                "ctc_nonblank_frames": None if am is None else round(nonblank / int(fl.sum()), 3),
                "rnnt_greedy_ser": round(100 * rnnt_e / ref_n, 2),
            }
        )
    return rows


def train_fresh_joint(
    model: RnntModel, lg: int, mode: str, tr: list[T.Utt], lm_tr: list[torch.Tensor], dev_batch: tuple, ns: argparse.Namespace
) -> list[dict[str, float]]:
    """A new embedding + prediction LSTM + joint on the frozen encoder; dev loss every ``eval_every`` steps."""
    cfg = model.cfg
    V = cfg.union_size if mode == "union" else cfg.vocab_sizes[lg]
    torch.manual_seed(0)
    emb = torch.nn.Embedding(V, cfg.embed_dim)
    pred = torch.nn.LSTM(cfg.embed_dim, cfg.pred_hidden, cfg.pred_layers, batch_first=True)
    joint = Joint(cfg.enc_hidden, cfg.pred_hidden, cfg.joint_dim, V)
    params = [*emb.parameters(), *pred.parameters(), *joint.parameters()]
    opt = torch.optim.Adam(params, lr=ns.lr)
    rng = np.random.default_rng(0)

    def encoded(us: list[T.Utt], lms: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        x, fl, y, tl = T.collate(us, lms)
        with torch.no_grad():
            enc = model.encode(x, torch.full((len(us),), lg))
        if mode == "union":
            y = model.to_union(y, lg)  # collate pads with blank 0, which to_union keeps
        return enc, fl, y, tl

    def loss(enc: torch.Tensor, fl: torch.Tensor, y: torch.Tensor, tl: torch.Tensor) -> torch.Tensor:
        p, _ = pred(emb(torch.cat([y.new_zeros(y.shape[0], 1), y], 1)))
        return rnnt_loss(joint(enc[:, :, None], p[:, None]), y, fl, tl, reduction="mean")

    dev_enc = encoded(*dev_batch)
    curve = []
    t0 = time.monotonic()
    for step in range(ns.steps + 1):
        if step % ns.eval_every == 0 or step == ns.steps:
            with torch.no_grad():
                d = float(loss(*dev_enc))
            curve.append({"step": step, "dev_loss": round(d, 2)})
            print(f"  {mode:>5} output ({V} symbols): step {step:4d} dev loss {d:8.2f}  {time.monotonic() - t0:6.0f} s", flush=True)
        if step == ns.steps:
            break
        idx = rng.choice(len(tr), ns.batch, replace=False).tolist()
        batch = encoded([tr[i] for i in idx], [lm_tr[i] for i in idx])
        opt.zero_grad()
        loss(*batch).backward()
        torch.nn.utils.clip_grad_norm_(params, 5.0)
        opt.step()
    return curve


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", required=True, help="a `streamkit corpus asr` directory")
    p.add_argument("--ckpt", required=True, help="a vanilla (or any variant's) training checkpoint, <out>.ckpt")
    p.add_argument("--reference", action="append", default=[], metavar="NAME=PATH", help="weight files whose dev loss is listed beside (repeatable)")
    p.add_argument("--lang", default="en", help="language of the loss probe and the fresh joints (default en)")
    p.add_argument("--dev-utts", type=int, default=15, help="dev utterances per language for the CTC / RNN-T comparison")
    p.add_argument("--probe-utts", type=int, default=40, help="dev utterances of --lang for the losses")
    p.add_argument("--train-utts", type=int, default=1200, help="training utterances of --lang for the fresh joints")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=1.5e-3)
    p.add_argument("--modes", default="language,union", help="which fresh joints: language, union or both (default)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "rnnt_vanilla_probe.json"))
    ns = p.parse_args(argv)
    torch.set_num_threads(1)
    modes = [m for m in ns.modes.split(",") if m]
    if not modes or any(m not in ("language", "union") for m in modes):
        p.error("--modes: a comma list of language, union")

    corpus = T.AsrCorpus(ns.corpus)
    if ns.lang not in corpus.langs:
        p.error(f"--lang {ns.lang}: the corpus has {corpus.langs}")
    lg = corpus.langs.index(ns.lang)
    model, ctc, step = load_ckpt(Path(ns.ckpt))
    print(f"{Path(ns.ckpt).name}: variant {model.cfg.variant}, step {step}, union {model.cfg.union_size} symbols")
    dev = corpus.split("dev")

    enc_rows = encoder_probe(model, ctc, corpus, dev, ns.dev_utts)
    print(f"\n{'lang':<5} {'CTC head greedy SER %':>22} {'RNN-T greedy SER %':>19} {'CTC non-blank frames':>21}")
    for r in enc_rows:
        print(f"{r['lang']:<5} {r['ctc_greedy_ser']!s:>22} {r['rnnt_greedy_ser']:>19} {r['ctc_nonblank_frames']!s:>21}")

    probe = [u for u in dev if u.lang == lg][: ns.probe_utts]
    lm_probe = T.compute_logmel(probe)
    x, fl, y, tl = T.collate(probe, lm_probe)
    losses = []
    with torch.inference_mode():
        for name, m in [("checkpoint", model)] + [(s.split("=", 1)[0], load_model(s.split("=", 1)[1])[0].eval()) for s in ns.reference]:
            if m.cfg.languages != model.cfg.languages:
                raise SystemExit(f"{name}: languages {m.cfg.languages} differ from the checkpoint's {model.cfg.languages}")
            losses.append({"model": name, "variant": m.cfg.variant, "dev_rnnt_loss": round(float(m(x, fl, y, tl, lg)["rnnt_loss"]), 2)})
    print(f"\nRNN-T loss on {len(probe)} {ns.lang} dev utterances:")
    for r in losses:
        print(f"  {r['model']:<12} ({r['variant']}): {r['dev_rnnt_loss']}")

    tr = [u for u in corpus.split("train") if u.lang == lg][: ns.train_utts]
    lm_tr = T.compute_logmel(tr)
    print(f"\nfresh prediction network + joint on the frozen encoder, {ns.lang} only:")
    curves = {m: train_fresh_joint(model, lg, m, tr, lm_tr, (probe, lm_probe), ns) for m in modes}

    result = {
        "benchmark": "rnnt_vanilla_probe",
        "checkpoint": {"file": Path(ns.ckpt).name, "variant": model.cfg.variant, "step": step, "union_size": model.cfg.union_size},
        "corpus_command": corpus.command,
        "settings": {k: getattr(ns, k) for k in ("lang", "dev_utts", "probe_utts", "train_utts", "steps", "eval_every", "batch", "lr")},
        "encoder_probe": enc_rows,
        "dev_losses": losses,
        "fresh_joint_curves": curves,
        "units": "SER: symbol edit distance / reference symbols, %; losses: RNN-T negative log-likelihood per utterance (nats)",
        "machine": machine_info(),
        "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    return write_result(ns.out, result)


if __name__ == "__main__":
    raise SystemExit(main())
