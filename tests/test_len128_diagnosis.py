"""research/len128_diagnosis.py: a run's settings, evaluations and losses kept as logged."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "research"))
import len128_diagnosis as diagnosis  # noqa: E402

from minielectra.config import RunConfig  # noqa: E402


def _run(folder: Path, lr: float) -> Path:
    cfg = RunConfig()
    cfg.train.learning_rate = lr
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg.to_dict()))
    rows = [{"kind": "train", "step": s, "lr": lr, "gen_loss": 7.0 - s / 1000, "disc_loss": 0.41,
             "gen_accuracy": 0.04, "grad_norm": 1.0, "replaced_fraction": 0.15}
            for s in range(10, 510, 10)]
    rows.append({"kind": "eval", "step": 500, "disc_auc": 0.53, "disc_auc_text": 0.52,
                 "disc_recall": 0.0, "disc_precision": 0.0, "gen_accuracy": 0.043})
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "checkpoints" / "step_0000500").mkdir(parents=True)
    return folder


def test_the_report_keeps_each_arms_evaluations_and_every_250th_step(tmp_path, monkeypatch):
    monkeypatch.setattr(diagnosis, "examples_fill", lambda: {"32": {}, "128": {}})
    monkeypatch.setattr(diagnosis, "attention", lambda checkpoint, n: {"n": n})
    runs = [_run(tmp_path / "normal", 1e-3), _run(tmp_path / "lr3e-4", 3e-4)]
    result = diagnosis.report(runs, tmp_path / "out")
    assert json.loads((tmp_path / "out" / "diagnosis.json").read_text()) == result
    normal = result["arms"]["normal"]
    assert normal["settings"] == {"model.position_init": "normal", "model.generator_size": 0.25,
                                  "model.tying": "embeddings", "objective.name": "electra",
                                  "objective.disc_weight": 50.0, "train.learning_rate": 1e-3,
                                  "train.batch_size": 128, "steps_run": 500}
    assert [e["step"] for e in normal["eval"]] == [500] and normal["eval"][0]["disc_auc"] == 0.53
    assert [t["step"] for t in normal["train"]] == [250, 500]
    assert result["arms"]["lr3e-4"]["settings"]["train.learning_rate"] == 3e-4
    assert result["length32_mini"][0]["step"] == 250  # the committed length-32 curve
    assert normal["attention"] == {"checkpoint_step": 500, "len128": {"n": 128}}
    assert result["bundled_attention_len32"] == {"n": 32}


@pytest.mark.integration
def test_attention_is_measured_where_each_layer_looks(data_dir):
    """On the bundled checkpoint at its own length: every layer of both networks, entropies
    within [0, log n], and the generator's last layer looking at its neighbours."""
    got = diagnosis.attention("bundled", 32, examples=4)
    for layers in got.values():
        assert len(layers) == 2
        assert all(0 <= x["entropy"] <= x["log_n"] + 1e-6 and 0 <= x["on_sep"] <= 1
                   for x in layers)
    assert got["generator"][-1]["mean_distance"] < 4
