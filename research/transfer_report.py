"""The transfer experiment's report (:mod:`.transfer`): JSON, a Markdown table, an SVG curve.

Per row and training-set size: the median dev accuracy of each arm, the *paired* gains
(pre-trained minus random init, seed by seed) with their median, range and the number of seeds
the pre-trained arm won, and each arm's median final training loss (how far it fitted the
training set). The figure plots the median gain against pre-training minutes, one line per size
and pre-training recipe (its points: the ``--pretrain-steps`` budgets).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, Sequence

from minielectra.experiments import svg
from minielectra.safeio import write_file


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def size_summary(runs: list[dict], size: int) -> dict[str, Any]:
    """One row's numbers at one training-set size; gains are paired by seed."""
    arms = {arm: {r["seed"]: r for r in runs if r["arm"] == arm and r["size"] == size}
            for arm in ("pretrained", "random")}
    seeds = sorted(set(arms["pretrained"]) & set(arms["random"]))
    gains = [arms["pretrained"][s]["score"] - arms["random"][s]["score"] for s in seeds]
    out = {"size": size, "seeds": seeds, "gains": [round(g, 2) for g in gains],
           "median_gain": _median(gains), "min_gain": min(gains, default=None),
           "max_gain": max(gains, default=None), "wins": sum(g > 0 for g in gains)}
    for arm, by_seed in arms.items():
        out[arm] = _median([by_seed[s]["score"] for s in seeds])
        out[f"{arm}_loss"] = _median([by_seed[s]["final_train_loss"] for s in seeds])
        out[f"{arm}_seconds"] = _median([by_seed[s]["seconds"] for s in seeds])
    out["gain_sd"] = statistics.stdev(gains) if len(gains) > 1 else 0.0
    return out


def summarise(measured: list[dict], sizes: Sequence[int]) -> list[dict]:
    return [{k: m[k] for k in ("name", "label", "pretrain", "finetune", "pretrain_steps",
                               "checkpoint", "disc_auc", "minutes", "effective_rank")}
            | {"sizes": [size_summary(m["runs"], n) for n in sizes]} for m in measured]


def _num(v, fmt: str = ".1f", sign: bool = False) -> str:
    if v is None:
        return "-"
    return format(v, ("+" if sign else "") + fmt)


def short_name(checkpoint: str) -> str:
    """``bundled``, ``RUN/step_K`` for a run's kept checkpoint, else the directory's name."""
    path = Path(str(checkpoint))
    if path.name.startswith("step_") and path.parent.name == "checkpoints":
        return f"{path.parent.parent.name}/{path.name}"
    return path.name or str(checkpoint)


def markdown(summary: list[dict], setup: dict) -> str:
    sizes = setup["sizes"]
    head = ["row", "pre-training", "AUC", "minutes", "eff. rank (random)"]
    for n in sizes:
        head += [f"n={n}: pre-trained / random", f"n={n}: gain (range, wins)"]
    lines = [f"# Transfer: fine-tuning gain over random init ({setup['task']})", "",
             f"Median dev accuracy per arm over the fine-tuning seeds measured (up to "
             f"{setup['seeds']}; wins/seeds in the gain column); gains paired by seed. "
             "Pre-training rows: one pre-training run (seed 0) each.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in summary:
        steps = (f"{row['pretrain_steps']} steps" if row["pretrain_steps"]
                 else short_name(row["checkpoint"]))
        rank = row["effective_rank"]
        cells = [row["label"], steps, _num(row["disc_auc"], ".3f"), _num(row["minutes"]),
                 f"{rank['pretrained']:.0f} ({rank['random_init']:.0f}) of {rank['dims']}"]
        for s in row["sizes"]:
            if not s["seeds"]:  # not measured at this size
                cells += ["-", "-"]
                continue
            cells.append(f"{_num(s['pretrained'])} / {_num(s['random'])}")
            cells.append(f"**{_num(s['median_gain'], sign=True)}** "
                         f"({_num(s['min_gain'], sign=True)}..{_num(s['max_gain'], sign=True)}, "
                         f"{s['wins']}/{len(s['seeds'])})")
        lines.append("| " + " | ".join(cells) + " |")
    recipes = {r["name"]: " ".join(r["finetune"]) or "none" for r in summary}  # once per row
    lines += ["", "Fine-tuning overrides per row: " + "; ".join(
        f"{name}: {recipe}" for name, recipe in recipes.items()), ""]
    return "\n".join(lines)


def _source(row: dict) -> str:
    """Which line of the curve a row's point is on: a pre-training row's budgets are one line;
    a fine-tuning row's checkpoints one line per run (a run's kept ``step_K`` checkpoints)."""
    if row["pretrain_steps"]:
        return ""
    return short_name(row["checkpoint"]).split("/")[0]


def curve(summary: list[dict], sizes: Sequence[int]) -> str:
    """Median gain vs pre-training minutes: one line per pre-training recipe (and run, for a
    fine-tuning row's checkpoints) and size."""
    series = []
    # one recipe for every line (the checkpoints of runs): it goes in the title, not each name
    labels = {row["label"] for row in summary if row["minutes"] is not None}
    one = len(labels) == 1 and all(_source(row) for row in summary)
    for n in sizes:
        groups: dict[tuple[str, str], list] = {}
        for row in summary:
            if row["minutes"] is None:
                continue
            s = next(x for x in row["sizes"] if x["size"] == n)
            if s["median_gain"] is not None:
                groups.setdefault((row["label"], _source(row)), []).append((row["minutes"], s))
        for (label, source), points in groups.items():
            points.sort(key=lambda p: p[0])
            name = (f"{source[:24]} n={n}" if one
                    else f"{label[:18]}{' ' + source[:16] if source else ''} n={n}")
            series.append({"name": name, "x": [p[0] for p in points],
                           "y": [p[1]["median_gain"] for p in points],
                           "err": [p[1]["gain_sd"] for p in points]})
    if not series:
        return ""
    title = "Fine-tuning gain over random init" + (f" ({labels.pop()})" if one else "")
    return svg.line_chart(series, title=title,
                          xlabel="pre-training minutes (this machine)",
                          ylabel="median paired gain (points; bars: sd)", hline=("no gain", 0.0))


def write_report(summary: list[dict], measured: list[dict], *, setup: dict,
                 out: Path) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    files = [out / "results.json", out / "results.md"]
    write_file(files[0], json.dumps({"setup": setup, "summary": summary, "rows": measured},
                                    indent=2, default=str) + "\n")
    write_file(files[1], markdown(summary, setup))
    figure = curve(summary, setup["sizes"])
    if figure:
        files.append(out / "gain_vs_minutes.svg")
        write_file(files[-1], figure)
    return {"files": [str(f) for f in files], "summary": summary}
