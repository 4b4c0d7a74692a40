"""Held-out evaluation: exact ROC-AUC (against scikit-learn), metric definitions, the JSON."""

import json
import random

import numpy as np
import pytest
import torch

from minielectra.config import RunConfig, apply_overrides, preset
from minielectra.model.electra import Electra
from minielectra.training.evaluate import evaluate, evaluate_model, heldout_batches, roc_auc

sklearn_metrics = pytest.importorskip("sklearn.metrics")


# ----------------------------------------------------------------------------------- AUC

@pytest.mark.parametrize("seed", range(5))
def test_roc_auc_matches_sklearn_with_ties(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 3000))
    labels = rng.random(n) < rng.uniform(0.05, 0.5)
    labels[:2] = [True, False]
    # Few distinct values, so many positive-negative ties (each must count 1/2).
    scores = rng.integers(0, 7, n) + 0.8 * labels * rng.random(n).round(1)
    assert roc_auc(scores, labels) == pytest.approx(sklearn_metrics.roc_auc_score(labels, scores),
                                                    abs=1e-12)


def test_roc_auc_closed_forms():
    assert roc_auc([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1]) == 1.0
    assert roc_auc([0.9, 0.8, 0.2, 0.1], [0, 0, 1, 1]) == 0.0
    assert roc_auc([0.5] * 6, [0, 1, 0, 1, 1, 0]) == 0.5  # all tied: chance
    assert roc_auc(np.float32([3.0, 1.0, 2.0]), torch.tensor([True, False, False])) == 1.0
    assert np.isnan(roc_auc([0.1, 0.2], [1, 1]))  # one class only: undefined


def test_roc_auc_is_exact_on_large_inputs():
    """Ranks in float64: no loss of precision on ~a million tokens (a float32 cumsum would)."""
    rng = np.random.default_rng(0)
    labels = rng.random(1_000_000) < 0.1
    scores = rng.normal(size=labels.size).astype(np.float32) + labels
    assert roc_auc(scores, labels) == pytest.approx(sklearn_metrics.roc_auc_score(labels, scores),
                                                    abs=1e-12)


# ----------------------------------------------------------------------- model and checkpoint

WORDS = "alpha beta gamma delta eps zeta eta theta iota kappa lambda mu nu xi pi rho".split()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A tiny trained run (3 steps) on a tiny corpus."""
    from minielectra.training.loop import pretrain

    rng = random.Random(1)
    root = tmp_path_factory.mktemp("eval")
    corpus = root / "tiny.txt"
    corpus.write_text("\n\n".join("\n".join(" ".join(rng.choices(WORDS, k=rng.randint(4, 10)))
                                            for _ in range(4)) for _ in range(40)) + "\n")
    cfg = apply_overrides(preset("tiny"), [
        f"data.corpus={corpus}", f"data.cache_dir={root / 'cache'}", "data.vocab_size=48",
        "data.held_out_fraction=0.3", "train.max_steps=3", "train.warmup_steps=1",
        "train.eval_examples=1000", f"train.out_dir={root / 'run'}"])
    result = pretrain(cfg, progress=False)
    return root / "run", result


def test_evaluate_prints_json_with_the_promised_keys(run_dir):
    out, trained = run_dir
    result = evaluate(trained["checkpoint"])
    keys = {"disc_auc", "disc_accuracy", "disc_precision", "disc_recall", "gen_accuracy",
            "replaced_fraction", "examples"}
    assert keys <= result.keys()
    assert json.loads(json.dumps(result)) == result  # JSON-ready: plain floats and ints
    for k in keys - {"examples"}:
        assert 0.0 <= result[k] <= 1.0, k
    assert result["examples"] > 0
    # deterministic: fixed seed, eval mode; a run directory resolves to its latest checkpoint
    assert evaluate(out) == result
    # the training loop's final held-out evaluation: same examples, batches and seed
    assert {k: result[k] for k in trained["heldout"]} == trained["heldout"]
    assert evaluate(out, seed=5)["disc_auc"] != result["disc_auc"]  # the seed does matter
    limited = evaluate(out, max_examples=3)
    assert limited["examples"] == 3


def test_heldout_batches_keep_every_example_or_spread_a_subset(run_dir):
    from minielectra.data.dataset import build_dataset
    from minielectra.config import RunConfig

    out, trained = run_dir
    cfg = RunConfig.load(out / "config.json")
    d = cfg.data
    ds = build_dataset(d.corpus, Electra.from_pretrained(trained["checkpoint"]).tokenizer,
                       max_seq_len=d.max_seq_len, split="heldout",
                       held_out_fraction=d.held_out_fraction, seed=cfg.train.seed,
                       cache_dir=d.cache_dir, num_workers=1, progress=False)
    everything = torch.cat([b["input_ids"] for b in heldout_batches(ds, batch_size=7)])
    assert len(everything) == len(ds) > 7  # the last, smaller batch is kept
    torch.testing.assert_close(everything, torch.from_numpy(ds.input_ids.astype(np.int64)))
    masks = torch.cat([b["attention_mask"] for b in heldout_batches(ds, batch_size=7)])
    assert masks.sum(1).tolist() == ds.lengths.tolist()
    subset = torch.cat([b["input_ids"] for b in heldout_batches(ds, batch_size=7, max_examples=5)])
    rows = np.linspace(0, len(ds) - 1, 5).round().astype(int)
    assert rows[0] == 0 and rows[-1] == len(ds) - 1  # first to last, not the first five
    torch.testing.assert_close(subset, torch.from_numpy(ds.input_ids[rows].astype(np.int64)))


def test_evaluate_model_metrics_match_their_definitions(run_dir):
    """Recompute every metric from one forward pass with the same seed, with scikit-learn."""
    out, trained = run_dir
    model = Electra.from_pretrained(trained["checkpoint"])
    from minielectra.data.dataset import build_dataset
    from minielectra.config import RunConfig
    cfg = RunConfig.load(out / "config.json")
    d = cfg.data
    ds = build_dataset(d.corpus, model.tokenizer, max_seq_len=d.max_seq_len, split="heldout",
                       held_out_fraction=d.held_out_fraction, seed=cfg.train.seed,
                       cache_dir=d.cache_dir, num_workers=1, progress=False)
    batch = next(heldout_batches(ds, batch_size=10_000))
    got = evaluate_model(model, [batch], seed=7)

    model.eval()
    with torch.no_grad():
        o = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"],
                  generator=torch.Generator().manual_seed(7))
    real = batch["attention_mask"].bool()
    y = o.is_replaced[real].numpy()
    p = torch.sigmoid(o.disc_logits[real]).numpy()
    pred = p > 0.5
    w = o.masked.weights.bool()
    assert got["disc_auc"] == pytest.approx(sklearn_metrics.roc_auc_score(y, p), abs=1e-9)
    ids = o.corrupted_ids[real].numpy()
    text = (ids != model.config.cls_token_id) & (ids != model.config.sep_token_id)
    assert text.sum() < len(text)  # there were [CLS]/[SEP] tokens to leave out
    assert got["disc_auc_text"] == pytest.approx(
        sklearn_metrics.roc_auc_score(y[text], p[text]), abs=1e-9)
    assert got["disc_accuracy"] == pytest.approx(sklearn_metrics.accuracy_score(y, pred))
    assert got["disc_precision"] == pytest.approx(
        sklearn_metrics.precision_score(y, pred, zero_division=0))
    assert got["disc_recall"] == pytest.approx(sklearn_metrics.recall_score(y, pred))
    gen_pred = o.gen_logits.argmax(-1)[w]
    gen_correct = (gen_pred == o.masked.targets[w]).float().mean().item()
    assert got["gen_accuracy"] == pytest.approx(gen_correct)
    assert got["replaced_fraction"] == pytest.approx(y.mean())
    assert got["examples"] == len(batch["input_ids"]) == len(ds)


def test_cli_evaluate_prints_the_json_and_refuses_bad_counts(run_dir, capsys):
    from minielectra.cli import main

    out, trained = run_dir
    assert main(["evaluate", "--checkpoint", str(out), "--max-examples", "4"]) == 0
    said = capsys.readouterr()
    printed = json.loads(said.out)  # stdout is the JSON alone; the progress goes to stderr
    assert printed["examples"] == 4 and printed["checkpoint"] == trained["checkpoint"]
    batches = -(-4 // RunConfig.load(out / "config.json").train.batch_size)
    assert f"evaluate: {batches}/{batches} (100%)" in said.err, said.err
    assert printed == {**evaluate(out, max_examples=4)}
    assert main(["evaluate", "--checkpoint", str(out), "--max-examples", "0"]) == 2
    assert "max_examples must be positive, got 0" in capsys.readouterr().err


def test_evaluate_at_another_length_builds_examples_of_that_length(run_dir, capsys):
    """``--max-seq-len``: a run pre-trained at two lengths is scored at either; the JSON says
    which, and a length past the model's positions is refused by name."""
    from minielectra.cli import main

    out, trained = run_dir
    own = evaluate(out)
    shorter = own["max_seq_len"] // 2
    short = evaluate(out, max_seq_len=shorter)
    assert short["max_seq_len"] == shorter and own["max_seq_len"] > shorter
    assert short["tokens"] / short["examples"] <= shorter < own["tokens"] / own["examples"] + 1
    assert main(["evaluate", "--checkpoint", str(out), "--max-seq-len", str(shorter)]) == 0
    assert json.loads(capsys.readouterr().out) == short
    assert main(["evaluate", "--checkpoint", str(out), "--max-seq-len", "100000"]) == 2
    assert "max_seq_len 100000 is longer than the checkpoint's" in capsys.readouterr().err
