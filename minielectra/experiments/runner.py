"""``minielectra experiment NAME``: every run of an experiment, then its tables and figures.

For each budget, arm and seed (:mod:`.specs`) one resumable run (:mod:`.runs`), then a
no-pre-training control per seed, then the report (:mod:`.report`).
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from ..config import RunConfig, apply_overrides, preset as preset_config
from ..objectives.flops import counted_flops, train_flops_per_step
from ..outputs import output_folder
from ..ownership import Layout
from .probe import tasks_present
from .report import write_report
from .runs import Judge, RunSpec, arm_config, execute, random_init
from .specs import EXPERIMENTS, get_experiment

# ``--out``: the runs (shared by the experiments that train the same run) and a report each.
EXPERIMENT_OUT = Layout("experiment", ("runs", "toy-grammar", *EXPERIMENTS),
                        lambda folder: (folder / "runs").is_dir())


def plan(name: str, *, budget: int | None = None, seeds: int = 1, preset: str = "nano",
         corpus: str | None = None, out: str | Path = "experiments",
         overrides: Sequence[str] = (), budgets: Sequence[float] | None = None
         ) -> list[RunSpec]:
    """The runs of experiment ``name``, in the order they run (smallest budgets first)."""
    exp = get_experiment(name)
    if budgets is not None and not set(budgets) <= set(exp.budgets):
        raise ValueError(f"--budgets {list(budgets)}: {name} runs at {list(exp.budgets)}")
    if seeds < 1:
        raise ValueError(f"--seeds must be >= 1, got {seeds}")
    base = preset_config(preset)
    # the experiment's own settings (tying and procedures need an equal-size generator) last
    apply_overrides(base, ([f"data.corpus={corpus}"] if corpus else []) + list(overrides)
                    + list(exp.extra))
    budget = budget or base.train.max_steps
    if budget < 4:
        raise ValueError(f"--budget must be at least 4 steps, got {budget}")
    reference = arm_config(base, exp.arms[0].overrides, steps=budget, seed=0, out_dir=Path("x"))
    ref_flops = train_flops_per_step(reference)
    specs = []
    for fraction in (b for b in exp.budgets if budgets is None or b in budgets):
        for arm in exp.arms:
            probe_cfg = arm_config(base, arm.overrides, steps=budget, seed=0, out_dir=Path("x"))
            cost = (train_flops_per_step(probe_cfg)
                    if probe_cfg.objective.procedure != "two-stage" else ref_flops)
            scale = ref_flops / cost if exp.equal == "flops" else 1.0
            steps = max(4, round(fraction * budget * scale))
            for seed in range(seeds):
                cfg = arm_config(base, arm.overrides, steps=steps, seed=seed, out_dir=Path("x"))
                spec = RunSpec(arm.label, seed, fraction, cfg)
                cfg.train.out_dir = str(run_dir(Path(out) / "runs", spec))
                specs.append(spec)
    return specs


def shard_of(specs: list[RunSpec], k: int, n: int) -> list[RunSpec]:
    """The k-th (1-based) of n shares, dealt seed by seed so that every share gets a mix of arms
    (the arms' costs differ) and the first seeds finish first."""
    order = sorted(range(len(specs)), key=lambda i: (specs[i].seed, i))
    return [specs[i] for j, i in enumerate(order) if j % n == k - 1]


def run_dir(runs: Path, spec: RunSpec) -> Path:
    """``runs/<spec.name>``, or the same run (config, seed, length) under another arm's name:
    ``generator-size``'s 1/4 arm finds ``efficiency``'s ELECTRA runs."""
    own = runs / spec.name
    if own.is_dir():
        return own
    same = sorted(p for p in runs.glob(f"*-{spec.content}") if p.is_dir())
    return same[0] if same else own


def flops_check(specs: list[RunSpec]) -> dict[str, dict]:
    """Each arm's FLOPs formula against ``FlopCounterMode`` on one step of a 2-row batch."""
    checks = {}
    for spec in specs:
        if spec.arm in checks:
            continue
        cfg = RunConfig.from_dict(spec.cfg.to_dict())
        cfg.train.batch_size, cfg.train.grad_accum = 2, 1
        two_stage = cfg.objective.procedure == "two-stage"
        formula = (train_flops_per_step(cfg) if not two_stage
                   else train_flops_per_step(cfg, stage=2))
        counted = counted_flops(cfg, step=cfg.train.max_steps - 1 if two_stage else 0)
        checks[spec.arm] = {"formula": formula, "counted": counted, "ratio": counted / formula}
    return checks


def skipped_judges(judge: Judge, present: list[str]) -> list[str]:
    """The judges that cannot run here, each with why: what the report then says it skipped."""
    why = "no GLUE task's files: MINIELECTRA_DATA_DIR unset or without glue/" if not present else ""
    swap_why = "off" if "sst2" in present else "no SST-2 sentences"
    return [what for what, on in (
        (f"linear probes ({why or 'no --probe-tasks'})", judge.probe_tasks),
        (f"fine-tuning ({why or 'no --finetune-tasks'})", judge.finetune_tasks),
        (f"the English word-order probe ({swap_why})", judge.swap_examples)) if not on]


def run_experiment(name: str, *, budget: int | None = None, seeds: int = 1,
                   preset: str = "nano", corpus: str | None = None,
                   out: str | Path = "experiments", overrides: Sequence[str] = (),
                   probe_tasks: Sequence[str] | None = None,
                   finetune_tasks: Sequence[str] | None = None, probe_examples: int = 4000,
                   finetune_examples: int = 2000, finetune_overrides: Sequence[str] = (),
                   swap_examples: int = 2000, budgets: Sequence[float] | None = None,
                   shard: tuple[int, int] | None = None, progress: bool = True
                   ) -> dict[str, Any]:
    """Run (or resume) experiment ``name`` and write its report to ``out/name/`` (the options:
    :class:`.options.PaperOptions`). ``shard=(k, n)``: only the k-th of n shares of the runs,
    and no report: n such processes fill the cores, then the command without it reports."""
    if shard is not None and not (len(shard) == 2 and 1 <= shard[0] <= shard[1]):
        raise ValueError(f"--shard K/N needs 1 <= K <= N, got {'/'.join(map(str, shard))}")
    get_experiment(name)  # an unknown name fails before any work
    present = tasks_present()
    probe_tasks = list(probe_tasks) if probe_tasks is not None else present
    if finetune_tasks is None:
        finetune_tasks = [t for t in ("sst2",) if t in present]
    # The English word-order probe needs SST-2's sentences (any data dir with GLUE has them).
    judge = Judge(tuple(probe_tasks), tuple(finetune_tasks), probe_examples, finetune_examples,
                  tuple(finetune_overrides),
                  swap_examples=swap_examples if "sst2" in present else 0)
    skipped = skipped_judges(judge, present)
    budget = budget or preset_config(preset).train.max_steps
    specs = plan(name, budget=budget, seeds=seeds, preset=preset, corpus=corpus, out=out,
                 overrides=overrides, budgets=budgets)
    if shard is not None:
        specs = shard_of(specs, *shard)
    parts = [corpus] if corpus is None or Path(corpus).exists() else corpus.split("+")
    # shared by the experiments and by shards running at once: claimed, not locked (each run's
    # folder inside is locked by its pretrain)
    with output_folder(out, EXPERIMENT_OUT, files=["runs/"] + ([f"{name}/"] if shard is None
                                                               else []),
                       inputs=[("--corpus", part) for part in parts], lock=False):
        if skipped and progress:
            print(f"experiment {name}: not judged: {'; '.join(skipped)}", file=sys.stderr)
        with contextlib.redirect_stdout(sys.stderr):  # stdout: the JSON the CLI prints
            if shard is not None:
                for spec in specs:
                    if progress:
                        print(f"[{name} shard {shard[0]}/{shard[1]}] {spec.arm}, seed "
                              f"{spec.seed} ({spec.steps} steps) -> {spec.cfg.train.out_dir}",
                              flush=True)
                    execute(spec, judge, progress=progress)
                return {"experiment": name, "shard": f"{shard[0]}/{shard[1]}",
                        "runs": len(specs), "out": str(out),
                        "next": "the same command without --shard writes the report"}
            return _run(name, specs, judge, out=Path(out), progress=progress,
                        setup={"preset": preset, "corpus": corpus, "budget": budget,
                               "seeds": seeds, "overrides": list(overrides),
                               "skipped": skipped})


def _run(name: str, specs: list[RunSpec], judge: Judge, *, out: Path, progress: bool,
         setup: dict) -> dict[str, Any]:
    exp = get_experiment(name)
    results, start = [], time.perf_counter()
    for i, spec in enumerate(specs, 1):
        if progress:
            print(f"[{name} {i}/{len(specs)}] {spec.arm}, seed {spec.seed}, budget "
                  f"{spec.budget:g} ({spec.steps} steps) -> {spec.cfg.train.out_dir}", flush=True)
        # a run shared with another plan keeps its own record; its arm and budget are this plan's
        r = {**execute(spec, judge, progress=progress), "arm": spec.arm, "budget": spec.budget}
        results.append(r)
        if progress:
            probe = "n/a" if r["probe_avg"] is None else f"{r['probe_avg']:.2f}"
            print(f"    probe avg {probe}  fine-tune {r['finetune_avg']}  "
                  f"train {r['train_seconds']:.0f} s  ({time.perf_counter() - start:.0f} s so far)",
                  flush=True)
    controls = [random_init(results[0], judge, seed=s, out=out / "runs")
                for s in sorted({s.seed for s in specs})]
    setup = {**setup, "judge": judge.__dict__, "flops_check": flops_check(specs)}
    report = write_report(exp, results, controls, out=out / name, setup=setup)
    if progress:
        print(report["markdown"])
    return {"experiment": name, "out": str(out / name), "runs": len(results),
            "files": report["files"], "summary": json.loads(json.dumps(report["summary"]))}
