"""research/transfer.py: fine-tuning gain over random init, row by row, at tiny sizes.

References: the gains are recomputed from the cached per-run files, the effective rank from a
matrix with known singular values, and the random-init arm's independence of tying and generator
size from freshly built models."""

import json
import sys
from pathlib import Path

import pytest
import torch

from minielectra.config import ModelConfig
from minielectra.model.electra import Electra
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "research"))
import transfer  # noqa: E402  (research/transfer.py)

TINY = ["model.num_layers=2", "model.max_position_embeddings=32", "train.log_every=2",
        "finetune.max_seq_len=16", "finetune.eval_batch_size=64"]


@pytest.fixture
def setup(write_tiny_corpus, tmp_path, glue_slice_dir, monkeypatch):
    monkeypatch.setenv("MINIELECTRA_DATA_DIR", str(glue_slice_dir))
    torch.set_num_threads(1)
    corpus = write_tiny_corpus(tmp_path / "tiny.txt")
    return dict(out=tmp_path / "exp", preset="tiny", overrides=TINY + [
        f"data.corpus={corpus}", f"data.cache_dir={tmp_path / 'cache'}"])


def test_effective_rank_of_known_singular_values():
    q, _ = torch.linalg.qr(torch.randn(40, 40, dtype=torch.float64))
    w = q[:, :6] @ torch.diag(torch.full((6,), 3.0, dtype=torch.float64)) @ \
        torch.linalg.qr(torch.randn(8, 8, dtype=torch.float64))[0][:6]
    w = w - w.mean(0)  # centred already up to the projection: rank 5 or 6 equal directions
    s = torch.linalg.svdvals(w)
    p = s ** 2 / (s ** 2).sum()
    expected = float(torch.exp(-(p[p > 0] * p[p > 0].log()).sum()))
    assert transfer.effective_rank(w) == pytest.approx(expected)
    assert transfer.effective_rank(torch.eye(16)) == pytest.approx(15.0, rel=1e-6)  # centred


def test_random_arm_does_not_depend_on_tying_or_generator_size():
    """The from-scratch encoder of each row's twin is the same for any tying or generator size
    (a fresh Electra of the pre-trained config would not be: the generator's draws come first)."""
    states = []
    for tying, size in (("embeddings", 0.25), ("none", 0.5), ("all", 1.0)):
        cfg = ModelConfig(vocab_size=40, embedding_size=8, hidden_size=16, num_layers=2,
                          num_heads=2, intermediate_size=32, generator_size=size, tying=tying)
        twin = transfer.random_twin(Electra(cfg))
        torch.manual_seed(3)  # what finetune(from_scratch) does with the twin's config
        states.append(Electra(twin.config).discriminator.encoder.state_dict())
    for other in states[1:]:
        assert other.keys() == states[0].keys()
        assert all(torch.equal(other[k], states[0][k]) for k in states[0])


def _cached_runs(out):
    return [json.loads(p.read_text()) for p in (out / "transfer" / "finetune").glob("*.json")]


def test_transfer_end_to_end_pretraining_then_finetuning_rows(setup):
    r = transfer.run_transfer(rows=["pt-embeddings", "pt-mask-0.25"], sizes=[16, 24], seeds=2,
                              pretrain_steps=[4, 8], progress=False, **setup)
    summary = r["summary"]
    assert [(s["name"], s["pretrain_steps"]) for s in summary] == [
        ("pt-embeddings", 4), ("pt-embeddings", 8), ("pt-mask-0.25", 4), ("pt-mask-0.25", 8)]
    data = json.loads((setup["out"] / "transfer" / "results.json").read_text())
    for row, measured in zip(summary, data["rows"]):
        assert row["minutes"] > 0 and 0 <= row["disc_auc"] <= 1
        for s in row["sizes"]:
            by = {(x["arm"], x["seed"]): x["score"] for x in measured["runs"]
                  if x["size"] == s["size"]}
            gains = [by[("pretrained", k)] - by[("random", k)] for k in (0, 1)]
            assert s["gains"] == [round(g, 2) for g in gains]
            assert s["median_gain"] == pytest.approx(sum(gains) / 2)
    # The random arm is one set of runs for all four rows (same shape, vocabulary and recipe).
    runs = _cached_runs(setup["out"])
    assert sum(x["arm"] == "random" for x in runs) == 2 * 2
    assert sum(x["arm"] == "pretrained" for x in runs) == 4 * 2 * 2
    md = (setup["out"] / "transfer" / "results.md").read_text()
    assert md.count("pre-train: masking rate 25%") == 2
    assert (setup["out"] / "transfer" / "gain_vs_minutes.svg").read_text().startswith("<svg")

    # Fine-tuning rows on two of those checkpoints, through the script's command line; reinit-1 and epochs-10
    # share their random arm (re-initialising a random encoder is a no-op).
    ckpts = [summary[0]["checkpoint"], summary[1]["checkpoint"]]
    args = ["--rows", "epochs-10", "reinit-1", "--sizes", "16",
            "--seeds", "2", "--checkpoint", *ckpts, "--out", str(setup["out"])]
    args += [a for o in setup["overrides"] if o.startswith("finetune.") for a in ("--set", o)]
    transfer.main(args)
    after = _cached_runs(setup["out"])
    new = [x for x in after if x not in runs]
    # epochs-10 on these checkpoints is pt-embeddings' recipe: all its runs are reused; only
    # reinit-1's pre-trained arm is new, on each checkpoint.
    assert [x["overrides"][-1] for x in new] == ["finetune.reinit_layers=1"] * 4
    again = json.loads((setup["out"] / "transfer" / "results.json").read_text())["summary"]
    assert [(r["name"], r["checkpoint"]) for r in again] == [
        ("epochs-10", ckpts[0]), ("epochs-10", ckpts[1]), ("reinit-1", ckpts[0]),
        ("reinit-1", ckpts[1])]
    for k in (0, 1):  # minutes from each run's record; the same runs, the same gains
        assert again[k]["minutes"] == pytest.approx(summary[k]["minutes"])
        assert again[k]["sizes"][0]["gains"] == summary[k]["sizes"][0]["gains"]

    # --report-only: what is there, nothing new (a third seed and an untrained budget are absent)
    before = len(_cached_runs(setup["out"]))
    partial = transfer.run_transfer(rows=["pt-embeddings", "pt-mask-0.25"], sizes=[16], seeds=3,
                                    pretrain_steps=[4, 12], report_only=True, progress=False,
                                    **setup)["summary"]
    assert [(s["name"], s["pretrain_steps"]) for s in partial] == [("pt-embeddings", 4),
                                                                   ("pt-mask-0.25", 4)]
    assert partial[1]["sizes"][0]["gains"] == summary[2]["sizes"][0]["gains"]
    # A fine-tuning row never run on a checkpoint is left out, not reported empty, even where
    # its random arm exists (reinit-1's is epochs-10's, which ran on the masking-rate checkpoint).
    masking = summary[2]["checkpoint"]
    mixed = transfer.run_transfer(rows=["reinit-1", "adam"], sizes=[16], seeds=2,
                                  checkpoint=[ckpts[0], masking], report_only=True,
                                  progress=False, **setup)["summary"]
    assert [(s["name"], s["checkpoint"]) for s in mixed] == [("reinit-1", ckpts[0])]
    # --set with an option the row sets too (as when pre-training rows are fine-tuned with
    # reinit-1's recipe): it counts once, so the row finds the same runs
    twice = {**setup, "overrides": setup["overrides"] + ["finetune.reinit_layers=1"]}
    dup = transfer.run_transfer(rows=["reinit-1"], sizes=[16], seeds=2, checkpoint=[ckpts[0]],
                                report_only=True, progress=False, **twice)["summary"]
    assert dup[0]["sizes"][0]["gains"] == mixed[0]["sizes"][0]["gains"]
    assert len(_cached_runs(setup["out"])) == before
    # Cached runs follow the weights, not the path: a copy of a checkpoint finds its runs, and
    # the same path holding another checkpoint (bundled after an upgrade, a resumed run) finds
    # that one's
    import shutil
    moving = setup["out"].parent / "moving"
    by_path = {}
    for ckpt in ckpts:
        shutil.rmtree(moving, ignore_errors=True)
        shutil.copytree(ckpt, moving)
        by_path[ckpt] = transfer.run_transfer(rows=["reinit-1"], sizes=[16], seeds=2,
                                              checkpoint=[str(moving)], report_only=True,
                                              progress=False, **setup)["summary"][0]
    for k, ckpt in enumerate(ckpts):
        assert by_path[ckpt]["sizes"][0]["gains"] == again[2 + k]["sizes"][0]["gains"]
        assert by_path[ckpt]["disc_auc"] == again[2 + k]["disc_auc"]
    assert len(_cached_runs(setup["out"])) == before


def test_unknown_rows_and_bad_counts_are_one_clear_error(setup):
    with pytest.raises(ValueError, match="unknown transfer row"):
        transfer.run_transfer(rows=["nope"], **setup)
    with pytest.raises(ValueError, match="--seeds"):
        transfer.run_transfer(rows=["paper"], seeds=0, **setup)


def test_minutes_of_a_kept_checkpoint_come_from_the_run_clock(tmp_path):
    """An earlier ``step_K`` checkpoint of a long run: the clock at its evaluation, with a
    resumed session's clock (which starts again at 0) added to the first one's."""
    run = tmp_path / "run"
    for k in (1000, 2000, 3000):
        (run / "checkpoints" / f"step_{k}").mkdir(parents=True)
    lines = [{"kind": "train", "step": 10, "elapsed_s": 3.0},
             {"kind": "eval", "step": 1000, "elapsed_s": 300.0},
             {"kind": "train", "step": 1500, "elapsed_s": 450.0},
             {"kind": "train", "step": 1510, "elapsed_s": 2.0},  # --resume: a new clock
             {"kind": "eval", "step": 2000, "elapsed_s": 150.0}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert transfer.checkpoint_minutes(str(run / "checkpoints" / "step_1000")) == 5.0
    assert transfer.checkpoint_minutes(str(run / "checkpoints" / "step_2000")) == 10.0
    assert transfer.checkpoint_minutes(str(run / "checkpoints" / "step_3000")) is None
    assert transfer.checkpoint_minutes(str(run)) is None  # a run dir: its latest, step_3000
    (run / "checkpoints" / "step_3000").rmdir()
    assert transfer.checkpoint_minutes(str(run)) == 10.0
    assert transfer.checkpoint_minutes("bundled") == transfer.BUNDLED_MINUTES
    # a milestone checkpoint between evaluations: the first log line at or after its step
    (run / "checkpoints" / "step_1490").mkdir(parents=True)
    assert transfer.checkpoint_minutes(str(run / "checkpoints" / "step_1490")) == 7.5


def test_curve_draws_one_line_per_run_of_kept_checkpoints():
    """A long run's step_K checkpoints are one line; the bundled model (another run) its own."""
    from transfer_report import curve

    def row(checkpoint, minutes, gain):
        size = {"size": 16, "median_gain": gain, "gain_sd": 0.0}
        return {"label": "10 epochs", "pretrain_steps": None, "checkpoint": checkpoint,
                "minutes": minutes, "sizes": [size]}
    summary = [row("bundled", 38.1, -0.5), row("/x/long/checkpoints/step_0001000", 7.0, -2.0),
               row("/x/long/checkpoints/step_0004000", 28.0, -1.0)]
    drawn = curve(summary, [16])
    import xml.etree.ElementTree as ET
    ns = "{http://www.w3.org/2000/svg}"
    legend = [" ".join(s.text for s in t.findall(f"{ns}tspan"))  # wrapped names, rejoined
              for t in ET.fromstring(drawn).iter(f"{ns}text") if t.findall(f"{ns}tspan")]
    # one recipe: it is in the title, and each line is named by its run
    assert legend == ["bundled n=16", "long n=16"]
    assert "Fine-tuning gain over random init (10 epochs)" in drawn
    summary.append({**row("/x/other", 5.0, 1.0), "label": "20 epochs"})
    legend = [" ".join(s.text for s in t.findall(f"{ns}tspan"))
              for t in ET.fromstring(curve(summary, [16])).iter(f"{ns}text")
              if t.findall(f"{ns}tspan")]
    assert legend == ["10 epochs bundled n=16", "10 epochs long n=16", "20 epochs other n=16"]


def test_random_arms_keep_the_checkpoints_position_init():
    """A checkpoint pre-trained with a sinusoidal position table is compared with random models
    that start the same way: the transfer experiment's twin and fine-tuning's from_scratch."""
    from minielectra.model.transformer import sinusoids
    from minielectra.finetune.classifier import FinetuneConfig, build_classifier
    from minielectra.finetune.glue.data import get_task
    cfg = ModelConfig(vocab_size=64, embedding_size=8, hidden_size=16, num_layers=1, num_heads=2,
                      intermediate_size=32, max_position_embeddings=32, generator_size=0.5,
                      position_init="sinusoidal")
    expected = sinusoids(32, 8)
    expected = expected / expected.std() * cfg.initializer_range
    twin = transfer.random_twin(Electra(cfg), seed=3)
    torch.testing.assert_close(twin.discriminator.encoder.embeddings.position.weight.detach(),
                               expected)
    torch.manual_seed(0)
    scratch = build_classifier(Electra(cfg), get_task("sst2"), FinetuneConfig(from_scratch=True))
    torch.testing.assert_close(scratch.encoder.embeddings.position.weight.detach(), expected)
