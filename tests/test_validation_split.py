"""The validation split the suite's choices are to be made on: carved by a fixed seed, a tenth of
each training set (at most 1,000), disjoint from SST-2's fixed training subsets, and the
committed file regenerates from what it records."""

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "research"))
import validation_split as vs  # noqa: E402

from minielectra.finetune.task import Example, subset  # noqa: E402

COMMITTED = ROOT / "research" / "results" / "validation_split.json"


def test_a_carve_is_fixed_by_its_seed_sized_and_avoids_the_excluded():
    a, b = vs.carve(5000, exclude=range(100)), vs.carve(5000, exclude=range(100))
    assert a == b and len(a) == 500 and len(set(a)) == 500 and min(a) >= 100
    assert vs.carve(5000, seed=1) != vs.carve(5000)
    assert len(vs.carve(67349)) == 1000  # the cap
    with pytest.raises(ValueError, match="outside the excluded"):
        vs.carve(100, exclude=range(95))


def test_the_kept_subsets_are_the_ones_the_suite_trains_on():
    items = list(range(3000))
    assert vs.subset_indices(3000, 800) == subset(items, 800)
    assert vs.subset_indices(10, 20) == list(range(10))


def test_the_committed_split_regenerates_from_what_it_records():
    split = json.loads(COMMITTED.read_text())
    sizes = {t: (e["train_examples"], e["sha256"]) for t, e in split["tasks"].items()}
    assert vs.render(vs.build(sizes)) == COMMITTED.read_text()
    sst2 = split["tasks"]["sst2"]
    used = set(vs.subset_indices(sst2["train_examples"], 8000)) | set(
        vs.subset_indices(sst2["train_examples"], 2000))
    assert not used & set(sst2["validation"])


def test_a_split_refuses_another_training_set():
    split = vs.build({"rte": (30, vs.fingerprint([Example(str(i), None, 0) for i in range(30)]))})
    examples = [Example(str(i), None, 0) for i in range(30)]
    train, held = vs.split_examples("rte", examples, split)
    assert len(held) == 3 and len(train) == 27 and not set(map(id, train)) & set(map(id, held))
    examples[5] = Example("changed", None, 0)
    with pytest.raises(ValueError, match="not the one the split was carved from"):
        vs.split_examples("rte", examples, split)


@pytest.mark.skipif(not os.environ.get("MINIELECTRA_DATA_DIR"),
                    reason="integration: needs the GLUE data (MINIELECTRA_DATA_DIR)")
def test_the_committed_split_matches_the_data():
    assert vs.render(vs.from_data()) == COMMITTED.read_text()
