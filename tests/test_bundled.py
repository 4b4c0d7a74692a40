"""The checkpoint shipped with the package: it loads by name, is small, and its model card's
held-out figures are what ``minielectra evaluate --checkpoint bundled`` reproduces."""

import json
import re

import pytest
import torch

from minielectra import Electra
from minielectra.data.corpus import find_data_dir
from minielectra.model.storage import BUNDLED, resolve_bundled
from minielectra.training.opening import resolve_checkpoint
from minielectra.training.evaluate import evaluate

CARD = BUNDLED / "MODEL_CARD.md"


def card_metrics() -> dict:
    """The JSON block of the model card that records ``minielectra evaluate``'s output."""
    match = re.search(r"```json\n(\{.*?\})\n```", CARD.read_text(), re.S)
    assert match, f"{CARD} has no ```json block with the evaluation"
    return json.loads(match.group(1))


def test_bundled_resolves_loads_and_is_a_few_megabytes(tmp_path):
    assert resolve_bundled("bundled") == BUNDLED == resolve_checkpoint("bundled")
    assert resolve_bundled(tmp_path) == tmp_path  # a local folder is itself (owner/name that
    # is not a local path is a hub model id: tests/test_firsthour.py)
    size = sum(p.stat().st_size for p in BUNDLED.iterdir())
    assert size < 10 * 2**20, f"bundled checkpoint is {size / 2**20:.1f} MiB"
    model = Electra.from_pretrained("bundled")
    assert model.tokenizer is not None
    ids, segments = model.tokenizer.encode_pair("The cat sat on the mat.")
    logits = model.discriminator(torch.tensor([ids]), token_type_ids=torch.tensor([segments]))
    assert logits.shape == (1, len(ids)) and torch.isfinite(logits).all()


def test_bundled_model_card_records_command_data_and_metrics():
    text = CARD.read_text()
    for needed in ("minielectra pretrain", "pretrain-en+pydocs", "steps", "minutes", "CPU"):
        assert needed in text, f"model card lacks {needed!r}"
    metrics = card_metrics()
    assert {"disc_auc", "disc_accuracy", "disc_precision", "disc_recall", "gen_accuracy",
            "replaced_fraction", "examples"} <= metrics.keys()


def test_bundled_model_card_evaluation_is_its_results_file_s():
    """The card's other figures are filled from research/results/bundled/results.json: its
    evaluation there is the one the card's JSON block records."""
    from pathlib import Path
    record = json.loads((Path(__file__).resolve().parents[1] / "research/results/bundled/"
                         "results.json").read_text())
    assert record["curve"][str(record["steps"])] == pytest.approx(
        card_metrics()["disc_auc"], abs=0.02)  # 512 examples in the run, all of them here
    for key, value in card_metrics().items():
        assert record["evaluate"]["32"][key] == pytest.approx(value, abs=1e-6), key


def test_bundled_figures_reproduce_on_its_held_out_split():
    if find_data_dir() is None or not (find_data_dir() / "pretrain-en").is_dir():
        pytest.skip("needs MINIELECTRA_DATA_DIR with pretrain-en (the bundled run's corpus)")
    expected = card_metrics()
    got = evaluate("bundled", max_examples=expected["examples"],
                   max_seq_len=expected.get("max_seq_len"))
    for key in ("disc_auc", "disc_accuracy", "gen_accuracy", "replaced_fraction"):
        assert got[key] == pytest.approx(expected[key], abs=1e-4), key


def test_make_bundled_reads_a_resumed_runs_curve_and_clock(tmp_path):
    """tools/make_bundled.py: the AUC table and the training time the card records come from
    the run's metrics.jsonl; a resumed run restarts its clock, and repeats an evaluation."""
    from minielectra.training.checkpoints import checkpoint_minutes
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import make_bundled

    records = [{"kind": "train", "step": 10, "elapsed_s": 5.0},
               {"kind": "eval", "step": 10, "disc_auc": 0.51, "elapsed_s": 5.2},
               {"kind": "train", "step": 20, "elapsed_s": 11.0},  # stopped here, resumed from 10
               {"kind": "train", "step": 20, "elapsed_s": 4.0},
               {"kind": "eval", "step": 20, "disc_auc": 0.6049, "elapsed_s": 4.2},
               {"kind": "train", "step": 30, "elapsed_s": 9.5},
               {"kind": "eval", "step": 30, "disc_auc": 0.7, "elapsed_s": 9.75}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert make_bundled.auc_curve(tmp_path) == {10: 0.51, 20: 0.605, 30: 0.7}
    (tmp_path / "checkpoints" / "step_0000030").mkdir(parents=True)
    step_30 = tmp_path / "checkpoints" / "step_0000030"
    assert checkpoint_minutes(str(step_30)) * 60 == pytest.approx(11.0 + 9.75)
