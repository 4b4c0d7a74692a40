"""Views of a run: the checkpoint slider, the training report (also live), held-out calibration
and precision-recall, and the "keep every K-th checkpoint" policy that feeds the slider.

One tiny run (vocabulary of 128, width 16, 6 steps, a checkpoint every 2 steps) is trained once
for the module. References are independent of the code under test: each checkpoint's
discriminator called directly, metrics.jsonl read line by line, numpy recounts, scikit-learn's
precision-recall curve and ``minielectra evaluate``'s own AUC.
"""

import json
import random
import re

import numpy as np
import pytest
import torch

from minielectra.config import RunConfig, apply_overrides, preset
from minielectra.model.electra import Electra
from minielectra.training.checkpoints import (list_checkpoints, prune_checkpoints,
                                              save_checkpoint)
from minielectra.training.evaluate import evaluate
from minielectra.training.loop import pretrain
from minielectra.viz.heldout import (average_precision, calibration_bins, heldout_figure,
                                     heldout_scores, heldout_text, precision_recall)
from minielectra.viz.report import (PANELS, SERIES, LiveReport, bundled_auc_curve,
                                   read_metrics, training_report)
from minielectra.viz.show import FIGURE_WIDTH, widget_bundle
from minielectra.viz.scoring import load_checkpoint
from minielectra.viz.timeline import learning_over_time, score_checkpoints

WORDS = ("the cat dog sat on mat ran far away quick brown fox jumps over lazy river tree "
         "house green blue red small big old new day night sun moon star sky").split()
TEXT = "the quick brown fox sat on the mat"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished tiny run, trained with a LiveReport attached: (run dir, the LiveReport)."""
    root = tmp_path_factory.mktemp("viz_run")
    rng = random.Random(0)
    docs = ["\n".join(" ".join(rng.choices(WORDS, k=rng.randint(4, 12)))
                      for _ in range(rng.randint(3, 6))) for _ in range(40)]
    (root / "tiny.txt").write_text("\n\n".join(docs) + "\n")
    cfg = apply_overrides(preset("tiny"), [
        f"data.corpus={root / 'tiny.txt'}", f"data.cache_dir={root / 'cache'}",
        "data.vocab_size=128", "train.eval_every=2", "train.save_every=2", "train.keep_last=1",
        "train.keep_every=1", f"train.out_dir={root / 'run'}"])
    live = LiveReport(every_s=3600.0)  # redraws only at evaluations, as a slow notebook would
    pretrain(cfg, progress=False, on_record=live)
    return root / "run", live


def test_keep_every_keeps_the_run_s_periodic_checkpoints(run):
    """keep_last=1 alone would leave only step 6; keep_every=1 keeps every save_every one."""
    assert [s for s, _ in list_checkpoints(run[0])] == [2, 4, 6]


def test_keep_every_prunes_all_but_every_k_th(tmp_path, tiny_model_config):
    cfg = RunConfig()
    cfg.model = tiny_model_config()
    t = cfg.train
    t.max_steps, t.save_every, t.keep_every, t.keep_last, t.milestones = 40, 2, 3, 2, ()
    model = Electra(cfg.model)
    for step in range(2, 31, 2):
        save_checkpoint(tmp_path, step, model, {"step": step}, cfg)
        prune_checkpoints(tmp_path, t)
    assert [s for s, _ in list_checkpoints(tmp_path)] == [6, 12, 18, 24, 28, 30]


def test_keep_every_needs_save_every():
    cfg = preset("nano")
    cfg.train.keep_every, cfg.train.save_every = 2, 0
    with pytest.raises(ValueError, match="train.keep_every"):
        cfg.validate()


# ------------------------------------------------------------------------------ the slider


def test_slider_has_one_step_per_checkpoint_scored_by_that_checkpoint(run):
    run_dir = run[0]
    fig = learning_over_time(run_dir, TEXT, seed=1)
    found = list_checkpoints(run_dir)
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == [str(s) for s, _ in found]
    # The corruption: the last checkpoint's own forward pass with the same seed.
    last = Electra.from_pretrained(found[-1][1]).eval()
    ids = torch.tensor([[last.tokenizer.cls_id, *last.tokenizer.encode(TEXT),
                         last.tokenizer.sep_id]])
    with torch.no_grad():
        corrupted = last(ids, generator=torch.Generator().manual_seed(1)).corrupted_ids
        for slider_step, (step, path) in zip(steps, found):
            disc = Electra.from_pretrained(path).eval().discriminator
            p = torch.sigmoid(disc(corrupted, torch.ones_like(ids)))[0, 1:-1]
            z = [v for row in slider_step.args[0]["z"][0] for v in row if v is not None]
            np.testing.assert_allclose(z, p.numpy(), rtol=1e-5, atol=1e-6)
            hover = [h for row in slider_step.args[0]["hovertext"][0] for h in row if h]
            assert [h.split("P(replaced) = ")[1][:5] for h in hover] == [f"{v:.3f}" for v in p]
    # The first step is what the page shows before the slider moves.
    assert steps[0].args[0]["z"][0] == fig.data[0].z and fig.layout.sliders[0].active == 0


def test_slider_frames_share_the_corruption_and_differ_in_scores(run):
    frames = score_checkpoints(list_checkpoints(run[0]), TEXT, replace={2: "dog"})
    assert [[r["token"] for r in recs] for _, recs in frames] == [
        [r["token"] for r in frames[0][1]]] * len(frames)
    assert frames[0][1][1]["token"] == "dog" and frames[0][1][1]["hand"]
    assert frames[0][1][0]["p_replaced"] != frames[-1][1][0]["p_replaced"]


def test_checkpoints_of_a_run_load_by_run_dir_as_the_latest(run):
    assert load_checkpoint(run[0]).path == list_checkpoints(run[0])[-1][1]


# ------------------------------------------------------------------------- training report


def _jsonl(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_report_traces_are_the_metrics_file_values(run):
    lines = _jsonl(run[0])
    fig = training_report(read_metrics(run[0]))
    assert len(fig.data) == len(SERIES)
    for trace, (_, kind, key, name) in zip(fig.data, SERIES):
        assert trace.name == name
        want = [(r["step"], r[key]) for r in lines if r["kind"] == kind]
        assert list(zip(trace.x, trace.y)) == want, key
    assert [r["step"] for r in lines if r["kind"] == "eval"] == [2, 4, 6]


def test_report_minutes_button_holds_elapsed_minutes(run):
    lines = _jsonl(run[0])
    fig = training_report(read_metrics(run[0]))
    minutes = next(b for b in fig.layout.updatemenus[0].buttons if b.label == "x: minutes")
    lr = [i for i, s in enumerate(SERIES) if s[2] == "lr"][0]
    assert list(minutes.args[0]["x"][lr]) == pytest.approx(
        [r["elapsed_s"] / 60 for r in lines if r["kind"] == "train"])
    fig_min = training_report(read_metrics(run[0]), x="minutes")
    assert list(fig_min.data[lr].x) == pytest.approx(list(minutes.args[0]["x"][lr]))


def test_live_report_received_every_record_of_the_run(run):
    run_dir, live = run
    assert live.records == _jsonl(run_dir)
    fresh = training_report(_jsonl(run_dir))  # the run's last record is an eval: redrawn
    for shown, want in zip(live.figure.data, fresh.data):
        assert (shown.x, shown.y) == (want.x, want.y)


def test_live_report_redraws_on_evaluations_and_when_due():
    live = LiveReport(every_s=3600.0)
    live.last_draw = float("inf")  # nothing is due by the clock
    train = {"kind": "train", "step": 10, "lr": 1e-3, "gen_loss": 3.0, "disc_loss": 0.4,
             "tokens_per_s": 5e3, "elapsed_s": 6.0}
    live(train)
    assert live.figure.data[0].x == ()  # not drawn yet
    live({"kind": "eval", "step": 10, "disc_auc": 0.7, "elapsed_s": 7.0})
    assert live.figure.data[0].x == (10,) and live.figure.data[0].y == (3.0,)
    auc = [i for i, s in enumerate(SERIES) if s[2] == "disc_auc"][0]
    assert live.figure.data[auc].y == (0.7,)
    live.every_s = 0.0
    live(dict(train, step=20, gen_loss=2.5))
    assert live.figure.data[0].y == (3.0, 2.5)
    # The widget's state (what a reloaded page draws) is the figure drawn last.
    shown = live.widget.get_state()["outputs"][0]["data"]["application/vnd.plotly.v1+json"]
    assert shown["data"][0]["y"] == [3.0, 2.5]


def _title_extent(fig, note) -> tuple[float, float]:
    """(left, right) in px of a subplot title, its width estimated at 0.6 em a character."""
    plot_w = fig.layout.width - fig.layout.margin.l - fig.layout.margin.r
    centre = fig.layout.margin.l + note.x * plot_w
    half = 0.6 * note.font.size * len(note.text) / 2
    return centre - half, centre + half


def test_report_is_as_wide_as_said_and_its_titles_do_not_overlap():
    fig = LiveReport().figure
    assert fig.layout.width == FIGURE_WIDTH
    titles = [a for a in fig.layout.annotations if a.text in PANELS]
    assert len(titles) == len(PANELS)
    rows = {}
    for note in titles:
        rows.setdefault(round(note.y, 3), []).append(_title_extent(fig, note))
    for extents in rows.values():  # side by side titles keep apart, and inside the figure
        extents.sort()
        assert extents[0][0] >= 0 and extents[-1][1] <= fig.layout.width, extents
        assert all(a[1] < b[0] for a, b in zip(extents, extents[1:])), extents


def test_report_panels_say_they_are_empty_until_their_first_record():
    live = LiveReport(every_s=0.0)
    notes = lambda: [a.visible for a in live.figure.layout.annotations  # noqa: E731
                     if (a.name or "").startswith("empty ")]
    assert notes() == [True] * len(PANELS)
    texts = [a.text for a in live.figure.layout.annotations if (a.name or "").startswith("empty")]
    assert any("no held-out evaluation yet" in t for t in texts)
    live({"kind": "train", "step": 10, "lr": 1e-3, "gen_loss": 3.0, "disc_loss": 0.4,
          "gen_accuracy": 0.1, "disc_accuracy": 0.8, "tokens_per_s": 5e3, "elapsed_s": 6.0})
    assert notes() == [False, False, True, True, False, False]  # the eval-only panels wait
    live({"kind": "eval", "step": 10, "disc_auc": 0.7, "disc_precision": 0.5,
          "disc_recall": 0.2, "elapsed_s": 7.0})
    assert notes() == [False] * len(PANELS)


def test_report_shows_a_line_not_its_repr_without_a_kernel():
    bundle = widget_bundle(LiveReport().widget, "live curves")
    assert bundle["text/plain"] == "live curves"
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_bundled_auc_curve_is_the_model_card_s_table(tmp_path):
    card = tmp_path / "card.md"
    card.write_text("intro\n\n| step | 1,000 | 2000 |\n|---|---|---|\n| AUC | 0.5 | 0.75 |\n")
    assert bundled_auc_curve(card) == {1000: 0.5, 2000: 0.75}
    card.write_text("| step | 1 |\n")
    with pytest.raises(ValueError, match="AUC"):
        bundled_auc_curve(card)
    # the shipped card: an evaluation every 1,000 steps to the run's last, ending near what
    # evaluate measures on all of the held-out split (the card's JSON block; 512 examples here)
    from minielectra.model.storage import BUNDLED
    last = json.loads((BUNDLED / "run_config.json").read_text())["train"]["max_steps"]
    final = json.loads(re.search(r"```json\n(\{.*?\})\n```",
                                 (BUNDLED / "MODEL_CARD.md").read_text(), re.S).group(1))
    curve = bundled_auc_curve()
    assert sorted(curve) == list(range(1000, last + 1, 1000))
    assert abs(curve[last] - final["disc_auc"]) < 0.02 and curve[last] > curve[1000] + 0.15


def test_bad_run_dirs_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no metrics.jsonl"):
        read_metrics(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such directory"):
        read_metrics(tmp_path / "missing")
    (tmp_path / "metrics.jsonl").write_text('{"kind": "train"}\nnot json\n')
    with pytest.raises(ValueError, match="line 2"):
        read_metrics(tmp_path)


# ------------------------------------------------------------------ held-out calibration, PR


def test_heldout_auc_is_evaluate_s(run):
    """Same documents, batch size and seed as `minielectra evaluate`: the same AUC."""
    path = list_checkpoints(run[0])[-1][1]
    s = heldout_scores(load_checkpoint(path), max_examples=8)
    assert s["auc"] == pytest.approx(evaluate(path, max_examples=8)["disc_auc"], abs=1e-12)
    assert s["p_replaced"].shape == s["replaced"].shape == s["text"].shape
    assert s["examples"] == 8


def test_heldout_text_is_a_heldout_example(run):
    ckpt = load_checkpoint(run[0])
    text = heldout_text(ckpt)
    assert text and set(text.split()) <= set(WORDS)


def test_calibration_bins_match_a_numpy_recount():
    rng = np.random.default_rng(0)
    p = np.r_[rng.random(500), 0.0, 1.0, 0.1]  # the edges: 0 in bin 0, 1 in the last bin
    y = rng.random(p.size) < p
    cal = calibration_bins(p, y, bins=10)
    count, _ = np.histogram(p, bins=np.linspace(0, 1, 11))
    assert cal["count"].tolist() == count.tolist()
    for b in range(10):
        inside = (p >= b / 10) & ((p < (b + 1) / 10) if b < 9 else (p <= 1))
        assert cal["mean_p"][b] == pytest.approx(p[inside].mean())
        assert cal["frac_replaced"][b] == pytest.approx(y[inside].mean())


def test_calibration_empty_bin_is_nan():
    cal = calibration_bins([0.05, 0.95], [False, True], bins=4)
    assert cal["count"].tolist() == [1, 0, 0, 1] and np.isnan(cal["mean_p"][1])


@pytest.mark.parametrize("seed", [0, 1])
def test_precision_recall_is_sklearn_s(seed):
    from sklearn.metrics import average_precision_score, precision_recall_curve
    rng = np.random.default_rng(seed)
    p = np.round(rng.random(300), 2)  # rounded: many ties, as float32 probabilities have
    y = rng.random(300) < 0.2 + 0.5 * p
    precision, recall, thresholds = precision_recall(p, y)
    want = precision_recall_curve(y, p)
    for ours, theirs in zip((precision, recall, thresholds), want):
        np.testing.assert_allclose(ours, theirs)
    assert average_precision(precision, recall) == pytest.approx(average_precision_score(y, p))


def test_heldout_figure_draws_the_bins_and_the_curve():
    rng = np.random.default_rng(2)
    p = rng.random(2000)
    y = rng.random(2000) < p
    fig = heldout_figure(p, y, bins=5)
    bars, diag, cal, pr, chance = fig.data
    assert list(bars.y) == calibration_bins(p, y, bins=5)["count"].tolist()
    np.testing.assert_allclose(cal.y, calibration_bins(p, y, bins=5)["frac_replaced"])
    precision, recall, _ = precision_recall(p, y)
    assert len(pr.x) <= 400 and (pr.x[0], pr.y[0]) == (recall[0], precision[0])
    assert (pr.x[-1], pr.y[-1]) == (0.0, 1.0)
    pairs = set(zip(recall.tolist(), precision.tolist()))
    assert all(pt in pairs for pt in zip(pr.x, pr.y))
    assert chance.y[0] == pytest.approx(y.mean())


# -------------------------------------------------------------------- the run's page (CLI)


def test_viz_run_page_has_report_slider_and_heldout(run, tmp_path, capsys):
    from minielectra.cli import main
    page = tmp_path / "run.html"
    assert main(["viz", "--run", str(run[0]), "--out", str(page), "--heldout-examples",
                 "8"]) == 0
    said = capsys.readouterr()
    result = json.loads(said.out)
    assert "held-out: " in said.err and "(100%)" in said.err, said.err  # the scoring's progress
    assert result["checkpoints"] == [2, 4, 6] and result["records"] == len(_jsonl(run[0]))
    assert result["text"] == heldout_text(load_checkpoint(run[0]))
    html = page.read_text()
    assert html.count("Plotly.newPlot") == 3 and html.count('"sliders":[{"active":0') == 1
    from test_viz_browser import assert_rendered, find_chromium, render
    if find_chromium() is None:
        pytest.skip("no Chromium on this machine (Debian, Ubuntu: apt-get install chromium)")
    # Move the slider to the last checkpoint as a reader would: the step's own restyle.
    moved = tmp_path / "moved.html"
    moved.write_text(html.replace("</body>", MOVE_SLIDER + "</body>"))
    shot = render(moved, tmp_path / "run.png", width=1200, height=2400)
    assert_rendered(shot, 3, width=1200, height=2400)
    assert "slider-container" in shot.dom and 'data-moved="6"' in shot.dom


MOVE_SLIDER = """<script>
window.addEventListener("load", function () {
  document.querySelectorAll(".js-plotly-plot").forEach(function (gd) {
    if (!gd.layout.sliders) return;
    var last = gd.layout.sliders[0].steps[gd.layout.sliders[0].steps.length - 1];
    Plotly.restyle(gd, last.args[0]).then(function () { gd.dataset.moved = last.label; });
  });
});
</script>"""
