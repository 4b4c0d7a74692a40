"""The experiment runner (minielectra.experiments): equal-FLOPs planning, resuming, the linear
probe against scikit-learn's ridge, the report's tables, and a tiny run of every experiment."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from minielectra.cli import main
from minielectra.experiments import probe, report, runner, svg
from minielectra.experiments.specs import EXPERIMENTS
from minielectra.objectives.flops import train_flops_per_step


TINY = ["model.max_position_embeddings=32", "train.log_every=2"]


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory, write_tiny_corpus):
    return write_tiny_corpus(tmp_path_factory.mktemp("corpus") / "tiny.txt")


@pytest.fixture
def tiny(corpus_file, tmp_path, glue_slice_dir, monkeypatch):
    monkeypatch.setenv("MINIELECTRA_DATA_DIR", str(glue_slice_dir))
    return dict(corpus=str(corpus_file), out=tmp_path / "exp", preset="tiny",
                overrides=TINY + [f"data.cache_dir={tmp_path / 'cache'}"])


# ------------------------------------------------------------------------------ planning


def test_equal_flops_gives_each_arm_the_reference_compute(tiny):
    specs = runner.plan("table5", budget=40, seeds=2, **tiny)
    assert len(specs) == 5 * 2
    ref = [s for s in specs if s.arm == "ELECTRA"][0]
    budget = 40 * train_flops_per_step(ref.cfg)
    for s in specs:
        assert abs(s.steps * train_flops_per_step(s.cfg) - budget) <= train_flops_per_step(s.cfg)
    assert len({s.cfg.train.out_dir for s in specs}) == 10
    mlm = [s for s in specs if s.arm == "BERT (MLM)"][0]
    assert mlm.cfg.objective.name == "mlm" and mlm.steps != ref.steps


def test_efficiency_budgets_and_shared_run_directories(tiny):
    eff = runner.plan("efficiency", budget=40, **tiny)
    assert sorted(s.steps for s in eff if s.arm == "ELECTRA") == [5, 10, 20, 40]
    t5 = runner.plan("table5", budget=40, **tiny)
    shared = {s.cfg.train.out_dir for s in eff} & {s.cfg.train.out_dir for s in t5}
    assert len(shared) == 2  # ELECTRA and MLM at the full budget are the same runs


def test_a_shared_run_is_reported_at_each_plans_budget(tiny, monkeypatch):
    """efficiency at budget 40 reuses the 20-step runs of budget 20, at fraction 0.5, not 1."""
    import minielectra.experiments.runs as runs
    captured = {}

    def fake_execute(spec, judge, **kw):  # a record written by the other plan
        return {"arm": spec.arm, "seed": spec.seed, "budget": 1.0, "steps": spec.steps,
                "probe_avg": 0.0, "finetune_avg": None, "train_seconds": 1.0}

    def fake_report(exp, results, controls, **kw):
        captured["results"] = results
        return {"markdown": "", "files": [], "summary": []}

    monkeypatch.setattr(runner, "execute", fake_execute)
    monkeypatch.setattr(runner, "random_init", lambda *a, **k: {})
    monkeypatch.setattr(runner, "write_report", fake_report)
    specs = runner.plan("efficiency", budget=40, **tiny)
    runner._run("efficiency", specs, runs.Judge(("sst2",)), out=tiny["out"], progress=False,
                setup={})
    budgets = {(r["arm"], r["steps"]): r["budget"] for r in captured["results"]}
    assert budgets[("ELECTRA", 20)] == 0.5 and budgets[("ELECTRA", 40)] == 1.0


def test_an_identical_run_under_another_arms_name_is_reused_and_relabelled(tiny, monkeypatch):
    """generator-size's 1/4 arm is efficiency's ELECTRA (the paper's generator): same config,
    seed and length, so once efficiency has trained it, generator-size uses that directory and
    reports it under its own arm."""
    import minielectra.experiments.runs as runs
    eff = {s.arm: s for s in runner.plan("efficiency", budget=40, budgets=[1.0], **tiny)}
    trained = eff["ELECTRA"].cfg.train.out_dir
    assert "electra-40-s0-" in trained
    before = {s.arm: s.cfg.train.out_dir for s in runner.plan("generator-size", budget=40, **tiny)}
    assert before["generator 1/4"] != trained  # nothing to reuse yet: its own name
    (tiny["out"] / "runs").mkdir(parents=True)
    Path(trained).mkdir()
    specs = runner.plan("generator-size", budget=40, **tiny)
    dirs = {s.arm: s.cfg.train.out_dir for s in specs}
    assert dirs["generator 1/4"] == trained
    assert dirs["generator 1/8"] == before["generator 1/8"]  # other configs keep their own

    captured = {}
    monkeypatch.setattr(runner, "execute", lambda spec, judge, **kw: {
        "arm": "ELECTRA" if spec.cfg.train.out_dir == trained else spec.arm, "seed": spec.seed,
        "budget": 1.0, "steps": spec.steps, "probe_avg": 0.0, "finetune_avg": None,
        "train_seconds": 1.0})
    monkeypatch.setattr(runner, "random_init", lambda *a, **k: {})
    monkeypatch.setattr(runner, "write_report",
                        lambda exp, results, controls, **kw: captured.update(results=results)
                        or {"markdown": "", "files": [], "summary": []})
    runner._run("generator-size", specs, runs.Judge(("sst2",)), out=tiny["out"], progress=False,
                setup={})
    assert [r["arm"] for r in captured["results"]] == [s.arm for s in specs]


# ---------------------------------------------------------------------------------- probe


def test_ridge_probe_matches_scikit_learn():
    sklearn = pytest.importorskip("sklearn.linear_model")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 6, generator=g, dtype=torch.float64)
    y = x @ torch.randn(6, 2, generator=g, dtype=torch.float64) + 0.3
    w = probe.ridge_fit(x, y, 5.0)
    ref = sklearn.Ridge(alpha=5.0).fit(x.numpy(), y.numpy())
    np.testing.assert_allclose(w[:-1].numpy(), ref.coef_.T, atol=1e-8)
    np.testing.assert_allclose(w[-1].numpy(), ref.intercept_, atol=1e-8)


def test_probe_separates_a_separable_task_and_not_noise():
    from minielectra.finetune.glue.data import get_task
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(2, (400,), generator=g)
    x = torch.randn(400, 8, generator=g) + 3.0 * labels[:, None].float()
    sst2 = get_task("sst2")
    good = probe.fit_probe(sst2, x[:300], labels[:300].tolist(), x[300:], labels[300:].tolist())
    assert good["score"] > 95
    noise = torch.randn(400, 8, generator=g)
    bad = probe.fit_probe(sst2, noise[:300], labels[:300].tolist(), noise[300:],
                          labels[300:].tolist())
    assert bad["score"] < 70


def test_equal_time_interpolates_in_log_time_and_never_extrapolates():
    rows = [{"arm": "A", "train_seconds": 100.0, "probe_avg": 60.0},
            {"arm": "A", "train_seconds": 1000.0, "probe_avg": 70.0},
            {"arm": "B", "train_seconds": 10.0, "probe_avg": 50.0},
            {"arm": "B", "train_seconds": 1000.0, "probe_avg": 58.0}]
    got = report.equal_time(rows, "A", "B")
    assert got[0]["B"] == pytest.approx(54.0) and got[0]["delta"] == pytest.approx(6.0)
    assert got[1]["B"] == pytest.approx(58.0)
    rows[3]["train_seconds"] = 500.0
    assert report.equal_time(rows, "A", "B")[1]["B"] is None


def test_svg_charts_are_wellformed_xml():
    import xml.etree.ElementTree as ET
    ns = "{http://www.w3.org/2000/svg}"
    line = ET.fromstring(svg.line_chart(
        [{"name": "a", "x": [1e9, 1e10], "y": [50, 60], "err": [1, 2]}],
        title="t", xlabel="x", ylabel="y", logx=True))
    assert line.tag == f"{ns}svg"
    assert len(line.findall(f"{ns}polyline")) == 1 and len(line.findall(f"{ns}circle")) == 2
    bars = ET.fromstring(svg.bar_chart(["g1", "g2"], [{"name": "s", "y": [50, 55], "err": [0, 1]}],
                                       title="t", ylabel="y"))
    assert bars.tag == f"{ns}svg"
    # the background, the plot frame, one legend swatch and one bar per group
    assert len(bars.findall(f"{ns}rect")) == 2 + 1 + 2


# ----------------------------------------------------------------------- end to end, resumed


def small_judge(**kw):
    return dict(probe_tasks=["sst2", "stsb"], finetune_tasks=["sst2"], probe_examples=30,
                finetune_examples=16, finetune_overrides=["finetune.epochs=1"], progress=False,
                **kw)


@pytest.mark.slow
def test_table5_end_to_end_then_resumes_without_retraining(tiny, monkeypatch):
    result = runner.run_experiment("table5", budget=6, seeds=1, **tiny, **small_judge())
    out = tiny["out"] / "table5"
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [r["arm"] for r in rows] == [a.label for a in EXPERIMENTS["table5"].arms] + [
        "random init (no pre-training)"]
    assert all(r["train_flops"] > 0 for r in rows[:-1])
    assert "| ELECTRA |" in (out / "results.md").read_text()
    assert (out / "table5_scores.svg").is_file() and (out / "table5_scores.html").is_file()
    assert result["runs"] == 5
    # a second call trains nothing: every run has its result file
    import minielectra.experiments.runs as runs
    monkeypatch.setattr(runs, "pretrain", lambda *a, **k: pytest.fail("retrained"))
    again = runner.run_experiment("table5", budget=6, seeds=1, **tiny, **small_judge())
    assert again["summary"] == json.loads(json.dumps(result["summary"]))
    # another judge re-scores the pre-trained checkpoints, still without training
    judge = {**small_judge(), "probe_tasks": ["sst2"], "finetune_tasks": []}
    rescored = runner.run_experiment("table5", budget=6, seeds=1, **tiny, **judge)
    assert all(r["finetune_tasks"] == [] and r["probe_tasks"] == ["sst2"]
               for r in rescored["summary"])


def test_an_interrupted_run_resumes_from_its_checkpoint(tiny, monkeypatch):
    import minielectra.experiments.runs as runs
    from minielectra.training.checkpoints import latest_checkpoint
    spec = runner.plan("efficiency", budget=8, **tiny)[-1]  # MLM, full budget
    judge = runs.Judge(("sst2",), (), 30, 16)
    real = runs.pretrain
    calls = []

    def interrupted(cfg, **kw):  # the first attempt stops half-way, as a crash would
        calls.append(kw["resume"])
        if len(calls) == 1:
            from minielectra.training.loop import pretrain
            pretrain(cfg, until_step=cfg.train.max_steps // 2, progress=False)
            raise KeyboardInterrupt
        return real(cfg, **kw)

    monkeypatch.setattr(runs, "pretrain", interrupted)
    with pytest.raises(KeyboardInterrupt):
        runs.execute(spec, judge)
    assert latest_checkpoint(spec.cfg.train.out_dir) is not None
    result = runs.execute(spec, judge)
    assert calls == [False, True] and result["resumed_from"] == spec.steps // 2
    assert result["steps"] == spec.steps


@pytest.mark.slow
@pytest.mark.parametrize("name", ["efficiency", "generator-size", "tying", "alectra",
                                  "procedures"])
def test_every_experiment_runs_end_to_end(tiny, name, capsys):
    code = main(["experiment", name, "--preset", "tiny", "--budget", "4", "--corpus",
                 tiny["corpus"], "--out", str(tiny["out"]), "--probe-tasks", "sst2",
                 "--finetune-tasks",
                 "--probe-examples", "30", *[a for o in tiny["overrides"] for a in ("--set", o)]])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)  # stdout is one JSON document
    assert printed["experiment"] == name
    out = json.loads((tiny["out"] / name / "results.json").read_text())
    arms = {r["arm"] for r in out["rows"]}
    assert {a.label for a in EXPERIMENTS[name].arms} <= arms
    assert list((tiny["out"] / name).glob("*.svg"))


def test_long_legend_names_wrap_inside_the_chart_and_keep_every_word():
    import xml.etree.ElementTree as ET
    ns = "{http://www.w3.org/2000/svg}"
    names = ["10 epochs, top layer re-initialised", "ELECTRA, generator 1/8 (mini)", "MLM"]
    chart = ET.fromstring(svg.line_chart(
        [{"name": n, "x": [1, 2], "y": [50, 60], "err": [0, 0]} for n in names],
        title="t", xlabel="x", ylabel="y"))
    legend = [t for t in chart.iter(f"{ns}text") if t.findall(f"{ns}tspan")]
    assert [" ".join(s.text for s in t.findall(f"{ns}tspan")) for t in legend] == names
    width = int(chart.get("width"))
    for t in legend:
        for line in t.findall(f"{ns}tspan"):  # ~6.5 px a character at font size 12
            assert float(line.get("x")) + 6.5 * len(line.text) <= width
    tops = [int(r.get("y")) for r in chart.iter(f"{ns}rect") if r.get("width") == "12"]
    assert tops == sorted(tops) and tops[2] - tops[1] >= 2 * 14  # a wrapped entry takes 2 rows


def test_shards_split_the_runs_and_the_command_without_shard_writes_the_report(tiny, capsys):
    """Two `--shard` processes train disjoint halves (each a mix of seeds) and write no report;
    the plain command then finds every run done, trains nothing and writes it."""
    specs = runner.plan("generator-size", budget=4, seeds=2, **tiny)
    halves = [runner.shard_of(specs, k, 2) for k in (1, 2)]
    assert sorted(s.name for h in halves for s in h) == sorted(s.name for s in specs)
    assert [s.seed for s in halves[0]] == [0, 0, 1, 1] and [s.seed for s in halves[1]] == [0, 0, 1, 1]

    args = ["experiment", "generator-size", "--preset", "tiny", "--budget", "4", "--seeds", "2",
            "--corpus", tiny["corpus"], "--out", str(tiny["out"]), "--probe-tasks", "sst2",
            "--finetune-tasks",
            "--probe-examples", "30", *[a for o in tiny["overrides"] for a in ("--set", o)]]
    assert main(args + ["--shard", "1/2"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["shard"] == "1/2" and printed["runs"] == 4
    done = {p.parent.name for p in (tiny["out"] / "runs").glob("*/result.json")}
    assert done == {s.name for s in halves[0]}
    assert not (tiny["out"] / "generator-size").exists()  # no report from a shard
    assert main(args + ["--shard", "2/2"]) == 0
    capsys.readouterr()
    stamps = {p: p.stat().st_mtime_ns for p in (tiny["out"] / "runs").glob("*/result.json")}
    assert len(stamps) == 8
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == 8
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps  # nothing re-trained or re-judged
    assert (tiny["out"] / "generator-size" / "results.json").exists()


@pytest.mark.parametrize("bad", ["0/2", "3/2", "1", "a/b"])
def test_a_bad_shard_is_a_usage_error_naming_the_option(bad, capsys):
    with pytest.raises(SystemExit) as e:
        main(["experiment", "efficiency", "--shard", bad])
    assert e.value.code == 2 and "--shard" in capsys.readouterr().err


@pytest.mark.parametrize("budgets", [[1.0], [0.5, 1.0]])
def test_the_figures_draw_the_word_order_probe_when_it_was_measured(tmp_path, budgets):
    """The word-order probe is the judge that sees pre-training at CPU scale: the bar chart (one
    budget) and the line charts (several) draw it next to the probe average, random init too."""
    exp = EXPERIMENTS["generator-size"]

    def record(arm, seed, budget, swap):
        return {"arm": arm, "seed": seed, "budget": budget, "steps": 0 if budget == 0 else 10,
                "train_flops": 0 if budget == 0 else 1e12 * budget, "train_seconds": 1.0,
                "tokens": 1, "probe": {"sst2": {"score": 50.0}}, "probe_avg": 50.0,
                "finetune": {}, "finetune_avg": None, "swap_score": swap, "heldout": {}}

    results = [record(a.label, s, b, 60.0 + s) for b in budgets for a in exp.arms for s in (0, 1)]
    controls = [record("random init (no pre-training)", s, 0.0, 49.0) for s in (0, 1)]
    files = report.write_report(exp, results, controls, out=tmp_path,
                                setup={"preset": "nano", "budget": 10, "seeds": 2})["files"]
    drawn = "".join(open(f).read() for f in files if f.endswith(".svg"))
    assert "word-order probe" in drawn and ("probe average" in drawn or "linear-probe" in drawn)
    if len(budgets) > 1:
        assert (tmp_path / "generator-size_word_order_vs_train_flops.svg").exists()


def test_arm_config_warmup_is_five_percent_unless_set():
    from minielectra.config import preset
    from minielectra.experiments.runs import arm_config
    base = preset("mini")
    assert arm_config(base, [], steps=15000, seed=0, out_dir=Path("x")).train.warmup_steps == 750
    kept = arm_config(base, ["train.warmup_steps=200"], steps=15000, seed=0, out_dir=Path("x"))
    assert kept.train.warmup_steps == 200 and kept.train.max_steps == 15000
