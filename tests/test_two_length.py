"""research/two_length.py: a run continued at its own length up to the switch, then longer.

References: the original run's own log (the steps before the switch must repeat it exactly) and
the checkpoint's run config (the length and batch of the last stage)."""

import json
import sys
from pathlib import Path

import torch

from minielectra.config import RunConfig, apply_overrides, preset
from minielectra.training import setup
from minielectra.training.loop import pretrain

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "research"))
from two_length import two_length  # noqa: E402  (research/two_length.py)


def train_log(run: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in map(json.loads, open(run / "metrics.jsonl"))
            if r["kind"] == "train"}


def test_two_length_repeats_the_run_then_trains_longer_with_a_smaller_batch(
        tmp_path, write_tiny_corpus):
    corpus = write_tiny_corpus(tmp_path / "tiny.txt")
    run, out = tmp_path / "run", tmp_path / "two"
    cfg = apply_overrides(preset("tiny"), [
        f"data.corpus={corpus}", f"data.cache_dir={tmp_path / 'cache'}", "data.max_seq_len=8",
        "train.max_steps=10", "train.save_every=2", "train.keep_last=10",
        f"train.out_dir={run}"])
    pretrain(cfg, progress=False)
    before = sorted(p.name for p in (run / "checkpoints").iterdir())

    summary = two_length(run, 4, out, switch=0.8, long=16, compile=False, progress=False)

    assert summary["step"] == 10
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before  # RUN untouched
    first, second = train_log(run), train_log(out)
    assert [second[s] for s in range(5, 9)] == [first[s] for s in range(5, 9)]
    assert second[9] != first[9]  # from the switch on: other examples, another batch
    saved = RunConfig.load(Path(summary["checkpoint"]) / "run_config.json")
    assert (saved.data.max_seq_len, saved.train.batch_size) == (16, 1)
    assert "data.max_seq_len" not in setup.RESUMABLE_CHANGES  # a user's resume still refuses it
    assert torch.isfinite(torch.tensor(summary["heldout"]["disc_auc"]))
