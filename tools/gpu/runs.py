"""Stages 4-6: the command line on a GPU, as a user runs it.

4. ``minielectra pretrain --preset small --corpus pretrain-en`` (BERT vocabulary) for about 3
   minutes (``train.max_minutes``: the run stops and saves), in a folder of the
   repository's ignored work area;
5. the same command with ``--resume``, planned in stage 4's call: it continues from stage 4's
   checkpoint on the same machine. Run on a fresh machine (stage 4 in an earlier window), the
   run is gone: then this stage trains half the time and resumes for the other half within the
   call, so the resume path is checked either way, and says so;
6. fine-tuning the resulting checkpoint on SST-2 and RTE (``minielectra finetune``, the paper's
   recipe, full training sets), and a ``torchrun --nproc_per_node=1`` smoke of the data-parallel
   path (20 steps).

pretrain-en is 22,668 examples at 128 tokens: a few minutes at Small's speed are dozens of
epochs, so the held-out AUC says the loop trains, not what ELECTRA-Small reaches (that needs
OpenWebText and 1M steps: ``tutorial/reproduce_small.md``). Each stage keeps the loss curve
(``metrics.jsonl``, thinned to 60 points), the held-out evaluations and the command.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from .common import REPO, TOY_SMALL, Context, check, cli, sh

# train.max_minutes of each run: it counts from the command's start (tokenising and compiling
# included); the final evaluation and checkpoint come on top (STAGES in gpu_check.py).
MINUTES = 3.0


def pretrain_args(ctx: Context, out: Path, minutes: float) -> list[str]:
    args = ["pretrain", "--preset", "small", "--corpus", "pretrain-en", "--out", str(out),
            "--set", "data.vocab=bert-uncased"]
    if ctx.dry:  # a step count, not a clock: a loaded CPU tokenises for a minute or more
        return args + ["--device", "cpu", "--max-steps", str(DRY_STEPS),
                       *[x for o in TOY_SMALL for x in ("--set", o)],
                       "--set", "train.batch_size=4", "--set", "train.eval_examples=16",
                       "--set", "train.log_every=2", "--set", "data.num_workers=1"]
    return args + ["--set", f"train.max_minutes={minutes}"]


DRY_STEPS = 100_000  # never reached: Ctrl-C stops each part


def minutes(ctx: Context, *, fallback: bool = False) -> float:
    """Wall-clock minutes from the command's start (loading data and compiling count)."""
    m = ctx.minutes.get("pretrain", MINUTES)
    return m / 2 if fallback else m


def part(ctx: Context, args: list[str], out: Path, *, timeout: float) -> dict:
    """One part of a run: ``train.max_minutes`` stops it on a GPU; the dry run stops it with
    Ctrl-C (SIGINT, which saves the last step) once it has logged 2 steps more than its
    checkpoint had, whatever the machine's load (its step count is never reached)."""
    if not ctx.dry:
        return sh(ctx, args, timeout=timeout)
    until = records(out)["last_step"] + 2
    print("$", " ".join(args), f"(Ctrl-C after step {until})", flush=True)
    begin = time.perf_counter()
    # SIGINT back to its default in the child: a shell's background job (CI, nohup) inherits
    # it ignored, and Python then never raises KeyboardInterrupt.
    proc = subprocess.Popen(args, cwd=REPO, env=ctx.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    while proc.poll() is None and time.perf_counter() - begin < timeout:
        if records(out)["last_step"] >= until:
            proc.send_signal(signal.SIGINT)
            break
        time.sleep(0.2)
    try:
        text = proc.communicate(timeout=120)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        text = proc.communicate()[0]
    print(text[-3000:], flush=True)
    return {"command": " ".join(args) + f"  (Ctrl-C after step {until})",
            "exit": proc.returncode, "seconds": round(time.perf_counter() - begin, 1),
            "output_tail": text[-3000:]}


def stopped_well(ctx: Context, code) -> bool:
    return code == (130 if ctx.dry else 0)  # 130: stopped by Ctrl-C, and saved


def records(run_dir: Path) -> dict:
    """The run's loss curve (60 points at most) and every held-out evaluation."""
    path = run_dir / "metrics.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    train = [r for r in lines if r.get("kind") == "train"]
    keep = ("step", "loss", "gen_loss", "disc_loss", "disc_accuracy", "tokens_per_s",
            "elapsed_s")
    stride = max(1, len(train) // 60)
    curve = [{k: r.get(k) for k in keep} for r in train[::stride] + train[-1:]]
    evals = [{k: v for k, v in r.items() if k in ("step", "disc_auc", "disc_auc_text",
                                                   "disc_accuracy", "gen_accuracy")}
             for r in lines if r.get("kind") == "eval"]
    return {"curve": curve, "evals": evals, "last_step": train[-1]["step"] if train else 0}


def pretrain(ctx: Context) -> dict:
    out = ctx.work / "runs" / "small"
    if (out / "checkpoints").exists():  # an earlier try on this machine: start over
        import shutil
        shutil.rmtree(out)
    result = part(ctx, cli(*pretrain_args(ctx, out, minutes(ctx))), out, timeout=7.5 * 60)
    result.update(records(out), run_dir=str(out))
    result["checks"] = {"ran": check(stopped_well(ctx, result["exit"])
                                     and result["last_step"] > 0, steps=result["last_step"])}
    return result


def resume(ctx: Context) -> dict:
    out = ctx.work / "runs" / "small"
    fresh = not (out / "checkpoints").exists()
    result = {"machine": "a fresh one: stage 4's run was gone, so this call trained half the "
                         "time and resumed for the other half" if fresh else
                         "the same as stage 4's: its run resumed"}
    m = minutes(ctx, fallback=fresh)
    if fresh:
        out = ctx.work / "runs" / "small-fresh"
        first = part(ctx, cli(*pretrain_args(ctx, out, m)), out, timeout=4 * 60)
        result["first_part"] = {k: first[k] for k in ("command", "exit", "seconds")}
    before = records(out)["last_step"]
    second = part(ctx, cli(*pretrain_args(ctx, out, m), "--resume"), out, timeout=7 * 60)
    result.update(second, **records(out), run_dir=str(out), resumed_from_step=before)
    result["checks"] = {"resumed_and_trained": check(
        stopped_well(ctx, second["exit"]) and result["last_step"] > before > 0,
        from_step=before, to_step=result["last_step"])}
    return result


def finetune_args(ctx: Context, checkpoint: Path, task: str) -> list[str]:
    args = ["finetune", "--checkpoint", str(checkpoint), "--task", task,
            "--out", str(ctx.work / "finetune" / task)]
    if ctx.dry:
        args += ["--max-train-examples", "16", "--set", "finetune.epochs=1",
                 "--set", "finetune.max_seq_len=32", "--set", "finetune.device=cpu"]
    return args


def torchrun_args(ctx: Context) -> list[str]:
    out = ctx.work / "runs" / "torchrun"
    args = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=1",
            "--master_port=29517", "-m", "minielectra", "pretrain", "--preset", "small",
            "--corpus", "pretrain-en", "--out", str(out), "--max-steps", "20",
            "--set", "data.vocab=bert-uncased", "--set", "train.milestones=()"]
    if ctx.dry:
        args += ["--device", "cpu", "--max-steps", "2", "--set", "train.batch_size=4",
                 "--set", "train.eval_examples=16", "--set", "data.num_workers=1",
                 *[x for o in TOY_SMALL for x in ("--set", o)]]
    return args


def finetune(ctx: Context) -> dict:
    run_dir = next((p for p in (ctx.work / "runs" / "small", ctx.work / "runs" / "small-fresh")
                    if (p / "checkpoints").exists()), None)
    result: dict = {}
    if run_dir is None:  # a fresh machine: pre-train briefly so there is something to tune
        run_dir = ctx.work / "runs" / "small-for-finetune"
        result["pretrained_here"] = part(ctx, cli(*pretrain_args(ctx, run_dir, 1.5)),
                                         run_dir, timeout=4 * 60)
    result["checkpoint"] = str(run_dir)
    result["torchrun"] = sh(ctx, torchrun_args(ctx), timeout=3 * 60)
    checks = {"torchrun_smoke": check(result["torchrun"]["exit"] == 0)}
    for task in ("rte", "sst2"):
        r = sh(ctx, cli(*finetune_args(ctx, run_dir, task)), timeout=4 * 60)
        saved = ctx.work / "finetune" / task / "result.json"
        r["score"] = json.loads(saved.read_text()).get("score") if saved.exists() else None
        result[task] = r
        checks[f"{task}_finetuned"] = check(r["exit"] == 0 and r["score"] is not None,
                                            score=r["score"])
    result["checks"] = checks
    return result
