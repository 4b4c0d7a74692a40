"""GLUE tasks, data loading and metrics (minielectra.finetune.glue.data).

Metrics are checked against scikit-learn / scipy (test-only dependencies) and hand-computed cases;
the loaders against the row counts and first rows of the real GLUE files (../shared/data, see its
MANIFEST.md), skipped when that folder is absent.
"""

import gzip

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as skm

from minielectra.data import hub as data_hub
from minielectra.finetune import task as ftask
from minielectra.finetune.glue import data as glue
from minielectra.finetune import metrics as glue_metrics
from minielectra.finetune.glue import table as glue_table
from minielectra.finetune.glue.data import get_task
from minielectra.finetune.task import Example

# ------------------------------------------------------------------------------------ metrics


def test_metrics_hand_computed():
    # 2x2 table tp=3, fn=1, fp=2, tn=4: MCC = (3*4 - 2*1) / sqrt(5*5*4*6) = 10 / sqrt(600)
    labels = [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]
    preds = [1, 1, 1, 0, 1, 1, 0, 0, 0, 0]
    assert glue_metrics.matthews_corr(preds, labels) == pytest.approx(10 / 600 ** 0.5)
    assert glue_metrics.accuracy(preds, labels) == pytest.approx(0.7)
    assert glue_metrics.f1_score(preds, labels) == pytest.approx(2 * 3 / (2 * 3 + 2 + 1))
    # Ranks of [10, 20, 20, 5] with ties averaged: [2, 3.5, 3.5, 1].
    np.testing.assert_allclose(glue_metrics.rankdata([10, 20, 20, 5]), [2, 3.5, 3.5, 1])
    assert glue_metrics.pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert glue_metrics.spearman([1, 2, 3], [1, 8, 27]) == pytest.approx(1.0)
    assert glue_metrics.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


def test_metrics_degenerate_cases():
    # A constant predictor: MCC 0 (as scikit-learn), correlations 0 (scipy says NaN), F1 0.
    assert glue_metrics.matthews_corr([1, 1, 1], [0, 1, 1]) == 0.0
    assert skm.matthews_corrcoef([0, 1, 1], [1, 1, 1]) == 0.0
    assert glue_metrics.pearson([1, 1, 1], [0, 1, 2]) == 0.0
    assert glue_metrics.spearman([0, 1, 2], [5, 5, 5]) == 0.0
    assert glue_metrics.f1_score([0, 0], [0, 0]) == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_classification_metrics_match_sklearn(seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, 200)
    preds = np.where(rng.random(200) < 0.7, labels, 1 - labels)
    assert glue_metrics.accuracy(preds, labels) == pytest.approx(skm.accuracy_score(labels, preds))
    assert glue_metrics.f1_score(preds, labels) == pytest.approx(skm.f1_score(labels, preds))
    assert glue_metrics.matthews_corr(preds, labels) == pytest.approx(
        skm.matthews_corrcoef(labels, preds))
    # three classes (the multi-class MCC; MNLI is scored by accuracy, but the function is general)
    labels3, preds3 = rng.integers(0, 3, 300), rng.integers(0, 3, 300)
    preds3[:150] = labels3[:150]
    assert glue_metrics.matthews_corr(preds3, labels3) == pytest.approx(
        skm.matthews_corrcoef(labels3, preds3))


@pytest.mark.parametrize("seed", [0, 1])
def test_correlations_match_scipy(seed):
    rng = np.random.default_rng(seed)
    y = np.round(rng.uniform(0, 5, 300) * 5) / 5  # STS-B-like scores with many ties
    x = y + rng.normal(0, 1.5, 300)
    x[:40] = np.round(x[:40])  # ties on the prediction side too
    assert glue_metrics.pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
    assert glue_metrics.spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)
    np.testing.assert_allclose(glue_metrics.rankdata(x), stats.rankdata(x))


def test_compute_metrics_reports_percent_and_primary_first():
    m = glue_metrics.compute_metrics(get_task("mrpc"), [1, 0, 1, 1], [1, 0, 0, 1])
    assert list(m) == ["accuracy", "f1"]
    assert m["accuracy"] == pytest.approx(75.0)
    assert m["f1"] == pytest.approx(100 * skm.f1_score([1, 0, 0, 1], [1, 0, 1, 1]))
    assert list(glue_metrics.compute_metrics(get_task("stsb"), [1.0, 2.0, 3.5], [0.5, 2.5, 3.0])) == \
        ["spearman", "pearson"]
    assert get_task("cola").metric == "matthews_corr"


# -------------------------------------------------------------------------------------- tasks


def test_task_table_follows_the_paper():
    assert glue.GLUE_TASKS == ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte")
    assert set(glue.TASKS) == set(glue.GLUE_TASKS) | {"wnli"}
    assert {n for n, t in glue.TASKS.items() if t.epochs == 10} == {"rte", "stsb"}
    assert {n for n, t in glue.TASKS.items() if t.swap_augment} == {"mrpc", "stsb"}
    assert get_task("stsb").is_regression and get_task("stsb").num_labels == 1
    assert get_task("mnli").num_labels == 3
    assert get_task("SST-2") is get_task("sst2") and get_task("STS-B").name == "stsb"
    with pytest.raises(KeyError, match="valid"):
        get_task("squad")


def test_swap_segments_doubles_pairs():
    ex = [Example("a", "b", 1), Example("c", "d", 0)]
    out = ftask.swap_segments(ex)
    assert [(e.text_a, e.text_b, e.label) for e in out] == [
        ("a", "b", 1), ("c", "d", 0), ("b", "a", 1), ("d", "c", 0)]


# ------------------------------------------------------------------------------ the hub path


class _FakeHub:
    """Stands in for ``datasets.load_dataset``: records the call, returns hub-shaped rows."""

    def __init__(self, rows=None, error=None):
        self.calls, self.rows, self.error = [], rows or [], error

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        if self.error:
            raise self.error
        return self.rows


def test_hub_is_used_without_a_data_dir(monkeypatch):
    import datasets
    monkeypatch.delenv("MINIELECTRA_DATA_DIR", raising=False)
    fake = _FakeHub([{"premise": "p", "hypothesis": "h", "label": 2, "idx": 0}])
    monkeypatch.setattr(datasets, "load_dataset", fake)
    ex = glue.load_split("mnli", "dev")
    assert fake.calls == [(("nyu-mll/glue", "mnli"), {"split": "validation_matched"})]
    assert (ex[0].text_a, ex[0].text_b, ex[0].label) == ("p", "h", 2)

    fake = _FakeHub([{"sentence1": "a", "sentence2": "b", "label": 3.8, "idx": 0}])
    monkeypatch.setattr(datasets, "load_dataset", fake)
    ex = glue.load_split("stsb", "train")
    assert fake.calls[0] == (("nyu-mll/glue", "stsb"), {"split": "train"})
    assert ex[0].label == pytest.approx(3.8)


def test_hub_failure_is_a_clear_error(monkeypatch):
    import datasets
    monkeypatch.setattr(data_hub, "_PROBED", [None])  # the hub answers, then the load fails
    monkeypatch.delenv("MINIELECTRA_DATA_DIR", raising=False)
    monkeypatch.setattr(datasets, "load_dataset", _FakeHub(error=ConnectionError("offline")))
    with pytest.raises(glue.GlueDataError, match=r"nyu-mll/glue.*'rte'.*MINIELECTRA_DATA_DIR"):
        glue.load_split("rte", "train")


def test_unreachable_hub_says_what_was_looked_for_and_how_to_go_local(monkeypatch):
    import datasets
    monkeypatch.setattr(data_hub, "_PROBED", ["no connection to huggingface.co:443: test"])
    monkeypatch.delenv("MINIELECTRA_DATA_DIR", raising=False)
    monkeypatch.setattr(datasets, "load_dataset", _FakeHub(error=ConnectionError("offline")))
    with pytest.raises(glue.GlueDataError) as e:
        glue.load_split("sst2", "train")
    message = str(e.value)
    assert "\n" not in message
    for part in ("no data dir is set", "datasets cache", "hub is unreachable (no connection",
                 "MINIELECTRA_DATA_DIR to a folder with glue/SST-2/train.tsv", "--train FILE"):
        assert part in message


def test_missing_local_task_names_what_was_looked_for(tmp_path, monkeypatch):
    import datasets
    monkeypatch.setattr(datasets, "load_dataset", _FakeHub(error=AssertionError("no hub")))
    with pytest.raises(glue.GlueDataError, match=r"MNLI/dev_matched\.tsv.*dev_matched\.tsv\.gz"):
        glue.load_split("mnli", "dev", data_dir=tmp_path)
    monkeypatch.setenv("MINIELECTRA_DATA_DIR", str(tmp_path))  # the variable counts as well
    with pytest.raises(glue.GlueDataError, match=r"QQP/train\.tsv"):
        glue.load_split("qqp", "train")


# -------------------------------------------------------------- real GLUE files (integration)

# Data rows per file, from ../shared/data/MANIFEST.md (read with QUOTE_NONE).
MANIFEST_ROWS = {("cola", "train"): 8551, ("cola", "dev"): 1043, ("sst2", "dev"): 872,
                 ("mrpc", "train"): 3667, ("mrpc", "dev"): 408, ("stsb", "train"): 5749,
                 ("stsb", "dev"): 1500, ("qnli", "dev"): 5463, ("rte", "train"): 2490,
                 ("rte", "dev"): 277, ("wnli", "train"): 635, ("wnli", "dev"): 71}


@pytest.mark.integration
@pytest.mark.parametrize("task,split", sorted(MANIFEST_ROWS))
def test_row_counts_match_the_manifest(data_dir, task, split):
    ex = glue.load_split(task, split, data_dir=data_dir)
    assert len(ex) == MANIFEST_ROWS[task, split]
    t = get_task(task)
    if t.is_regression:
        assert all(0.0 <= e.label <= 5.0 for e in ex)
    else:
        assert {e.label for e in ex} == set(range(t.num_labels))
    assert all(e.text_a and (e.text_b is None) == (len(t.text_cols) == 1) for e in ex)


@pytest.mark.integration
def test_first_rows_parse_as_in_the_files(data_dir):
    first = {t: glue.load_split(t, s, data_dir=data_dir)[0] for t, s in
             [("cola", "train"), ("mrpc", "train"), ("stsb", "dev"), ("rte", "dev"),
              ("qnli", "dev")]}
    # CoLA has no header: its first line is data.
    assert first["cola"] == Example(
        "Our friends won't buy this analysis, let alone the next one we propose.", None, 1)
    # MRPC's header starts with a BOM; label is column 0, sentences columns 3 and 4.
    assert first["mrpc"].label == 1 and first["mrpc"].text_a.startswith("Amrozi accused")
    assert first["mrpc"].text_b.startswith("Referring to him as only")
    assert first["stsb"] == Example("A man with a hard hat is dancing.",
                                    "A man wearing a hard hat is dancing.", 5.0)
    assert first["rte"].label == 1  # not_entailment, id 1 as on the hub
    assert first["qnli"].label == 0 and first["qnli"].text_a.startswith("What came into force")


@pytest.mark.integration
def test_quote_none_keeps_stray_quotes(data_dir):
    # MRPC dev row 0, sentence B starts with a lone quote; default csv quoting would eat rows.
    ex = glue.load_split("mrpc", "dev", data_dir=data_dir)
    assert ex[0].text_b.startswith('" The foodservice pie business')


@pytest.mark.integration
def test_slices_read_plain_and_gzipped(glue_slice_dir):
    assert (glue_slice_dir / "glue" / "CoLA" / "train.tsv").is_file()  # written plain
    assert len(glue.load_split("cola", "train", data_dir=glue_slice_dir)) == 40
    assert len(glue.load_split("mrpc", "dev", data_dir=glue_slice_dir)) == 40


@pytest.mark.integration
def test_max_examples_is_a_fixed_ordered_subset(data_dir):
    full = glue.load_split("rte", "train", data_dir=data_dir)
    sub = glue.load_split("rte", "train", data_dir=data_dir, max_examples=50)
    again = glue.load_split("rte", "train", data_dir=data_dir, max_examples=50)
    assert len(sub) == 50 and sub == again
    pos = [full.index(e) for e in sub]
    assert pos == sorted(pos) and pos != list(range(50))  # random, but in file order


def test_malformed_tsv_is_an_error(tmp_path):
    folder = tmp_path / "glue" / "RTE"
    folder.mkdir(parents=True)
    with gzip.open(folder / "train.tsv.gz", "wt") as f:
        f.write("index\tsentence1\tsentence2\tlabel\n0\tonly two\n")
    with pytest.raises(ValueError, match="fewer than 4 columns"):
        glue.load_split("rte", "train", data_dir=tmp_path)
    # One broken line in 2000 (as in QQP's train file) is skipped, with a warning.
    good = "".join(f"{i}\tpremise {i}\thypothesis\tentailment\n" for i in range(2000))
    with gzip.open(folder / "train.tsv.gz", "wt") as f:
        f.write("index\tsentence1\tsentence2\tlabel\n" + good + "2000\tonly two\n")
    with pytest.warns(UserWarning, match=r"skipped 1 row.*\[2000\]"):
        ex = glue.load_split("rte", "train", data_dir=tmp_path)
    assert len(ex) == 2000 and ex[-1].text_a == "premise 1999"


def test_pair_tasks_and_the_papers_metric_names():
    assert {n for n, t in glue.TASKS.items() if not t.is_pair} == {"cola", "sst2"}
    # ELECTRA paper section 3.1: Spearman for STS, Matthews for CoLA, accuracy for the rest.
    names = {n: glue_metrics.METRIC_NAMES[t.metric] for n, t in glue.TASKS.items()}
    assert names.pop("cola") == "Matthews correlation"
    assert names.pop("stsb") == "Spearman correlation"
    assert set(names.values()) == {"accuracy"}


# -------------------------------------------------------------------------------- the table


def _result(score, subset=False):
    return {"score": score, "scores": [score], "train_subset": subset, "train_examples": 500,
            "train_examples_available": 8551}


def test_glue_score_is_the_mean_of_eight_without_wnli():
    # ELECTRA-Small-OWT, official README (tutorial/appendix_official_recipe.md section A.5):
    # printed avg 80.4.
    scores = dict(zip(glue.GLUE_TASKS, [56.8, 88.3, 87.4, 86.8, 88.3, 78.9, 87.9, 68.5]))
    results = {t: _result(v) for t, v in scores.items()}
    results["wnli"] = _result(0.0)  # shown, never averaged
    md, average, partial = glue_table.format_table(results, name="Small-OWT")
    assert average == pytest.approx(642.9 / 8) and not partial
    assert "| Small-OWT | 56.8 | 88.3 | 87.4 | 86.8 | 88.3 | 78.9 | 87.9 | 68.5 | 0.0 | 80.4 |" \
        in md
    assert "partial" not in md and "†" not in md


def test_table_marks_partial_absent_not_run_and_subsets():
    results = {"cola": _result(40.0, subset=True), "rte": _result(61.0)}
    md, average, partial = glue_table.format_table(results, name="m",
                                             missing={"mnli": "no MNLI/train.tsv"})
    assert average == pytest.approx(50.5) and partial
    row = md.splitlines()[2].split("|")[2:-1]
    cells = dict(zip(["CoLA", "SST-2", "MRPC", "STS-B", "QQP", "MNLI", "QNLI", "RTE", "GLUE"],
                     [c.strip() for c in row]))
    assert cells == {"CoLA": "40.0†", "SST-2": "–", "MRPC": "–", "STS-B": "–", "QQP": "–",
                     "MNLI": "n/a", "QNLI": "–", "RTE": "61.0", "GLUE": "50.5*"}
    assert "2 of 8 GLUE tasks" in md and "CoLA 500 of 8551" in md
    assert "MNLI: data absent: no MNLI/train.tsv" in md
    assert glue_table.glue_average({}) == (None, [])
    assert glue_table.format_table({})[1:] == (None, True)
