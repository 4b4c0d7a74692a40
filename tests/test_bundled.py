"""The checkpoint shipped with the package: it loads by name, is small, and its model card's
held-out figures are what ``minielectra evaluate --checkpoint bundled`` reproduces."""

import json
import re

import pytest
import torch

from minielectra import Electra
from minielectra.data.corpus import find_data_dir
from minielectra.model.storage import BUNDLED, resolve_bundled
from minielectra.training.checkpoints import resolve_checkpoint
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


def test_bundled_figures_reproduce_on_its_held_out_split():
    if find_data_dir() is None or not (find_data_dir() / "pretrain-en").is_dir():
        pytest.skip("needs MINIELECTRA_DATA_DIR with pretrain-en (the bundled run's corpus)")
    expected = card_metrics()
    got = evaluate("bundled", max_examples=expected["examples"])
    for key in ("disc_auc", "disc_accuracy", "gen_accuracy", "replaced_fraction"):
        assert got[key] == pytest.approx(expected[key], abs=1e-4), key
