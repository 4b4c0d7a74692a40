"""GLUE: the nine tasks and their data, as the ELECTRA paper measured them (section 3.1, Table 7).

The paper reports the GLUE *dev* sets. We read the original GLUE TSV files, as the official code
(``finetune/classification/classification_tasks.py``) does, from ``<data dir>/glue/<TASK>/``
(the ``data_dir`` argument or ``MINIELECTRA_DATA_DIR``); without a data dir, the same data from
the hub (``nyu-mll/glue``). Labels get the hub's ids either way, so that a model trained on one
source can be scored on the other. The metrics: :mod:`..metrics`; the table: :mod:`.table`.
"""

from __future__ import annotations

import csv
import io
import warnings
from pathlib import Path

from ...data.corpus import find_data_dir
from ...data.hub import hub_unreachable
from ..task import Example, Task, read_text, subset


_BINARY = ("0", "1")
_NLI = ("entailment", "not_entailment")

class GlueTask(Task):
    """A GLUE task: its examples are the data directory's TSV files, or the hub's."""

    def examples(self, split: str, *, data_dir: str | Path | None = None) -> list[Example]:
        return load_split(self, split, data_dir=data_dir)


TASKS: dict[str, Task] = {t.name: t for t in (
    GlueTask("cola", "CoLA", "CoLA", (3,), 1, ("sentence",), ("unacceptable", "acceptable"),
             _BINARY, ("matthews_corr",), header=False),
    GlueTask("sst2", "SST-2", "SST-2", (0,), 1, ("sentence",), ("negative", "positive"),
             _BINARY, ("accuracy",)),
    GlueTask("mrpc", "MRPC", "MRPC", (3, 4), 0, ("sentence1", "sentence2"),
             ("not_equivalent", "equivalent"), _BINARY, ("accuracy", "f1"), swap_augment=True),
    GlueTask("stsb", "STS-B", "STS-B", (7, 8), -1, ("sentence1", "sentence2"), None, None,
             ("spearman", "pearson"), epochs=10, swap_augment=True),
    GlueTask("qqp", "QQP", "QQP", (3, 4), 5, ("question1", "question2"),
             ("not_duplicate", "duplicate"), _BINARY, ("accuracy", "f1")),
    GlueTask("mnli", "MNLI", "MNLI", (8, 9), -1, ("premise", "hypothesis"),
             ("entailment", "neutral", "contradiction"), ("entailment", "neutral", "contradiction"),
             ("accuracy",), dev_file="dev_matched", hub_dev_split="validation_matched"),
    GlueTask("qnli", "QNLI", "QNLI", (1, 2), -1, ("question", "sentence"), _NLI, _NLI,
             ("accuracy",)),
    GlueTask("rte", "RTE", "RTE", (1, 2), -1, ("sentence1", "sentence2"), _NLI, _NLI,
             ("accuracy",), epochs=10),
    GlueTask("wnli", "WNLI", "WNLI", (1, 2), -1, ("sentence1", "sentence2"),
             ("not_entailment", "entailment"), _BINARY, ("accuracy",)),
)}

# The paper's table order; the GLUE score averages these eight (WNLI is left out, as in BERT).
GLUE_TASKS: tuple[str, ...] = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte")

_ALIASES = {"sst-2": "sst2", "sts-b": "stsb", "mnli-m": "mnli", "mnli_matched": "mnli"}


def get_task(name: str) -> Task:
    """Look a task up by our name, the GLUE folder name or the paper's header (case-insensitive)."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in TASKS:
        raise KeyError(f"unknown GLUE task {name!r}; valid: {sorted(TASKS)}")
    return TASKS[key]


class GlueDataError(FileNotFoundError):
    """A task's data could not be found (locally) or fetched (from the hub)."""


def _parse_row(task: Task, row: list[str], where: str) -> Example:
    """One data row; ``where`` ("FILE: line N") names it when its label is not the task's."""
    texts = [row[c].strip() for c in task.text_cols]
    raw = row[task.label_col].strip()
    column = task.label_col % len(row) + 1
    if task.is_regression:
        try:
            label = float(raw)
        except ValueError:
            raise ValueError(f"{where}, column {column}: {task.display} label {raw!r} is not a "
                             "number") from None
    elif raw in task.tsv_labels:
        label = task.tsv_labels.index(raw)
    else:
        raise ValueError(f"{where}, column {column}: {task.display} label {raw!r} is not one of "
                         f"{list(task.tsv_labels)}")
    return Example(texts[0], texts[1] if len(texts) > 1 else None, label)


def load_tsv_split(task: Task, split: str, data_dir: Path) -> list[Example]:
    """``split`` ("train" or "dev") of ``task`` from ``<data_dir>/glue/<TASK>/``."""
    folder = Path(data_dir) / "glue" / task.folder
    stem = task.dev_file if split == "dev" else split
    path = next((p for p in (folder / f"{stem}.tsv", folder / f"{stem}.tsv.gz") if p.is_file()),
                None)
    if path is None:
        raise GlueDataError(
            f"GLUE {task.display} {split} data not found: looked for {folder / (stem + '.tsv')} "
            f"and {folder / (stem + '.tsv.gz')} (data dir {data_dir}, from the data_dir argument "
            "or MINIELECTRA_DATA_DIR; unset both to download nyu-mll/glue from the hub)")
    first = 1 if task.header else 0
    # QUOTE_NONE: GLUE text holds stray quotes that the default quoting would use to merge rows
    rows = list(csv.reader(io.StringIO(read_text(path), newline=""), delimiter="\t",
                           quoting=csv.QUOTE_NONE))[first:]
    # A label counted from the end (label_col < 0) comes after the texts: at least one more column.
    need = max(max(task.text_cols) + (2 if task.label_col < 0 else 1), task.label_col + 1)
    bad = [i for i, r in enumerate(rows) if len(r) < need]
    # A few broken lines occur in real GLUE files (QQP train; transformers' processors skip them
    # too); more than 0.1% means this is not a GLUE TSV file at all.
    if len(bad) > 0.001 * len(rows):
        raise ValueError(f"{path}: {len(bad)} of {len(rows)} rows have fewer than {need} "
                         f"columns (first: data row {bad[0]}); is this a GLUE TSV file?")
    if bad:
        warnings.warn(f"{path}: skipped {len(bad)} row(s) with fewer than {need} columns "
                      f"(data rows {bad[:5]}{'...' if len(bad) > 5 else ''})", stacklevel=2)
    return [_parse_row(task, r, f"{path}: line {i + first + 1}")
            for i, r in enumerate(rows) if len(r) >= need]


def load_hub_split(task: Task, split: str) -> list[Example]:
    """``split`` of ``task`` from the Hugging Face hub (``nyu-mll/glue``)."""
    offline = hub_unreachable()  # offline: the datasets cache only, and at once
    import datasets  # imported here: the offline path must not need it

    hub_split = task.hub_dev_split if split == "dev" else split
    local = f"glue/{task.folder}/{split if split == 'train' else task.dev_file}.tsv"
    try:
        ds = datasets.load_dataset("nyu-mll/glue", task.name, split=hub_split)
    except Exception as e:  # network, auth or cache errors all mean the same thing to a user
        if offline:
            raise GlueDataError(
                f"GLUE {task.display} {split}: no local copy (no data dir is set, and "
                f"nyu-mll/glue {task.name} is not in the datasets cache) and the Hugging Face hub "
                f"is unreachable ({offline}); set MINIELECTRA_DATA_DIR to a folder with {local}, "
                "or fine-tune on your own files: --train FILE --dev FILE") from None
        raise GlueDataError(
            f"could not load GLUE {task.display} {split} from the hub (nyu-mll/glue, config "
            f"{task.name!r}, split {hub_split!r}): {e}. Offline, set MINIELECTRA_DATA_DIR to a "
            f"folder with {local}") from e
    a, b = (*task.hub_fields, None)[:2]
    kind = float if task.is_regression else int
    return [Example(row[a], None if b is None else row[b], kind(row["label"])) for row in ds]


def load_split(task: Task | str, split: str, *, data_dir: str | Path | None = None,
               max_examples: int | None = None, seed: int = 0) -> list[Example]:
    """Examples of ``split`` ("train" or "dev"): local files if a data dir is set, else the hub;
    ``max_examples``: a random subset (chosen by ``seed``, kept in file order)."""
    task = get_task(task) if isinstance(task, str) else task
    if split not in ("train", "dev"):
        raise ValueError(f"split must be 'train' or 'dev', got {split!r}")
    root = find_data_dir(data_dir)  # None: the hub
    examples = load_hub_split(task, split) if root is None else load_tsv_split(task, split, root)
    return subset(examples, max_examples, seed=seed)


