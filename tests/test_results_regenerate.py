"""Every committed results file that carries its own records regenerates from them, byte for
byte, with the code that reports it today: the paper's experiments (``runs`` and ``controls`` ->
rows and table), the transfer study (each row's ``runs`` -> summary and table), the suite (its
rows' scores by seed -> the comparisons, the floor's averages and the table), the laptop preset's
measurement (its records -> its summary), and the tables of the word-order and learning curves
from their points. A file whose figures no longer follow from its records fails here."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "research" / "results"
sys.path.insert(0, str(ROOT / "research"))
import laptop  # noqa: E402
import recipe_choice  # noqa: E402
import learning_curve  # noqa: E402
import suite_report  # noqa: E402
import transfer_report  # noqa: E402
import word_order_curve  # noqa: E402

from minielectra.experiments import report  # noqa: E402
from minielectra.experiments.specs import get_experiment  # noqa: E402

EXPERIMENTS = sorted(p.parent.name for p in (RESULTS / "experiments").glob("*/results.json")
                     if p.parent.name != "toy-grammar")  # toy-grammar: its own command's format
TRANSFER = sorted(str(p.parent.relative_to(RESULTS)) for p in
                  (RESULTS / "transfer").rglob("results.json"))


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_an_experiment_regenerates_from_its_runs(name):
    out = RESULTS / "experiments" / name
    d = json.loads((out / "results.json").read_text())
    exp = get_experiment(d["experiment"])
    rows = report.aggregate(exp, d["runs"], d["controls"])
    summary = {"experiment": exp.name, "question": exp.question, "setup": d["setup"],
               "rows": rows, "runs": d["runs"], "controls": d["controls"]}
    assert json.dumps(summary, indent=2, default=str) + "\n" == (out / "results.json").read_text()
    assert report.markdown(exp, rows, d["setup"]) == (out / "results.md").read_text()


@pytest.mark.parametrize("name", TRANSFER)
def test_a_transfer_study_regenerates_from_its_runs(name):
    out = RESULTS / name
    d = json.loads((out / "results.json").read_text())
    summary = transfer_report.summarise(d["rows"], d["setup"]["sizes"])
    text = json.dumps({"setup": d["setup"], "summary": summary, "rows": d["rows"]}, indent=2,
                      default=str) + "\n"
    assert text == (out / "results.json").read_text()
    assert transfer_report.markdown(summary, d["setup"]) == (out / "results.md").read_text()


def test_the_suite_regenerates_from_its_rows(tmp_path):
    for name in ("results.json", "results.md"):
        (tmp_path / name).write_bytes((RESULTS / "suite" / name).read_bytes())
    suite_report.restate(tmp_path)
    for name in ("results.json", "results.md"):
        assert (tmp_path / name).read_text() == (RESULTS / "suite" / name).read_text(), name


@pytest.mark.parametrize("name", ["word_order", "position_init"])
def test_a_word_order_curve_table_regenerates_from_its_points(name):
    d = json.loads((RESULTS / name / "results.json").read_text())
    assert word_order_curve.markdown(d) == (RESULTS / name / "results.md").read_text()


def test_the_learning_curve_table_regenerates_from_its_curves():
    d = json.loads((RESULTS / "learning_curve_nano_mini.json").read_text())
    assert learning_curve.markdown_table(d["curves"]) + "\n" == (
        RESULTS / "learning_curve_nano_mini.md").read_text()


def _suite_run(arm: str, task: str, size, score: float, recipe: str = "reinit-1") -> dict:
    return {"arm": arm, "recipe": recipe, "task": task, "size": size, "seed": 0, "score": score}


def test_the_laptop_report_pairs_electra_and_mlm_by_pretraining_seed(tmp_path, monkeypatch):
    """ELECTRA against MLM has as many pairs as pre-training seeds; an ELECTRA seed without its
    MLM arm is no pair."""
    records = tmp_path / "records"
    (records / "validation").mkdir(parents=True)
    lead = {"laptop-s0": 3.0, "laptop-mlm-s0": 0.0, "laptop-s1": 1.0, "laptop-mlm-s1": 0.0,
            "laptop-s2": 9.0}
    for i, (arm, extra) in enumerate(lead.items()):
        for j, (task, size) in enumerate(laptop.SUITE):
            (records / "validation" / f"{i}-{j}.json").write_text(
                json.dumps(_suite_run(arm, task, size, 50.0 + extra)))
    monkeypatch.setattr(laptop, "OUT", tmp_path)
    monkeypatch.setattr(laptop, "RECORDS", records)
    versus = laptop.report()["validation"]["electra_vs_mlm"]
    assert versus["by_unit"] == {"0": 3.0, "1": 1.0} and versus["n"] == 2
    assert versus["mean"] == pytest.approx(2.0) and versus["wins"] == 2


def test_the_mlm_arm_spends_the_laptop_presets_flops():
    from minielectra.config import preset
    from minielectra.objectives.flops import run_flops
    from minielectra.overrides import apply_overrides

    steps = laptop.mlm_steps()
    mlm = apply_overrides(preset("laptop"), ["objective.name=mlm", f"train.max_steps={steps}"])
    assert steps > preset("laptop").train.max_steps  # no generator: cheaper steps, more of them
    assert run_flops(mlm) == pytest.approx(run_flops(preset("laptop")), rel=1e-4)
    assert f"--set objective.name=mlm --max-steps {steps}\n" in (  # the page's command
        ROOT / "docs" / "results" / "suite.md").read_text()


def test_the_recipe_choice_regenerates_from_its_records(tmp_path, monkeypatch):
    """research/results/recipe/results.json from its records and the suite's file, byte for
    byte."""
    monkeypatch.setattr(recipe_choice, "OUT", tmp_path)
    recipe_choice.report()
    assert (tmp_path / "results.json").read_text() == \
        (RESULTS / "recipe" / "results.json").read_text()


def test_the_recipe_choice_follows_its_rule(tmp_path, monkeypatch):
    """The highest validation average is chosen; a lead below two dev seeds' spread is said to be
    within the noise; the dev sets' figures are the suite's own."""
    monkeypatch.setattr(recipe_choice, "OUT", tmp_path)
    monkeypatch.setattr(recipe_choice, "RECORDS", tmp_path / "records")
    (tmp_path / "records").mkdir()
    scores = {"reinit-1": 50.0, "paper": 50.5, "epochs-10": 48.0}
    for i, (recipe, score) in enumerate(scores.items()):
        for j, (task, size) in enumerate(recipe_choice.SUITE):
            (tmp_path / "records" / f"{i}-{j}.json").write_text(
                json.dumps(_suite_run("bundled", task, size, score, recipe)))
    d = recipe_choice.report()
    suite = json.loads((RESULTS / "suite" / "results.json").read_text())
    seeds = next(r for r in suite["rows"] if r["arm"] == "bundled"
                 and r["recipe"] == "reinit-1")["suite"]["by_seed"]
    assert (d["chosen"], d["runner_up"], d["lead"]) == ("paper", "reinit-1", 0.5)
    assert d["within_noise"] == (0.5 < abs(seeds["1"] - seeds["0"]))
    assert d["dev"]["paper"]["tasks"]["cola"] == round(next(
        r for r in suite["rows"] if r["arm"] == "bundled" and r["recipe"] == "paper"
    )["tasks"]["cola@None"]["scores"]["0"], 2)


def test_the_lists_are_not_empty():
    assert len(EXPERIMENTS) >= 6 and len(TRANSFER) >= 10


def test_the_laptop_measurement_regenerates_from_its_records(tmp_path, monkeypatch):
    """research/results/laptop/results.json and its curve from its records alone (the run's
    evaluations, the suite's per-run files and the floor), byte for byte."""
    monkeypatch.setattr(laptop, "OUT", tmp_path)  # the records stay the committed ones
    laptop.report()
    for name in ("results.json", "auc_vs_step.svg"):
        assert (tmp_path / name).read_text() == (RESULTS / "laptop" / name).read_text(), name
