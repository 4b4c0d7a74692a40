"""``minielectra finetune``: one task, whichever kind it is, fine-tuned and scored.

A GLUE task (:mod:`.glue`), SQuAD (:mod:`.squad`), a hub dataset or your own files
(:mod:`.owndata`); your own data gets its own recipe (:data:`OWN_DATA_RECIPE`) unless ``--set``
says otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

from ..overrides import override_keys
from ..outputs import output_folder
from ..config import finetune_config
from ..training.device import resolve_device
from ..training.opening import checkpoint_path, open_checkpoint
from .glue.data import get_task
from .output import FINETUNED
from .owndata.data import Columns, UserTask, task_from_files, task_from_hub
from .squad.train import TASKS as SQUAD_TASKS, finetune_squad
from .task import Task
from .train import finetune_loaded, check_counts


# The recipe for your own data (files or a hub dataset), each setting unless --set gives it: the
# best of three recipes by the GLUE-style suite's five-task average on a validation split carved
# from the training sets (docs/results/suite.md; the paper's 3 epochs, 10 epochs, 10 epochs with
# the top layer re-initialised), by a lead within the noise: a default, not a measured best. GLUE
# tasks keep the paper's recipe, as the paper ran them.
OWN_DATA_RECIPE = ("finetune.epochs=10",)
OWN_DATA_NOTE = "10 epochs"


def own_data_overrides(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """``overrides`` after the own-data recipe's settings they do not give, and those added."""
    given = override_keys(overrides)
    added = [o for o in OWN_DATA_RECIPE if o.split("=", 1)[0] not in given]
    return [*added, *overrides], added


def resolve_task(task: str | Task | None = None, *, train=None, dev=None,
                 columns: Columns = Columns(), regression: bool | None = None) -> Task:
    """A GLUE task by name, a hub dataset (``"hf:<name>[:<config>]"``), a :class:`Task`, or a
    user's training and dev files (:mod:`.owndata`)."""
    if train is not None or dev is not None:
        if train is None or dev is None or task is not None:
            raise ValueError("give --train FILE and --dev FILE together, without --task")
        return task_from_files(train, dev, columns=columns, regression=regression)
    if task is None:
        raise ValueError("give --task (a GLUE task, or hf:<name>[:<config>]) or --train FILE "
                         "--dev FILE")
    if isinstance(task, Task):
        return task
    if task.startswith("hf:"):
        return task_from_hub(task, columns=columns, regression=regression)
    if columns != Columns() or regression is not None:
        raise ValueError("--text-column, --label-column and --regression are for your own data "
                         "(--train/--dev or --task hf:...), not for a GLUE task")
    return get_task(task)


def finetune(checkpoint, task: str | Task | None = None, *, out: str | Path | None = None,
             seed: int = 0, seeds: int = 1, overrides: Sequence[str] = (),
             data_dir: str | Path | None = None, max_train_examples: int | None = None,
             progress: bool = True, save_model: bool = True, keep_all_models: bool = False,
             train: str | Path | None = None, dev: str | Path | None = None,
             columns: Columns = Columns(), regression: bool | None = None,
             on_start=None) -> dict[str, Any]:
    """Fine-tune ``checkpoint`` (an :class:`Electra` in memory or anything
    :func:`~minielectra.training.opening.resolve_checkpoint` takes) on one task
    (:func:`resolve_task`) ``seeds`` times, seeds ``seed``, ``seed + 1``, ...; the median run on
    the dev set is the result (the paper's protocol). With ``out``: ``result.json`` and the median
    run's model (``keep_all_models``: every run's too, in ``seed-N/``). ``on_start()`` runs
    once the data is read and ``out`` is held."""
    check_counts(seeds, max_train_examples)
    # an output that is, holds or lies in what the run reads would replace or mix with it
    inputs = {"--checkpoint": checkpoint_path(checkpoint), "--train": train, "--dev": dev}
    if isinstance(task, str) and task in SQUAD_TASKS:  # question answering (.squad.train)
        if seeds != 1 or columns != Columns() or regression is not None:
            raise ValueError(f"--task {task} takes one --seed, and no --seeds, columns or "
                             "--regression")
        with output_folder(out, FINETUNED, inputs=inputs, replace=True,
                           what="fine-tuning") as folder:  # locked; replaced when all is written
            return finetune_squad(checkpoint, task, out=folder, seed=seed, overrides=overrides,
                                  train=train, dev=dev, data_dir=data_dir,
                                  max_train_examples=max_train_examples, progress=progress,
                                  save_model=save_model, on_start=on_start)
    cfg = finetune_config(overrides)  # a bad value is refused before the data is read
    resolve_device(cfg)  # and a device or precision this machine lacks
    task = resolve_task(task, train=train, dev=dev, columns=columns, regression=regression)
    added = []
    if isinstance(task, UserTask):
        overrides, added = own_data_overrides(overrides)
        cfg = finetune_config(overrides)
    pretrained, path = open_checkpoint(checkpoint)
    source = None if path is None else str(path)
    def start():  # once the inputs and --out are good: a refusal stays one line
        if on_start is not None:
            on_start()
        if added and progress:
            print(f"finetune {task.display}: the recipe for your own data, {OWN_DATA_NOTE} "
                  "(the best of three on the GLUE-style suite's validation split; "
                  "--set finetune.epochs=N to change it)", file=sys.stderr)
    with output_folder(out, FINETUNED, inputs=inputs, replace=True,
                       what="fine-tuning") as folder:  # locked; replaced when all is written
        return finetune_loaded(pretrained, source, task, cfg, out=folder, seed=seed, seeds=seeds,
                         data_dir=data_dir, max_train_examples=max_train_examples,
                         progress=progress, save_model=save_model,
                         keep_all_models=keep_all_models, on_start=start)
