"""The ``laptop`` preset, measured: its discriminator at both of its lengths, its learning curve,
and the suite (:mod:`suite`) beside the bundled checkpoint and the bag-of-words floor.

    minielectra pretrain --preset laptop --out RUN --seed K          # OMP_NUM_THREADS=1 here
    python research/suite.py run --arm laptop-sK=RUN --seeds 1 --split validation --out VAL
    python research/suite.py run --arm bundled=bundled --seeds 1 --split validation --out VAL
    python research/suite.py floor --split validation --out VAL
    python research/suite.py run --arm laptop-sK=RUN --seeds 1 --out DEV
    python research/laptop.py collect --run RUN --validation VAL --dev DEV   # the records
    python research/laptop.py report                                         # results.json

BERT's masked-language model at equal pre-training FLOPs is the same preset with
``objective.name=mlm`` and the steps that ``python research/laptop.py mlm-steps`` computes
(:mod:`minielectra.objectives.flops`: an MLM step skips the generator, so it takes more of them),
its suite arm named ``laptop-mlm-sK``; ``collect`` takes its run the same way.

The rule stated before the measurement, on the suite's average (the validation split chooses,
the dev sets report): the laptop checkpoint replaces the bundled one when, in every pre-training
seed, it is above the bag-of-words floor and above the bundled checkpoint on the validation
split, and its discriminator reaches held-out AUC 0.80 and recall 0.25 at P = 0.5 at its own
final length. ``collect`` copies what the runs left into ``research/results/laptop/records/``
(the run's evaluations and the suite's per-run files); ``report`` computes ``results.json`` (and
``auc_vs_step.svg``) from them alone, so a test regenerates it byte for byte.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from suite_spec import SUITE, suite_averages  # noqa: E402

from minielectra.experiments.stats import paired_by_unit  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "research" / "results" / "laptop"
RECORDS = OUT / "records"
AIM = {"disc_auc": 0.80, "disc_recall": 0.25}
KEYS = ("disc_auc", "disc_auc_text", "disc_recall", "disc_precision", "gen_accuracy")
MLM_KEYS = ("mlm_accuracy",)
# held-out losses, beside the training batches' (the gap: memorising): the held-out record's key
# -> the training record's (an MLM run's training records name its one loss ``loss``)
LOSSES = {"electra": {"gen_loss": "gen_loss", "disc_loss": "disc_loss"},
          "mlm": {"mlm_loss": "loss"}}


def _train_losses(train: list[dict], step: int, config: dict) -> dict:
    """The training batches' mean losses over the last tenth of the evaluation interval that ends
    at ``step`` (the whole interval would reach back to where the losses were higher)."""
    last = config["train"]["eval_every"] // 10
    near = [r for r in train if step - last < r["step"] <= step]
    losses = LOSSES[config["objective"]["name"]]
    return {k: round(statistics.mean(r[t] for r in near), 4) for k, t in losses.items()
            if t in near[0]}


def mlm_steps() -> int:
    """The steps at which the MLM objective spends the ``laptop`` preset's pre-training FLOPs."""
    from minielectra.config import preset
    from minielectra.objectives.flops import run_flops, train_flops_per_step
    from minielectra.overrides import apply_overrides

    mlm = apply_overrides(preset("laptop"), ["objective.name=mlm"])
    return round(run_flops(preset("laptop")) / train_flops_per_step(mlm))


def collect(run: Path, validation: Path, dev: Path | None) -> None:
    """The run's evaluations (and its final checkpoint scored at both lengths) and the suite's
    per-run files, as records."""
    from minielectra.config import RunConfig
    from minielectra.objectives.flops import run_flops
    from minielectra.training.evaluate import evaluate

    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    config = json.loads((run / "config.json").read_text())
    objective = config["objective"]["name"]
    keys = KEYS if objective == "electra" else MLM_KEYS
    d = config["data"]
    final = {n: {k: round(v, 4) for k, v in evaluate(run, max_seq_len=n).items() if k in keys}
             for n in (d["max_seq_len"], d["long_seq_len"])}
    train = [r for r in records if r["kind"] == "train"]
    pretraining = {"seed": config["train"]["seed"], "objective": objective,
                   "steps": train[-1]["step"],
                   "train_flops": run_flops(RunConfig.load(run / "config.json"), train[-1]["step"]),
                   "seconds": round(train[-1]["elapsed_s"]), "threads": 1,
                   "lengths": [d["max_seq_len"], d["long_seq_len"]],
                   "eval": [{"step": r["step"], "max_seq_len": r["max_seq_len"],
                             **{k: round(r[k], 4) for k in (*keys, *LOSSES[objective])
                                if k in r},
                             "train": _train_losses(train, r["step"], config)}
                            for r in records if r["kind"] == "eval"],
                   "final": {str(n): v for n, v in final.items()}}
    name = "" if objective == "electra" else f"{objective}-"
    RECORDS.mkdir(parents=True, exist_ok=True)
    (RECORDS / f"pretraining-{name}s{pretraining['seed']}.json").write_text(
        json.dumps(pretraining, indent=1) + "\n")
    for split, folder in (("validation", validation), ("dev", dev)):
        if folder is None:
            continue
        target = RECORDS / split
        target.mkdir(exist_ok=True)
        for p in sorted((folder / "runs").glob("*.json")):
            if json.loads(p.read_text())["recipe"] == "reinit-1":  # the suite's recipe
                shutil.copyfile(p, target / p.name)
        if (folder / "floor.json").is_file():
            shutil.copyfile(folder / "floor.json", target / "floor.json")


def at_last_rate(p: dict) -> dict | None:
    """How far the aim's AUC is at the final length, if the AUC kept rising at the rate of the
    last evaluation interval (a bound from below: curves flatten): the steps, and the minutes at
    the run's own mean step time."""
    long = [e for e in p["eval"] if e["max_seq_len"] == p["lengths"][-1]]
    if len(long) < 2:
        return None
    a, b = long[-2:]
    rate = (b["disc_auc"] - a["disc_auc"]) / (b["step"] - a["step"])
    steps = (AIM["disc_auc"] - b["disc_auc"]) / rate if rate > 0 else float("inf")
    return {"auc_per_1000_steps": round(1000 * rate, 4), "steps": round(steps, -2),
            "minutes": round(steps * p["seconds"] / p["steps"] / 60)}


def curve_svg(pre: list[dict]) -> str:
    """The discriminator's held-out AUC against step, each seed at each of its lengths (the
    final checkpoint scored at the short length too), with the aim: the curve that says whether
    more steps would reach it."""
    from minielectra.experiments import svg

    series = []
    for p in pre:
        short, long = p["lengths"]
        for n in (short, long):
            points = [(e["step"], e["disc_auc"]) for e in p["eval"] if e["max_seq_len"] == n]
            if n == short:  # the final checkpoint at the short length, after the long steps
                points.append((p["steps"], p["final"][str(n)]["disc_auc"]))
            series.append({"name": f"seed {p['seed']}, {n} tokens", "x": [x for x, _ in points],
                           "y": [y for _, y in points], "err": [0.0] * len(points)})
    return svg.line_chart(series, title="laptop preset: held-out discriminator AUC",
                          xlabel="pre-training step", ylabel="held-out AUC",
                          hline=(f"aim {AIM['disc_auc']:.2f}", AIM["disc_auc"]))


def report() -> dict:
    """``results.json`` from the records alone."""
    pre = [json.loads(p.read_text()) for p in sorted(RECORDS.glob("pretraining-s*.json"))]
    mlm = [json.loads(p.read_text()) for p in sorted(RECORDS.glob("pretraining-mlm-s*.json"))]
    result = {"aim": AIM, "pretraining": pre, **({"mlm_pretraining": mlm} if mlm else {})}
    for split in ("validation", "dev"):
        folder = RECORDS / split
        runs = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))
                if p.name != "floor.json"]
        if not runs:
            continue
        entry = {"arms": suite_averages(runs)}
        arms = entry["arms"]
        seeds = sorted({int(a.rsplit("-s", 1)[1]) for a in arms if a.startswith("laptop-mlm-s")})
        versus = {k: [arms[f"laptop-s{k}"]["average"] - arms[f"laptop-mlm-s{k}"]["average"]]
                  for k in seeds if f"laptop-s{k}" in arms}
        if versus:  # paired by pre-training seed, fine-tuning seeds averaged inside each arm
            entry["electra_vs_mlm"] = paired_by_unit(versus)
        if (folder / "floor.json").is_file():
            floor = json.loads((folder / "floor.json").read_text())
            scores = {r["task"]: r["score"] for r in floor if (r["task"], r["size"]) in SUITE}
            entry["floor"] = {"tasks": {t: round(v, 2) for t, v in scores.items()},
                              "average": round(statistics.mean(scores.values()), 2)}
        result[split] = entry
    for p in pre:
        final = p["final"][str(p["lengths"][-1])]
        p["meets_aim"] = all(final[k] >= v for k, v in AIM.items())
        p["aim_at_last_rate"] = at_last_rate(p)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    if pre:
        (OUT / "auc_vs_step.svg").write_text(curve_svg(pre))
    return result


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="the records, from a run and the suite's folders")
    c.add_argument("--run", type=Path, required=True)
    c.add_argument("--validation", type=Path, required=True)
    c.add_argument("--dev", type=Path)
    sub.add_parser("report", help="results.json from the records")
    sub.add_parser("mlm-steps", help="the MLM arm's steps at the preset's pre-training FLOPs")
    a = ap.parse_args(argv)
    if a.command == "mlm-steps":
        print(mlm_steps())
        return
    if a.command == "collect":
        collect(a.run, a.validation, a.dev)
    print(json.dumps(report(), indent=1))


if __name__ == "__main__":
    main()
