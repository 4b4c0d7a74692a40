"""The SQuAD scorer against hand-computed scores, one rule per case (normalisation, EM, F1, max over
golds, missing and empty predictions, the 2.0 keys and the no-answer threshold), and the
``squad-eval`` command on .json and .json.gz files."""

import gzip
import json

import pytest

from minielectra.cli import main
from minielectra.finetune.squad.data import load_file
from minielectra.finetune.squad.eval import evaluate, exact_match, f1, normalize_answer


def dataset(questions, version="1.1"):
    """Official nesting from ``[(id, [gold texts])]``; an empty list is unanswerable (2.0)."""
    context = "x" * 10
    qas = [{"id": q, "question": "?", "answers": [{"text": t, "answer_start": 0} for t in golds],
            **({"is_impossible": not golds} if version == "v2.0" else {})}
           for q, golds in questions]
    return {"version": version, "data": [{"title": "t", "paragraphs": [{"context": context,
                                                                         "qas": qas}]}]}


@pytest.mark.parametrize("text, normal", [
    ("The Eiffel Tower", "eiffel tower"),  # case, article
    ("a  cat,\tan  apple!", "cat apple"),  # punctuation, articles, whitespace runs
    ("theatre anthem", "theatre anthem"),  # articles only as whole words
    ("U.S.-born", "usborn"),  # punctuation is deleted, not turned into spaces
    ("“quotes” ‘are’ kept", "“quotes” ‘are’ kept"),  # not in string.punctuation
    ("", ""),
])
def test_normalize_answer(text, normal):
    assert normalize_answer(text) == normal


def test_exact_match_and_f1_by_hand():
    assert exact_match("The Broncos", "broncos.") == 1
    assert exact_match("Denver Broncos", "Broncos") == 0
    # gold: denver broncos (2), prediction: broncos won (2); one shared: P = R = 1/2
    assert f1("Denver Broncos", "the Broncos won") == pytest.approx(0.5)
    # repeated tokens count as a bag: gold "a b b" vs "b b b c" -> gold [b, b] (a removed)
    # shared 2, P = 2/4, R = 2/2, F1 = 2/3
    assert f1("a b b", "b b b c") == pytest.approx(2 / 3)
    assert f1("", "") == 1.0 and f1("", "x") == 0.0
    assert f1("", "", empty_agrees=False) == 0.0  # the 1.1 script's rule


def test_v1_max_over_golds_missing_and_empty_predictions(capsys):
    data = dataset([("q1", ["Denver Broncos", "Broncos"]), ("q2", ["1,000 km"]),
                    ("q3", ["Paris"]), ("q4", ["Rome"])])
    preds = {"q1": "the Broncos", "q2": "1000 km wide", "q3": ""}  # q4 missing
    out = evaluate(data, preds)
    # q1: EM 1 (second gold); q2: "1000 km" vs "1000 km wide": P 2/3, R 1, F1 0.8; q3, q4: 0
    assert out == pytest.approx({"exact_match": 100 * 1 / 4, "f1": 100 * 1.8 / 4})
    assert "1 unanswered" in capsys.readouterr().err


def test_v2_keys_and_threshold():
    data = dataset([("a1", ["red"]), ("a2", ["big dog"]), ("n1", []), ("n2", [])], "v2.0")
    preds = {"a1": "red", "a2": "dog", "n1": "", "n2": "blue"}
    out = evaluate(data, preds)
    # a1 1/1, a2 EM 0 F1 2/3 (P 1, R 1/2), n1 1/1 (both empty), n2 0/0
    assert out == pytest.approx({
        "exact": 50.0, "f1": 100 * (1 + 2 / 3 + 1) / 4, "total": 4,
        "HasAns_exact": 50.0, "HasAns_f1": 100 * (1 + 2 / 3) / 2, "HasAns_total": 2,
        "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2})
    probs = {"a1": 0.1, "a2": 0.6, "n1": 0.3, "n2": 0.9}
    # threshold 0.5: a2 and n2 count as "no answer": a2 -> 0, n2 -> 1
    out = evaluate(data, preds, na_probs=probs, na_prob_thresh=0.5)
    assert out["exact"] == 75.0 and out["f1"] == pytest.approx(75.0)
    # the sweep, from "all abstain" (2 right): a1 +1 -> 3 at 0.1; n1 (pred "") +0; a2 +1 (EM 0:
    # +0) ...: best EM 3/4 at threshold 0.1, best F1 3 at 0.1 then 3 + 2/3 at 0.6
    assert out["best_exact"] == 75.0 and out["best_exact_thresh"] == 0.1
    assert out["best_f1"] == pytest.approx(100 * (3 + 2 / 3) / 4)
    assert out["best_f1_thresh"] == 0.6


def test_v2_missing_prediction_is_left_out(capsys):
    data = dataset([("a1", ["red"]), ("n1", [])], "v2.0")
    out = evaluate(data, {"a1": "red"})
    assert out["total"] == 1 and out["exact"] == 100.0 and "NoAns_total" not in out
    assert "no prediction" in capsys.readouterr().err


def test_v2_golds_that_normalise_to_nothing_mean_no_answer():
    data = dataset([("q", ["The", "a"])], "v2.0")
    assert evaluate(data, {"q": ""})["exact"] == 100.0


def test_squad_eval_command_reads_json_and_gz(tmp_path, capsys):
    data = dataset([("a1", ["red"]), ("n1", [])], "v2.0")
    with gzip.open(tmp_path / "dev.json.gz", "wt") as f:
        json.dump(data, f)
    (tmp_path / "preds.json").write_text(json.dumps({"a1": "red", "n1": "x"}))
    (tmp_path / "na.json").write_text(json.dumps({"a1": 0.2, "n1": 0.8}))
    assert main(["squad-eval", str(tmp_path / "dev.json.gz"), str(tmp_path / "preds.json"),
                 "--na-prob-file", str(tmp_path / "na.json"), "--na-prob-thresh", "0.5"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["exact"] == 100.0 and out["best_f1_thresh"] == 0.2


def test_squad_eval_refuses_bad_files_in_one_line(tmp_path, capsys):
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "preds.json").write_text("{}")
    assert main(["squad-eval", str(tmp_path / "list.json"), str(tmp_path / "preds.json")]) == 2
    err = capsys.readouterr().err
    assert "not SQuAD JSON" in err and len(err.strip().splitlines()) == 1
    (tmp_path / "d.json").write_text(json.dumps(dataset([("q", ["a b"])])))
    (tmp_path / "na.json").write_text("{}")
    assert main(["squad-eval", str(tmp_path / "d.json"), str(tmp_path / "preds.json"),
                 "--na-prob-file", str(tmp_path / "na.json")]) == 2
    assert "for SQuAD 2.0" in capsys.readouterr().err


def test_real_dev_sets_score_their_own_golds(data_dir):
    """Integration: each official dev set, answered with its first gold, scores 100."""
    for name in ("dev-v1.1.json.gz", "dev-v2.0.json.gz"):
        s = load_file(data_dir / "squad" / name)
        preds = {e.qid: e.answers[0][0] if e.answers else "" for e in s.examples}
        out = evaluate(s.dataset, preds)
        assert out.get("exact_match", out.get("exact")) == 100.0
