"""Data-parallel pre-training (torchrun + DDP, gloo on CPU): 2 processes == 1 process.

The reference for a 2-process run over global batch b is a 1-process run over the same examples
in the same order: batch b/2 with ``grad_accum`` 2 (the same slices, the same per-slice loss,
gradients averaged; see minielectra.training.ranks). Dropout stays on: each slice's randomness
is seeded by its global index, so it matches too. The 2-process runs go through the real command
line, ``torchrun -m minielectra pretrain``, on a corpus prepared with ``minielectra prepare``.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from minielectra.config import apply_overrides, preset
from minielectra.data.dataset import batch_iterator
from minielectra.data.prepare import ShardedDataset, prepare
from minielectra.data.tokenizer import WordPieceTokenizer
from minielectra.model.electra import Electra
from minielectra.training.loop import pretrain
from minielectra.training.ranks import Ranks

TINY = ["data.max_seq_len=16", "model.embedding_size=8", "model.hidden_size=16",
        "model.num_layers=1", "model.num_heads=2", "model.intermediate_size=32",
        "model.max_position_embeddings=16", "model.generator_size=0.5", "model.dropout=0.1",
        "model.attention_dropout=0.1", "train.max_steps=4", "train.warmup_steps=1",
        "train.log_every=1", "train.eval_examples=8", "train.max_minutes=0",
        "train.milestones=()", "train.save_every=2", "train.device=cpu"]


@pytest.fixture(scope="module")
def data(tmp_path_factory, write_tiny_corpus, tiny_words) -> Path:
    root = tmp_path_factory.mktemp("ddp")
    write_tiny_corpus(root / "tiny.txt", documents=80)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    WordPieceTokenizer([*specials, *tiny_words]).save(root / "tok")
    prepare(str(root / "tiny.txt"), out=root / "data", tokenizer=str(root / "tok"),
            max_seq_len=16, held_out_fraction=0.2, num_workers=1, progress=False)
    return root / "data"


def torchrun(*args: str, nproc: int = 2) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[1])}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={nproc}", "-m", "minielectra", *args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def cli_args(data: Path, out: Path, *overrides: str) -> list[str]:
    sets = [a for o in (*TINY, *overrides) for a in ("--set", o)]
    return ["pretrain", "--preset", "nano", "--data", str(data), "--out", str(out), *sets]


def one_process(data: Path, out: Path, *overrides: str):
    cfg = apply_overrides(preset("nano"), [f"data.prepared={data}", f"train.out_dir={out}",
                                           *TINY, *overrides])
    return pretrain(cfg, progress=False)


def weights(path) -> dict[str, torch.Tensor]:
    return Electra.from_pretrained(path).state_dict()


def assert_same_weights(a, b):
    a, b = weights(a), weights(b)
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6, msg=k)


def train_records(out: Path) -> list[dict]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == "train"]


def test_two_processes_train_the_one_process_model_and_resume_exactly(data, tmp_path):
    """2 ranks x 4 examples == 1 process x 4 examples x grad_accum 2, weights and logged losses;
    then the 2-process run, stopped after its step-2 checkpoint and resumed, ends the same."""
    done = torchrun(*cli_args(data, tmp_path / "ddp", "train.batch_size=8"))
    summary = json.loads(done.stdout[done.stdout.index("{"):])  # rank 0 alone prints
    single = one_process(data, tmp_path / "one", "train.batch_size=4", "train.grad_accum=2")
    assert_same_weights(summary["checkpoint"], single["checkpoint"])
    ddp, one = train_records(tmp_path / "ddp"), train_records(tmp_path / "one")
    assert [r["step"] for r in ddp] == [1, 2, 3, 4]  # rank 0 wrote each line once
    for a, b in zip(ddp, one):
        for k in ("loss", "gen_loss", "disc_loss", "grad_norm"):
            assert a[k] == pytest.approx(b[k], rel=1e-5), (a["step"], k)

    # an interruption after the step-2 checkpoint: its later checkpoint never happened
    shutil.rmtree(tmp_path / "ddp" / "checkpoints" / "step_0000004")
    torchrun(*cli_args(data, tmp_path / "ddp", "train.batch_size=8"), "--resume")
    assert_same_weights(tmp_path / "ddp" / "checkpoints" / "step_0000004", single["checkpoint"])


def test_gradient_accumulation_syncs_once_per_step_and_matches_one_process(data, tmp_path):
    """grad_accum 2 under DDP (no_sync on the first micro-batch): 2 ranks x 2 micro-batches of 4
    == 1 process x 4 micro-batches of 4; slice k of step s is micro-batch 4s + k there."""
    done = torchrun(*cli_args(data, tmp_path / "ddp", "train.batch_size=8", "train.grad_accum=2",
                              "train.max_steps=2"))
    summary = json.loads(done.stdout[done.stdout.index("{"):])
    single = one_process(data, tmp_path / "one", "train.batch_size=4", "train.grad_accum=4",
                         "train.max_steps=2")
    assert_same_weights(summary["checkpoint"], single["checkpoint"])


def test_rank_slices_make_up_the_global_batch(data):
    """Each rank reads its own rows; together they are the 1-process batch, in order."""
    train = ShardedDataset(data / "train")
    whole = batch_iterator(train, 6, seed=1, start=2)
    parts = [batch_iterator(train, 6, seed=1, start=2, rank=r, world_size=3) for r in range(3)]
    for _ in range(4):
        batch = next(whole)
        sliced = [next(p) for p in parts]
        for k in batch:
            assert all(s[k].shape[0] == 2 for s in sliced)
            assert torch.equal(torch.cat([s[k] for s in sliced]), batch[k]), k


def test_a_global_batch_that_does_not_split_evenly_is_refused(data, tmp_path):
    with pytest.raises(ValueError, match="multiple of the number of processes, 3"):
        Ranks(rank=0, world_size=3).check(8)
    with pytest.raises(ValueError, match="split evenly"):
        next(batch_iterator(ShardedDataset(data / "train"), 8, rank=1, world_size=3))
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=3",
         "-m", "minielectra", *cli_args(data, tmp_path / "x", "train.batch_size=8")],
        env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "multiple of the number of processes" in done.stderr


def test_slice_seeds_differ_between_slices_and_repeat_for_one():
    from minielectra.training.ranks import seed_slice
    draws = []
    for index in (0, 1, 0):
        seed_slice(7, index)
        draws.append(torch.rand(5).numpy())
    np.testing.assert_array_equal(draws[0], draws[2])
    assert not np.allclose(draws[0], draws[1])


def test_ctrl_c_on_one_rank_stops_every_rank_at_the_same_log_step():
    """A Ctrl-C seen by one process only is acted on at a log step, after the ranks agree
    (``Ranks.any``, an all-reduce there): never a rank alone, which would hang the others."""
    from types import SimpleNamespace

    from minielectra.training.interrupt import SigintFlag
    from minielectra.training.loop import Run

    asked = []

    def any_rank(flag: bool) -> bool:  # the other rank saw the Ctrl-C
        asked.append(flag)
        return True

    flag = SigintFlag()
    run = SimpleNamespace(ranks=Ranks(rank=1, world_size=2, any=any_rank), sigint=flag,
                          t=SimpleNamespace(log_every=5), step=3)
    assert not Run.interrupt_requested(run) and asked == []  # between log steps: no collective
    run.step = 5
    assert Run.interrupt_requested(run) and asked == [False]  # this rank saw nothing, yet stops
    single = SimpleNamespace(ranks=Ranks(), sigint=flag, t=SimpleNamespace(log_every=5), step=3)
    assert not Run.interrupt_requested(single)
    flag.requested = True
    assert Run.interrupt_requested(single)  # one process: at the next step boundary
