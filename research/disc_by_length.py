"""The discriminator's held-out scores of pre-trained checkpoints at lengths 32 and 128.

    python research/disc_by_length.py --out FILE.json NAME=CHECKPOINT [NAME=CHECKPOINT ...]

Each checkpoint is scored by ``minielectra evaluate`` (512 evenly spaced held-out examples of
its own corpus in batches of 64, its own generator replacing, its seed), once
with the examples cut at 32 tokens and once at 128, whatever length it was pre-trained at: the
course's views show sentences of about 32 tokens, fine-tuning reads up to 128.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from minielectra.training.evaluate import evaluate

LENGTHS, EXAMPLES = (32, 128), 512
KEPT = ("disc_auc", "disc_auc_text", "disc_precision", "disc_recall", "gen_accuracy")


def scores(checkpoint: str | Path) -> dict:
    """``{"len32": {...}, "len128": {...}}``: ``evaluate`` at each length."""
    out = {}
    for n in LENGTHS:
        result = evaluate(checkpoint, max_examples=EXAMPLES, batch_size=64, max_seq_len=n)
        out[f"len{n}"] = {k: round(result[k], 4) for k in KEPT}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("arms", nargs="+", help="NAME=CHECKPOINT")
    args = ap.parse_args()
    table = {}
    for arm in args.arms:
        name, path = arm.split("=", 1)
        table[name] = {"checkpoint": path, **scores(path)}
        print(name, json.dumps(table[name]))
    args.out.write_text(json.dumps(table, indent=1) + "\n")


if __name__ == "__main__":
    main()
