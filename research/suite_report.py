"""The suite's report (:mod:`suite`): per arm and recipe, each task's score and the average;
gains over random init and ELECTRA against MLM, paired by seed; the bag-of-words floor.

Scores are means over fine-tuning seeds (each seed's average is the mean of its five task
scores); a gain is paired seed by seed (the same training subset, data order and head
initialisation in both arms), with its sd, the seeds won and the paired t-test's p. Writes
``RESULTS/results.json`` and ``RESULTS/results.md``.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

from minielectra.experiments.stats import noise_phrase, paired_by_unit, paired_t
from minielectra.finetune.glue.data import get_task
from minielectra.safeio import write_file

from suite_spec import EXTRA, FEW, PROTOCOL, RECIPES, SUITE

GROUPS = {"suite": SUITE, "few": FEW}


def load_runs(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((out / "runs").glob("*.json"))]


def by_seed(runs: list[dict]) -> dict:
    """(arm, recipe) -> (task, size) -> seed -> run."""
    table: dict = defaultdict(lambda: defaultdict(dict))
    for r in runs:
        table[(r["arm"], r["recipe"])][(r["task"], r["size"])][r["seed"]] = r
    return table


def group_average(cells: dict, tasks, seeds=None) -> dict[int, float]:
    """Seed -> the mean of the group's task scores, for seeds that ran every task."""
    have = [set(cells.get(t, {})) for t in tasks]
    common = set.intersection(*have) if have else set()
    if seeds is not None:
        common &= set(seeds)
    return {s: statistics.fmean(cells[t][s]["score"] for t in tasks) for s in sorted(common)}


def paired(a: dict[int, float], b: dict[int, float]) -> dict | None:
    seeds = sorted(set(a) & set(b))
    if not seeds:
        return None
    diffs = [a[s] - b[s] for s in seeds]
    test = paired_t(diffs) if len(diffs) > 1 else {"mean": diffs[0], "sd": float("nan"),
                                                     "p": float("nan")}
    return {"seeds": seeds, "diffs": [round(d, 2) for d in diffs], "mean": test["mean"],
            "sd": test["sd"], "p": test["p"], "wins": sum(d > 0 for d in diffs)}


def summarise(runs: list[dict], floor: list[dict]) -> dict:
    cells = by_seed(runs)
    random = {recipe: cells[(arm, recipe)] for arm, recipe in cells
              if any(r["random"] for t in cells[(arm, recipe)].values() for r in t.values())}
    rows = []
    for (arm, recipe), tasks in sorted(cells.items(), key=lambda kv: (kv[0][1] != "reinit-1",
                                                                        kv[0][0])):
        # a seed that has not run every task of the suite yet stays out of the task columns too,
        # so that a row's task scores and its average are over the same seeds
        complete = set(group_average(tasks, SUITE))
        kept = {tn: {k: v for k, v in seeds.items() if not complete or k in complete
                     or tn not in SUITE} for tn, seeds in tasks.items()}
        row = {"arm": arm, "recipe": recipe,
               "random": any(r["random"] for t in tasks.values() for r in t.values()),
               "tasks": {f"{t}@{n}": {"mean": statistics.fmean(s["score"] for s in seeds.values()),
                                      "scores": {k: round(v["score"], 2) for k, v in seeds.items()},
                                      "best_epoch_gap": statistics.fmean(
                                          max(v["epoch_scores"]) - v["score"]
                                          for v in seeds.values())}
                         for (t, n), seeds in kept.items() if seeds}}
        base = random.get(recipe) or random.get("reinit-1")
        for name, group in GROUPS.items():
            avg = group_average(tasks, group)
            row[name] = {"mean": statistics.fmean(avg.values()) if avg else None,
                         "by_seed": {s: round(v, 2) for s, v in avg.items()}}
            if not row["random"] and base is not None:
                row[name]["gain"] = paired(avg, group_average(base, group))
        rows.append(row)
    return {"rows": rows, "floor": floor, **derived(rows, floor)}


def by_pretraining_seed(averages: dict[str, dict], pairs: dict[int, tuple[str, str]]) -> dict | None:
    """Arm A minus arm B on the suite average (``averages``: arm -> fine-tuning seed -> average),
    at the unit of the claim: a claim about a pre-training choice has as many pairs as
    pre-training seeds k (``pairs``: k -> (A, B)). The fine-tuning seeds' differences are
    averaged inside each k (:func:`~minielectra.experiments.stats.paired_by_unit`)."""
    inner = {}
    for k, (a, b) in pairs.items():
        if a in averages and b in averages:
            pair = paired(averages[a], averages[b])
            if pair:
                inner[k] = pair
    if not inner:
        return None
    test = paired_by_unit({k: p["diffs"] for k, p in inner.items()})
    return {"by_pretraining_seed": inner, "mean": test["mean"], "sd": test["sd"],
            "p": test["p"], "p_flip": test["p_flip"], "wins": test["wins"], "n": test["n"],
            "pairs_won": sum(d > 0 for p in inner.values() for d in p["diffs"]),
            "pairs": sum(len(p["diffs"]) for p in inner.values())}


def _electra(k: int, variant: str = "") -> str:
    """The ELECTRA arm of pre-training seed k: bundled is seed 0 at length 32; ``variant``
    ``len128`` pre-trained at length 128, ``2len`` at 32 and the last tenth at 128."""
    if variant:
        return f"electra-{variant}" if k == 0 else f"electra-{variant}-s{k}"
    return "bundled" if k == 0 else f"electra-s{k}"


def _finish_at_32(k: int) -> str:
    """The length-32 run that shares the two-length run's first 13,500 steps: ``electra-sK``, or
    for seed 0 ``electra-s0r``, a rerun from scratch (the bundled run was trained eagerly, the
    rerun compiled: their rounding differs, and by step 13,000 so do their weights)."""
    return "electra-s0r" if k == 0 else _electra(k)


# key -> (what is compared, which side "ahead" names, (A, B) of pre-training seed k)
COMPARISONS = {
    "electra_vs_mlm": ("ELECTRA − MLM", "ELECTRA", lambda k: (_electra(k), f"mlm-s{k}")),
    "len128_vs_len32": ("ELECTRA at length 128 − length 32", "length 128",
                        lambda k: (_electra(k, "len128"), _electra(k))),
    "2len_vs_len32": ("ELECTRA at two lengths (32, the last tenth 128) − length 32",
                      "two lengths", lambda k: (_electra(k, "2len"), _finish_at_32(k))),
    "2len_vs_len128": ("ELECTRA at two lengths − length 128", "two lengths",
                       lambda k: (_electra(k, "2len"), _electra(k, "len128"))),
}


def floor_average(floor: list[dict]) -> dict:
    """The floor's mean over each group's tasks (None: a task missing)."""
    score = {(f["task"], f["size"]): f["score"] for f in floor}
    return {name: statistics.fmean(score[k] for k in group)
            if all(k in score for k in group) else None for name, group in GROUPS.items()}


def derived(rows: list[dict], floor: list[dict]) -> dict:
    """What the results file computes from its rows and floor: the floor's averages and the
    pre-training comparisons."""
    return {"floor_average": floor_average(floor), **comparisons(rows)}


def comparisons(rows: list[dict]) -> dict:
    """Each of :data:`COMPARISONS` at equal pre-training FLOPs, paired by pre-training seed (None:
    no pair), from the rows' suite averages by fine-tuning seed (what the results file keeps)."""
    averages = {r["arm"]: {int(s): v for s, v in r["suite"]["by_seed"].items()}
                for r in rows if r["recipe"] == "reinit-1"}
    return {key: by_pretraining_seed(averages, {k: pair(k) for k in range(10)})
            for key, (_, _, pair) in COMPARISONS.items()}


def _fmt(x, digits=1):
    return "" if x is None else f"{x:.{digits}f}"


def _gain(g: dict | None) -> str:
    if not g:
        return ""
    sd = "" if g["sd"] != g["sd"] else f" ± {g['sd']:.1f}"
    p = "" if g["p"] != g["p"] else f", p {g['p']:.2g}"
    return f"{g['mean']:+.1f}{sd}{p} ({g['wins']} of {len(g['seeds'])})"


def markdown(summary: dict) -> str:
    cols = [f"{t}@{n}" for t, n in SUITE]
    head = [get_task(t).display + ("" if n is None else f" {n:,}") for t, n in SUITE]
    lines = ["| arm | recipe | " + " | ".join(head) + " | average | − random init, paired "
             "| few (≤2,000 each) | − random init | SST-2 2,000 | SST-2 all |",
             "|---" * (len(head) + 8) + "|"]
    for row in summary["rows"]:
        t = row["tasks"]
        extra = [_fmt(t.get(f"{task}@{n}", {}).get("mean")) for task, n in EXTRA]
        lines.append(f"| {row['arm']} | {row['recipe']} | " +
                     " | ".join(_fmt(t.get(c, {}).get("mean")) for c in cols) +
                     f" | **{_fmt(row['suite']['mean'])}** | {_gain(row['suite'].get('gain'))} "
                     f"| {_fmt(row['few']['mean'])} | {_gain(row['few'].get('gain'))} | " +
                     " | ".join(extra) + " |")
    floor = {(f["task"], f["size"]): f["score"] for f in summary["floor"]}
    if floor:
        suite = [floor.get(k) for k in SUITE]
        few = [floor.get(k) for k in FEW]
        avg = statistics.fmean(suite) if None not in suite else None
        favg = statistics.fmean(few) if None not in few else None
        lines.append("| TF-IDF + linear (floor) | | " + " | ".join(_fmt(x) for x in suite) +
                     f" | **{_fmt(avg)}** | | {_fmt(favg)} | | " +
                     " | ".join(_fmt(floor.get(k)) for k in EXTRA) + " |")
    lines += ["", "Recipes: " + "; ".join(f"`{k}` = {', '.join(v) or 'the paper’s'}"
                                          for k, v in RECIPES.items()) +
              f"; every run {', '.join(PROTOCOL)}."]
    for key, (what, ahead, _) in COMPARISONS.items():
        d = summary.get(key)
        if d:
            sd = "" if d["sd"] != d["sd"] else f" ± {d['sd']:.1f}"
            each = "; ".join(f"seed {k}: {p['mean']:+.1f} ({', '.join(f'{x:+.1f}' for x in p['diffs'])})"
                             for k, p in d["by_pretraining_seed"].items())
            lines.append(f"\n{what} on the suite average, paired by pre-training seed: "
                         f"{d['mean']:+.1f}{sd}, {noise_phrase(d)}; {ahead} ahead with "
                         f"{d['wins']} of {d['n']} pre-training seeds, in {d['pairs_won']} of "
                         f"{d['pairs']} fine-tuning runs (by pre-training seed, the mean of its "
                         f"fine-tuning seeds: {each}).")
    return "\n".join(lines) + "\n"


def restate(results: Path) -> dict:
    """Recompute the comparisons and ``results.md`` from a results file's own rows (the suite
    averages by fine-tuning seed), without the per-run records: ``results.json`` and
    ``results.md`` come out byte for byte as committed when nothing changed."""
    summary = json.loads((results / "results.json").read_text())
    summary = {"rows": summary["rows"], "floor": summary["floor"],
               **derived(summary["rows"], summary["floor"])}
    write_file(results / "results.json", json.dumps(summary, indent=1) + "\n")
    write_file(results / "results.md", markdown(summary))
    return {"files": [str(results / "results.json"), str(results / "results.md")]}


def write_report(out: Path, results: Path) -> dict:
    floor_file = out / "floor.json"
    floor = json.loads(floor_file.read_text()) if floor_file.is_file() else []
    summary = summarise(load_runs(out), floor)
    results.mkdir(parents=True, exist_ok=True)
    write_file(results / "results.json", json.dumps(summary, indent=1) + "\n")
    write_file(results / "results.md", markdown(summary))
    return {"rows": [(r["arm"], r["recipe"], r["suite"]["mean"]) for r in summary["rows"]],
            "files": [str(results / "results.json"), str(results / "results.md")]}
