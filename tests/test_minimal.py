"""``minimal_pretrain``, the algorithm in one loop, makes the updates the library's loop makes.

Reference: :func:`minielectra.training.loop.pretrain` on the same config and seed, its losses read
step by step from the records it writes (``train.log_every=1``), and its final weights. Dropout
is on, so the masks, samples and dropout draws must all line up.
"""

import pytest
import torch

import minielectra
from minielectra.config import apply_overrides, preset
from minielectra.training.loop import pretrain
from minielectra.training.minimal import minimal_pretrain


def tiny(corpus, cache, out, *overrides):
    return apply_overrides(preset("tiny"), [
        f"data.corpus={corpus}", f"data.cache_dir={cache}", "model.dropout=0.1",
        "model.attention_dropout=0.1", "train.eval_every=0", f"train.out_dir={out}", *overrides])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, write_tiny_corpus):
    return write_tiny_corpus(tmp_path_factory.mktemp("corpus") / "tiny.txt")


def test_same_seed_same_losses_as_the_library_loop(corpus, tmp_path):
    cfg = tiny(corpus, tmp_path / "cache", tmp_path / "run")
    records = []
    pretrain(cfg, progress=False, on_record=records.append)
    library = [r for r in records if r["kind"] == "train"]
    minimal = minimal_pretrain(tiny(corpus, tmp_path / "cache", tmp_path / "unused"))
    assert [r["step"] for r in library] == [r["step"] for r in minimal] == list(range(1, 7))
    for key in ("gen_loss", "disc_loss", "loss"):
        torch.testing.assert_close(torch.tensor([r[key] for r in minimal]),
                                   torch.tensor([r[key] for r in library]), rtol=1e-5, atol=1e-6)
    assert minimal[0]["gen_loss"] != minimal[-1]["gen_loss"]  # it did train


def test_another_seed_gives_other_losses(corpus, tmp_path):
    a = minimal_pretrain(tiny(corpus, tmp_path / "cache", tmp_path / "a"), steps=2)
    b = minimal_pretrain(tiny(corpus, tmp_path / "cache", tmp_path / "b", "train.seed=1"),
                         steps=2)
    assert a[0]["disc_loss"] != b[0]["disc_loss"]


def test_it_is_the_package_s_and_refuses_what_it_leaves_out(corpus, tmp_path):
    assert minielectra.minimal_pretrain is minimal_pretrain
    with pytest.raises(ValueError, match="grad_accum"):
        minimal_pretrain(tiny(corpus, tmp_path / "cache", tmp_path / "c", "train.grad_accum=2"))
