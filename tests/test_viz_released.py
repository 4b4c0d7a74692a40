"""The released ELECTRA-Small beside the bundled model (``viz.released``), tested offline with
local transformers-format directories made from the bundled checkpoint.

References: transformers' own ``ElectraForPreTraining`` on the same directory, and the bundled
model's records for the same text and corruption.
"""

import pytest
import torch

from minielectra.model.convert import convert
from minielectra.viz.released import load_released
from minielectra.viz.scoring import load_checkpoint, score_text

transformers = pytest.importorskip("transformers")
TEXT = "the man walked to the station in the rain ."


@pytest.fixture(scope="module")
def hf_dirs(tmp_path_factory):
    out = convert("bundled", tmp_path_factory.mktemp("hf") / "hf", direction="to_hf")
    return out / "discriminator", out / "generator"


def test_a_local_copy_loads_through_from_pretrained_and_scores_as_transformers(hf_dirs):
    disc, gen = hf_dirs
    released, message = load_released(disc, gen)
    assert released is not None and message.startswith("loaded ")
    reference = transformers.ElectraForPreTraining.from_pretrained(disc).eval()
    ids = torch.tensor([released.tokenizer.encode_pair(TEXT)[0]])
    with torch.no_grad():
        torch.testing.assert_close(released.model.discriminator(ids), reference(ids).logits)
    bundled = score_text(load_checkpoint("bundled"), TEXT, replace={3: "of"})
    theirs = score_text(released, TEXT, replace={3: "of"})
    assert [r["token"] for r in theirs] == [r["token"] for r in bundled]
    torch.testing.assert_close(torch.tensor([r["p_replaced"] for r in theirs]),
                               torch.tensor([r["p_replaced"] for r in bundled]))


def test_an_unreachable_model_is_one_line_saying_what_was_skipped(tmp_path):
    released, message = load_released(tmp_path / "no-such-model", tmp_path / "no-such-gen")
    assert released is None
    assert message.startswith(f"skipped {tmp_path / 'no-such-model'}") and "\n" not in message


def test_offline_the_hub_is_skipped_at_once(monkeypatch):
    import time

    from minielectra.data import hub
    monkeypatch.setattr(hub, "_PROBED", ["no connection to huggingface.co:443: test"])
    start = time.perf_counter()
    ckpt, message = load_released()
    assert ckpt is None and "not reachable" in message and "\n" not in message
    assert time.perf_counter() - start < 2  # no retries
