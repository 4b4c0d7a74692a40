"""Why ELECTRA pre-trained at length 128 learns so little here: the length-128 arm's first steps,
measured against the length-32 curve, one suspect changed at a time.

    python research/len128_diagnosis.py run --out runs/len128 [--steps 4000]  # ~1 CPU-h an arm
    python research/len128_diagnosis.py report runs/len128/* --out research/results/len128

Every arm is the suite's ``electra-len128`` recipe (the bundled checkpoint's: ``mini``'s model, a
1/4 generator, every selected token masked) at 128 tokens and batch 32 (the length-32 runs'
4,096 tokens a step), on its 13,150-step schedule, stopped after ``--steps`` steps; one setting
changes per arm (:data:`ARMS`). ``report`` keeps, for each run, its settings, every held-out
evaluation and the training losses every 250 steps, beside the length-32 ``mini`` curve of
``research/results/learning_curve_nano_mini.json``, how full the examples are at each length
(``examples_fill``) and where each network's attention looks (:func:`attention`: each run's last
checkpoint at 128 tokens, the bundled checkpoint at its own 32), in ``diagnosis.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ("model.generator_size=0.25", "objective.mask_token_prob=1.0", "data.max_seq_len=128",
          "train.batch_size=32", "train.milestones=()", "train.max_minutes=0",
          "train.eval_every=500", "train.save_every=500", "train.keep_last=1")
ARMS = {  # name -> the one setting it changes
    "normal": (),  # the suite's electra-len128 arm as it was trained
    "sinusoidal": ("model.position_init=sinusoidal",),  # a position table with structure
    "lr3e-4": ("train.learning_rate=3e-4",),  # a third of mini's peak learning rate
    "batch128": ("train.batch_size=128", "train.eval_every=250"),  # 4x the sequences a step
    "generator-half": ("model.generator_size=0.5",),  # a generator 64 wide with 2 heads
    "untied": ("model.tying=none",),  # no embeddings shared by the two networks
    "disc-weight-1": ("objective.disc_weight=1.0",),  # the discriminator's loss not x50
    "mlm": ("objective.name=mlm",),  # BERT's objective alone on the same network
}
SETTINGS = ("model.position_init", "model.generator_size", "model.tying", "objective.name",
            "objective.disc_weight", "train.learning_rate", "train.batch_size")  # the arms vary
SCHEDULE_STEPS = 13_150
KEPT_EVAL = ("disc_auc", "disc_auc_text", "disc_recall", "disc_precision", "gen_accuracy",
             "mlm_accuracy")  # the MLM arm has no discriminator: its accuracy is mlm_accuracy
KEPT_TRAIN = ("lr", "gen_loss", "disc_loss", "gen_accuracy", "mlm_accuracy", "grad_norm",
              "replaced_fraction")


def run(out: Path, steps: int, arms: list[str]) -> None:
    """Each arm until its evaluation at ``steps`` (the schedule stays 13,150 steps long)."""
    for name in arms:
        sets = [a for s in (*RECIPE, *ARMS[name]) for a in ("--set", s)]
        cmd = [sys.executable, "-m", "minielectra", "pretrain", "--preset", "mini",
               "--out", str(out / name), "--max-steps", str(SCHEDULE_STEPS), "--precision",
               "fp32", "--no-compile", *sets]
        proc = subprocess.Popen(cmd)
        metrics = out / name / "metrics.jsonl"
        while proc.poll() is None:
            done = metrics.is_file() and any(
                r.get("kind") == "eval" and r.get("step", 0) >= steps
                for r in map(json.loads, metrics.read_text().splitlines()[-5:]))
            if done:
                proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                pass


def examples_fill(lengths=(32, 128)) -> dict:
    """Mean tokens per example and the share of examples at least 90% full, per length."""
    from minielectra.data.dataset import build_dataset
    from minielectra.data.tokenizer import WordPieceTokenizer
    from minielectra.model.storage import BUNDLED
    tokenizer = WordPieceTokenizer.load(BUNDLED)
    out = {}
    for n in lengths:
        ds = build_dataset("pretrain-en+pydocs", tokenizer, max_seq_len=n, split="train",
                           num_workers=1, progress=False)
        lengths_ = np.asarray(ds.lengths)
        out[str(n)] = {"examples": int(len(lengths_)),
                       "mean_tokens": round(float(lengths_.mean()), 1),
                       "full": round(float((lengths_ >= 0.9 * n).mean()), 3)}
    return out


def attention(checkpoint: str | Path, n: int, examples: int = 32) -> dict:
    """Where each layer of both networks looks, on ``examples`` held-out examples at length
    ``n``: the attention's entropy (nats; uniform over the row is ``log n``), the mean distance
    ``|i - j|`` between a token and what it attends to, and the share of attention on ``[CLS]``
    and on ``[SEP]`` (a head that always looks there reads no context)."""
    import torch
    from einops import rearrange

    from minielectra.data.dataset import build_dataset, collate
    from minielectra.model.attention import padding_mask
    from minielectra.objectives.compute import load_model
    model = load_model(checkpoint).eval()
    ds = build_dataset("pretrain-en+pydocs", model.tokenizer, max_seq_len=n, split="heldout",
                       num_workers=1, progress=False)
    batch = collate(ds, np.arange(examples))
    ids, keep = batch["input_ids"], batch["attention_mask"].bool()  # (b, n) each
    distance = (torch.arange(n)[None, :] - torch.arange(n)[:, None]).abs().float()  # (n, n)
    out = {}
    with torch.no_grad():
        for name in ("generator", "discriminator"):
            if getattr(model, name, None) is None:  # the MLM baseline has one network
                continue
            encoder = getattr(model, name).encoder
            x = encoder.embed_proj(encoder.embeddings(ids, batch["token_type_ids"]))  # (b, n, d)
            mask = padding_mask(batch["attention_mask"])  # (b, 1, 1, n)
            layers = []
            for layer in encoder.layers:
                q, k, _ = rearrange(layer.attn.qkv(x), "b n (three h e) -> three b h n e",
                                    three=3, h=layer.attn.num_heads)
                scores = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5  # (b, h, n, n)
                w = scores.masked_fill(~mask, float("-inf")).softmax(-1)
                rows = keep[:, None, :, None].expand_as(w[..., :1]).squeeze(-1)  # real queries
                entropy = -(w * w.clamp_min(1e-12).log()).sum(-1)  # (b, h, n)
                at = {"cls": ids == model.config.cls_token_id,
                      "sep": ids == model.config.sep_token_id}  # (b, n) each
                layers.append({
                    "entropy": round(float(entropy[rows].mean()), 2),
                    "log_n": round(float(keep.sum(-1).float().log().mean()), 2),
                    "mean_distance": round(float((w * distance).sum(-1)[rows].mean()), 1),
                    **{f"on_{t}": round(float((w * where[:, None, None, :]).sum(-1)[rows].mean()),
                                        3) for t, where in at.items()}})
                x = layer(x, mask)
            out[name] = layers
    return out


def summarise(run_dir: Path) -> dict:
    config = json.loads((run_dir / "config.json").read_text())
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x]
    evals = [{"step": r["step"], **{k: round(r[k], 4) for k in KEPT_EVAL if k in r}}
             for r in rows if r["kind"] == "eval"]
    train = [{"step": r["step"], **{k: round(r[k], 4) for k in KEPT_TRAIN if k in r}}
             for r in rows if r["kind"] == "train" and r["step"] % 250 == 0]
    settings = {key: config[key.split(".")[0]][key.split(".")[1]] for key in SETTINGS}
    settings["steps_run"] = max(r["step"] for r in rows)
    last = sorted((run_dir / "checkpoints").glob("step_*"))[-1]
    return {"settings": settings, "eval": evals, "train": train,
            "attention": {"checkpoint_step": int(last.name.split("_")[1]),
                          "len128": attention(last, 128)}}


def report(runs: list[Path], out: Path) -> dict:
    curve = json.loads((ROOT / "research/results/learning_curve_nano_mini.json").read_text())
    mini = next(c for c in curve["curves"] if c["preset"] == "mini")
    result = {"about": __doc__.split("\n\n")[0],
              "arms": {r.name: summarise(r) for r in runs},
              "length32_mini": [{"step": p["step"], "disc_auc": round(p["disc_auc"], 4),
                                 "gen_accuracy": round(p["gen_accuracy"], 4)}
                                for p in mini["points"] if p["step"] <= 4000],
              "examples_fill": examples_fill(),
              "bundled_attention_len32": attention("bundled", 32)}
    out.mkdir(parents=True, exist_ok=True)
    (out / "diagnosis.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--steps", type=int, default=4000)
    r.add_argument("--arms", nargs="+", choices=sorted(ARMS), default=list(ARMS))
    p = sub.add_parser("report")
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--out", type=Path, default=ROOT / "research/results/len128")
    args = ap.parse_args()
    if args.command == "run":
        run(args.out, args.steps, args.arms)
    else:
        report(args.runs, args.out)


if __name__ == "__main__":
    main()
