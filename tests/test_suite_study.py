"""research/suite.py: the GLUE-style suite's plan, its shared run queue and its report.

References: the report's averages and paired gains are recomputed here by hand from made-up
runs; the claim files are checked against what a second worker and a dead worker leave."""

import json
import os
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "research"))
import suite  # noqa: E402  (research/suite.py)
import suite_report  # noqa: E402

TASKS = [t for t, _ in suite.SUITE]


def fake_runs(arm, scores_by_seed, *, random=False, recipe="reinit-1"):
    """One run per task and seed; each task's score is the seed's number plus the task's index."""
    return [{"arm": arm, "random": random, "recipe": recipe, "task": t, "size": n, "seed": s,
             "score": base + i, "epoch_scores": [base + i - 1, base + i], "final_train_loss": 0.1}
            for s, base in scores_by_seed.items() for i, (t, n) in enumerate(suite.SUITE)]


def test_plan_runs_every_arms_first_seed_before_any_later_one():
    arms = suite.arms_from(["random=bundled", "bundled=bundled", "mlm-s0=/x=BERT MLM"])
    assert [a.random for a in arms] == [True, False, False] and arms[2].label == "BERT MLM"
    jobs = suite.plan(arms, recipes=["reinit-1", "paper"], seeds=2, groups=["suite"],
                      recipe_arms=["bundled"])
    first_seed1 = next(i for i, j in enumerate(jobs) if j.seed == 1)
    assert {j.arm.name for j in jobs[:first_seed1]} == {"random", "bundled", "mlm-s0"}
    assert {j.arm.name for j in jobs if j.recipe == "paper"} == {"bundled"}
    assert len(jobs) == 2 * (3 + 1) * len(suite.SUITE)


def test_random_arm_drops_reinit_and_trains_from_scratch():
    random, bundled = suite.arms_from(["random=bundled", "bundled=bundled"])
    job = suite.Job(random, "reinit-1", "rte", None, 0)
    assert "finetune.from_scratch=true" in suite.overrides_of(job)
    assert not any(o.startswith("finetune.reinit_layers") for o in suite.overrides_of(job))
    job = suite.Job(bundled, "reinit-1", "rte", None, 0)
    assert "finetune.reinit_layers=1" in suite.overrides_of(job)
    assert "finetune.keep_epoch=last" in suite.overrides_of(job)


def test_a_claim_is_one_workers_and_a_dead_workers_claim_is_taken_over(tmp_path):
    path = tmp_path / "k.claim"
    assert suite.claim(path) and not suite.claim(path)  # held by this (living) process
    path.write_text(f"{2 ** 22 + 12345} {os.uname().nodename}\n")  # a pid that does not run
    assert suite.claim(path)
    assert path.read_text().split()[0] == str(os.getpid())


def test_report_averages_and_pairs_by_seed(tmp_path):
    runs = (fake_runs("random", {0: 50.0, 1: 52.0, 2: 51.0}, random=True)
            + fake_runs("bundled", {0: 53.0, 1: 52.5, 2: 55.0})
            + fake_runs("mlm-s0", {0: 52.0, 1: 54.0, 2: 50.0}))
    summary = suite_report.summarise(runs, floor=[])
    rows = {r["arm"]: r for r in summary["rows"]}
    offset = statistics.fmean(range(len(suite.SUITE)))  # the tasks' added indices
    assert rows["bundled"]["suite"]["mean"] == pytest.approx(statistics.fmean(
        [53.0, 52.5, 55.0]) + offset)
    gain = rows["bundled"]["suite"]["gain"]
    assert gain["diffs"] == [3.0, 0.5, 4.0] and gain["wins"] == 3
    assert gain["mean"] == pytest.approx(2.5) and gain["sd"] == pytest.approx(
        statistics.stdev([3.0, 0.5, 4.0]))
    assert "gain" not in rows["random"]["suite"]
    evm = summary["electra_vs_mlm"]  # bundled (pre-training seed 0) against mlm-s0
    # one pre-training seed is one pair, however many fine-tuning seeds it has: no test
    assert evm["n"] == 1 and evm["pairs"] == 3 and evm["p"] != evm["p"]
    assert evm["mean"] == pytest.approx(statistics.fmean([1.0, -1.5, 5.0]))
    md = suite_report.markdown(summary)
    assert "| bundled | reinit-1 |" in md and "+2.5 ± 1.8" in md and "(3 of 3)" in md


def test_the_two_length_arm_pairs_with_both_lengths_of_its_pre_training_seed():
    runs = (fake_runs("electra-s1", {0: 50.0, 1: 51.0})
            + fake_runs("electra-len128-s1", {0: 55.0, 1: 53.0})
            + fake_runs("electra-2len-s1", {0: 54.0, 1: 54.0}))
    summary = suite_report.summarise(runs, floor=[])
    assert summary["2len_vs_len32"]["by_pretraining_seed"][1]["diffs"] == [4.0, 3.0]
    assert summary["2len_vs_len128"]["by_pretraining_seed"][1]["diffs"] == [-1.0, 1.0]
    assert summary["electra_vs_mlm"] is None  # no MLM arm
    assert "two lengths ahead with 1 of 1 pre-training seeds, in 2 of 2" in suite_report.markdown(
        summary)
    seed0 = suite_report.summarise(fake_runs("bundled", {0: 60.0}) + fake_runs(
        "electra-s0r", {0: 50.0}) + fake_runs("electra-2len", {0: 51.0}), floor=[])
    assert seed0["2len_vs_len32"]["by_pretraining_seed"][0]["diffs"] == [1.0]  # not bundled


def test_pre_training_comparisons_pair_by_pre_training_seed():
    scipy_stats = pytest.importorskip("scipy.stats")
    runs = (fake_runs("bundled", {0: 60.0, 1: 62.0}) + fake_runs("mlm-s0", {0: 55.0, 1: 58.0})
            + fake_runs("electra-s1", {0: 57.0, 1: 56.0}) + fake_runs("mlm-s1", {0: 56.0, 1: 53.0}))
    evm = suite_report.summarise(runs, floor=[])["electra_vs_mlm"]
    unit_means = [statistics.fmean([5.0, 4.0]), statistics.fmean([1.0, 3.0])]
    assert evm["n"] == 2 and evm["pairs"] == 4 and evm["wins"] == 2
    assert evm["p"] == pytest.approx(scipy_stats.ttest_1samp(unit_means, 0.0).pvalue)
    assert evm["p"] > scipy_stats.ttest_1samp([5.0, 4.0, 1.0, 3.0], 0.0).pvalue  # not 4 pairs
    assert "within the noise of 2 pre-training seeds" in suite_report.markdown(
        suite_report.summarise(runs, floor=[]))


def test_a_seed_missing_a_task_is_left_out_of_the_average():
    runs = fake_runs("bundled", {0: 60.0, 1: 61.0})
    runs = [r for r in runs if not (r["seed"] == 1 and r["task"] == "rte")]
    cells = suite_report.by_seed(runs)[("bundled", "reinit-1")]
    assert list(suite_report.group_average(cells, suite.SUITE)) == [0]


def test_report_files(tmp_path):
    out, results = tmp_path / "out", tmp_path / "results"
    (out / "runs").mkdir(parents=True)
    for i, r in enumerate(fake_runs("random", {0: 50.0}, random=True)
                          + fake_runs("bundled", {0: 51.0})):
        (out / "runs" / f"{i}.json").write_text(json.dumps(r))
    (out / "floor.json").write_text(json.dumps(
        [{"task": t, "size": n, "score": 40.0 + i} for i, (t, n) in
         enumerate(suite.SUITE + suite.FEW + suite.EXTRA)]))
    got = suite_report.write_report(out, results)
    assert ("bundled", "reinit-1", pytest.approx(53.0)) in got["rows"]
    md = (results / "results.md").read_text()
    assert "TF-IDF + linear (floor)" in md and "**42.0**" in md  # the floor's suite average
    assert json.loads((results / "results.json").read_text())["rows"]
