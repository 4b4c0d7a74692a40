"""BERT's two-length pre-training, tried on the suite's ELECTRA arm: most steps at 32 tokens, the
last tenth at 128 (BERT trained 90% of its steps at 128 and the rest at 512).

    python research/two_length.py --run RUN --from-step 7500 --out OUT [--switch 0.9]

RUN is a length-32 pre-training run (``minielectra pretrain --out RUN``). OUT continues its
checkpoint at ``--from-step`` exactly as RUN did, at 32 tokens, up to ``switch x max_steps``, then
to the end at 128 tokens with a quarter of the batch: the same tokens a step, the same schedule,
the same steps, so the same pre-training compute up to attention's share. The length-32 steps
repeat RUN's (same data and masks; compiled here, so equal to rounding: step 7,700's loss is
19.96658 in both); only the last tenth differs.

The library refuses to resume with another length or batch (``check_resumable``): a user who
does that by mistake gets a different run. This study changes them on purpose, so it lets those
two keys change for its second stage, and nothing else.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
from pathlib import Path

from minielectra.config import RunConfig
from minielectra.training import setup
from minielectra.training.loop import pretrain


def copy_run(run: Path, step: int, out: Path) -> None:
    """OUT as RUN was right after writing ``step``: its files and that one checkpoint."""
    if out.exists():
        return  # continuing an earlier call: pretrain(resume=True) takes the newest checkpoint
    name = f"step_{step:07d}"
    shutil.copytree(run, out, ignore=lambda d, names: [
        n for n in names if n == "run.lock" or (Path(d).name == "checkpoints" and n != name)])


def two_length(run: Path, from_step: int, out: Path, *, switch: float = 0.9, long: int = 128,
               shrink: int = 4, compile: bool = True, progress: bool = True) -> dict:
    """RUN's checkpoint at ``from_step`` continued in OUT: at its own length up to ``switch x
    max_steps``, then at length ``long`` with the batch ``shrink`` times smaller. Returns the
    final ``pretrain`` summary; calling it again continues where a stopped call left off."""
    copy_run(run, from_step, out)
    cfg = RunConfig.load(run / "checkpoints" / f"step_{from_step:07d}" / "run_config.json")
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, out_dir=str(out),
                                                             compile=compile))
    at = round(switch * cfg.train.max_steps)
    newest = max(int(p.name[5:]) for p in (out / "checkpoints").glob("step_*"))
    if newest < at:
        pretrain(cfg, resume=True, until_step=at, progress=progress)
    cfg = dataclasses.replace(
        cfg, data=dataclasses.replace(cfg.data, max_seq_len=long),
        train=dataclasses.replace(cfg.train, batch_size=cfg.train.batch_size // shrink))
    allowed = {"data.max_seq_len", "train.batch_size"} - setup.RESUMABLE_CHANGES
    setup.RESUMABLE_CHANGES |= allowed  # for this call only: on purpose, not by mistake
    try:
        return pretrain(cfg, resume=True, progress=progress)
    finally:
        setup.RESUMABLE_CHANGES -= allowed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, required=True, help="a length-32 pre-training run")
    ap.add_argument("--from-step", type=int, required=True, help="its checkpoint to continue")
    ap.add_argument("--out", type=Path, required=True, help="the two-length run's folder")
    ap.add_argument("--switch", type=float, default=0.9, help="share of steps at length 32")
    args = ap.parse_args()
    summary = two_length(args.run, args.from_step, args.out, switch=args.switch)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
