"""Does pre-training help? SST-2 from a pre-trained checkpoint vs the same recipe from random init.

Both arms run :func:`minielectra.finetune.train.finetune` with the paper's recipe (lr 3e-4, layer-wise
decay 0.8, batch 32, 3 epochs, warmup 10%) on the same fixed random subset of the SST-2 training
set, scored on the full dev set, in the same process one after the other. The random arm is the
same architecture and tokenizer with freshly initialised weights (``finetune.from_scratch=true``).
Prints JSON with each arm's median dev accuracy, its final training loss (how well it fitted the
training set), wall time, and the difference; with several ``--train-examples`` sizes, one such
comparison per size (each a fixed random subset; the smaller are not nested in the larger).

    python research/sst2.py --checkpoint runs/nano            # ~4 min on 2 cores
    python research/sst2.py --checkpoint bundled --train-examples 1000 2000 8000 --seeds 5
    python research/sst2.py --checkpoint runs/nano --train-examples all  # 16 min/seed

The data directory is ``MINIELECTRA_DATA_DIR``, else the Hugging Face hub.
"""

from __future__ import annotations

import minielectra  # noqa: F401  (first: its import sets OMP_WAIT_POLICY before torch loads)

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path


def _size(text: str) -> int | None:
    """``--train-examples`` value: a positive count, or 'all' (None: the whole training set)."""
    if text == "all":
        return None
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive count or 'all', got {text!r}")
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True,
                        help="a checkpoint or run directory, or 'bundled'")
    parser.add_argument("--task", default="sst2")
    parser.add_argument("--train-examples", type=_size, nargs="+", default=[8000],
                        help="size(s) of a fixed random subset of the training set (CPU budget), "
                             "or 'all' for the whole training set, as the paper")
    parser.add_argument("--seeds", type=int, default=1, help="runs per arm; the median is kept")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--set", action="append", default=[], metavar="finetune.KEY=VALUE",
                        help="recipe overrides for both arms, e.g. finetune.loss_reduction=mean")
    args = parser.parse_args()

    import torch

    from minielectra.finetune.run import finetune
    from minielectra.training.opening import open_checkpoint

    # Resolved (a run dir's latest checkpoint, 'bundled') and loaded once for all runs.
    pretrained, checkpoint = open_checkpoint(args.checkpoint)
    sizes = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.train_examples:
            arms = {}
            for arm, extra in (("pretrained", []), ("random_init", ["finetune.from_scratch=true"])):
                start = time.perf_counter()
                r = finetune(pretrained, args.task, max_train_examples=n, seeds=args.seeds,
                             progress=False, save_model=False,
                             overrides=[f"finetune.num_threads={args.threads}", *args.set, *extra],
                             out=Path(tmp) / f"{arm}-{n or 'all'}")
                arms[arm] = {"score": r["score"], "scores": r["scores"],
                             # mean over the last 20 steps; ~0.69 = chance for two classes
                             "final_train_loss": [round(run["final_train_loss"], 4)
                                                  for run in r["runs"]],
                             "wall_s": round(time.perf_counter() - start, 1),
                             "steps": r["runs"][0]["steps"]}
                print(n or "all", arm, json.dumps(arms[arm]), flush=True)
            sizes.append({"train_examples": r["train_examples"], "arms": arms, "gain_points": round(
                arms["pretrained"]["score"] - arms["random_init"]["score"], 2)})
    print(json.dumps({
        "benchmark": "sst2_pretrained_vs_random_init",
        "checkpoint": checkpoint, "task": args.task, "metric": r["metric"],
        "overrides": args.set, "loss_reduction": r["config"]["loss_reduction"],
        "dev_examples": r["dev_examples"], "seeds": args.seeds, "sizes": sizes,
        "machine": {"cpus": os.cpu_count(), "torch_threads": args.threads,
                    "platform": platform.platform(), "torch": torch.__version__,
                    "loadavg": os.getloadavg()},
    }, indent=2))


if __name__ == "__main__":
    main()
