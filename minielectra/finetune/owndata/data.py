"""Your own labelled data for ``minielectra finetune``: CSV, TSV or JSONL files, or a hub dataset.

``finetune --train FILE --dev FILE`` (or ``--task hf:<name>[:<config>]``) builds a
:class:`UserTask`, a :class:`~minielectra.finetune.task.Task` whose examples come from the
files, so the GLUE recipe, metrics, seeds, saved model and ``predict`` apply unchanged. Formats,
columns, labels and metrics: docs/guides/own-data.md. Regression targets are standardised by the
training labels' mean and spread. Every problem with a file is a one-line ``ValueError`` naming
the file, the line and the column; an empty text is refused rather than skipped (a row left out
changes what is trained on and scored without a word).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ...data.hub import hub_unreachable
from ..tables import Row, read_rows
from ..task import Example, Task


@dataclass(frozen=True)
class Columns:
    """Which fields hold the text, its optional pair, and the label."""

    text: str = "text"
    text_pair: str | None = None  # None: "text_pair" when the training data has that column
    label: str = "label"


@dataclass(frozen=True)
class UserTask(Task):
    """A task built from a user's data: the examples travel with it."""

    train_examples: tuple[Example, ...] = field(default=(), compare=False, repr=False)
    dev_examples: tuple[Example, ...] = field(default=(), compare=False, repr=False)

    def examples(self, split: str, *, data_dir: str | Path | None = None) -> list[Example]:
        """Read when the task was built (from the user's files or a hub dataset)."""
        return list(self.train_examples if split == "train" else self.dev_examples)


def _label_text(value: Any, where: str, column: str) -> str:
    """A label as the text that names its class: ``1``, ``1.0`` and ``"1"`` are one class."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ValueError(f"{where}, column {column!r}: the label is empty")
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (dict, list)):
        raise ValueError(f"{where}, column {column!r}: the label is a JSON "
                         f"{type(value).__name__}, not a class name or a number")
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    if not math.isfinite(number):  # nan, inf: neither a class nor a target
        raise ValueError(f"{where}, column {column!r}: the label {text!r} is not a finite "
                         "number; fix or remove the row")
    return str(int(number)) if number.is_integer() else text


def _number(label: str) -> float | None:
    try:
        x = float(label)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _is_regression(labels: list[str], regression: bool | None, where: list[str]) -> bool:
    """``regression``, or (None) whether the labels are numbers with fractions. A few fractions
    among whole-number classes (0, 1, 0.5) are refused, naming the first: more likely a typo
    than a regression task, and as a class of its own it would be silently wrong."""
    if regression is not None:
        return regression
    numbers = [_number(x) for x in labels]
    if not all(x is not None for x in numbers):
        return False
    fractions = [i for i, x in enumerate(numbers) if not x.is_integer()]
    if fractions and len(fractions) * 4 < len(labels):
        i, whole = fractions[0], len(labels) - len(fractions)
        raise ValueError(f"{where[i]}: label {labels[i]!r} has a fraction, but {whole} of the "
                         f"{len(labels)} labels are whole-number classes; fix it, or pass "
                         "--regression if the labels are numbers to predict")
    return bool(fractions)


def _class_names(labels: Iterable[str]) -> tuple[str, ...]:
    names = set(labels)
    if all(_number(x) is not None and _number(x).is_integer() for x in names):
        return tuple(sorted(names, key=lambda x: float(x)))
    return tuple(sorted(names))


def _field(row: Row, column: str, role: str, flag: str) -> Any:
    where, fields = row
    if column not in fields:
        raise ValueError(f"{where}: no {role} column {column!r} (columns: "
                         f"{', '.join(map(str, fields))}); name yours with {flag}")
    return fields[column]


def _examples(rows: list[Row], columns: Columns, pair: str | None, *,
              regression: bool, names: tuple[str, ...] | None, train: str) -> list[Example]:
    out = []
    for row in rows:
        text = _field(row, columns.text, "text", "--text-column")
        text_b = _field(row, pair, "text pair", "--text-pair-column") if pair else None
        raw = _label_text(_field(row, columns.label, "label", "--label-column"), row[0],
                          columns.label)
        if regression:
            label = _number(raw)
            if label is None:
                raise ValueError(f"{row[0]}, column {columns.label!r}: label {raw!r} is not a "
                                 "number (a regression task needs numbers)")
        elif raw in names:
            label = names.index(raw)
        else:
            raise ValueError(f"{row[0]}, column {columns.label!r}: label {raw!r} does not occur "
                             f"in the training data {train} (its labels: {list(names)})")
        for value, column in ((text, columns.text), (text_b if pair else "x", pair)):
            if value is None or isinstance(value, (dict, list)):  # JSON null or structure
                raise ValueError(f"{row[0]}, column {column!r}: the text is "
                                 f"{'null' if value is None else 'not a string'}")
            if not str(value).strip():  # trained on as "" it teaches nothing, and skews a score
                raise ValueError(f"{row[0]}, column {column!r}: the text is empty; fill it in "
                                 "or remove the row")
        out.append(Example(str(text), None if text_b is None else str(text_b), label))
    return out


def build_task(name: str, train_rows: list[Row], dev_rows: list[Row], *,
               columns: Columns = Columns(), regression: bool | None = None,
               train_source: str = "") -> UserTask:
    """A :class:`UserTask` from the rows of a training and a dev set."""
    pair = columns.text_pair
    if pair is None and "text_pair" in train_rows[0][1]:
        pair = "text_pair"
    roles = [("--text-column", columns.text), ("--text-pair-column", pair),
             ("--label-column", columns.label)]
    for i, (flag, column) in enumerate(roles):  # one column read as two things: silently wrong
        other = next((f for f, n in roles[i + 1:] if n is not None and n == column), None)
        if other is not None:
            raise ValueError(f"{flag} and {other} both name the column {column!r}: a column is "
                             "either the text, the second text or the label")
    labels = [_label_text(_field(r, columns.label, "label", "--label-column"), r[0],
                          columns.label) for r in train_rows]
    is_reg = _is_regression(labels, regression, [r[0] for r in train_rows])
    names = None if is_reg else _class_names(labels)
    if names is not None and len(names) < 2:
        raise ValueError(f"{train_source}: every training label is {names[0]!r}; a classifier "
                         "needs at least two classes (or pass --regression for numbers)")
    common = dict(columns=columns, pair=pair, regression=is_reg, names=names, train=train_source)
    train, dev = _examples(train_rows, **common), _examples(dev_rows, **common)
    shift, scale = 0.0, 1.0
    if is_reg:
        values = [e.label for e in train]
        shift = sum(values) / len(values)
        scale = math.sqrt(sum((v - shift) ** 2 for v in values) / len(values)) or 1.0
    metric_names = (("pearson", "spearman") if is_reg else
                    ("accuracy", "f1") if len(names) == 2 else ("accuracy",))
    return UserTask(name, name, "", (), 0, (columns.text,) + ((pair,) if pair else ()),
                    names, names, metric_names, label_shift=shift, label_scale=scale,
                    train_examples=tuple(train), dev_examples=tuple(dev))


def task_from_files(train: str | Path, dev: str | Path, *, columns: Columns = Columns(),
                    regression: bool | None = None) -> UserTask:
    """``finetune --train FILE --dev FILE``: the task named after the training file."""
    train_rows, dev_rows = read_rows(train), read_rows(dev)
    return build_task(Path(train).name, train_rows, dev_rows, columns=columns,
                      regression=regression, train_source=str(train))


HUB_DEV_SPLITS = ("validation", "dev", "valid", "test")


def task_from_hub(spec: str, *, columns: Columns = Columns(),
                  regression: bool | None = None) -> UserTask:
    """``--task hf:<name>[:<config>]``: its train split, and the first of ``HUB_DEV_SPLITS``."""
    parts = spec.removeprefix("hf:").split(":")
    if not 1 <= len(parts) <= 2 or not all(parts):
        raise ValueError(f"--task {spec!r}: expected hf:<name>[:<config>]")
    offline = hub_unreachable()  # offline: the datasets cache only, and at once
    import datasets  # imported here: slow, and only the hub needs it

    try:
        splits = datasets.load_dataset(*parts)
    except Exception as e:
        where = f"hub dataset {spec[3:]!r}"
        if offline:
            raise FileNotFoundError(
                f"{where}: not in the datasets cache, and the Hugging Face hub is unreachable "
                f"({offline}); fine-tune on local files instead: --train FILE --dev FILE") from None
        raise RuntimeError(f"{where}: could not load it ({e})") from None
    dev_split = next((s for s in HUB_DEV_SPLITS if s in splits), None)
    if "train" not in splits or dev_split is None:
        raise ValueError(f"hub dataset {spec[3:]!r} has splits {sorted(splits)}; fine-tuning "
                         f"needs 'train' and one of {list(HUB_DEV_SPLITS)}")
    rows = {s: _hub_rows(spec, splits[s], s, columns.label) for s in ("train", dev_split)}
    return build_task(spec, rows["train"], rows[dev_split], columns=columns,
                      regression=regression, train_source=f"{spec} train")


def _hub_rows(spec: str, split, name: str, label: str) -> list[Row]:
    """Rows of a hub split; a ClassLabel column is read as its class names."""
    feature = split.features.get(label)
    names = getattr(feature, "names", None)
    rows = []
    for i, r in enumerate(split):
        if names is not None and isinstance(r.get(label), int) and 0 <= r[label] < len(names):
            r = {**r, label: names[r[label]]}
        rows.append((f"{spec} {name} row {i}", r))
    if not rows:
        raise ValueError(f"{spec}: split {name!r} is empty")
    return rows

