"""Your own data in ``finetune``: reading CSV/TSV/JSONL, labels, regression, and the whole path to
``predict``, checked against scikit-learn and scipy on the saved model's own predictions.

The files are the handmade ones of tests/fixtures (reviews: two classes; pairs: a TSV of sentence
pairs; scores: JSONL regression); the model is a tiny random ELECTRA with a character vocabulary.
"""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats
from sklearn import metrics as skm

from minielectra.cli import main
from minielectra.data import hub as data_hub
from minielectra.finetune import run as ft_run, task as ftask, train as ft
from minielectra.finetune import predict as pr
from minielectra.finetune.owndata import data as userdata

FIXTURES = Path(__file__).parent / "fixtures"
FAST = ["finetune.epochs=2", "finetune.num_threads=1", "finetune.batch_size=4"]


@pytest.fixture(scope="module")
def checkpoint(char_run_dir):
    """A ``pretrain --out`` run dir: a tiny random ELECTRA with a character vocabulary."""
    return char_run_dir


# ----------------------------------------------------------------------------------- reading


def test_the_three_formats_read_alike(tmp_path):
    (tmp_path / "a.csv").write_text('text,label\n"one, two",x\n\nthree,y\n')
    (tmp_path / "a.tsv").write_text('text\tlabel\none, two\tx\n\nthree\ty\n')
    (tmp_path / "a.jsonl").write_text('{"text": "one, two", "label": "x"}\n\n'
                                      '{"text": "three", "label": "y"}\n')
    for suffix, lines in ((".csv", (2, 4)), (".tsv", (2, 4)), (".jsonl", (1, 3))):
        rows = userdata.read_rows(tmp_path / f"a{suffix}")
        assert [r[1]["text"] for r in rows] == ["one, two", "three"]
        assert [r[0] for r in rows] == [f"{tmp_path / ('a' + suffix)}: line {n}" for n in lines]


def test_gzipped_files_and_a_bom_are_read(tmp_path):
    import gzip
    (tmp_path / "a.csv.gz").write_bytes(gzip.compress("\ufefftext,label\nhi,1\nho,0\n".encode()))
    assert [r[1] for r in userdata.read_rows(tmp_path / "a.csv.gz")] == [
        {"text": "hi", "label": "1"}, {"text": "ho", "label": "0"}]


def rows(*labels):
    return [(f"f: line {i + 2}", {"text": f"t{i}", "label": x}) for i, x in enumerate(labels)]


@pytest.mark.parametrize("labels, names, regression", [
    (("b", "a", "b"), ("a", "b"), False),
    (("10", "2", "1"), ("1", "2", "10"), False),  # integers: classes, in numeric order
    ((1, "1", 1.0, 0), ("0", "1"), False),  # JSON 1, "1" and 1.0 are one class
    ((True, False), ("false", "true"), False),
    (("0.5", "2", "3.25"), None, True),  # a fraction: regression
])
def test_labels_become_classes_or_regression(labels, names, regression):
    task = userdata.build_task("t", rows(*labels), rows(*labels[:1]))
    assert task.is_regression == regression and task.label_names == names


def test_regression_on_request_and_its_scale():
    task = userdata.build_task("t", rows("1", "2", "3", "6"), rows("4"), regression=True)
    assert task.is_regression and task.metrics == ("pearson", "spearman")
    assert task.label_shift == pytest.approx(3.0)
    assert task.label_scale == pytest.approx(np.std([1, 2, 3, 6]))
    assert [e.label for e in task.dev_examples] == [4.0]


def test_metrics_follow_the_number_of_classes():
    assert userdata.build_task("t", rows("a", "b"), rows("a")).metrics == ("accuracy", "f1")
    assert userdata.build_task("t", rows("a", "b", "c"), rows("a")).metrics == ("accuracy",)


def test_renamed_columns_and_an_automatic_pair(tmp_path):
    (tmp_path / "t.csv").write_text("review,second,stars\na,b,1\nc,d,2\n")
    task = userdata.task_from_files(tmp_path / "t.csv", tmp_path / "t.csv", columns=(
        userdata.Columns(text="review", text_pair="second", label="stars")))
    assert task.is_pair and [(e.text_a, e.text_b) for e in task.train_examples] == [
        ("a", "b"), ("c", "d")]
    pairs = userdata.task_from_files(FIXTURES / "pairs_train.tsv", FIXTURES / "pairs_dev.tsv")
    assert pairs.is_pair and pairs.label_names == ("0", "1")  # text_pair found by name


# ----------------------------------------------------------------------- finetune -> predict


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def sets(*overrides):
    return [x for o in overrides for x in ("--set", o)]


def test_own_csv_gives_the_glue_json_and_a_model_predict_reads(capsys, checkpoint, tmp_path,
                                                                 glue_slice_dir, monkeypatch):
    r = run(capsys, "finetune", "--checkpoint", checkpoint, "--train",
            FIXTURES / "reviews_train.csv", "--dev", FIXTURES / "reviews_dev.csv", "--out",
            tmp_path / "m", "--seeds", 3, *sets(*FAST))
    monkeypatch.setenv("MINIELECTRA_DATA_DIR", str(glue_slice_dir))
    glue_r = run(capsys, "finetune", "--checkpoint", checkpoint, "--task", "sst2",
                 "--max-train-examples", 8, *sets(*FAST))
    assert set(r) == set(glue_r)  # the same JSON, key for key
    assert (r["task"], r["metric_key"], r["seeds"]) == ("reviews_train.csv", "accuracy", [0, 1, 2])
    assert r["score"] == sorted(r["scores"])[1] and r["dev_examples"] == 4
    dev = userdata.read_rows(FIXTURES / "reviews_dev.csv")
    out = run(capsys, "predict", "--model", tmp_path / "m", *[d[1]["text"] for d in dev[:1]])
    assert out["task"] == "reviews_train.csv"
    preds = pr.predict(tmp_path / "m", [d[1]["text"] for d in dev])
    truth = [d[1]["label"] for d in dev]
    labels = [p["label"] for p in preds]
    assert set(labels) <= {"negative", "positive"}
    assert r["metrics"]["accuracy"] == pytest.approx(100 * skm.accuracy_score(truth, labels))
    assert r["metrics"]["f1"] == pytest.approx(100 * skm.f1_score(truth, labels,
                                                                   pos_label="positive"))


def test_own_pairs_and_regression_predict_on_the_labels_scale(checkpoint, tmp_path):
    r = ft_run.finetune(checkpoint, train=FIXTURES / "pairs_train.tsv",
                    dev=FIXTURES / "pairs_dev.tsv", out=tmp_path / "pairs", overrides=FAST,
                    progress=False)
    with pytest.raises(ValueError, match="input 0 has only one sentence"):
        pr.predict(tmp_path / "pairs", ["just one"])
    assert len(pr.predict(tmp_path / "pairs", [("a", "b")])) == 1 and r["dev_examples"] == 2
    r = ft_run.finetune(checkpoint, train=FIXTURES / "scores_train.jsonl",
                    dev=FIXTURES / "scores_dev.jsonl", out=tmp_path / "scores",
                    overrides=FAST, progress=False)
    dev = userdata.read_rows(FIXTURES / "scores_dev.jsonl")
    scores = [p["score"] for p in pr.predict(tmp_path / "scores", [d[1]["text"] for d in dev])]
    truth = [d[1]["label"] for d in dev]
    assert r["metric_key"] == "pearson"
    assert r["metrics"]["pearson"] == pytest.approx(100 * stats.pearsonr(scores, truth)[0],
                                                    abs=1e-3)
    assert r["metrics"]["spearman"] == pytest.approx(100 * stats.spearmanr(scores, truth)[0],
                                                     abs=1e-3)
    # outputs come back on the labels' scale: logit * sd + mean of the training labels
    train = [d[1]["label"] for d in userdata.read_rows(FIXTURES / "scores_train.jsonl")]
    from minielectra.finetune.classifier import collate, encode
    from minielectra.finetune.saved import load_finetuned
    ft_model = load_finetuned(tmp_path / "scores")
    examples = [ftask.Example(d[1]["text"], None, 0) for d in dev]
    with torch.no_grad():
        logits = ft_model.model(**collate(encode(ft_model.tokenizer, examples, 128), 0))
    expected = logits.squeeze(-1).numpy() * np.std(train) + np.mean(train)
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-5)


def test_a_hub_dataset_is_read_through_datasets(checkpoint, monkeypatch):
    datasets = pytest.importorskip("datasets")
    features = datasets.Features({"sentence": datasets.Value("string"),
                                  "label": datasets.ClassLabel(names=["neg", "pos"])})
    data = {"sentence": ["good", "bad", "fine", "awful"], "label": [1, 0, 1, 0]}
    splits = datasets.DatasetDict({s: datasets.Dataset.from_dict(data, features=features)
                                   for s in ("train", "validation")})
    calls = []
    monkeypatch.setattr(data_hub, "_PROBED", [None])
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: calls.append(a) or splits)
    task = ft_run.resolve_task("hf:someone/reviews:en", columns=userdata.Columns(text="sentence"))
    assert calls == [("someone/reviews", "en")] and task.label_names == ("neg", "pos")
    assert [e.label for e in task.dev_examples] == [1, 0, 1, 0]


def test_without_a_checkpoint_the_bundled_one_is_fine_tuned_and_said(capsys):
    code = main(["finetune", "--train", str(FIXTURES / "reviews_train.csv"), "--dev",
                 str(FIXTURES / "reviews_dev.csv"), *sets("finetune.epochs=1",
                                                          "finetune.num_threads=1")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["checkpoint"].endswith("assets/bundled")
    assert "no --checkpoint given: fine-tuning the bundled one" in err


def test_own_data_gets_the_suites_recipe_unless_set_says_otherwise(capsys, checkpoint):
    """10 epochs by default (finetune.run.OWN_DATA_RECIPE), said in one line; a --set of the
    same key wins and silences it; a GLUE task keeps the paper's recipe."""
    assert ft_run.own_data_overrides(["finetune.epochs=2"]) == (["finetune.epochs=2"], [])
    assert ft_run.own_data_overrides(["finetune.lr=1"]) == (
        ["finetune.epochs=10", "finetune.lr=1"], ["finetune.epochs=10"])
    common = ["--checkpoint", checkpoint, "--train", FIXTURES / "reviews_train.csv", "--dev",
              FIXTURES / "reviews_dev.csv", "--set", "finetune.num_threads=1"]
    code = main([str(a) for a in ["finetune", *common, "--set", "finetune.batch_size=16"]])
    out, err = capsys.readouterr()
    assert code == 0 and json.loads(out)["config"]["epochs"] == 10
    assert [line for line in err.splitlines() if "the recipe for your own data" in line] == [
        "finetune reviews_train.csv: the recipe for your own data, 10 epochs (the best of three "
        "on the GLUE-style suite's validation split; --set finetune.epochs=N to change it)"]
    r = run(capsys, "finetune", *common, *sets("finetune.epochs=1"))
    assert r["config"]["epochs"] == 1


def test_standard_input_of_one_long_line_is_one_input(monkeypatch):
    """`predict -` given a 2 MB line: one input (the model reads its first tokens), not the csv
    module's field-size error."""
    import io as _io
    from minielectra.finetune.glue.data import get_task
    from minielectra.finetune.predict import group_texts
    line = "word " * 400_000
    monkeypatch.setattr("sys.stdin", _io.StringIO(line + "\nshort one\n"))
    assert group_texts(["-"], get_task("sst2")) == [(line, None), ("short one", None)]
