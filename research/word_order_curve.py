"""When does pre-training beat random init on English? The word-order probe along long runs.

``minielectra experiment efficiency`` and friends judge short runs; at CPU budgets of a few minutes
every arm, random init included, probes alike. This script follows whole runs instead: for every
kept checkpoint (``train.keep_every=1``) of each run given, the English word-order probe
(:mod:`minielectra.experiments.swap_probe`: held-out SST-2 sentences, every other one with two
neighbouring words swapped, a ridge probe on the frozen encoder) at ``--probe-seeds`` seeds (which
sentences are swapped, and where), next to random init of the same shape at ``--random-seeds``
seeds; optionally the GLUE probe average (:mod:`minielectra.experiments.probe`) at a few
checkpoints. Training FLOPs per step are counted from each run's config
(:mod:`minielectra.objectives.flops`), so runs with different objectives compare at equal compute.

    minielectra pretrain --preset mini --out runs/electra --max-steps 25000 \\
        --set model.generator_size=0.25 --set train.keep_every=1 --set train.save_every=1000 \\
        --set train.eval_every=1000 --set train.max_minutes=90
    minielectra pretrain ... --out runs/mlm --set objective.name=mlm ...
    python research/word_order_curve.py --run "ELECTRA, generator 1/4=runs/electra" \\
        --run "MLM=runs/mlm" --glue-every 4000 --out results/word_order

Prints one JSON document and writes it (``results.json``), a table (``results.md``),
``word_order_vs_flops.svg`` and, for ELECTRA runs, ``auc_vs_step.svg`` (the held-out AUC at
every evaluation in ``metrics.jsonl``) to ``--out``. Run again with the same ``--out``, it
measures only what that ``results.json`` lacks (checkpoints kept since, another run, other
settings).
"""

from __future__ import annotations

import minielectra  # noqa: F401  (first: its import sets OMP_WAIT_POLICY before torch loads)

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

from minielectra.safeio import write_file


def swap_scores(model, seeds: int, max_seq_len: int) -> list[float]:
    from minielectra.experiments.swap_probe import swap_probe
    return [swap_probe(model.discriminator.encoder, model.tokenizer, max_seq_len=max_seq_len,
                       seed=s)["score"] for s in range(seeds)]


def glue_average(model, max_seq_len: int) -> float:
    from minielectra.experiments.probe import probe, tasks_present
    scores = probe(model.discriminator.encoder, model.tokenizer, tasks_present(),
                   max_train_examples=2000, max_seq_len=max_seq_len)
    return sum(p["score"] for p in scores.values()) / len(scores)


def heldout_by_step(run: Path) -> dict[int, dict]:
    """The run's held-out evaluations (``metrics.jsonl``) by step, without their clock."""
    evals = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        entry = json.loads(line) if line.strip() else {}
        if entry.get("kind") == "eval":
            evals[entry["step"]] = {k: v for k, v in entry.items()
                                    if k in ("disc_auc", "gen_accuracy", "mlm_accuracy")}
    return evals


def summary(scores: list[float]) -> dict:
    return {"mean": statistics.fmean(scores),
            "sd": statistics.stdev(scores) if len(scores) > 1 else 0.0, "per_seed": scores}


def measure_run(label: str, run: Path, *, probe_seeds: int, glue_every: int,
                max_seq_len: int, done: dict[int, dict]) -> list[dict]:
    """``done``: this run's points of an earlier report, by step (reused, not re-measured)."""
    from minielectra.config import RunConfig
    from minielectra.training.checkpoints import checkpoint_minutes
    from minielectra.model.electra import Electra
    from minielectra.objectives.flops import train_flops_per_step
    per_step = train_flops_per_step(RunConfig.load(run / "config.json"))
    checkpoints = sorted((c for c in (run / "checkpoints").iterdir()
                          if re.fullmatch(r"step_\d+", c.name)), key=lambda c: c.name)
    if not checkpoints:
        raise SystemExit(f"{run}/checkpoints holds no step_K checkpoint")
    points, heldout = [], heldout_by_step(run)  # read once, not once per checkpoint
    for i, ckpt in enumerate(checkpoints):
        step = int(ckpt.name.split("_")[1])
        wants_glue = bool(glue_every) and (step % glue_every == 0 or i == len(checkpoints) - 1)
        if step in done and wants_glue <= ("glue_probe_avg" in done[step]):
            points.append(done[step])
            continue
        model = Electra.from_pretrained(str(ckpt))
        point = {"run": label, "step": step, "train_flops": step * per_step,
                 "minutes": checkpoint_minutes(str(ckpt)), "heldout": heldout.get(step, {}),
                 "swap": summary(swap_scores(model, probe_seeds, max_seq_len))}
        if wants_glue:
            point["glue_probe_avg"] = glue_average(model, max_seq_len)
        print(f"[word-order] {label} step {step}: {point['swap']['mean']:.1f}", file=sys.stderr,
              flush=True)
        points.append(point)
    return points


def random_init(run: Path, *, seeds: int, probe_seeds: int, glue: bool,
                max_seq_len: int) -> dict:
    """Random init of the first run's shape and tokenizer, one model per seed."""
    from transfer import random_twin
    from minielectra.model.electra import Electra
    first = sorted((run / "checkpoints").iterdir())[0]
    model = Electra.from_pretrained(str(first))
    swaps, glues = [], []
    for seed in range(seeds):
        twin = random_twin(model, seed)
        swaps.append(statistics.fmean(swap_scores(twin, probe_seeds, max_seq_len)))
        if glue:
            glues.append(glue_average(twin, max_seq_len))
    return {"swap": summary(swaps), "glue_probe_avg": summary(glues) if glues else None}


def earlier_report(out: Path | None, *, probe_seeds: int, max_seq_len: int) -> dict:
    """What ``out/results.json`` already measured the same way: points by (label, run dir) and
    step, and the random-init control by its first run, seeds and GLUE flag. A run that has kept
    more checkpoints since is measured at those only."""
    old = json.loads((out / "results.json").read_text()) if out and (
        out / "results.json").is_file() else None
    if old is None or (old["probe_seeds"], old["max_seq_len"]) != (probe_seeds, max_seq_len):
        return {}
    found: dict = {}
    for p in old["points"]:
        found.setdefault((p["run"], old["runs"][p["run"]]), {})[p["step"]] = p
    control = old["random_init"]
    first = next(iter(old["runs"].values()))
    found[("random init", first, len(control["swap"]["per_seed"]),
           control["glue_probe_avg"] is not None)] = control
    return found


def figure(points: list[dict], control: dict) -> str:
    from minielectra.experiments.svg import line_chart
    series = []
    for label in dict.fromkeys(p["run"] for p in points):
        mine = [p for p in points if p["run"] == label]
        series.append({"name": label, "x": [p["train_flops"] for p in mine],
                       "y": [p["swap"]["mean"] for p in mine],
                       "err": [p["swap"]["sd"] for p in mine]})
    mean = control["swap"]["mean"]
    return line_chart(series, title="English word-order probe along pre-training",
                      xlabel="training FLOPs", ylabel="probe accuracy (%)",
                      hline=(f"random init {mean:.1f}", mean))


def auc_curves(runs: list[tuple[str, Path]]) -> dict[str, list[list[float]]]:
    """Every held-out evaluation of each ELECTRA run (``metrics.jsonl``): ``[[step, AUC], ...]``
    by label; an MLM run (no discriminator) has none and is left out."""
    curves = {}
    for label, run in runs:
        points = [[step, e["disc_auc"]] for step, e in sorted(heldout_by_step(run).items())
                  if "disc_auc" in e]
        if points:
            curves[label] = points
    return curves


def auc_figure(curves: dict[str, list[list[float]]]) -> str:
    from minielectra.experiments.svg import line_chart
    series = [{"name": label, "x": [s for s, _ in pts], "y": [a for _, a in pts],
               "err": [0.0] * len(pts)} for label, pts in curves.items()]
    return line_chart(series, title="Held-out discriminator ROC-AUC along pre-training",
                      xlabel="step", ylabel="held-out ROC-AUC", hline=("chance 0.5", 0.5))


def markdown(result: dict) -> str:
    """One row per scored checkpoint, then random init."""
    control = result["random_init"]
    lines = ["| run | step | training FLOPs | minutes | held-out | word-order probe (%) | "
             "GLUE probe avg |", "|---|---|---|---|---|---|---|"]
    for p in result["points"]:
        held = p["heldout"]
        held = (f"AUC {held['disc_auc']:.3f}" if "disc_auc" in held else
                f"MLM acc {held['mlm_accuracy']:.3f}" if "mlm_accuracy" in held else "")
        minutes = "" if p["minutes"] is None else f"{p['minutes']:.1f}"
        glue = f"{p['glue_probe_avg']:.1f}" if "glue_probe_avg" in p else ""
        lines.append(f"| {p['run']} | {p['step']} | {p['train_flops']:.2e} | {minutes} | {held} | "
                     f"{p['swap']['mean']:.1f} ± {p['swap']['sd']:.1f} | {glue} |")
    glue = control["glue_probe_avg"]
    lines.append(f"| random init ({len(control['swap']['per_seed'])} seeds) | 0 | 0 | | | "
                 f"{control['swap']['mean']:.1f} ± {control['swap']['sd']:.1f} | "
                 + (f"{glue['mean']:.1f} ± {glue['sd']:.1f} |" if glue else "|"))
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", required=True, metavar="LABEL=DIR",
                        help="a pre-training run directory with kept step_K checkpoints")
    parser.add_argument("--probe-seeds", type=int, default=3)
    parser.add_argument("--random-seeds", type=int, default=5)
    parser.add_argument("--glue-every", type=int, default=0,
                        help="GLUE probe average at steps divisible by this, and at the last "
                             "checkpoint (0: off)")
    parser.add_argument("--max-seq-len", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    import torch
    torch.set_num_threads(args.threads)
    runs = []
    for item in args.run:
        label, sep, where = item.rpartition("=")
        if not sep or not label:
            raise SystemExit(f"--run {item!r}: expected LABEL=DIR")
        if not (Path(where) / "config.json").is_file():
            raise SystemExit(f"--run {item!r}: {where}/config.json not found (a run directory?)")
        runs.append((label, Path(where)))
    start = time.perf_counter()
    earlier = earlier_report(args.out, probe_seeds=args.probe_seeds, max_seq_len=args.max_seq_len)
    points = [p for label, run in runs
              for p in measure_run(label, run, probe_seeds=args.probe_seeds,
                                   glue_every=args.glue_every, max_seq_len=args.max_seq_len,
                                   done=earlier.get((label, str(run)), {}))]
    control = earlier.get(("random init", str(runs[0][1]), args.random_seeds,
                           bool(args.glue_every)))
    if control is None:
        control = random_init(runs[0][1], seeds=args.random_seeds,
                              probe_seeds=args.probe_seeds, glue=bool(args.glue_every),
                              max_seq_len=args.max_seq_len)
    curves = auc_curves(runs)
    result = {"runs": {label: str(run) for label, run in runs}, "points": points,
              "heldout_auc": curves, "random_init": control, "probe_seeds": args.probe_seeds,
              "max_seq_len": args.max_seq_len, "seconds": round(time.perf_counter() - start, 1)}
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        write_file(args.out / "results.json", text + "\n")
        write_file(args.out / "word_order_vs_flops.svg", figure(points, control))
        write_file(args.out / "results.md", markdown(result))
        if curves:
            write_file(args.out / "auc_vs_step.svg", auc_figure(curves))
    print(text)


if __name__ == "__main__":
    main()
