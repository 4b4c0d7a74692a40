"""The discriminator's held-out scores of pre-trained checkpoints at lengths 32 and 128.

    python research/disc_by_length.py --out FILE.json NAME=CHECKPOINT [NAME=CHECKPOINT ...]

Each checkpoint is scored as its training loop scores it (``evaluate_model``: 512 evenly spaced
held-out examples of its own corpus, its own generator making the replacements, its seed), once
with the examples cut at 32 tokens and once at 128, whatever length it was pre-trained at: the
course's views show sentences of about 32 tokens, fine-tuning reads up to 128.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from minielectra.training.evaluate import evaluate_model, examples_for, heldout_batches
from minielectra.training.evaluate import run_config_for
from minielectra.model.storage import resolve_bundled
from minielectra.objectives.compute import load_model

LENGTHS, EXAMPLES = (32, 128), 512
KEPT = ("disc_auc", "disc_auc_text", "disc_precision", "disc_recall", "gen_accuracy")


def scores(checkpoint: Path, length: int) -> dict:
    checkpoint = resolve_bundled(checkpoint)  # "bundled": the package's, with its run config
    model = load_model(checkpoint)
    cfg = run_config_for(checkpoint, model)
    model.objective = cfg.objective
    cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, max_seq_len=length))
    _, dataset = examples_for(cfg, model.tokenizer)
    batches = heldout_batches(dataset, batch_size=64, max_examples=EXAMPLES)
    result = evaluate_model(model.eval(), batches, seed=cfg.train.seed)
    return {k: round(result[k], 4) for k in KEPT}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("arms", nargs="+", help="NAME=CHECKPOINT")
    args = ap.parse_args()
    table = {}
    for arm in args.arms:
        name, path = arm.split("=", 1)
        table[name] = {"checkpoint": path, **{f"len{n}": scores(Path(path), n) for n in LENGTHS}}
        print(name, json.dumps(table[name]))
    args.out.write_text(json.dumps(table, indent=1) + "\n")


if __name__ == "__main__":
    main()
