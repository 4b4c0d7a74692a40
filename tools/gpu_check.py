"""The whole GPU verification in one command: ``python tools/gpu_check.py``.

GPU time comes in windows of 15 minutes on one chip, the machine's start (a few minutes) and its
idle time included, at most 10 minutes a command. So the checks are stages, run in the order of
``PLAN``: a call runs the next stages not yet done while their expected time fits ``--minutes``
(at least one), and a later call skips what is done. Results accumulate in
``benchmarks/results/gpu/<device>.json``, written after every stage: per stage the command, the
date, versions, seconds, raw figures and the checks made (``ok`` true/false). A failed stage is
tried again first; a stage that ran out of time (``partial``) goes on where it stopped.

====  =====================================================================================
  1   environment; bf16 peak measured by a large matmul; bf16 vs fp32 parity over 20 steps;
      fused AdamW vs the library's optimiser                          (``gpu/numerics.py``)
  3   the headline: ``small`` at 128 x 128 vs transformers' modules, steps/s, MFU against
      stage 1's peak, peak memory (``bench_small.py``)                   (``gpu/speed.py``)
  2   ``torch.compile``: 0 graph breaks, 1 graph over 50 steps of changing masks, 0 host syncs
      under ``set_sync_debug_mode("error")``                              (``gpu/graph.py``)
  4   ``minielectra pretrain --preset small --corpus pretrain-en``, ~3 minutes (``gpu/runs.py``)
  5   the same run resumed (``--resume``), in the same call as stage 4
  8   what ``small`` should run: CUDA graphs (``mode="reduce-overhead"``) vs the default
      compile, batch 256/512 vs 128                                   (``gpu/variants.py``)
  6   fine-tuning it on SST-2 and RTE; a ``torchrun --nproc_per_node=1`` smoke
  7   lessons 05, 07, 08 as scripts on the GPU, timed beside the CPU   (``gpu/lessons.py``)
====  =====================================================================================

The plan, one call per window (expected minutes on an H100 in ``STAGES``; ``--minutes`` is the
command's share of its window; ``--plan`` prints what a call would run)::

    call 1  --minutes 7    stages 1, 3, 2  (5.5 min expected; with the start, ~10 of the window)
    call 2  --minutes 9.5  stages 4, 5     (8.5)
    call 3  --minutes 9.5  stages 8, 6     (8.5)
    call 4  --minutes 9.5  stage 7, and any stage that failed before

Here (with ``MINIELECTRA_DATA_DIR`` set, and PyPI reachable for the one wheel)::

    python tools/gpu_check.py --pack .gpu_pack     # data + wheel, 16 MiB; prints sizes
    python tools/gpu_check.py --dry-run            # every stage on the CPU, toy shapes

On the GPU machine, each call (carry ``.gpu_pack``; the JSON comes back through ``$OUT``)::

    PYTHONUNBUFFERED=1 python tools/gpu_check.py --minutes 7 --copy-to $OUT

then copy the returned ``<device>.json`` into ``benchmarks/results/gpu/`` and commit it before
the next call (it travels with the repository and tells the next call what is done); ``--stage
N`` runs one stage (again). ``python tools/gpu_check.py --fill
benchmarks/results/gpu/<device>.json`` writes the measured figures into the results tables.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(1, str(REPO))  # the GPU machine has no install: this checkout is the library
sys.path.insert(1, str(REPO / "benchmarks"))  # the speed scripts the stages run (peak, bench_small)
# Idle OpenMP threads sleep, as `import minielectra` sets (before torch is imported).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

from gpu import graph, lessons, numerics, runs, speed, variants  # noqa: E402
from gpu.common import Context, versions  # noqa: E402
from gpu.pack import install_wheels, pack  # noqa: E402
from minielectra.safeio import write_file  # noqa: E402

# number: (what, the function, minutes it is expected to take on an H100, for planning calls).
# Compiling ELECTRA-Small takes about a minute on the machine's 16 cores; each figure is measured
# on a compiled step, and the inductor cache lets later stages of a call reuse a graph.
STAGES = {
    1: ("environment, measured bf16 peak, bf16 parity, fused AdamW",
        lambda ctx, prev, left: numerics.run(ctx), 1.0),
    2: ("torch.compile: graph breaks, recompiles, host syncs",
        lambda ctx, prev, left: graph.run(ctx), 1.5),
    3: ("the headline: small at 128 x 128 vs transformers' modules, MFU, memory",
        lambda ctx, prev, left: speed.run(ctx), 3.0),
    4: ("pretrain --preset small on pretrain-en (~3 min)",
        lambda ctx, prev, left: runs.pretrain(ctx), 4.5),
    5: ("pretrain --resume", lambda ctx, prev, left: runs.resume(ctx), 4.0),
    6: ("fine-tune SST-2 and RTE; torchrun smoke",
        lambda ctx, prev, left: runs.finetune(ctx), 4.0),
    7: ("lessons 05, 07, 08 on the GPU", lambda ctx, prev, left: lessons.run(
        ctx, seconds_left=left), 3.5),
    8: ("CUDA graphs vs the default compile, batch 256/512 vs 128",
        lambda ctx, prev, left: variants.run(ctx, prev, seconds_left=left), 4.5),
}
# The order calls run them: the headline speed first, the command line's pre-training and its
# resume in one call (the same machine), then what decides the preset, fine-tuning, the lessons.
PLAN = (1, 3, 2, 4, 5, 8, 6, 7)


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {"stages": {}}


def save(results: dict, path: Path, copy_to: Path | None) -> None:
    """Write whole or not at all (a killed call leaves the previous file), then copy out."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_file(path, json.dumps(results, indent=1) + "\n")  # never through a link
    if copy_to is not None:
        copy_to.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, copy_to / path.name)


def stage_passed(entry: dict) -> bool:
    checks = entry.get("result", {}).get("checks", {})
    return entry.get("status") == "done" and all(c["ok"] for c in checks.values())


def run_stage(number: int, ctx: Context, results: dict, seconds_left: float) -> dict:
    what, fn, _ = STAGES[number]
    previous = results["stages"].get(str(number), {})
    print(f"\n=== stage {number}: {what}", flush=True)
    entry = {"what": what, "command": " ".join(["python", "tools/gpu_check.py",
                                                *sys.argv[1:]]),
             "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
             "device": results["device"], "versions": versions()}
    begin = time.perf_counter()
    try:
        result = fn(ctx, previous.get("result") if previous.get("status") == "partial" else None,
                    seconds_left)
        entry["status"] = "partial" if result.get("partial") else "done"
        entry["result"] = result
    except Exception as e:  # recorded, and the next stages still run: GPU time is rare
        entry["status"] = "failed"
        entry["error"] = f"{type(e).__name__}: {e}"
        entry["traceback"] = traceback.format_exc()[-4000:]
        print(entry["traceback"], flush=True)
    entry["seconds"] = round(time.perf_counter() - begin, 1)
    return entry


def plan(results: dict, asked: list[int] | None) -> list[int]:
    """The stages asked for, or those not done yet in ``PLAN``'s order, failed ones first."""
    if asked:
        return asked
    status = {n: results["stages"].get(str(n), {}).get("status") for n in PLAN}
    return ([n for n in PLAN if status[n] == "failed"]
            + [n for n in PLAN if status[n] not in ("done", "failed")])


def this_call(todo: list[int], minutes: float) -> list[int]:
    """The stages of ``todo`` a call of ``minutes`` expects to run: in order while their
    expected minutes fit, at least one."""
    out, used = [], 0.0
    for n in todo:
        if out and used + STAGES[n][2] > minutes:
            break
        out.append(n)
        used += STAGES[n][2]
    return out


def summary(results: dict) -> str:
    lines = [f"{'stage':<6}{'status':<9}{'s':>7}  checks"]
    for n in PLAN:
        e = results["stages"].get(str(n))
        if not e:
            lines.append(f"{n:<6}{'-':<9}{'':>7}  not run")
            continue
        checks = e.get("result", {}).get("checks", {})
        text = ", ".join(f"{k} {'ok' if c['ok'] else 'FAILED'}" for k, c in checks.items())
        lines.append(f"{n:<6}{e['status']:<9}{e['seconds']:>7}  {text or e.get('error', '')}")
    return "\n".join(lines)


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stage", type=int, action="append", choices=sorted(STAGES),
                    help="run this stage (again); repeatable (default: the next not done)")
    ap.add_argument("--dry-run", action="store_true", help="every stage on the CPU at toy "
                    "shapes (packs the data into the work folder, without wheels)")
    ap.add_argument("--pack", type=Path, metavar="DIR", help="copy data and wheels into DIR")
    ap.add_argument("--no-wheels", action="store_true", help="--pack: data only")
    ap.add_argument("--minutes", type=float, default=7.0, help="this call's time: stages run "
                    "while their expected time fits (at least one); 7 for a window's first "
                    "call (the machine's start comes on top), 9.5 for the next ones")
    ap.add_argument("--plan", action="store_true", help="print the stages this call would run "
                    "(from the results file and --minutes) and stop")
    ap.add_argument("--pretrain-minutes", type=float, help="stages 4-5's training time "
                    f"(default {runs.MINUTES})")
    ap.add_argument("--results", type=Path, help="the JSON (default benchmarks/results/gpu/"
                    "<device>.json; the dry run's: in the work folder)")
    ap.add_argument("--work", type=Path, default=REPO / ".gpu_work",
                    help="runs, caches and converted lessons (ignored by git)")
    ap.add_argument("--data", type=Path, help="the data folder (default: .gpu_pack/data when "
                    "it exists, else MINIELECTRA_DATA_DIR)")
    ap.add_argument("--copy-to", type=Path, help="also copy the JSON here after each stage "
                    "(the device call's $OUT)")
    ap.add_argument("--fill", type=Path, metavar="JSON",
                    help="write the measured figures of a results JSON into the README tables")
    return ap.parse_args(argv)


def context(args) -> Context:
    cuda = torch.cuda.is_available() and not args.dry_run
    if not cuda and not args.dry_run:
        raise SystemExit("gpu_check: no CUDA GPU here; --dry-run runs every stage on the CPU")
    work = args.work.resolve()
    data = args.data or (REPO / ".gpu_pack" / "data" if (REPO / ".gpu_pack" / "data").is_dir()
                         else None)
    if args.dry_run:  # the pack's code path too: data copied into the work folder
        data = Path(pack(work / "pack", wheels=False)["pack"]) / "data"
    elif data is None and os.environ.get("MINIELECTRA_DATA_DIR"):
        data = Path(os.environ["MINIELECTRA_DATA_DIR"])
    minutes = {"pretrain": args.pretrain_minutes} if args.pretrain_minutes else {}
    return Context(dry=args.dry_run, device=torch.device("cuda" if cuda else "cpu"), work=work,
                   data_dir=data, minutes=minutes)


def main(argv=None) -> int:
    args = parse(argv)
    if args.fill:
        from gpu.tables import fill
        print(json.dumps(fill(args.fill), indent=2))
        return 0
    if args.pack:
        print(json.dumps(pack(args.pack.resolve(), wheels=not args.no_wheels), indent=2))
        return 0
    if args.plan:  # from --results (a fresh plan without one): no GPU needed
        todo = plan(load(args.results) if args.results else {"stages": {}}, args.stage)
        print(f"this call ({args.minutes:g} min): stages "
              f"{', '.join(map(str, this_call(todo, args.minutes)))} (not done yet: {todo})")
        return 0
    begin = time.perf_counter()
    ctx = context(args)
    installed = install_wheels(REPO / ".gpu_pack", ctx.work) if ctx.cuda else []
    device = torch.cuda.get_device_name() if ctx.cuda else "cpu-dry-run"
    path = args.results or (ctx.work / "cpu-dry-run.json" if ctx.dry
                            else REPO / "benchmarks" / "results" / "gpu" / f"{slug(device)}.json")
    results = load(path)
    results.update(device=device, wheels_installed=installed or results.get("wheels_installed"))
    todo = plan(results, args.stage)
    for i, number in enumerate(todo):
        ctx.earlier = results["stages"]
        left = 60 * args.minutes - (time.perf_counter() - begin)
        if i and not args.dry_run and 60 * STAGES[number][2] > left:
            print(f"stage {number} left for the next call ({left / 60:.1f} min left)")
            break
        results["stages"][str(number)] = run_stage(number, ctx, results, left)
        save(results, path, args.copy_to)
    print("\n" + summary(results))
    print(f"results: {path}")
    ran = [results["stages"][str(n)] for n in todo if str(n) in results["stages"]]
    return 0 if all(stage_passed(e) or e["status"] == "partial" for e in ran) else 1


if __name__ == "__main__":
    sys.exit(main())
