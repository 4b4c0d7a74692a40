"""``minielectra prepare`` and ``pretrain --data``: shards, resume, refusals, training from them.

References: the single-folder builder (``build_dataset``) for the shards' content, an
uninterrupted ``prepare`` for a resumed one, and a count of the chunks actually built for "finished
shards are not redone". A tiny corpus is written to tmp_path; chunks are made small so that it
spans several shards.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from minielectra import cli
from minielectra.config import apply_overrides, preset
from minielectra.data import dataset as dataset_mod
from minielectra.data import prepare as prepare_mod
from minielectra.data.dataset import batch_iterator, build_dataset
from minielectra.data.prepare import ShardedDataset, load_prepared, prepare
from minielectra.data.tokenizer import WordPieceTokenizer

CHUNK = 400  # characters per chunk: the tiny corpus makes ~25 chunks


@pytest.fixture
def corpus_file(tmp_path, write_tiny_corpus) -> Path:
    return write_tiny_corpus(tmp_path / "tiny.txt", documents=60)


@pytest.fixture
def vocab(tmp_path, tiny_words) -> Path:
    tok = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *tiny_words])
    tok.save(tmp_path / "tok")
    return tmp_path / "tok" / "vocab.txt"


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setattr(prepare_mod, "CHUNK_CHARS", CHUNK)
    monkeypatch.setattr(dataset_mod, "CHUNK_CHARS", CHUNK)


def run_prepare(corpus_file, vocab, out, **kw):
    options = dict(tokenizer=str(vocab), max_seq_len=16, held_out_fraction=0.2,
                   chunks_per_shard=4, num_workers=1, progress=False)
    return prepare(str(corpus_file), out=out, **{**options, **kw})


def arrays(ds) -> dict[str, np.ndarray]:
    rows = np.arange(len(ds))
    return {"input_ids": ds.input_ids[rows], "token_type_ids": ds.token_type_ids[rows],
            "lengths": ds.lengths[rows]}


def test_shards_hold_exactly_the_single_folder_builders_examples(corpus_file, vocab, tmp_path,
                                                                  cache_dir):
    summary = run_prepare(corpus_file, vocab, tmp_path / "out")
    assert summary["train"]["shards"] >= 3  # the test is about several shards
    tok = WordPieceTokenizer.from_vocab_file(vocab)
    for split in ("train", "heldout"):
        reference = build_dataset(str(corpus_file), tok, max_seq_len=16, split=split,
                                  held_out_fraction=0.2, num_workers=1, progress=False,
                                  cache_dir=cache_dir)
        sharded = ShardedDataset(tmp_path / "out" / split)
        assert len(sharded) == len(reference) == summary[split]["num_examples"]
        for name, values in arrays(sharded).items():
            np.testing.assert_array_equal(values, arrays(reference)[name], err_msg=name)
    # batches over shard borders: the same rows as from the one-folder dataset
    a = next(batch_iterator(sharded, 5, seed=3))
    b = next(batch_iterator(reference, 5, seed=3))
    for k in a:
        assert (a[k] == b[k]).all(), k


def test_an_interrupted_prepare_resumes_without_redoing_finished_shards(corpus_file, vocab,
                                                                        tmp_path, monkeypatch):
    run_prepare(corpus_file, vocab, tmp_path / "straight")
    real_write, written = prepare_mod._write_shard, []

    def crash_on_third(root, index, results, **kw):
        if len(written) == 2:
            list(results)  # the third shard's chunks are built, then the process dies
            raise KeyboardInterrupt
        written.append(index)
        return real_write(root, index, results, **kw)

    monkeypatch.setattr(prepare_mod, "_write_shard", crash_on_third)
    with pytest.raises(KeyboardInterrupt):
        run_prepare(corpus_file, vocab, tmp_path / "resumed")
    monkeypatch.setattr(prepare_mod, "_write_shard", real_write)

    built = []
    real_build = dataset_mod.build_chunk
    monkeypatch.setattr(dataset_mod, "build_chunk",
                        lambda index, *a: built.append(index) or real_build(index, *a))
    run_prepare(corpus_file, vocab, tmp_path / "resumed")
    train_built = built[:built.index(0)]  # then the held-out split starts again at chunk 0
    assert train_built[0] == 2 * 4 == min(train_built)  # 2 finished shards of 4 chunks kept
    for split in ("train", "heldout"):
        a, b = (ShardedDataset(tmp_path / d / split) for d in ("straight", "resumed"))
        for name, values in arrays(a).items():
            np.testing.assert_array_equal(values, arrays(b)[name], err_msg=f"{split} {name}")


def test_prepare_refuses_a_folder_written_with_other_settings(corpus_file, vocab, tmp_path):
    run_prepare(corpus_file, vocab, tmp_path / "out")
    with pytest.raises(ValueError, match="max_seq_len"):
        run_prepare(corpus_file, vocab, tmp_path / "out", max_seq_len=32)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="notes.txt"):
        run_prepare(corpus_file, vocab, tmp_path / "other")
    assert sorted(p.name for p in (tmp_path / "other").iterdir()) == ["notes.txt"]


def test_pretrain_data_uses_the_folders_tokenizer_and_shards(corpus_file, vocab, tmp_path):
    run_prepare(corpus_file, vocab, tmp_path / "data")
    with pytest.raises(ValueError, match="16 tokens") as e:
        load_prepared(tmp_path / "data", max_seq_len=32)
    # both ways out, as the user types them
    assert "--set data.max_seq_len=16" in str(e.value) and "--max-seq-len 32" in str(e.value)
    from minielectra.training.loop import pretrain
    cfg = apply_overrides(preset("tiny"), [
        f"data.prepared={tmp_path / 'data'}", "data.corpus=/nonexistent", "train.max_steps=3",
        f"train.out_dir={tmp_path / 'run'}"])
    summary = pretrain(cfg, progress=False)
    saved = WordPieceTokenizer.load(Path(summary["checkpoint"]))
    assert saved.tokens == WordPieceTokenizer.from_vocab_file(vocab).tokens
    assert summary["heldout"]["examples"] == 8
    # `evaluate` on that run scores the folder's held-out shards (its corpus does not exist),
    # the same examples and figures the loop's final evaluation logged.
    from minielectra.training.evaluate import evaluate
    result = evaluate(tmp_path / "run", max_examples=8)
    assert result["corpus"] == f"prepared:{tmp_path / 'data'}"
    for key in ("examples", "disc_auc", "disc_accuracy", "gen_accuracy"):
        assert result[key] == pytest.approx(summary["heldout"][key], abs=1e-6), key
    assert evaluate(tmp_path / "run", split="train")["examples"] == len(
        ShardedDataset(tmp_path / "data" / "train"))
    with pytest.raises(ValueError, match="--split heldout or train"):
        evaluate(tmp_path / "run", split="all")
    # another length needs text to build the examples from: the folder holds them at 16 tokens
    with pytest.raises(ValueError, match="examples have 16 tokens.*--corpus"):
        evaluate(tmp_path / "run", max_seq_len=12)
    assert evaluate(tmp_path / "run", max_seq_len=12, corpus=str(corpus_file))["max_seq_len"] == 12


def test_cli_prepare_then_pretrain_data(corpus_file, vocab, tmp_path, capsys):
    out = tmp_path / "data"
    assert cli.main(["prepare", "--corpus", str(corpus_file), "--tokenizer", str(vocab),
                     "--out", str(out), "--max-seq-len", "16", "--workers", "1",
                     "--held-out-fraction", "0.2"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["train"]["num_examples"] == len(ShardedDataset(out / "train"))
    args = cli.build_parser().parse_args(["pretrain", "--preset", "small", "--data", str(out),
                                          "--device", "cpu"])
    cfg = cli.pretrain_config(args)
    assert cfg.data.prepared == str(out)
    # CPU: no GPU defaults; a million steps repay the compiling, and take bf16 where the CPU
    # has it natively (training/compiling.py)
    from minielectra.training.device import cpu_bf16_missing
    bf16 = "fp32" if cpu_bf16_missing() else "bf16"
    assert (cfg.train.precision, cfg.train.compile) == (bf16, True)
