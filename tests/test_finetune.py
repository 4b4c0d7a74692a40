"""GLUE fine-tuning (minielectra.finetune.train): the recipe's pieces against closed forms and
references, then short end-to-end runs on tiny random models.

End-to-end runs use either synthetic data written here or slices of the real GLUE files
(``glue_slice_dir``; without ../shared/data, the handmade ones of tests/fixtures/glue).
"""

import dataclasses
import gzip
import json
import math
import string

import numpy as np
import pytest
import torch

from minielectra.config import FinetuneConfig, ModelConfig, finetune_config
from minielectra.data.tokenizer import WordPieceTokenizer
from minielectra.model import checkpoint as model_checkpoint
from minielectra.model import hf
from minielectra.model.electra import Electra
from minielectra.finetune import classifier
from minielectra.finetune import run as ft_run, train as ft
from minielectra.finetune import task as ftask
from minielectra.finetune.glue import data as glue
from minielectra.finetune import predict as pr
from minielectra.finetune import saved as saved_model
from minielectra.finetune.glue import suite as tasks_suite
from minielectra.training import opening
from minielectra.training.opening import resolve_checkpoint
from minielectra.finetune.inputs import read_lines

FAST = ["finetune.eval_batch_size=64"]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models run fastest on one thread; on a busy 2-core machine, 2 threads wait on each
    other (a 32-wide MLP step measured 100x slower)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def char_tokenizer(tmp_path_factory):
    """A character-level WordPiece vocabulary: every lower-case word is spelt in pieces."""
    chars = list(string.ascii_lowercase + string.digits)
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + list(".,'!?-;:()\"`$&/")
    tokens += ["##" + c for c in chars]
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(tokens) + "\n")
    return WordPieceTokenizer.from_vocab_file(path)


def tiny_electra(tokenizer, seed=0, **kw):
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=tokenizer.vocab_size, embedding_size=16, hidden_size=32,
                      num_layers=2, num_heads=2, intermediate_size=64,
                      max_position_embeddings=128, generator_size=0.5,
                      pad_token_id=tokenizer.pad_id, cls_token_id=tokenizer.cls_id,
                      sep_token_id=tokenizer.sep_id, mask_token_id=tokenizer.mask_id, **kw)
    model = Electra(cfg)
    model.tokenizer = tokenizer
    return model


@pytest.fixture(scope="module")
def pretrained(char_tokenizer):
    return tiny_electra(char_tokenizer)


# ------------------------------------------------------------------------------------- config


def test_overrides_are_typed_and_checked():
    cfg = finetune_config([
        "finetune.learning_rate=1e-4", "finetune.epochs=2", "finetune.encoder_dropout=none",
        "finetune.layerwise_decay_official=true", "finetune.schedule=linear"])
    assert (cfg.learning_rate, cfg.epochs, cfg.encoder_dropout) == (1e-4, 2, None)
    assert cfg.layerwise_decay_official and cfg.schedule == "linear"
    with pytest.raises(KeyError, match="finetune.learning_rate"):  # names the valid keys
        finetune_config(["finetune.learnig_rate=1"])
    with pytest.raises(KeyError):
        finetune_config(["train.learning_rate=1"])
    with pytest.raises(ValueError, match="finetune.epochs expects int"):
        finetune_config(["finetune.epochs=1.5"])
    with pytest.raises(ValueError, match="layerwise_decay"):
        finetune_config(["finetune.layerwise_decay=0"])


def test_defaults_are_the_papers():
    c = FinetuneConfig()
    assert (c.learning_rate, c.layerwise_decay, c.weight_decay, c.warmup_fraction) == \
        (3e-4, 0.8, 0.0, 0.1)
    assert (c.batch_size, c.max_seq_len, c.head_dropout, c.epochs) == (32, 128, 0.1, 0)
    assert c.double_unordered and not c.layerwise_decay_official and not c.bias_correction
    assert c.loss_reduction == "sum"  # run_finetuning.py: tf.reduce_sum over the batch
    with pytest.raises(ValueError, match="sum|mean"):
        finetune_config(["finetune.loss_reduction=max"])


# ---------------------------------------------------------------------------- the classifier


def test_head_is_glorot_linear_on_cls(pretrained):
    torch.manual_seed(0)
    model = classifier.build_classifier(pretrained, glue.get_task("mnli"), FinetuneConfig()).eval()
    w = model.head.weight
    bound = math.sqrt(6 / (32 + 3))  # Glorot uniform, fan_in 32, fan_out 3
    assert w.shape == (3, 32) and w.abs().max() <= bound and w.abs().max() > 0.5 * bound
    assert torch.all(model.head.bias == 0)
    ids = torch.randint(5, 40, (2, 9))
    expected = model.encoder(ids)[:, 0] @ w.T + model.head.bias  # no pooler, no extra dense
    torch.testing.assert_close(model(ids), expected)


def test_classifier_copies_the_discriminator_encoder(pretrained):
    cfg = FinetuneConfig()
    model = classifier.build_classifier(pretrained, glue.get_task("sst2"), cfg)
    source = pretrained.discriminator.encoder.state_dict()
    for k, v in model.encoder.state_dict().items():
        torch.testing.assert_close(v, source[k], rtol=0, atol=0)
    with torch.no_grad():
        model.encoder.embeddings.word.weight.add_(1.0)  # a copy: the checkpoint is untouched
    assert not torch.equal(model.encoder.embeddings.word.weight,
                           pretrained.discriminator.encoder.embeddings.word.weight)
    # The paper's fine-tuning dropout (0.1) replaces the checkpoint's unless told otherwise.
    p = [m.p for m in model.encoder.modules() if isinstance(m, torch.nn.Dropout)]
    assert p and set(p) == {0.1} and model.encoder.layers[0].attn.dropout == 0.1
    keep = classifier.build_classifier(pretrained, glue.get_task("sst2"),
                               dataclasses.replace(cfg, encoder_dropout=None))
    assert keep.encoder.layers[0].dropout.p == pretrained.config.dropout
    scratch = classifier.build_classifier(pretrained, glue.get_task("sst2"),
                                  dataclasses.replace(cfg, from_scratch=True))
    assert not torch.equal(scratch.encoder.layers[0].ffn_in.weight,
                           pretrained.discriminator.encoder.layers[0].ffn_in.weight)


def test_dynamic_padding_changes_nothing(pretrained, char_tokenizer):
    model = classifier.build_classifier(pretrained, glue.get_task("mrpc"), FinetuneConfig()).eval()
    enc = classifier.encode(char_tokenizer, [ftask.Example("a short one", "b", 0),
                                     ftask.Example("a much longer first sentence", "and more", 1)],
                    128)
    batch = classifier.collate(enc, char_tokenizer.pad_id)
    assert batch["input_ids"].shape == (2, len(enc[1][0]))
    assert batch["attention_mask"][0].sum() == len(enc[0][0])
    assert batch["token_type_ids"][0, len(enc[0][0]):].eq(0).all()
    alone = model(**classifier.collate(enc[:1], char_tokenizer.pad_id))
    torch.testing.assert_close(model(**batch)[:1], alone, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------ optimisation recipe


@pytest.mark.parametrize("official", [False, True])
def test_layerwise_decay_depths(pretrained, official):
    cfg = FinetuneConfig(learning_rate=1.0, layerwise_decay=0.5,
                            layerwise_decay_official=official)
    model = classifier.build_classifier(pretrained, glue.get_task("sst2"), cfg)
    groups = classifier.layerwise_param_groups(model, cfg)
    lr_of = {id(p): g["lr"] for g in groups for p in g["params"]}
    assert len(lr_of) == sum(1 for _ in model.parameters())  # every parameter exactly once
    shift = 1 if official else 0  # official: everything one factor lower, head unchanged
    enc = model.encoder
    assert lr_of[id(model.head.weight)] == 1.0
    assert lr_of[id(enc.layers[1].ffn_out.weight)] == 0.5 ** (1 + shift)  # top layer
    assert lr_of[id(enc.layers[0].attn.qkv.weight)] == 0.5 ** (2 + shift)
    assert lr_of[id(enc.embeddings.word.weight)] == 0.5 ** (3 + shift)
    assert lr_of[id(enc.embed_proj.weight)] == 0.5 ** (3 + shift)
    assert lr_of[id(enc.embeddings.norm.weight)] == 0.5 ** (3 + shift)
    assert all(g["weight_decay"] == 0.0 for g in groups)


def test_weight_decay_skips_biases_and_layernorm(pretrained):
    cfg = FinetuneConfig(weight_decay=0.01)
    model = classifier.build_classifier(pretrained, glue.get_task("sst2"), cfg)
    wd_of = {id(p): g["weight_decay"] for g in classifier.layerwise_param_groups(model, cfg)
             for p in g["params"]}
    assert wd_of[id(model.head.weight)] == 0.01 and wd_of[id(model.head.bias)] == 0.0
    assert wd_of[id(model.encoder.layers[0].ffn_norm.weight)] == 0.0


def test_schedule_warmup_then_linear_decay():
    total, warmup = 100, 10
    linear = [classifier.lr_factor(s, total, warmup, "linear") for s in range(total)]
    assert linear[0] == 0 and linear[5] == pytest.approx(0.5) and linear[10] == pytest.approx(1)
    assert linear[55] == pytest.approx(0.5) and linear[-1] == pytest.approx(1 / 90)
    # official: (1 - step/T) * min(1, step/W), the ramp times the already decaying line
    official = [classifier.lr_factor(s, total, warmup, "official") for s in range(total)]
    assert official[5] == pytest.approx(0.95 * 0.5) and official[50] == pytest.approx(0.5)


def test_batch_order_reshuffles_every_epoch():
    n, bs, epochs = 70, 32, 3
    order = ft.batch_order(n, bs, epochs, torch.Generator().manual_seed(5))
    assert [len(b) for b in order] == [32, 32, 6] * epochs  # ceil(70/32) steps, last one smaller
    gen = torch.Generator().manual_seed(5)  # the same draws, one permutation an epoch
    for e in range(epochs):
        assert torch.equal(torch.cat(order[3 * e:3 * e + 3]), torch.randperm(n, generator=gen))


def test_batch_order_official_stream_is_one_shuffle_read_through_a_buffer():
    n, bs, epochs, size = 1000, 32, 3, 100
    order = ft.batch_order(n, bs, epochs, torch.Generator().manual_seed(1), shuffle_buffer=size)
    steps = math.ceil(n / bs)  # 32: the set padded to 1,024 with 24 loss-free dummies
    assert len(order) == steps * epochs and all(len(b) <= bs for b in order)
    flat = torch.cat(order)
    assert n * epochs - size <= len(flat) <= steps * bs * epochs  # dummies dropped
    # The output is the first (epochs x 1,024 + 100) stream elements minus the 100 left in the
    # buffer, so every example is seen epochs times, give or take one (the epochs overlap).
    counts = torch.bincount(flat, minlength=n)
    assert counts.min() >= epochs - 1 and counts.max() <= epochs + 1
    assert (counts != epochs).sum() <= 2 * size
    # Read through a buffer of 100: the element emitted t-th entered the stream before position
    # t + 100 of the once-shuffled set (its first draw), and it is not the set's order either.
    once = torch.randperm(n, generator=torch.Generator().manual_seed(1))
    where = torch.empty(n, dtype=torch.long)
    where[once] = torch.arange(n)
    first = flat[: n - size]
    pos = where[first]
    assert (pos < torch.arange(len(first)) + size).all()
    assert (pos - torch.arange(len(first))).abs().float().mean() > size / 4


def test_batch_order_buffer_of_one_repeats_the_single_shuffle():
    # tf.data's shuffle(1) passes the stream through unchanged: the once-shuffled set, repeated.
    order = ft.batch_order(64, 16, 2, torch.Generator().manual_seed(0), shuffle_buffer=1)
    assert len(order) == 8 and torch.equal(torch.cat(order[:4]), torch.cat(order[4:]))
    # A set smaller than a batch: mostly dummies; a batch may come out empty, never too long.
    tiny = ft.batch_order(3, 32, 4, torch.Generator().manual_seed(0), shuffle_buffer=100)
    assert len(tiny) == 4 and sum(len(b) for b in tiny) <= 4 * 32
    assert set(torch.cat(tiny).tolist()) <= {0, 1, 2}


# ------------------------------------------------------------------------------ end to end


def _write_sst2(root, rows_train, rows_dev):
    folder = root / "glue" / "SST-2"
    folder.mkdir(parents=True)
    for name, rows in (("train", rows_train), ("dev", rows_dev)):
        with gzip.open(folder / f"{name}.tsv.gz", "wt") as f:
            f.write("sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows))


@pytest.fixture(scope="module")
def toy_sst2(tmp_path_factory):
    """An SST-2-format task a tiny model can learn in seconds: the first word is the label."""
    rng = np.random.default_rng(0)
    words = ["cat", "dog", "tree", "sun", "rain", "blue", "red", "home"]

    def rows(n):
        ys = rng.integers(0, 2, n)
        return [(("yes " if y else "no ") + " ".join(rng.choice(words, 4)), int(y)) for y in ys]

    root = tmp_path_factory.mktemp("toy")
    _write_sst2(root, rows(256), rows(64))
    return root


def test_finetune_learns_and_is_deterministic(pretrained, toy_sst2, tmp_path):
    overrides = FAST + ["finetune.epochs=4", "finetune.learning_rate=2e-3"]
    r = ft_run.finetune(pretrained, "sst2", data_dir=toy_sst2, overrides=overrides, seed=3,
                    progress=False, out=tmp_path / "run")
    assert r["task"] == "sst2" and r["metric"] == "accuracy" and r["metric_key"] == "accuracy"
    assert r["score"] >= 90.0, r  # a random-init head on a random encoder sits near 50
    assert r["runs"][0]["steps"] == 4 * math.ceil(256 / 32)
    again = ft_run.finetune(pretrained, "sst2", data_dir=toy_sst2, overrides=overrides, seed=3,
                        progress=False)
    assert again["score"] == r["score"]
    assert again["runs"][0]["final_train_loss"] == r["runs"][0]["final_train_loss"]
    saved = json.loads((tmp_path / "run" / "result.json").read_text())
    assert saved["score"] == r["score"]

    # Reload and predict: the labels of the dev sentences reproduce the reported accuracy.
    dev = glue.load_split("sst2", "dev", data_dir=toy_sst2)
    preds = pr.predict(tmp_path / "run", [e.text_a for e in dev])
    acc = 100 * np.mean([p["label_id"] == e.label for p, e in zip(preds, dev)])
    assert acc == pytest.approx(r["score"])
    assert preds[0]["label"] in ("negative", "positive")
    assert sum(preds[0]["probabilities"].values()) == pytest.approx(1.0)


def test_official_shuffle_buffer_trains_the_same_number_of_steps(pretrained, toy_sst2):
    overrides = FAST + ["finetune.epochs=4", "finetune.learning_rate=2e-3",
                        "finetune.shuffle_buffer=100"]
    r = ft_run.finetune(pretrained, "sst2", data_dir=toy_sst2, overrides=overrides, seed=3,
                    progress=False)
    assert r["runs"][0]["steps"] == 4 * math.ceil(256 / 32) and r["score"] >= 90.0, r
    with pytest.raises(ValueError, match="shuffle_buffer"):
        finetune_config(["finetune.shuffle_buffer=-1"])


def test_seeds_give_the_median(pretrained, toy_sst2, tmp_path):
    r = ft_run.finetune(pretrained, "sst2", data_dir=toy_sst2, seeds=3, seed=0, progress=False,
                    max_train_examples=64, overrides=FAST + ["finetune.epochs=1"],
                    out=tmp_path, keep_all_models=True)
    assert r["seeds"] == [0, 1, 2] and len(r["scores"]) == 3
    assert r["median"] == r["score"] == pytest.approx(float(np.median(r["scores"])))
    assert (r["train_examples"], r["train_examples_available"], r["train_subset"]) == (64, 256,
                                                                                      True)
    assert all((tmp_path / f"seed-{s}" / "model.safetensors").is_file() for s in range(3))
    saved = json.loads((tmp_path / "finetune.json").read_text())["result"]  # the --out model
    assert saved["seed"] == r["median_seed"] and saved["score"] == r["score"]


def _runs(*pairs):
    return [{"seed": i, "score": a, "metrics": {"accuracy": a, "f1": f}}
            for i, (a, f) in enumerate(pairs)]


def test_the_result_is_the_median_run_not_per_metric_medians():
    # Hand-made runs: the median accuracy (70) belongs to seed 1, whose F1 is 10; the median of
    # the F1 column would be 50, a number no run produced.
    runs = _runs((60.0, 90.0), (70.0, 10.0), (80.0, 50.0))
    assert ft.median_run(runs) == 1
    data = ft.TaskData([], [], [], [], 0, 0)
    r = ft._summarise(glue.get_task("mrpc"), runs, data, FinetuneConfig(), None)
    assert (r["score"], r["metrics"], r["median_seed"]) == (70.0, {"accuracy": 70.0, "f1": 10.0},
                                                            1)
    # Even counts take the lower middle run (a real run); ties go to the earlier seed.
    assert ft.median_run(_runs((4, 0), (1, 0), (3, 0), (2, 0))) == 3
    assert ft.median_run(_runs((5, 0), (5, 0), (5, 0))) == 1
    assert ft.median_run(_runs((9, 0))) == 0


# --------------------------------------------------------------------------- the loss


def test_task_loss_is_the_official_sum_over_the_batch():
    torch.manual_seed(0)
    logits, labels = torch.randn(5, 3), torch.tensor([0, 2, 1, 1, 0])
    naive = sum(math.log(sum(math.exp(v) for v in row)) - row[y]  # -log softmax, by hand
                for row, y in zip(logits.tolist(), labels.tolist()))
    mnli = glue.get_task("mnli")
    assert classifier.task_loss(mnli, logits, labels).item() == pytest.approx(naive, rel=1e-6)
    assert classifier.task_loss(mnli, logits, labels, reduction="mean").item() == pytest.approx(
        naive / 5, rel=1e-6)
    # STS-B: squared error against label / 5: (0.2 - 1/5)^2 + (0.9 - 5/5)^2 + (0 - 2.5/5)^2
    stsb = glue.get_task("stsb")
    pred, score = torch.tensor([[0.2], [0.9], [0.0]]), torch.tensor([1.0, 5.0, 2.5])
    assert classifier.task_loss(stsb, pred, score).item() == pytest.approx(0.01 + 0.25, rel=1e-6)
    assert classifier.task_loss(stsb, pred, score, reduction="mean").item() == pytest.approx(0.26 / 3)


def test_sum_makes_the_first_update_batch_size_times_the_means(pretrained, char_tokenizer):
    """With a huge Adam eps the update is lr * 0.1 * g / eps, linear in the gradient g, so one
    step on 4 examples moves the weights exactly 4x further with the official sum."""
    task = glue.get_task("sst2")
    ex = [ftask.Example(t, None, y) for t, y in [("yes a cat", 1), ("no dog", 0),
                                                ("yes the sun", 1), ("no rain.", 0)]]
    enc = classifier.encode(char_tokenizer, ex, 32)
    data = ft.TaskData(enc, [e.label for e in ex], enc, [e.label for e in ex], 4, 4)
    moved, logged = {}, {}
    for reduction in ("sum", "mean"):
        cfg = FinetuneConfig(learning_rate=1e4, adam_eps=1e5, grad_clip=0, epochs=1,
                                warmup_fraction=0, head_dropout=0, encoder_dropout=0,
                                loss_reduction=reduction)
        torch.manual_seed(0)
        model = classifier.build_classifier(pretrained, task, cfg)
        with torch.no_grad():
            logits = model(**classifier.collate(enc, char_tokenizer.pad_id))
        per_example = torch.nn.functional.cross_entropy(logits, torch.tensor([1, 0, 1, 0]))
        before = model.head.weight.detach().clone()
        info = ft.train_classifier(model, task, data, cfg, seed=0, progress=False,
                                   pad_id=char_tokenizer.pad_id)
        moved[reduction], logged[reduction] = model.head.weight.detach() - before, info
        # The logged loss is per example either way (comparable across reductions).
        assert info["final_train_loss"] == pytest.approx(per_example.item(), rel=1e-5)
    assert logged["sum"]["steps"] == 1 and moved["mean"].abs().max() > 1e-3
    torch.testing.assert_close(moved["sum"], 4 * moved["mean"], rtol=1e-4, atol=1e-7)


def test_missing_tokenizer_and_too_long_sequences_are_errors(char_tokenizer, toy_sst2):
    bare = tiny_electra(char_tokenizer)
    bare.tokenizer = None
    with pytest.raises(ValueError, match="finetune.vocab"):
        ft_run.finetune(bare, "sst2", data_dir=toy_sst2, progress=False)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        ft_run.finetune(bare, "sst2", data_dir=toy_sst2, progress=False,
                    overrides=["finetune.max_seq_len=512"])


@pytest.mark.integration
def test_stsb_regression_and_mrpc_doubling_on_real_slices(pretrained, glue_slice_dir, tmp_path):
    r = ft_run.finetune(pretrained, "stsb", data_dir=glue_slice_dir, progress=False,
                    overrides=FAST + ["finetune.epochs=1"], out=tmp_path / "stsb")
    assert (r["metric"], r["metric_key"]) == ("Spearman correlation", "spearman")
    assert set(r["metrics"]) == {"spearman", "pearson"}
    assert r["train_examples"] == 40 and r["train_examples_used"] == 80  # doubled
    assert -100 <= r["score"] <= 100
    pair = ("A plane is taking off.", "A plane is flying.")
    preds = pr.predict(tmp_path / "stsb", [pair])
    assert set(preds[0]) == {"score"}
    # The head regresses label / 5: a prediction is 5 x its single output.
    model = saved_model.load_finetuned(tmp_path / "stsb")
    ids, types = model.tokenizer.encode_pair(*pair)
    with torch.no_grad():
        raw = model.model(torch.tensor([ids]), token_type_ids=torch.tensor([types])).item()
    assert preds[0]["score"] == pytest.approx(5 * raw, rel=1e-5)
    no_double = ft_run.finetune(pretrained, "mrpc", data_dir=glue_slice_dir, progress=False,
                            overrides=FAST + ["finetune.epochs=1",
                                              "finetune.double_unordered=false"])
    assert no_double["train_examples_used"] == 40 and set(no_double["metrics"]) == {
        "accuracy", "f1"}


@pytest.mark.integration
def test_run_glue_tables_what_ran_and_lists_what_is_missing(pretrained, glue_slice_dir,
                                                            tmp_path):
    s = tasks_suite.run_glue(pretrained, ["cola", "rte", "mnli"], data_dir=glue_slice_dir,
                    progress=False, out=tmp_path, overrides=FAST + ["finetune.epochs=1"])
    assert set(s["scores"]) == {"cola", "rte"} and "mnli" in s["missing"]
    assert "MNLI/train.tsv" in s["missing"]["mnli"]
    assert s["glue_score"] is None and s["glue_partial"]  # 2 of 8 tasks: no GLUE score
    assert s["glue_average"] == pytest.approx((s["scores"]["cola"] + s["scores"]["rte"]) / 2)
    md = (tmp_path / "glue.md").read_text()
    header = md.splitlines()[0]
    assert header.split("|")[2:11] == [f" {n} " for n in ("CoLA", "SST-2", "MRPC", "STS-B",
                                                           "QQP", "MNLI", "QNLI", "RTE", "GLUE")]
    assert "n/a MNLI: data absent" in md
    assert json.loads((tmp_path / "glue.json").read_text())["scores"] == s["scores"]


def test_checkpoint_directories_give_the_same_run(pretrained, toy_sst2, tmp_path):
    """In memory, a minielectra checkpoint dir and a transformers dir: one model, one result."""
    
    pretrained.save_pretrained(tmp_path / "mini")
    hf.export(pretrained, tmp_path / "hf")
    kw = dict(data_dir=toy_sst2, progress=False, max_train_examples=64,
              overrides=FAST + ["finetune.epochs=1"])
    runs = [ft_run.finetune(c, "sst2", **kw) for c in
            (pretrained, tmp_path / "mini", tmp_path / "hf" / "discriminator")]
    losses = [r["runs"][0]["final_train_loss"] for r in runs]
    assert losses[0] == pytest.approx(losses[1], abs=1e-6) == pytest.approx(losses[2], abs=1e-6)
    assert runs[1]["checkpoint"] == str(tmp_path / "mini")
    # A transformers dir without vocab.txt needs finetune.vocab.
    (tmp_path / "hf" / "discriminator" / "vocab.txt").rename(tmp_path / "vocab.txt")
    with pytest.raises(ValueError, match="finetune.vocab"):
        ft_run.finetune(tmp_path / "hf" / "discriminator", "sst2", **kw)
    r = ft_run.finetune(tmp_path / "hf" / "discriminator", "sst2", data_dir=toy_sst2,
                    progress=False, max_train_examples=64,
                    overrides=kw["overrides"] + [f"finetune.vocab={tmp_path / 'vocab.txt'}"])
    assert r["runs"][0]["final_train_loss"] == pytest.approx(losses[0], abs=1e-6)


def test_run_dirs_bundled_and_bin_only_transformers_dirs_resolve(pretrained, char_tokenizer,
                                                                 tmp_path):
    from safetensors.torch import load_file

    from minielectra.model.storage import BUNDLED
    from minielectra.config import RunConfig
    from minielectra.training.checkpoints import save_checkpoint

    save_checkpoint(tmp_path / "run", 4, tiny_electra(char_tokenizer, seed=4), {}, RunConfig())
    save_checkpoint(tmp_path / "run", 12, pretrained, {}, RunConfig())  # the final one
    model, source = opening.open_checkpoint(tmp_path / "run")
    assert source == tmp_path / "run" / "checkpoints" / "step_0000012"
    for k, v in pretrained.state_dict().items():
        torch.testing.assert_close(model.state_dict()[k], v, rtol=0, atol=0)
    assert resolve_checkpoint("bundled") == BUNDLED
    # A transformers directory as the hub ships it: pytorch_model.bin, no model.safetensors.
    hf.export(pretrained, tmp_path / "hf")
    d = tmp_path / "hf" / "discriminator"
    torch.save(load_file(d / "model.safetensors"), d / "pytorch_model.bin")
    (d / "model.safetensors").unlink()
    assert resolve_checkpoint(d) == d
    with pytest.raises(FileNotFoundError, match="run directory"):
        resolve_checkpoint(tmp_path / "empty")


@pytest.mark.integration
def test_run_glue_resolves_and_loads_the_checkpoint_once(pretrained, glue_slice_dir, tmp_path,
                                                         monkeypatch):
    
    pretrained.save_pretrained(tmp_path / "ckpt")
    calls = {"resolve": 0, "load": 0}
    resolve, load = opening.resolve_checkpoint, model_checkpoint.load_pretrained

    def counted(name, fn):
        def wrapper(*a, **kw):
            calls[name] += 1
            return fn(*a, **kw)
        return wrapper

    monkeypatch.setattr(opening, "resolve_checkpoint", counted("resolve", resolve))
    monkeypatch.setattr(model_checkpoint, "load_pretrained", counted("load", load))
    s = tasks_suite.run_glue(tmp_path / "ckpt", ["cola", "rte"], seeds=2, data_dir=glue_slice_dir,
                    progress=False, overrides=FAST + ["finetune.epochs=1"])
    assert calls == {"resolve": 1, "load": 1}  # two tasks, two seeds each: one load
    assert s["checkpoint"] == s["tasks"]["cola"]["checkpoint"] == str(tmp_path / "ckpt")


def test_read_pairs_names_the_file_and_real_line_numbers(tmp_path):
    f = tmp_path / "inputs.tsv"
    f.write_text("one\n\ntwo\tthree\n\na\tb\tc\n")  # the bad row is on line 5, after blanks
    with pytest.raises(ValueError, match=r"inputs\.tsv: line\(s\) \[5\]"):
        read_lines(f)
    f.write_text("\n\n")
    with pytest.raises(ValueError, match=r"inputs\.tsv: no input"):
        read_lines(f)
    f.write_text("one\n\ntwo\tthree\n")
    assert read_lines(f) == [("one", None), ("two", "three")]
