"""tools/gpu_check.py, the GPU verification kit, kept working while no GPU is lent.

- ``--dry-run`` runs every stage's code path on the CPU at toy shapes (the pack, the command
  line's pretrain/resume/fine-tune/torchrun, the lesson scripts) and records every check;
- ``--pack`` copies exactly the data the stages need, byte for byte, and measures what a call
  would send against the 64 MiB limit;
- ``--fill`` replaces only the marked block of a document;
- the library's training path imports nothing that the bare GPU image lacks.
"""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("MINIELECTRA_DATA_DIR", REPO.parent / "shared" / "data"))
needs_data = pytest.mark.skipif(not (DATA / "pretrain-en").is_dir(),
                                reason="needs MINIELECTRA_DATA_DIR with pretrain-en, glue, vocab")
sys.path.insert(0, str(REPO / "tools"))


def env(**extra):
    return dict(os.environ, PYTHONPATH=str(REPO), MINIELECTRA_DATA_DIR=str(DATA), **extra)


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("gpu_work")
    proc = subprocess.run([sys.executable, "tools/gpu_check.py", "--dry-run",
                           "--work", str(work)], cwd=REPO, env=env(), capture_output=True,
                          text=True, timeout=900)
    return proc, work


@needs_data
@pytest.mark.slow
def test_dry_run_runs_every_stage_and_every_check_passes(dry_run):
    proc, work = dry_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    from gpu_check import STAGES
    results = json.loads((work / "cpu-dry-run.json").read_text())
    assert sorted(results["stages"], key=int) == [str(n) for n in STAGES]
    for n, entry in results["stages"].items():
        assert entry["status"] == "done", (n, entry.get("error"))
        assert entry["result"]["checks"], n
        assert all(c["ok"] for c in entry["result"]["checks"].values()), (n, entry["result"])
        assert entry["versions"]["torch"] and "gpu_check.py" in entry["command"]
    # the resumed run went on from where the first one stopped
    four, five = results["stages"]["4"]["result"], results["stages"]["5"]["result"]
    assert five["resumed_from_step"] == four["last_step"] < five["last_step"]
    # the bf16 stages run bf16 autocast on a CPU that has it: the code path the GPU runs
    from minielectra.training.device import cpu_bf16_missing
    if cpu_bf16_missing() is None:
        assert results["stages"]["2"]["result"]["precision"] == "bf16"
        parity = results["stages"]["1"]["result"]["parity"]
        assert parity["loss_fp32"] != parity["loss_bf16"]  # bf16 really ran


@needs_data
@pytest.mark.slow
def test_a_second_call_skips_what_is_done(dry_run):
    proc, work = dry_run
    again = subprocess.run([sys.executable, "tools/gpu_check.py", "--dry-run",
                            "--work", str(work)], cwd=REPO, env=env(), capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0, again.stdout[-2000:]
    assert "=== stage" not in again.stdout  # every stage was done: none ran again


def test_the_plan_fits_15_minute_windows_with_the_headline_in_the_first_call():
    """Each window is one call: the machine's start (up to ~4 minutes) plus at most 10 minutes
    a command. The first call runs stage 1 (the peak and parity) then stage 3 (the headline
    speed) then stage 2 (the compiled graph's checks); the resume runs in the pre-training's
    call; every stage is planned once."""
    from gpu_check import PLAN, STAGES, plan, this_call
    results, calls = {"stages": {}}, []
    for minutes in (7, 9.5, 9.5, 9.5):
        todo = this_call(plan(results, None), minutes)
        calls.append(todo)
        assert sum(STAGES[n][2] for n in todo) <= minutes
        assert 4 + minutes <= (11 if len(calls) == 1 else 14)
        results["stages"].update({str(n): {"status": "done"} for n in todo})
    assert calls[0] == [1, 3, 2]
    assert any({4, 5} <= set(c) for c in calls)
    assert sorted(n for c in calls for n in c) == sorted(STAGES) == sorted(PLAN)
    results["stages"]["6"] = {"status": "failed"}
    assert plan(results, None) == [6]  # a failed stage comes back first


@needs_data
def test_pack_copies_the_data_byte_for_byte_and_measures_the_call(tmp_path):
    from gpu.pack import DATA as PACKED, LIMIT, folder_bytes, pack
    os.environ.setdefault("MINIELECTRA_DATA_DIR", str(DATA))
    result = pack(tmp_path / "pack", wheels=False)
    for rel in PACKED:
        src = DATA / rel
        files = [src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file())
        assert files
        for f in files:
            copy = tmp_path / "pack" / "data" / f.relative_to(DATA)
            assert hashlib.sha256(copy.read_bytes()).digest() == \
                hashlib.sha256(f.read_bytes()).digest()
    assert result["pack_mib"] == round(folder_bytes(tmp_path / "pack") / 2 ** 20, 2)
    assert result["total_mib"] * 2 ** 20 < LIMIT


def test_fill_replaces_only_the_marked_block(tmp_path):
    from gpu.tables import fill
    results = {"device": "NVIDIA H100 80GB HBM3", "stages": {"2": {
        "status": "done", "started": "2026-11-25T12:00:00+00:00", "result": {
            "steps": 50, "unique_graphs": 1, "graph_breaks": {}, "host_syncs": [],
            "checks": {"no_host_syncs": {"ok": True}}}}}}
    (tmp_path / "r.json").write_text(json.dumps(results))
    before, after = "# Title\n\nprose\n", "\nmore prose\n"
    doc = tmp_path / "doc.md"
    doc.write_text(before + "<!-- gpu-check -->\nold\n<!-- /gpu-check -->" + after)
    fill(tmp_path / "r.json", targets=(doc,))
    text = doc.read_text()
    assert text.startswith(before) and text.endswith("<!-- /gpu-check -->" + after)
    assert "old" not in text and "NVIDIA H100 80GB HBM3, 2026-11-25" in text
    assert "| 1 graph, 0 graph breaks, 0 host syncs | 1, 0, 0 (met) |" in text
    results["device"] = "cpu-dry-run"  # toy figures never reach the documents
    (tmp_path / "dry.json").write_text(json.dumps(results))
    with pytest.raises(ValueError, match="dry run"):
        fill(tmp_path / "dry.json", targets=(doc,))
    bare = tmp_path / "bare.md"
    bare.write_text("no block\n")
    with pytest.raises(ValueError, match="bare.md"):
        fill(tmp_path / "r.json", targets=(bare,))


def test_a_lesson_script_is_its_code_cells_in_order():
    from gpu.lessons import PRELUDE, script
    cells = json.loads((REPO / "notebooks" / "08_scaling_up.ipynb").read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    text = script("08_scaling_up")
    assert text.startswith(PRELUDE)
    positions = [text.index(source) for source in code]
    assert positions == sorted(positions) and len(code) > 3


BLOCKER = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError("not on the GPU image: " + name)
sys.meta_path.insert(0, Block())
import minielectra.cli, minielectra.training.loop, minielectra.finetune.train
import minielectra.finetune.glue.suite, minielectra.distributed.ddp, minielectra.training.evaluate
"""


@pytest.mark.parametrize("blocked, ok", [
    ({"datasets", "plotly", "ipywidgets", "anywidget", "IPython", "nbformat", "nbclient"}, True),
    ({"einops"}, False),  # the check can fail: the model does import einops (the image has it)
])
def test_training_imports_nothing_the_gpu_image_lacks(blocked, ok):
    proc = subprocess.run([sys.executable, "-c", BLOCKER.format(blocked=sorted(blocked))],
                          cwd=REPO, env=env(), capture_output=True, text=True, timeout=120)
    assert (proc.returncode == 0) == ok, proc.stderr[-1500:]


def test_bench_throughput_reports_each_side_against_a_peak_it_measured(capsys):
    """The fraction is steps/s x the paper's FLOPs per step / the matmul rate measured in the
    same run; the profile's shares are fractions of the step that sum to at most 1."""
    import bench_throughput
    from minielectra.config import preset
    from minielectra.objectives.flops import train_flops_per_step
    bench_throughput.main(["--preset", "nano", "--rounds", "2", "--steps", "1", "--batch-size",
                           "4", "--seq-len", "8", "--profile-steps", "1", "--peak-n", "128"])
    r = json.loads(capsys.readouterr().out)
    run = preset("nano")
    run.train.batch_size, run.data.max_seq_len = 4, 8
    assert r["flops_per_step"] == train_flops_per_step(run)
    assert r["peak"]["gflops"] == round(max(p["tflops"] for p in r["peak"]["measured"]) * 1e3, 1)
    for side in ("minielectra", "transformers"):
        expected = r[side]["median"] * r["flops_per_step"] / (r["peak"]["gflops"] * 1e9)
        assert abs(r["fraction_of_peak"][side] - expected) <= 0.001 + 0.03 * expected
        shares = r["profile"][side]["ops"].values()
        assert 0 < sum(shares) <= 1.0001 and r["profile"][side]["matmul"] > 0
