"""One run of an experiment: pre-train (resumable), then judge downstream; a finished run is a file.

A run's directory ``OUT/runs/<arm>-<steps>-s<seed>-<config hash>/`` holds the pre-training run,
``timing.json`` (training seconds, kept across interruptions), ``pretrain.json`` once trained and
``result.json`` once judged. Runs are named by their content, so experiments that train the same
run share its directory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..config import RunConfig, apply_overrides, override_keys
from ..objectives.compute import build_model, load_model
from ..objectives.flops import run_flops, train_flops_per_step
from ..finetune.run import finetune
from ..ownership import claim
from ..safeio import write_file
from ..training.checkpoints import latest_checkpoint
from ..training.loop import pretrain
from ..training.setup import RUN_DIR
from .probe import probe
from .swap_probe import swap_probe


@dataclass(frozen=True)
class Judge:
    """How a pre-trained encoder is scored downstream."""

    probe_tasks: tuple[str, ...]
    finetune_tasks: tuple[str, ...] = ("sst2",)
    probe_examples: int = 4000
    finetune_examples: int = 2000
    finetune_overrides: tuple[str, ...] = ()
    # Sentences (pairs) are cut to this many tokens. Default (0): twice the pre-training length,
    # at most 128. A CPU preset pre-trains on 16 or 32 tokens: position embeddings beyond that
    # were never trained, and 32 tokens hold most SST-2 sentences.
    max_seq_len: int = 0
    # The word-order probe on English (:mod:`.swap_probe`): its training sentences, 0 = off.
    swap_examples: int = 0


@dataclass(frozen=True)
class RunSpec:
    arm: str
    seed: int
    budget: float  # fraction of --budget
    cfg: RunConfig

    @property
    def steps(self) -> int:
        return self.cfg.train.max_steps

    @property
    def content(self) -> str:
        """``<steps>-s<seed>-<hash of the config>``: what the run is, whichever arm names it."""
        d = self.cfg.to_dict()
        d["train"] = {**d["train"], "out_dir": ""}
        digest = hashlib.sha1(json.dumps(d, sort_keys=True).encode()).hexdigest()[:8]
        return f"{self.steps}-s{self.seed}-{digest}"

    @property
    def name(self) -> str:
        """``<arm>-<content>``: the same run in two experiments (same config, seed and length)
        under the same arm is one directory."""
        return f"{slug(self.arm)}-{self.content}"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def arm_config(base: RunConfig, overrides, *, steps: int, seed: int, out_dir: Path) -> RunConfig:
    """``base`` with the arm's overrides and this run's length, seed and directory. Warmup is
    5% of the steps (``nano``'s 100 of 2000), the same schedule shape at every budget, unless
    the overrides set it; checkpoints every quarter, for resuming; no wall-clock limit."""
    overrides = list(overrides)
    cfg = apply_overrides(RunConfig.from_dict(base.to_dict()), overrides)
    t = cfg.train
    t.max_steps, t.seed, t.out_dir = steps, seed, str(out_dir)
    if "train.warmup_steps" not in override_keys(overrides):
        t.warmup_steps = max(1, round(0.05 * steps))
    t.save_every, t.eval_every, t.max_minutes, t.milestones = max(1, steps // 4), 0, 0.0, ()
    t.log_every = min(t.log_every, max(1, steps // 4))
    return cfg.validate()


def read_record(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _jsonable(judge: Judge) -> dict:
    """The judge as its JSON reads back (tuples become lists), to compare with a saved one."""
    return json.loads(json.dumps(dataclasses.asdict(judge)))


def write_record(path: Path, data: dict) -> None:
    write_file(path, json.dumps(data, indent=2, default=str) + "\n")


JUDGED = ["timing.json", "pretrain.json", "result.json"]  # what a run's directory gains here


class Clock:
    """Training seconds across interruptions: this process's share is extrapolated from the log
    lines (time since the first line this process wrote, scaled to the steps it trained)."""

    def __init__(self, path: Path, start_step: int):
        self.path, self.start_step = path, start_step
        self.before = (read_record(path) or {}).get("train_seconds", 0.0) if start_step else 0.0
        self.first: tuple[float, int] | None = None
        self.seconds = self.before

    def __call__(self, record: dict[str, Any]) -> None:
        if record.get("kind") != "train":
            return
        now, step = time.perf_counter(), record["step"]
        if self.first is None:
            self.first = (now, step)
            return
        t0, s0 = self.first
        if step > s0:
            rate = (now - t0) / (step - s0)
            self.seconds = self.before + rate * (step - self.start_step)
            write_record(self.path, {"train_seconds": self.seconds, "step": step})


def pretrain_run(spec: RunSpec, *, progress: bool) -> dict[str, Any]:
    """Pre-train ``spec`` (resuming if it has a checkpoint); returns ``pretrain.json``."""
    out = Path(spec.cfg.train.out_dir)
    done = read_record(out / "pretrain.json")
    if done is not None:
        return done
    claim(out, RUN_DIR, JUDGED)  # a file of the user's in the way is refused, naming it
    ckpt = latest_checkpoint(out)
    start = int(ckpt.name.split("_")[-1]) if ckpt is not None else 0
    clock = Clock(out / "timing.json", start)
    summary = pretrain(spec.cfg, resume=ckpt is not None, progress=progress, on_record=clock)
    saved = RunConfig.load(out / "config.json")  # vocabulary resolved from the tokenizer
    result = {"arm": spec.arm, "seed": spec.seed, "budget": spec.budget, "steps": summary["step"],
              "checkpoint": summary["checkpoint"], "heldout": summary["heldout"],
              "train_seconds": clock.seconds, "resumed_from": start,
              "flops_per_step": train_flops_per_step(saved) if saved.objective.procedure !=
              "two-stage" else run_flops(saved) / saved.train.max_steps,
              "train_flops": run_flops(saved),
              "tokens": summary["step"] * saved.train.batch_size * saved.data.max_seq_len,
              "config": saved.to_dict()}
    write_record(out / "pretrain.json", result)
    return result


def judge_model(model: Electra, judge: Judge, *, seed: int,
                pretrained_length: int) -> dict[str, Any]:
    """Linear probes on the frozen discriminator encoder, then fine-tuning (one seed per
    pre-training seed, so the spread over seeds covers both)."""
    n = judge.max_seq_len or min(128, 2 * pretrained_length)
    n = min(n, model.config.max_position_embeddings)
    probes = probe(model.discriminator.encoder, model.tokenizer, list(judge.probe_tasks),
                   max_train_examples=judge.probe_examples, max_seq_len=n)
    tuned = {}
    for task in judge.finetune_tasks:
        r = finetune(model, task, seed=seed, max_train_examples=judge.finetune_examples,
                     overrides=[f"finetune.max_seq_len={n}", *judge.finetune_overrides],
                     progress=False, save_model=False)
        tuned[task] = {"score": r["score"], "train_seconds": r["runs"][0]["train_seconds"]}
    swap = (swap_probe(model.discriminator.encoder, model.tokenizer, max_seq_len=n,
                       train_examples=judge.swap_examples, dev_examples=judge.swap_examples // 2)
            if judge.swap_examples else None)
    scores = [p["score"] for p in probes.values()]
    return {"probe": probes, "probe_avg": sum(scores) / len(scores) if scores else None,
            "swap": swap, "swap_score": swap["score"] if swap else None,
            "finetune": tuned,
            "finetune_avg": (sum(t["score"] for t in tuned.values()) / len(tuned)
                             if tuned else None)}


def execute(spec: RunSpec, judge: Judge, *, progress: bool = False) -> dict[str, Any]:
    """Pre-train and judge ``spec`` unless its ``result.json`` says it is done."""
    out = Path(spec.cfg.train.out_dir)
    done = read_record(out / "result.json")
    if done is not None and done.get("judge") == _jsonable(judge):
        return done
    result = pretrain_run(spec, progress=progress)  # read back from pretrain.json when done
    claim(out, RUN_DIR, JUDGED)
    model = load_model(result["checkpoint"])
    result = {**result, **judge_model(model, judge, seed=spec.seed,
                                      pretrained_length=spec.cfg.data.max_seq_len),
              "judge": _jsonable(judge)}
    write_record(out / "result.json", result)
    return result


def random_init(reference: dict[str, Any], judge: Judge, *, seed: int, out: Path) -> dict:
    """The no-pre-training control: a freshly initialised model of the reference run's shape and
    tokenizer, judged the same way (cached in ``out/random-init-s<seed>.json``)."""
    path = out / f"random-init-s{seed}.json"
    done = read_record(path)
    if done is not None and done.get("judge") == _jsonable(judge):
        return done
    loaded = load_model(reference["checkpoint"])
    torch.manual_seed(seed)
    model = build_model(loaded.config, loaded.objective)
    model.tokenizer = loaded.tokenizer
    result = {"arm": "random init (no pre-training)", "seed": seed, "budget": 0.0, "steps": 0,
              "train_flops": 0, "train_seconds": 0.0, "tokens": 0, "heldout": {},
              **judge_model(model, judge, seed=seed,
                            pretrained_length=reference["config"]["data"]["max_seq_len"]),
              "judge": _jsonable(judge)}
    write_record(path, result)
    return result
