"""GLUE: the nine tasks, their data and their metrics, as the ELECTRA paper measured them.

The paper (Clark et al. 2020, section 3.1 and appendix Table 7) reports the GLUE *dev* sets:
Matthews correlation for CoLA, Spearman correlation for STS-B and accuracy for everything else;
the "GLUE score" is the mean over the eight tasks without WNLI. The official fine-tuning code
(google-research/electra ``finetune/classification/classification_tasks.py``) reads the original
GLUE TSV files; we read the same files, or the same data from the Hugging Face hub
(``nyu-mll/glue``), and give both the hub's label ids so that a model trained on one source can be
scored on the other.

Data comes from, in this order:

1. ``data_dir`` (an argument) or the ``MINIELECTRA_DATA_DIR`` environment variable:
   ``<dir>/glue/<TASK>/{train,dev}.tsv[.gz]`` (MNLI: ``dev_matched.tsv``), in the GLUE TSV format;
2. otherwise the hub, through ``datasets.load_dataset("nyu-mll/glue", <config>, split=...)``.

The metrics are written out in numpy (no scipy or scikit-learn at run time); the tests check them
against scipy and scikit-learn.
"""

from __future__ import annotations

import csv
import gzip
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# --------------------------------------------------------------------------------------- tasks


@dataclass(frozen=True)
class Task:
    """One GLUE task: where its text lives in the TSV and on the hub, and how it is scored."""

    name: str  # our name and the hub config: "sst2"
    display: str  # the paper's column header: "SST-2"
    folder: str  # the GLUE folder name: "SST-2"
    text_cols: tuple[int, ...]  # TSV columns of sentence A (and B)
    label_col: int  # TSV column of the label (negative counts from the end)
    hub_fields: tuple[str, ...]  # hub column names of sentence A (and B)
    # Label names in the hub's id order; the TSV labels in the same order. None: regression.
    label_names: tuple[str, ...] | None
    tsv_labels: tuple[str, ...] | None
    metrics: tuple[str, ...]  # the first is the paper's metric
    epochs: int = 3  # paper Table 7: 3, but 10 for RTE and STS-B
    swap_augment: bool = False  # official code doubles MRPC and STS-B with A and B swapped
    header: bool = True  # CoLA's TSV has none
    dev_file: str = "dev"
    hub_dev_split: str = "validation"

    @property
    def is_regression(self) -> bool:
        return self.label_names is None

    @property
    def num_labels(self) -> int:
        return 1 if self.label_names is None else len(self.label_names)

    @property
    def metric(self) -> str:
        return self.metrics[0]

    @property
    def is_pair(self) -> bool:
        """Sentence pairs (MRPC, STS-B, the NLI tasks) rather than single sentences."""
        return len(self.hub_fields) == 2


_BINARY = ("0", "1")
_NLI = ("entailment", "not_entailment")

TASKS: dict[str, Task] = {t.name: t for t in (
    Task("cola", "CoLA", "CoLA", (3,), 1, ("sentence",), ("unacceptable", "acceptable"), _BINARY,
         ("matthews_corr",), header=False),
    Task("sst2", "SST-2", "SST-2", (0,), 1, ("sentence",), ("negative", "positive"), _BINARY,
         ("accuracy",)),
    Task("mrpc", "MRPC", "MRPC", (3, 4), 0, ("sentence1", "sentence2"),
         ("not_equivalent", "equivalent"), _BINARY, ("accuracy", "f1"), swap_augment=True),
    Task("stsb", "STS-B", "STS-B", (7, 8), -1, ("sentence1", "sentence2"), None, None,
         ("spearman", "pearson"), epochs=10, swap_augment=True),
    Task("qqp", "QQP", "QQP", (3, 4), 5, ("question1", "question2"),
         ("not_duplicate", "duplicate"), _BINARY, ("accuracy", "f1")),
    Task("mnli", "MNLI", "MNLI", (8, 9), -1, ("premise", "hypothesis"),
         ("entailment", "neutral", "contradiction"), ("entailment", "neutral", "contradiction"),
         ("accuracy",), dev_file="dev_matched", hub_dev_split="validation_matched"),
    Task("qnli", "QNLI", "QNLI", (1, 2), -1, ("question", "sentence"), _NLI, _NLI, ("accuracy",)),
    Task("rte", "RTE", "RTE", (1, 2), -1, ("sentence1", "sentence2"), _NLI, _NLI, ("accuracy",),
         epochs=10),
    Task("wnli", "WNLI", "WNLI", (1, 2), -1, ("sentence1", "sentence2"),
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


# ---------------------------------------------------------------------------------------- data


@dataclass
class Example:
    text_a: str
    text_b: str | None
    label: int | float  # class id in the hub's order, or the raw STS-B score in [0, 5]


class GlueDataError(FileNotFoundError):
    """A task's data could not be found (locally) or fetched (from the hub)."""


def resolve_data_dir(data_dir: str | Path | None = None) -> Path | None:
    """``data_dir`` if given, else ``$MINIELECTRA_DATA_DIR``, else None (= use the hub)."""
    if data_dir is None:
        data_dir = os.environ.get("MINIELECTRA_DATA_DIR") or None
    return None if data_dir is None else Path(data_dir)


def read_tsv(path: str | Path) -> list[list[str]]:
    """Rows of a GLUE TSV file (plain or gzipped). ``QUOTE_NONE``: GLUE text holds stray quotes
    that Python's default quoting would use to merge rows; ``utf-8-sig`` drops MRPC's BOM."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8-sig", newline="") as f:
        return list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def _find_file(folder: Path, stem: str) -> Path | None:
    for name in (f"{stem}.tsv", f"{stem}.tsv.gz"):
        if (folder / name).is_file():
            return folder / name
    return None


def _parse_row(task: Task, row: list[str]) -> Example:
    texts = [row[c].strip() for c in task.text_cols]
    raw = row[task.label_col].strip()
    label = float(raw) if task.is_regression else task.tsv_labels.index(raw)
    return Example(texts[0], texts[1] if len(texts) > 1 else None, label)


def load_tsv_split(task: Task, split: str, data_dir: Path) -> list[Example]:
    """``split`` ("train" or "dev") of ``task`` from ``<data_dir>/glue/<TASK>/``."""
    folder = Path(data_dir) / "glue" / task.folder
    stem = task.dev_file if split == "dev" else split
    path = _find_file(folder, stem)
    if path is None:
        raise GlueDataError(
            f"GLUE {task.display} {split} data not found: looked for {folder / (stem + '.tsv')} "
            f"and {folder / (stem + '.tsv.gz')} (data dir {data_dir}, from the data_dir argument "
            "or MINIELECTRA_DATA_DIR; unset both to download nyu-mll/glue from the hub)")
    rows = read_tsv(path)[1 if task.header else 0:]
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
        rows = [r for r in rows if len(r) >= need]
    return [_parse_row(task, r) for r in rows]


def load_hub_split(task: Task, split: str) -> list[Example]:
    """``split`` of ``task`` from the Hugging Face hub (``nyu-mll/glue``)."""
    import datasets  # imported here: the offline path must not need it

    hub_split = task.hub_dev_split if split == "dev" else split
    try:
        ds = datasets.load_dataset("nyu-mll/glue", task.name, split=hub_split)
    except Exception as e:  # network, auth or cache errors all mean the same thing to a user
        raise GlueDataError(
            f"could not load GLUE {task.display} {split} from the hub (nyu-mll/glue, config "
            f"{task.name!r}, split {hub_split!r}): {e}. Offline, set MINIELECTRA_DATA_DIR to a "
            f"folder with glue/{task.folder}/{split if split == 'train' else task.dev_file}.tsv"
        ) from e
    fields = task.hub_fields
    out = []
    for row in ds:
        label = float(row["label"]) if task.is_regression else int(row["label"])
        out.append(Example(row[fields[0]], row[fields[1]] if len(fields) > 1 else None, label))
    return out


def load_split(task: Task | str, split: str, *, data_dir: str | Path | None = None,
               max_examples: int | None = None, seed: int = 0) -> list[Example]:
    """Examples of ``split`` ("train" or "dev"): local files if a data dir is set, else the hub.

    ``max_examples`` keeps a random subset of that size (chosen by ``seed``, kept in file order)
    so that CPU runs can use a fixed slice of a large training set.
    """
    task = get_task(task) if isinstance(task, str) else task
    if split not in ("train", "dev"):
        raise ValueError(f"split must be 'train' or 'dev', got {split!r}")
    root = resolve_data_dir(data_dir)
    examples = load_hub_split(task, split) if root is None else load_tsv_split(task, split, root)
    return subset(examples, max_examples, seed=seed)


def subset(examples: list[Example], max_examples: int | None, *, seed: int = 0) -> list[Example]:
    """A random subset of ``max_examples`` (chosen by ``seed``) kept in file order; all of
    ``examples`` when there are no more than that."""
    if max_examples is None or max_examples >= len(examples):
        return examples
    keep = np.random.default_rng(seed).choice(len(examples), max_examples, replace=False)
    return [examples[i] for i in sorted(keep)]


def swap_segments(examples: list[Example]) -> list[Example]:
    """The official MRPC/STS-B augmentation: the data once as is, once with A and B swapped."""
    return examples + [Example(e.text_b, e.text_a, e.label) for e in examples if e.text_b]


# ------------------------------------------------------------------------------------- metrics
# Plain numpy versions of the usual definitions; tests compare them with scikit-learn and scipy.


def accuracy(preds, labels) -> float:
    preds, labels = np.asarray(preds), np.asarray(labels)
    return float(np.mean(preds == labels))


def f1_score(preds, labels, *, positive: int = 1) -> float:
    """Binary F1 of class ``positive``; 0 when there is no true or predicted positive."""
    preds, labels = np.asarray(preds) == positive, np.asarray(labels) == positive
    tp = np.sum(preds & labels)
    denom = 2 * tp + np.sum(preds & ~labels) + np.sum(~preds & labels)
    return float(2 * tp / denom) if denom else 0.0


def matthews_corr(preds, labels) -> float:
    """Matthews correlation (the multi-class form of Gorodkin 2004, equal to the binary phi
    coefficient for two classes); 0 when either side is constant, as scikit-learn does."""
    preds, labels = np.asarray(preds), np.asarray(labels)
    classes, idx = np.unique(np.concatenate([labels, preds]), return_inverse=True)
    k, n = len(classes), len(labels)
    confusion = np.zeros((k, k), dtype=np.float64)
    np.add.at(confusion, (idx[:n], idx[n:]), 1)
    t, p = confusion.sum(1), confusion.sum(0)  # true and predicted count per class
    c, s = np.trace(confusion), float(n)
    cov_tp, cov_pp, cov_tt = c * s - t @ p, s * s - p @ p, s * s - t @ t
    return float(cov_tp / np.sqrt(cov_tt * cov_pp)) if cov_tt * cov_pp > 0 else 0.0


def pearson(x, y) -> float:
    """Pearson correlation; 0 when either side is constant (e.g. a collapsed regressor)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    x, y = x - x.mean(), y - y.mean()
    denom = np.sqrt((x @ x) * (y @ y))
    return float(x @ y / denom) if denom > 0 else 0.0


def rankdata(x) -> np.ndarray:
    """Ranks from 1, ties sharing their average rank (scipy's ``rankdata(method='average')``)."""
    x = np.asarray(x)
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    # Each run of equal values gets the mean of the ranks it spans: (first + last) / 2.
    starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])
    ends = np.r_[starts[1:], len(x)]
    ranks = np.empty(len(x), dtype=np.float64)
    for s, e in zip(starts, ends):
        ranks[order[s:e]] = (s + 1 + e) / 2
    return ranks


def spearman(x, y) -> float:
    return pearson(rankdata(x), rankdata(y))


METRICS = {"accuracy": accuracy, "f1": f1_score, "matthews_corr": matthews_corr,
           "pearson": pearson, "spearman": spearman}

# The paper's words for the metrics (section 3.1: "Spearman correlation for STS, Matthews
# correlation for CoLA, and accuracy for the other GLUE tasks"): the ``metric`` of the JSON.
METRIC_NAMES = {"matthews_corr": "Matthews correlation", "spearman": "Spearman correlation",
                "accuracy": "accuracy", "f1": "F1", "pearson": "Pearson correlation"}


def compute_metrics(task: Task | str, predictions, labels) -> dict[str, float]:
    """Every metric of ``task``, in percent (GLUE's convention: 100 x the value)."""
    task = get_task(task) if isinstance(task, str) else task
    return {m: 100.0 * METRICS[m](predictions, labels) for m in task.metrics}


# -------------------------------------------------------------------------------- GLUE table


def glue_average(scores: dict[str, float]) -> tuple[float | None, list[str]]:
    """The mean over the 8 GLUE-score tasks among ``scores`` (never WNLI), and those tasks.

    It is the paper's "GLUE score" only when all 8 are there; fewer make a partial average.
    """
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
    """The paper's Table 1/8 layout as Markdown: ``(markdown, average, partial)``.

    ``results`` maps task -> a ``finetune`` result (``score``, ``scores``, ``train_subset``...),
    ``missing`` task -> why its data is absent. Cells: the score, ``†`` when trained on a subset,
    ``n/a`` for absent data, ``–`` for a task not run; the GLUE column gets ``*`` when partial.
    """
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
