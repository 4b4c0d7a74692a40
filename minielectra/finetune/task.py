"""A fine-tuning task and its examples: what GLUE, your own data and the classifier share.

A :class:`Task` says how a task is scored and, in its family's subclass, where its examples come
from (:meth:`Task.examples`): GLUE's nine are in :mod:`.glue.data`, a user's files become one in
:mod:`.owndata.data`. The shared fine-tuning code knows a task only through this class.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..data.documents import not_text


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
    # Regression targets are trained as (label - shift) / scale: STS-B's 0-5 scores as label / 5
    # (the official code); a user's numbers standardised by their training mean and spread.
    label_shift: float = 0.0
    label_scale: float = 5.0

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

    def examples(self, split: str, *, data_dir: str | Path | None = None) -> list[Example]:
        """The examples of ``split`` ("train" or "dev"), from where the task's family keeps them
        (GLUE's files or the hub, a user's files); a task rebuilt for ``predict`` has none."""
        raise ValueError(f"task {self.name!r} carries no {split} examples: it describes a "
                         "fine-tuned model's labels, not a data set")


@dataclass
class Example:
    text_a: str
    text_b: str | None
    label: int | float  # class id in the hub's order, or the raw STS-B score in [0, 5]


def read_text(path: str | Path) -> str:
    """The text of a (gzipped) UTF-8 file, its BOM dropped. A binary file or bytes that are not
    UTF-8 are refused naming the file, the line and the column (what a user needs to fix it)."""
    path = Path(path)
    data = path.read_bytes()
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise ValueError(f"{path}: not a readable gzip file ({e})") from None
    why = not_text(data[:8192])
    if why is not None:
        raise ValueError(f"{path}: {why}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise ValueError(f"{path}: line {line}, column {column}: byte 0x{data[e.start]:02x} is "
                         "not UTF-8 text (save the file as UTF-8)") from None


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
