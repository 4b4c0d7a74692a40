"""The GLUE results table in the paper's layout, and the GLUE average (paper section 3.1).

The "GLUE score" is the mean over the eight tasks without WNLI; fewer tasks make a partial average.
"""

from __future__ import annotations

import numpy as np

from .data import GLUE_TASKS, get_task


def glue_average(scores: dict[str, float]) -> tuple[float | None, list[str]]:
    """The mean over the 8 GLUE-score tasks among ``scores`` (never WNLI), and those tasks: the
    paper's "GLUE score" only when all 8 are there; fewer make a partial average."""
    used = [t for t in GLUE_TASKS if t in scores]
    return (float(np.mean([scores[t] for t in used])) if used else None), used


def _cell(task: str, results: dict[str, dict], missing: dict[str, str]) -> str:
    if task in missing:
        return "n/a"
    if task not in results:
        return "–"
    r = results[task]
    return f"{r['score']:.1f}" + ("†" if r.get("train_subset") else "")


def _footnotes(results: dict[str, dict], missing: dict[str, str], used: list[str]) -> list[str]:
    runs = sorted({len(r["scores"]) for r in results.values()})
    lines = ["- GLUE dev sets: Matthews correlation (CoLA), Spearman correlation (STS-B), accuracy "
             f"(others); median of {'/'.join(map(str, runs)) or '0'} run(s) per task. "
             "GLUE = mean of the 8 tasks without WNLI."]
    if len(used) < len(GLUE_TASKS):
        absent = ", ".join(get_task(t).display for t in GLUE_TASKS if t not in used)
        lines.append(f"- \\* partial: mean of the {len(used)} of 8 GLUE tasks that ran (without "
                     f"{absent}), not a GLUE score.")
    subsets = [f"{get_task(t).display} {r['train_examples']} of {r['train_examples_available']}"
               for t, r in results.items() if r.get("train_subset")]
    if subsets:
        lines.append("- † trained on a random subset of the training set: " + ", ".join(subsets)
                     + " examples; not comparable with the paper.")
    lines += [f"- n/a {get_task(t).display}: data absent: {why}" for t, why in missing.items()]
    lines.append("- –: not run.")
    return lines


def format_table(results: dict[str, dict], *, name: str = "model",
                 missing: dict[str, str] | None = None) -> tuple[str, float | None, bool]:
    """The paper's Table 1/8 layout as Markdown: ``(markdown, average, partial)``. ``results``
    maps task -> a ``finetune`` result, ``missing`` task -> why its data is absent. Cells: the
    score, ``†`` when trained on a subset, ``n/a`` for absent data, ``–`` for a task not run; the
    GLUE column gets ``*`` when partial."""
    missing = missing or {}
    extra = [t for t in list(results) + list(missing) if t not in GLUE_TASKS]
    columns = list(GLUE_TASKS) + list(dict.fromkeys(extra))
    average, used = glue_average({t: r["score"] for t, r in results.items()})
    partial = len(used) < len(GLUE_TASKS)
    avg = "–" if average is None else f"{average:.1f}" + ("*" if partial else "")
    head = [get_task(t).display for t in columns] + ["GLUE"]
    cells = [_cell(t, results, missing) for t in columns] + [avg]
    lines = ["| model | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|",
             f"| {name} | " + " | ".join(cells) + " |", ""]
    return "\n".join(lines + _footnotes(results, missing, used)) + "\n", average, partial
