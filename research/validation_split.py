"""A validation split carved from each suite task's training set, to make choices on.

The suite's choices (the fine-tuning recipe, the bundled checkpoint) were made on GLUE's dev sets,
the same sets the results pages report. A choice belongs on a split the pages do not report:
this script carves one from each training set, by a fixed seed, and writes which training
examples it holds (their indices in file order: no text is copied), so every run can leave them
out of training and score its choice on them, and the dev sets then score the decision once.

- a tenth of each training set, at most 1,000 examples (``FRACTION``, ``CAP``), chosen by
  ``numpy.random.default_rng(SEED)``;
- SST-2's is drawn from outside the suite's fixed 8,000- and 2,000-sentence training subsets
  (``minielectra.finetune.task.subset``, seed 0), so those subsets stay as they are; the other
  tasks train on their whole training set, which then loses these examples;
- each task's entry records the training set's size and a SHA-256 of its examples, so a
  different copy of the data is an error, not a silently different split.

    python research/validation_split.py                      # writes research/results/validation_split.json
    python research/validation_split.py --check               # the committed file against the data

A few seconds; needs ``MINIELECTRA_DATA_DIR``. :func:`on_validation` gives a task that trains on
the training part and scores on this split (``research/suite.py run --split validation``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

SEED, FRACTION, CAP = 0, 0.1, 1000
TASKS = ("cola", "sst2", "mrpc", "stsb", "rte")
KEEP_SUBSETS = {"sst2": (8000, 2000)}  # training subsets the suite draws (seed 0), left whole
OUT = Path(__file__).resolve().parents[1] / "research" / "results" / "validation_split.json"


def subset_indices(n: int, size: int, *, seed: int = 0) -> list[int]:
    """The indices :func:`minielectra.finetune.task.subset` keeps (the same draw)."""
    if size >= n:
        return list(range(n))
    return sorted(np.random.default_rng(seed).choice(n, size, replace=False).tolist())


def carve(n: int, *, seed: int = SEED, fraction: float = FRACTION, cap: int = CAP,
          exclude=()) -> list[int]:
    """Sorted indices of ``min(cap, round(fraction * n))`` training examples, none in
    ``exclude``, chosen by ``seed``."""
    pool = np.setdiff1d(np.arange(n), np.asarray(sorted(set(exclude)), dtype=int))
    size = min(cap, round(fraction * n))
    if size > len(pool):
        raise ValueError(f"a split of {size} needs {size} examples outside the excluded, "
                         f"has {len(pool)}")
    return sorted(np.random.default_rng(seed).choice(pool, size, replace=False).tolist())


def fingerprint(examples) -> str:
    h = hashlib.sha256()
    for e in examples:
        h.update(json.dumps([e.text_a, e.text_b, e.label], ensure_ascii=False).encode())
    return h.hexdigest()


def entry(task: str, n: int, digest: str) -> dict:
    exclude = {i for size in KEEP_SUBSETS.get(task, ()) for i in subset_indices(n, size)}
    return {"train_examples": n, "sha256": digest, "validation": carve(n, exclude=exclude)}


def build(sizes: dict[str, tuple[int, str]]) -> dict:
    """The whole file from each task's (training-set size, fingerprint)."""
    return {"seed": SEED, "fraction": FRACTION, "cap": CAP,
            "kept_subsets": {t: list(s) for t, s in KEEP_SUBSETS.items()},
            "tasks": {t: entry(t, n, d) for t, (n, d) in sizes.items()}}


def render(split: dict) -> str:
    return json.dumps(split, indent=1) + "\n"


def split_examples(task: str, examples: list, split: dict) -> tuple[list, list]:
    """(training, validation) of ``task``'s whole training set, by the committed split."""
    spec = split["tasks"][task]
    if len(examples) != spec["train_examples"] or fingerprint(examples) != spec["sha256"]:
        raise ValueError(f"{task}: this training set is not the one the split was carved from")
    held = set(spec["validation"])
    return ([e for i, e in enumerate(examples) if i not in held],
            [e for i, e in enumerate(examples) if i in held])


def on_validation(task_name: str, size: int | None = None, split: dict | None = None):
    """``task_name`` with its training set split: ``examples("train")`` the training part (at
    most ``size`` of it), ``examples("dev")`` the validation part, so that ``finetune`` and the
    floor make their choices on it. A subset the suite keeps whole (SST-2's 8,000 and 2,000) is
    the suite's own draw from the whole training set, which the validation part avoids."""
    import dataclasses

    from minielectra.finetune.glue.data import GlueTask, get_task, load_split
    from minielectra.finetune.task import subset

    split = split or json.loads(OUT.read_text())

    class OnValidation(GlueTask):
        def examples(self, part: str, *, data_dir=None):
            whole = load_split(self, "train", data_dir=data_dir)
            train, held = split_examples(self.name, whole, split)
            if part == "dev":
                return held
            if size in KEEP_SUBSETS.get(self.name, ()):
                return subset(whole, size)  # the suite's draw: none of it is held out
            return subset(train, size)

    return OnValidation(**{f.name: getattr(get_task(task_name), f.name)
                           for f in dataclasses.fields(GlueTask)})


def from_data(data_dir=None) -> dict:
    from minielectra.finetune.glue.data import load_split
    sizes = {}
    for t in TASKS:
        train = load_split(t, "train", data_dir=data_dir)
        sizes[t] = (len(train), fingerprint(train))
    return build(sizes)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="compare the committed file, write nothing")
    p.add_argument("--out", type=Path, default=OUT)
    a = p.parse_args(argv)
    text = render(from_data())
    if a.check:
        same = a.out.read_text() == text
        print("the committed split matches the data" if same else "the split differs from the data")
        return 0 if same else 1
    from minielectra.safeio import write_file
    write_file(a.out, text)
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
