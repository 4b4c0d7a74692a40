"""A candidate for the bundled checkpoint beside the installed one, on what the course shows.

    python research/bundled_candidate.py --candidate NAME=RUN ... --out results/suite/bundled_candidate.json

The suite ranks pre-training *recipes* (two pre-training seeds each); installing one replaces the
bundled *checkpoint*, one run. This scores the two checkpoints side by side on what the course
reads from the bundled one:

- ``evaluate`` on all of each one's held-out split, at 32 and at 128 tokens (seed 0);
- the word-order probe (held-out SST-2 sentences, half with two neighbouring words swapped, a
  ridge probe on the frozen encoder; probe seeds 0-2, 32 tokens);
- lesson 06's seven hand-made replacements: P(replaced) of each.

The suite averages by fine-tuning seed come from ``research/results/suite/results.json``.
"""

from __future__ import annotations

import minielectra  # noqa: F401  (first: its import sets OMP_WAIT_POLICY before torch loads)

import argparse
import json
from pathlib import Path

from minielectra.experiments.swap_probe import swap_probe
from minielectra.safeio import write_file
from minielectra.training.evaluate import evaluate
from minielectra.viz.scoring import Checkpoint, load_checkpoint, score_text

WALK = "the man walked to the station in the rain ."
PLAY = "the children played in the park after school ."
# lesson 06's probes: (text, word, its replacement, what the replacement breaks)
PROBES = [(WALK, "station", "the", "grammar"), (WALK, "walked", "of", "grammar"),
          (PLAY, "park", "and", "grammar"), (WALK, "rain", "station", "meaning"),
          (WALK, "man", "river", "meaning"), (PLAY, "park", "sky", "meaning"),
          (PLAY, "school", "water", "meaning")]
KEYS = ("disc_auc", "disc_precision", "disc_recall", "gen_accuracy", "examples")


def probes(ckpt: Checkpoint) -> dict[str, float]:
    out = {}
    for text, old, new, kind in PROBES:
        position = next(r["position"] for r in score_text(ckpt, text) if r["original"] == old)
        record = next(r for r in score_text(ckpt, text, replace={position: new}) if r["replaced"])
        out[f"{old} -> {new} ({kind})"] = round(record["p_replaced"], 3)
    return out


def scores(checkpoint: str) -> dict:
    ckpt = load_checkpoint(checkpoint)
    model = ckpt.model
    at = {n: evaluate(checkpoint, seed=0, max_seq_len=n) for n in (32, 128)}
    return {
        "evaluate": {n: {k: at[n][k] for k in KEYS} for n in at},
        "word_order": [swap_probe(model.discriminator.encoder, model.tokenizer, max_seq_len=32,
                                  seed=s)["score"] for s in range(3)],
        "probes": probes(ckpt),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--candidate", required=True, nargs="+", metavar="NAME=PATH",
                    help="checkpoints or pre-training runs, each with a name")
    ap.add_argument("--out", type=Path, required=True, help="the JSON to write")
    args = ap.parse_args()
    named = dict(c.split("=", 1) for c in args.candidate)
    result = {"bundled": scores("bundled"),
              **{name: {"path": path, **scores(path)} for name, path in named.items()}}
    write_file(args.out, json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
