"""Two lengths in one run (``data.long_seq_len``): most steps short, the last ones long, with the
same tokens a step; the switch is exact across a resume, and the run is scored at its last length."""

from __future__ import annotations

import json

import pytest
import torch

from minielectra.config import apply_overrides, preset
from minielectra.model.electra import Electra
from minielectra.training.evaluate import evaluate
from minielectra.training.inputs import long_stage
from minielectra.training.loop import pretrain

TWO = ["data.max_seq_len=8", "data.long_seq_len=16", "data.long_fraction=0.5",
       "train.max_steps=6", "train.eval_every=2", "train.save_every=2", "model.dropout=0.1"]


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory, write_tiny_corpus):
    return write_tiny_corpus(tmp_path_factory.mktemp("corpus") / "tiny.txt")


def two_length_run(corpus_file, out, *more):
    return apply_overrides(preset("tiny"), [f"data.corpus={corpus_file}",
                                            f"data.cache_dir={out.parent / 'cache'}",
                                            f"train.out_dir={out}", *TWO, *more])


def evals(out):
    return [(r["step"], r["max_seq_len"]) for r in map(json.loads, open(out / "metrics.jsonl"))
            if r["kind"] == "eval"]


def test_the_last_steps_read_long_examples_with_as_many_tokens_a_step(corpus_file, tmp_path):
    cfg = two_length_run(corpus_file, tmp_path / "run")
    first, long = long_stage(cfg)
    assert first == 3 and long.data.max_seq_len == 16 and long.train.batch_size == 2
    seen = []
    import minielectra.training.loop as loop
    real = loop.train_step

    def spy(net, batches, *a, **k):
        def watched():
            for b in batches:
                seen.append(tuple(b["input_ids"].shape))
                yield b
        return real(net, watched(), *a, **k)
    loop.train_step = spy
    try:
        summary = pretrain(cfg, progress=False)
    finally:
        loop.train_step = real
    assert seen == [(4, 8)] * 3 + [(2, 16)] * 3
    assert evals(tmp_path / "run") == [(2, 8), (4, 16), (6, 16)]  # step 2 is before the switch
    scored = evaluate(summary["checkpoint"], max_examples=cfg.train.eval_examples)  # as the loop
    assert scored["max_seq_len"] == 16
    assert scored["disc_auc"] == pytest.approx(summary["heldout"]["disc_auc"])


@pytest.mark.parametrize("stop", [2, 3, 4])  # before, at and after the switch
def test_a_resume_crosses_the_switch_exactly(corpus_file, tmp_path, stop):
    straight = pretrain(two_length_run(corpus_file, tmp_path / "a"), progress=False)
    pretrain(two_length_run(corpus_file, tmp_path / "b"), progress=False, until_step=stop)
    torch.manual_seed(1234)  # a resumed process does not inherit the first one's RNG
    resumed = pretrain(two_length_run(corpus_file, tmp_path / "b"), progress=False, resume=True)
    a = Electra.from_pretrained(straight["checkpoint"]).state_dict()
    b = Electra.from_pretrained(resumed["checkpoint"]).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert straight["heldout"] == resumed["heldout"]
    due = [r for r in dict(evals(tmp_path / "b")).items() if r[0] % 2 == 0]  # until_step's aside
    assert evals(tmp_path / "a") == due  # each evaluation at its step's length


@pytest.mark.parametrize("overrides, message", [
    (["data.long_seq_len=8"], "data.long_seq_len must be 0 or longer than data.max_seq_len 8"),
    (["data.long_fraction=1.0"], r"data.long_fraction must be in \(0, 1\)"),
    (["data.long_seq_len=12"], "must divide train.batch_size x data.max_seq_len"),
    (["data.long_seq_len=32"], "data.long_seq_len 32 exceeds model.max_position_embeddings 16"),
    (["data.prepared=somewhere"], "a prepared folder holds examples of one length"),
])
def test_impossible_two_length_settings_name_the_key(corpus_file, tmp_path, overrides, message):
    cfg = two_length_run(corpus_file, tmp_path / "never", *overrides)
    with pytest.raises(ValueError, match=message):
        pretrain(cfg, progress=False)
    assert not (tmp_path / "never").exists()
