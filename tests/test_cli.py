"""The ``finetune``, ``glue`` and ``predict`` commands, end to end through ``cli.main``.

A tiny model is pre-trained nowhere: it is built at random and written as a ``minielectra
pretrain`` run directory (``checkpoints/step_N``), so the commands also resolve run directories.
Each printed JSON is checked against references computed here without the code under test:
scikit-learn metrics on the reloaded model's predictions, hand-computed means, and logits from
the model's own forward pass. The GLUE inputs are 40-row slices of the real files
(``glue_slice_dir``), or without ../shared/data the handmade ones of tests/fixtures/glue.
"""

import json

import numpy as np
import pytest
import torch
from sklearn import metrics as skm

from minielectra.cli import main
from minielectra.finetune import task as ftask
from minielectra.finetune.glue import data as glue
from minielectra.finetune import metrics as glue_metrics
from minielectra.finetune.glue import table as glue_table
from minielectra.finetune import predict as pr
from minielectra.finetune import saved as saved_model

pytestmark = pytest.mark.integration

FAST = ["--set", "finetune.epochs=1", "--set", "finetune.eval_batch_size=64",
        "--set", "finetune.num_threads=1"]


@pytest.fixture(scope="module")
def run_dir(char_run_dir):
    """A ``pretrain --out`` directory with two checkpoints; the later one is step 7."""
    return char_run_dir


@pytest.fixture
def slices(glue_slice_dir, monkeypatch):
    monkeypatch.setenv("MINIELECTRA_DATA_DIR", str(glue_slice_dir))
    return glue_slice_dir


def run_cli(capsys, *argv):
    """``(exit code, stdout JSON or None, stderr)``."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def dev_predictions(model_dir, task, data_dir):
    dev = glue.load_split(task, "dev", data_dir=data_dir)
    inputs = [e.text_a if e.text_b is None else (e.text_a, e.text_b) for e in dev]
    return pr.predict(model_dir, inputs), [e.label for e in dev]


def test_finetune_prints_the_papers_metric_and_resolves_run_dirs(capsys, run_dir, slices,
                                                                  tmp_path):
    code, r, _ = run_cli(capsys, "finetune", "--checkpoint", run_dir, "--task", "cola",
                         "--max-train-examples", 16, "--out", tmp_path / "cola", *FAST)
    assert code == 0
    assert (r["task"], r["metric"], r["metric_key"]) == ("cola", "Matthews correlation",
                                                         "matthews_corr")
    assert r["checkpoint"] == str(run_dir / "checkpoints" / "step_0000007")  # the latest
    assert (r["train_examples"], r["train_examples_available"], r["train_subset"]) == (16, 40,
                                                                                      True)
    preds, labels = dev_predictions(tmp_path / "cola", "cola", slices)
    mcc = 100 * skm.matthews_corrcoef(labels, [p["label_id"] for p in preds])
    assert r["score"] == pytest.approx(mcc, abs=1e-9)
    assert r["scores"] == [r["score"]] and r["median"] == r["score"]


def test_finetune_seeds_report_the_median_run(capsys, run_dir, slices, tmp_path):
    code, r, _ = run_cli(capsys, "finetune", "--checkpoint", run_dir, "--task", "mrpc",
                         "--seeds", 3, "--seed", 5, "--out", tmp_path / "mrpc", *FAST,
                         "--set", "finetune.learning_rate=3e-3")
    assert code == 0 and r["metric"] == "accuracy" and r["seeds"] == [5, 6, 7]
    assert len(r["scores"]) == 3 and r["score"] == r["median"] == np.median(r["scores"])
    median = next(run for run in r["runs"] if run["seed"] == r["median_seed"])
    assert median["score"] == r["score"] and r["metrics"] == median["metrics"]  # F1 of that run
    # The model left in --out is the median run's: its dev predictions give its accuracy and F1.
    preds, labels = dev_predictions(tmp_path / "mrpc", "mrpc", slices)
    ids = [p["label_id"] for p in preds]
    assert 100 * skm.accuracy_score(labels, ids) == pytest.approx(r["score"], abs=1e-9)
    assert 100 * skm.f1_score(labels, ids) == pytest.approx(r["metrics"]["f1"], abs=1e-9)
    assert not list((tmp_path / "mrpc").glob("seed-*"))  # the other runs' models are not kept


def test_glue_seed_gives_finetunes_runs(capsys, run_dir, slices):
    """``glue --seed 5 --seeds 2`` runs each task exactly as ``finetune --seed 5 --seeds 2``."""
    common = ["--checkpoint", run_dir, "--max-train-examples", 16, "--seeds", 2, "--seed", 5,
              *FAST]
    code, g, _ = run_cli(capsys, "glue", "--tasks", "rte", *common)
    assert code == 0
    code, f, _ = run_cli(capsys, "finetune", "--task", "rte", *common)
    assert code == 0 and f["seeds"] == [5, 6] and g["tasks"]["rte"]["seeds"] == [5, 6]
    assert g["scores"]["rte"] == f["score"]
    assert [r["final_train_loss"] for r in g["tasks"]["rte"]["runs"]] == \
        [r["final_train_loss"] for r in f["runs"]]  # the same runs, not just the same score


def test_glue_save_models_keeps_each_tasks_median_model(capsys, run_dir, slices, tmp_path):
    code, g, _ = run_cli(capsys, "glue", "--checkpoint", run_dir, "--tasks", "rte", "sst2",
                         "--max-train-examples", 16, "--seeds", 2, "--out", tmp_path / "g",
                         "--save-models", *FAST)
    assert code == 0
    for task in ("rte", "sst2"):
        folder = tmp_path / "g" / task
        assert (folder / "model.safetensors").is_file() and not list(folder.glob("seed-*"))
        preds, labels = dev_predictions(folder, task, slices)
        acc = 100 * skm.accuracy_score(labels, [p["label_id"] for p in preds])
        assert acc == pytest.approx(g["scores"][task], abs=1e-9)  # the median run's model
    code, _, _ = run_cli(capsys, "glue", "--checkpoint", run_dir, "--tasks", "rte",
                         "--max-train-examples", 16, "--out", tmp_path / "plain", *FAST)
    assert code == 0 and not (tmp_path / "plain" / "rte" / "model.safetensors").exists()
    code, _, err = run_cli(capsys, "glue", "--checkpoint", run_dir, "--tasks", "rte",
                           "--save-models", *FAST)
    assert code == 2 and "save_models needs out" in err


def test_finetune_without_data_names_the_files(capsys, run_dir, slices):
    code, _, err = run_cli(capsys, "finetune", "--checkpoint", run_dir, "--task", "qqp")
    assert code == 2 and "QQP/train.tsv" in err and "QQP/train.tsv.gz" in err


@pytest.mark.parametrize("task", sorted(glue.TASKS))
def test_every_task_name_runs_or_names_its_missing_files(capsys, run_dir, slices, task):
    t = glue.get_task(task)
    folder = slices / "glue" / t.folder
    have = all(any((folder / f"{split}.tsv{z}").is_file() for z in ("", ".gz"))
               for split in ("train", t.dev_file))
    code, r, err = run_cli(capsys, "finetune", "--checkpoint", run_dir, "--task", task,
                           "--max-train-examples", 8, *FAST)
    if have:
        assert code == 0 and r["task"] == task and r["metric"] == glue_metrics.METRIC_NAMES[t.metric]
        assert r["dev_examples"] == 40 and r["runs"][0]["epochs"] == 1
    else:  # QQP, MNLI (no files) and QNLI (dev only) in ../shared/data
        assert code == 2 and f"{t.folder}/" in err and "looked for" in err


def test_glue_json_on_stdout_marked_table_on_stderr(capsys, run_dir, slices, tmp_path):
    code, s, err = run_cli(capsys, "glue", "--checkpoint", run_dir, "--tasks", "cola", "rte",
                           "mnli", "wnli", "--max-train-examples", 24, "--out", tmp_path, *FAST)
    assert code == 0
    assert set(s["scores"]) == {"cola", "rte", "wnli"} and set(s["missing"]) == {"mnli"}
    # The average is over the GLUE tasks that ran, never WNLI, and says it is partial.
    assert s["glue_average"] == pytest.approx((s["scores"]["cola"] + s["scores"]["rte"]) / 2)
    assert s["glue_partial"] is True and s["glue_score"] is None
    assert s["glue_average_over"] == ["cola", "rte"]
    assert s["not_run"] == ["sst2", "mrpc", "stsb", "qqp", "qnli"]
    row = next(line for line in err.splitlines() if line.startswith("| run |"))
    cells = [c.strip() for c in row.split("|")[2:-1]]
    header = next(line for line in err.splitlines() if line.startswith("| model"))
    cols = [c.strip() for c in header.split("|")[2:-1]]
    assert cols == ["CoLA", "SST-2", "MRPC", "STS-B", "QQP", "MNLI", "QNLI", "RTE", "WNLI",
                    "GLUE"]
    by_col = dict(zip(cols, cells))
    assert by_col["CoLA"] == f"{s['scores']['cola']:.1f}†"  # trained on 24 of 40 examples
    assert by_col["MNLI"] == "n/a" and by_col["SST-2"] == "–"
    assert by_col["GLUE"] == f"{s['glue_average']:.1f}*"
    assert "24 of 40" in err and "MNLI/train.tsv" in err
    assert (tmp_path / "glue.md").read_text() == s["table"]


def test_predict_scores_sentences_and_files(capsys, run_dir, slices, tmp_path):
    assert run_cli(capsys, "finetune", "--checkpoint", run_dir, "--task", "rte",
                   "--max-train-examples", 8, "--out", tmp_path / "rte", *FAST)[0] == 0
    code, p, _ = run_cli(capsys, "predict", "--model", tmp_path / "rte",
                         "A man is playing a guitar.", "A person plays music.")
    assert code == 0 and p["task"] == "rte" and len(p["predictions"]) == 1
    # The probabilities are the softmax of the reloaded model's logits on [CLS] A [SEP] B [SEP].
    ft = saved_model.load_finetuned(tmp_path / "rte")
    ids, types = ft.tokenizer.encode_pair("A man is playing a guitar.", "A person plays music.")
    with torch.no_grad():
        logits = ft.model(torch.tensor([ids]), token_type_ids=torch.tensor([types]))[0]
    expected = dict(zip(glue.get_task("rte").label_names, logits.softmax(-1).tolist()))
    got = p["predictions"][0]
    assert got["probabilities"] == pytest.approx(expected, abs=1e-6)
    assert got["label"] == max(expected, key=expected.get)
    assert (got["text_a"], got["text_b"]) == ("A man is playing a guitar.",
                                              "A person plays music.")

    # A file of pairs, read with QUOTE_NONE: the lone quote stays in the text.
    (tmp_path / "pairs.tsv").write_text('" A quoted start\tsecond\n\nthird\tfourth "\n')
    code, p, _ = run_cli(capsys, "predict", "--model", tmp_path / "rte", "--file",
                         tmp_path / "pairs.tsv")
    assert code == 0 and [(x["text_a"], x["text_b"]) for x in p["predictions"]] == [
        ('" A quoted start', "second"), ("third", 'fourth "')]
    # RTE takes pairs: one sentence is a clear error, and so are both input forms at once.
    code, _, err = run_cli(capsys, "predict", "--model", tmp_path / "rte", "only one")
    assert code == 2 and "pairs" in err
    code, _, err = run_cli(capsys, "predict", "--model", tmp_path / "rte", "a", "b",
                           "--file", tmp_path / "pairs.tsv")
    assert code == 2 and "--file" in err


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path):
    """`minielectra predict ... | head`: the pipe closes before the JSON is written."""
    import subprocess
    import sys
    proc = subprocess.Popen([sys.executable, "-m", "minielectra", "lessons", str(tmp_path / "c")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # no reader left: the JSON's write fails with EPIPE
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
