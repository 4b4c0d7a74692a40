"""The paper's measure at laptop scale: a GLUE-style suite, one fine-tuning recipe, many arms.

``python research/suite.py run`` fine-tunes every *arm* (a pre-trained checkpoint, or random
init of the same shape and vocabulary) on every task of the suite with one recipe and several
seeds; ``python research/suite.py report`` writes the table. The tasks are GLUE's (the data
directory's ``glue/``), scored with the paper's metrics (Matthews correlation for CoLA, Spearman
for STS-B, accuracy for the others) and averaged as GLUE does, WNLI left out as the paper does:

- **suite** (the average): CoLA (8,551 training sentences), SST-2 (a fixed random 8,000 of
  67,349), MRPC (3,667 pairs), STS-B (5,749) and RTE (2,490), each scored on its whole dev set;
- **few**: the same five tasks with at most 2,000 training examples each;
- SST-2 with 2,000 sentences, and the whole of SST-2, reported beside the average.

The recipe of every arm is fixed before the measurement, by a stated rule (the report repeats
it): the few-sample recipe the project recommended before the suite existed (10 epochs, the top
encoder layer re-initialised, lr 3e-4, layer-wise decay 0.8, batch 32, length 128), the model
after the last epoch scored (the paper's protocol: no epoch is chosen on the dev set). Other
recipes are rows of their own on the bundled checkpoint (the choice of the default recipe).

Every fine-tuning run is a file under ``OUT/runs/<key>.json`` (the key: a hash of the arm's
weights, the task, the training-set size, the seed and the recipe), so the study stops and
continues, and any number of worker processes share it: a worker claims a run by creating
``<key>.claim`` (a claim left by a process that died is taken over). ``--lock FILE`` makes a
worker hold ``flock FILE`` for each run, to share a core with other work.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

import minielectra  # noqa: F401,E402  (first: sets OMP_WAIT_POLICY before torch loads)
import torch  # noqa: E402

from minielectra.finetune.run import finetune  # noqa: E402
from minielectra.training.opening import open_checkpoint  # noqa: E402
from suite_spec import EXTRA, FEW, PROTOCOL, RECIPES, SUITE  # noqa: E402
from transfer import digest, random_twin, shape_key, weights_key  # noqa: E402
from validation_split import on_validation  # noqa: E402


@dataclass(frozen=True)
class Arm:
    name: str
    checkpoint: str  # a checkpoint dir or run dir, or "bundled"
    label: str
    random: bool = False  # random init of the checkpoint's shape and vocabulary


@dataclass(frozen=True)
class Job:
    arm: Arm
    recipe: str
    task: str
    size: int | None
    seed: int
    split: str = "dev"  # or "validation": trained without it, scored on it (validation_split.py)


def arms_from(specs: Sequence[str]) -> list[Arm]:
    """``NAME=CHECKPOINT[=LABEL]``; ``random=CHECKPOINT`` is random init of that shape."""
    arms = []
    for spec in specs:
        name, checkpoint, *label = spec.split("=", 2)
        arms.append(Arm(name, checkpoint, label[0] if label else name,
                        random=name.startswith("random")))
    return arms


def plan(arms: Sequence[Arm], *, recipes: Sequence[str], seeds: int, groups: Sequence[str],
         recipe_arms: Sequence[str], split: str = "dev") -> list[Job]:
    """Jobs in the order they run: group by group, seed by seed, so that every arm's first
    seeds finish before any arm's later ones (an early report is already paired)."""
    tasks = {"suite": SUITE, "few": FEW, "sst2-2000": EXTRA[:1], "sst2-all": EXTRA[1:]}
    jobs = []
    for group in groups:
        for seed in range(seeds):
            for recipe in recipes:
                for arm in arms:
                    if recipe != "reinit-1" and arm.name not in recipe_arms:
                        continue
                    jobs += [Job(arm, recipe, t, n, seed, split) for t, n in tasks[group]]
    return list(dict.fromkeys(jobs))


# ---------------------------------------------------------------------------------- running jobs

class Models:
    """Each arm's model and identity, loaded once per worker."""

    def __init__(self):
        self.cache: dict[str, tuple] = {}

    def get(self, arm: Arm):
        """The arm's model and identity; None while its checkpoint is not there (a pre-training
        run still going: name its final ``step_N`` checkpoint, which appears when it is done)."""
        if arm.name not in self.cache:
            if arm.checkpoint != "bundled" and not Path(arm.checkpoint).exists():
                return None
            model, _ = open_checkpoint(arm.checkpoint)
            if arm.random:
                model = random_twin(model)
                self.cache[arm.name] = (model, {"random": shape_key(model)})
            else:
                self.cache[arm.name] = (model, {"pretrained": weights_key(model)})
        return self.cache[arm.name]


def overrides_of(job: Job) -> list[str]:
    recipe = list(RECIPES[job.recipe]) + list(PROTOCOL)
    if job.arm.random:  # re-initialising layers of a random encoder changes nothing
        recipe = [o for o in recipe if not o.startswith("finetune.reinit_layers=")]
        recipe.append("finetune.from_scratch=true")
    return recipe


def job_key(job: Job, identity: dict) -> str:
    split = {} if job.split == "dev" else {"split": job.split}  # the dev runs keep their keys
    return digest({"identity": identity, "task": job.task, "size": job.size, "seed": job.seed,
                    "overrides": sorted(overrides_of(job)), "protocol": 1, **split})


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def claim(path: Path) -> bool:
    """Create ``path`` (this process's claim on a run); take over one whose process is gone."""
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            try:
                pid, host = path.read_text().split()[:2]
            except (OSError, ValueError):
                return False
            if host != socket.gethostname() or _alive(int(pid)):
                return False
            path.unlink(missing_ok=True)
            continue
        os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
        os.close(fd)
        return True
    return False


@contextlib.contextmanager
def held(lock: Path | None):
    if lock is None:
        yield
        return
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run_job(job: Job, models: Models, runs: Path, lock: Path | None) -> dict | None:
    if models.get(job.arm) is None:
        return None
    model, identity = models.get(job.arm)
    key = job_key(job, identity)
    done, mine = runs / f"{key}.json", runs / f"{key}.claim"
    if done.is_file() or not claim(mine):
        return None
    try:
        with held(lock):
            start = time.perf_counter()
            task, size = job.task, job.size
            if job.split == "validation":  # its own training part and its own "dev"
                task, size = on_validation(job.task, job.size), None
            r = finetune(model, task, seed=job.seed, max_train_examples=size,
                         overrides=overrides_of(job), progress=False, save_model=False)
        run = r["runs"][0]
        result = {"arm": job.arm.name, "random": job.arm.random, "identity": identity,
                  "checkpoint": job.arm.checkpoint, "recipe": job.recipe, "task": job.task,
                  "size": job.size, "split": job.split, "train_examples": r["train_examples"],
                  "seed": job.seed,
                  "overrides": overrides_of(job), "score": r["score"], "metrics": r["metrics"],
                  "epoch_scores": run["epoch_scores"], "best_epoch": run["best_epoch"],
                  "final_train_loss": run["final_train_loss"], "steps": run["steps"],
                  "seconds": round(time.perf_counter() - start, 1),
                  "finished": time.strftime("%Y-%m-%d %H:%M:%S"), "torch": torch.__version__}
        tmp = runs / f".{key}.tmp"
        tmp.write_text(json.dumps(result, indent=1) + "\n")
        os.replace(tmp, done)
        return result
    finally:
        mine.unlink(missing_ok=True)


def run(jobs: Sequence[Job], *, out: Path, lock: Path | None) -> None:
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    models = Models()
    for i, job in enumerate(jobs):
        r = run_job(job, models, runs, lock)
        if r is not None:
            size = "all" if job.size is None else job.size
            print(f"[suite {i + 1}/{len(jobs)}] {job.arm.name} {job.recipe} {job.task}@{size} "
                  f"seed {job.seed}: {r['score']:.1f} ({r['seconds']:.0f} s)", flush=True)


# ------------------------------------------------------------------------------- command line

def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="fine-tune the arms (continues where the last run stopped)")
    r.add_argument("--arm", action="append", required=True, metavar="NAME=CHECKPOINT[=LABEL]",
                   help="an arm; a NAME starting with 'random' is random init of that shape")
    r.add_argument("--recipes", nargs="+", default=["reinit-1"], choices=sorted(RECIPES))
    r.add_argument("--recipe-arms", nargs="*", default=["bundled"],
                   help="arms that also run the other recipes (default: bundled)")
    r.add_argument("--groups", nargs="+", default=["suite"],
                   choices=["suite", "few", "sst2-2000", "sst2-all"])
    r.add_argument("--seeds", type=int, default=3)
    r.add_argument("--split", choices=["dev", "validation"], default="dev",
                   help="score on GLUE's dev sets, or train without the validation split "
                        "(research/results/validation_split.json) and score on it, to choose")
    r.add_argument("--out", type=Path, default=Path("experiments/suite"))
    r.add_argument("--lock", type=Path, help="hold flock on this file during each run")
    r.add_argument("--dry-run", action="store_true", help="list the jobs, run nothing")
    rep = sub.add_parser("report", help="the table, from the runs made so far")
    rep.add_argument("--out", type=Path, default=Path("experiments/suite"))
    rep.add_argument("--results", type=Path, default=Path("research/results/suite"))
    rs = sub.add_parser("restate", help="the comparisons and the table again, from the results "
                        "file's own rows (no per-run records needed)")
    rs.add_argument("--results", type=Path, default=Path("research/results/suite"))
    fl = sub.add_parser("floor", help="the bag-of-words floor (TF-IDF + logistic/ridge)")
    fl.add_argument("--out", type=Path, default=Path("experiments/suite"))
    fl.add_argument("--split", choices=["dev", "validation"], default="dev")
    a = p.parse_args(argv)
    if a.command == "run":
        jobs = plan(arms_from(a.arm), recipes=a.recipes, seeds=a.seeds, groups=a.groups,
                    recipe_arms=a.recipe_arms, split=a.split)
        if a.dry_run:
            for j in jobs:
                print(j.arm.name, j.recipe, j.task, j.size, j.seed)
            return
        run(jobs, out=a.out, lock=a.lock)
    elif a.command == "report":
        from suite_report import write_report
        print(json.dumps(write_report(a.out, a.results), indent=2))
    elif a.command == "restate":
        from suite_report import restate
        print(json.dumps(restate(a.results), indent=2))
    else:
        from suite_floor import run_floor
        print(json.dumps(run_floor(a.out, split=a.split), indent=2))


if __name__ == "__main__":
    main()
