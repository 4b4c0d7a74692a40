"""Several GLUE tasks in one go, and the table in the paper's layout (``minielectra glue``).

The pre-trained checkpoint is loaded once for every task. ``--out DIR`` is written as
``finetune --out`` is (:mod:`..output`): locked, and replaced as a whole once every task, model
and the summary are written, so the summary always describes what is on disk.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from . import data as glue, table
from ...ownership import Layout
from ...safeio import read_json, write_file
from ...config import FinetuneConfig, finetune_config
from ...training.device import resolve_device
from ...training.opening import checkpoint_path, open_checkpoint
from ...outputs import output_folder
from ..train import finetune_loaded, check_counts

# glue.json, glue.md and a folder per task (its result.json, with --save-models its model)
GLUE_OUT = Layout("glue", ("glue.json", "glue.md", *glue.TASKS),
                  lambda folder: "tasks" in read_json(folder / "glue.json"))


def run_glue(checkpoint, tasks: Sequence[str] | None = None, *, seeds: int = 1, seed: int = 0,
             out: str | Path | None = None, overrides: Sequence[str] = (),
             data_dir: str | Path | None = None, max_train_examples: int | None = None,
             progress: bool = True, save_models: bool = False, skip_missing: bool = True,
             name: str | None = None, on_start=None) -> dict[str, Any]:
    """Fine-tune on several tasks (default: the 8 of the GLUE score) and tabulate them. A task
    whose data is absent is skipped and listed (``skip_missing``), so an offline data dir without
    MNLI/QQP still yields the other columns (a partial average). With ``out``: ``glue.json``,
    ``glue.md`` and a folder per task: its ``result.json`` (and, ``save_models``, its model).
    ``on_start()`` runs once the first task's data is read."""
    if save_models and out is None:
        raise ValueError("save_models needs out: the folder the fine-tuned models go to")
    check_counts(seeds, max_train_examples)
    names = [glue.get_task(t).name for t in (tasks or glue.GLUE_TASKS)]
    twice = next((t for t in names if names.count(t) > 1), None)
    if twice is not None:  # run twice, one result kept: refused rather than half shown
        raise ValueError(f"--tasks names {twice} twice")
    cfg = finetune_config(overrides)
    resolve_device(cfg)  # a device or precision this machine lacks: refused before any work
    inputs = {"--checkpoint": checkpoint_path(checkpoint)}
    pretrained, path = open_checkpoint(checkpoint)  # once for all tasks
    source = None if path is None else str(path)
    with output_folder(out, GLUE_OUT, inputs=inputs, replace=True, what="glue") as folder:
        summary = _run_tasks(pretrained, source, names, cfg, out=folder, seeds=seeds, seed=seed,
                             data_dir=data_dir, max_train_examples=max_train_examples,
                             progress=progress, save_models=save_models,
                             skip_missing=skip_missing, on_start=on_start,
                             label=name or (Path(str(checkpoint)).name if source else "model"))
        if folder is not None:
            write_file(folder / "glue.json", json.dumps(summary, indent=2) + "\n")
            write_file(folder / "glue.md", summary["table"])
    return summary


def _run_tasks(pretrained, source, names: list[str], cfg: FinetuneConfig, *, out: Path | None,
               seeds: int, seed: int, data_dir, max_train_examples, progress: bool,
               save_models: bool, skip_missing: bool, label: str,
               on_start=None) -> dict[str, Any]:
    """Fine-tune and score each task (into ``out/TASK``), then the summary and its table."""
    results, missing = {}, {}
    for t in names:
        try:
            results[t] = finetune_loaded(
                pretrained, source, glue.get_task(t), cfg, seed=seed, seeds=seeds,
                data_dir=data_dir, max_train_examples=max_train_examples, progress=progress,
                save_model=save_models, keep_all_models=False,
                out=None if out is None else out / t, on_start=on_start)
            on_start = None  # said once, by the first task that has its data
        except glue.GlueDataError as e:
            if not skip_missing:
                raise
            missing[t] = str(e)
    if not results:  # nothing to tabulate: say why once, rather than print a table of n/a
        raise glue.GlueDataError(f"no GLUE task has its data here; {next(iter(missing.values()))}")
    # The row is named as the user named the checkpoint: the run, not its step_N directory.
    markdown, average, partial = table.format_table(results, name=label, missing=missing)
    return {"checkpoint": source, "tasks_requested": names,
            "glue_score": None if partial else average, "glue_average": average,
            "glue_partial": partial,
            "glue_average_over": [t for t in glue.GLUE_TASKS if t in results],
            "scores": {t: r["score"] for t, r in results.items()}, "missing": missing,
            "not_run": [t for t in glue.GLUE_TASKS if t not in names],
            "table": markdown, "tasks": results}
