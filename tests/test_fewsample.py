"""Few-sample fine-tuning options (minielectra.finetune.fewsample): re-initialising the top layers."""

import gzip

import numpy as np
import pytest
import torch

from minielectra.config import FinetuneConfig, ModelConfig, finetune_config
from minielectra.model.electra import Electra
from minielectra.model.transformer import Block, init_weights
from minielectra.finetune import classifier, fewsample
from minielectra.finetune import run as ft_run, train as ft
from minielectra.finetune.glue.data import get_task


def tiny(seed=0, **kw):
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=40, embedding_size=16, hidden_size=32, num_layers=3,
                      num_heads=2, intermediate_size=64, max_position_embeddings=32,
                      generator_size=0.5, cls_token_id=2, sep_token_id=3, mask_token_id=4, **kw)
    model = Electra(cfg)
    with torch.no_grad():  # off its initialisation, as a pre-trained model is
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape))
    return model


def build(model, *overrides):
    cfg = finetune_config(overrides)
    torch.manual_seed(5)
    clf = classifier.build_classifier(model, get_task("sst2"), cfg)
    fewsample.prepare(clf, cfg, initializer_range=model.config.initializer_range)
    return clf, cfg


def test_reinit_top_layer_is_a_fresh_bert_block():
    model = tiny()
    clf, _ = build(model, "finetune.reinit_layers=1")
    src = model.discriminator.encoder
    for i in (0, 1):  # untouched: the pre-trained weights
        for a, b in zip(clf.encoder.layers[i].parameters(), src.layers[i].parameters()):
            assert torch.equal(a, b)
    top = clf.encoder.layers[2]
    # Reference: a block initialised by init_weights from the same generator state.
    ref = Block(model.config)
    torch.manual_seed(5)
    ref_clf = classifier.build_classifier(model, get_task("sst2"), FinetuneConfig())
    init_weights(ref, model.config.initializer_range)
    for (name, a), b in zip(top.named_parameters(), ref.parameters()):
        assert torch.equal(a, b), name
    assert torch.equal(clf.head.weight, ref_clf.head.weight)  # the head drew first, as before


def test_reinit_is_a_no_op_from_scratch_and_checks_its_range():
    model = tiny()
    a, _ = build(model, "finetune.from_scratch=true")
    b, _ = build(model, "finetune.from_scratch=true", "finetune.reinit_layers=2")
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    with pytest.raises(ValueError, match="reinit_layers=4 but the encoder has 3"):
        build(model, "finetune.reinit_layers=4")
    with pytest.raises(ValueError, match="reinit_layers must be >= 0"):
        build(model, "finetune.reinit_layers=-1")
    with pytest.raises(ValueError, match="share_layers"):
        build(tiny(share_layers=True), "finetune.reinit_layers=1")


def test_finetune_applies_reinit_end_to_end(tmp_path, monkeypatch):
    """A whole finetune() run with reinit_layers: its first step starts from the re-initialised
    layer (checked by recording the model the optimiser receives)."""
    folder = tmp_path / "glue" / "SST-2"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for split, n in (("train", 64), ("dev", 16)):
        with gzip.open(folder / f"{split}.tsv.gz", "wt") as f:
            f.write("sentence\tlabel\n" + "".join(
                f"{'yes' if y else 'no'} cat\t{y}\n" for y in rng.integers(0, 2, n)))
    from minielectra.data.tokenizer import WordPieceTokenizer
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "yes", "no", "cat"]))
    model = tiny()
    model.tokenizer = WordPieceTokenizer.from_vocab_file(vocab)
    seen = []
    train = ft.train_classifier
    monkeypatch.setattr(ft, "train_classifier", lambda m, *a, **k: (
        seen.append([p.detach().clone() for p in m.encoder.layers[2].parameters()]),
        train(m, *a, **k))[1])
    r = ft_run.finetune(model, "sst2", data_dir=tmp_path, progress=False, save_model=False,
                    overrides=["finetune.reinit_layers=1", "finetune.epochs=1",
                               "finetune.max_seq_len=16"])
    assert r["config"]["reinit_layers"] == 1
    biases = [p for p in seen[0] if p.ndim == 1]
    assert any(torch.count_nonzero(b) == 0 for b in biases)  # fresh biases: zero
