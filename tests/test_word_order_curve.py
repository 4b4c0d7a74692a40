"""research/word_order_curve.py: the English word-order probe along a run's kept checkpoints.

A tiny run keeps a checkpoint every 2 steps; the script must score each one, put it at
step x the FLOPs counted from the run's config, read its held-out metrics from metrics.jsonl,
score random init at each seed, draw the figure, and refuse a --run that is not a run directory
by naming it. The data dir is a 40-row slice of GLUE (the probe's sentences come from SST-2)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from minielectra.config import RunConfig, preset, apply_overrides
from minielectra.objectives.flops import train_flops_per_step
from minielectra.training.loop import pretrain

REPO = Path(__file__).resolve().parents[1]
TINY = ["model.num_layers=2", "model.max_position_embeddings=32", "train.log_every=2",
        "train.max_steps=4", "train.save_every=2", "train.keep_every=1", "train.eval_every=2"]


@pytest.fixture
def run_dir(write_tiny_corpus, tmp_path):
    torch.set_num_threads(1)
    corpus = write_tiny_corpus(tmp_path / "tiny.txt")
    cfg = apply_overrides(preset("tiny"), TINY + [
        f"data.corpus={corpus}", f"data.cache_dir={tmp_path / 'cache'}",
        f"train.out_dir={tmp_path / 'run'}"])
    pretrain(cfg, progress=False)
    return tmp_path / "run"


def _script(args, data_dir, cwd):
    env = dict(os.environ, PYTHONPATH=str(REPO), MINIELECTRA_DATA_DIR=str(data_dir))
    return subprocess.run([sys.executable, str(REPO / "research" / "word_order_curve.py"),
                           *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_every_kept_checkpoint_is_scored_at_its_counted_flops(run_dir, glue_slice_dir,
                                                              tmp_path):
    out = tmp_path / "report"
    proc = _script(["--run", f"tiny ELECTRA={run_dir}", "--probe-seeds", "2",
                    "--random-seeds", "2", "--glue-every", "4", "--max-seq-len", "16",
                    "--out", str(out)], glue_slice_dir, tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert json.loads((out / "results.json").read_text()) == result
    per_step = train_flops_per_step(RunConfig.load(run_dir / "config.json"))
    points = result["points"]
    assert [p["step"] for p in points] == [2, 4]
    assert [p["train_flops"] for p in points] == [2 * per_step, 4 * per_step]
    evals = {e["step"]: e for e in map(json.loads, (run_dir / "metrics.jsonl").open())
             if e.get("kind") == "eval"}
    for p in points:
        assert p["heldout"]["disc_auc"] == evals[p["step"]]["disc_auc"]
        scores = p["swap"]["per_seed"]
        assert len(scores) == 2 and all(0 <= s <= 100 for s in scores)
        assert p["swap"]["mean"] == pytest.approx(sum(scores) / 2)
    assert "glue_probe_avg" not in points[0] and "glue_probe_avg" in points[1]  # step 4 only
    control = result["random_init"]
    assert len(control["swap"]["per_seed"]) == 2 and len(control["glue_probe_avg"]["per_seed"]) == 2
    assert result["heldout_auc"] == {"tiny ELECTRA": [[s, evals[s]["disc_auc"]]
                                                       for s in sorted(evals)]}
    auc_svg = (out / "auc_vs_step.svg").read_text()
    assert auc_svg.startswith("<svg") and "tiny ELECTRA" in auc_svg and "chance 0.5" in auc_svg
    svg = (out / "word_order_vs_flops.svg").read_text()
    assert svg.startswith("<svg") and "tiny ELECTRA" in svg and "random init" in svg
    table = (out / "results.md").read_text().splitlines()
    assert len(table) == 2 + 2 + 1 and table[-1].startswith("| random init (2 seeds) |")
    assert table[3].startswith("| tiny ELECTRA | 4 | ")
    assert f"{points[1]['swap']['mean']:.1f} ± " in table[3]
    assert "[word-order] tiny ELECTRA step 4" in proc.stderr  # progress on stderr, JSON on stdout

    # again with the same --out: nothing is re-measured, the report is the same
    again = _script(["--run", f"tiny ELECTRA={run_dir}", "--probe-seeds", "2",
                     "--random-seeds", "2", "--glue-every", "4", "--max-seq-len", "16",
                     "--out", str(out)], glue_slice_dir, tmp_path)
    assert again.returncode == 0 and "[word-order]" not in again.stderr, again.stderr
    repeat = json.loads(again.stdout)
    assert {**repeat, "seconds": 0} == {**result, "seconds": 0}


def test_a_run_that_is_not_a_run_directory_is_named(glue_slice_dir, tmp_path):
    proc = _script(["--run", f"x={tmp_path / 'nowhere'}"], glue_slice_dir, tmp_path)
    assert proc.returncode != 0 and "nowhere/config.json not found" in proc.stderr
    proc = _script(["--run", str(tmp_path)], glue_slice_dir, tmp_path)
    assert proc.returncode != 0 and "expected LABEL=DIR" in proc.stderr
