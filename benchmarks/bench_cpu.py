"""CPU training speed in one run: eager against compiled, against transformers, against the peak.

    python benchmarks/bench_cpu.py --out benchmarks/results/cpu.json     # ~15-25 min, 2 cores

On an idle machine: the 1-minute load average is recorded before the start, and a start above
1.5 is refused (``--force`` runs anyway, marked in the JSON). Everything is measured in this one
process, the compared sides interleaved round by round (A B, B A, ...) so that a change in the
machine's load hits both; each ratio is the median of the per-round ratios (paired), with its
quartiles.

- **pre-training**, ``nano`` and ``mini`` (``train_step`` as ``pretrain`` runs it, the optimiser
  and schedule included): eager and compiled (``training.compiling.compile_module``) steps/s;
  the first compile's seconds with an empty compiler cache and again with a warm one; the
  break-even run length and the speed-up of a 50-minute run, compiling included; eager through
  MKL instead of oneDNN (``model.cpu.ONEDNN``), the library's products before this route; and
  transformers' modules (``bench_throughput.HFElectra``), compiled the same way, the ratio with
  both sides compiled.
- **fine-tuning**, SST-2 (``MINIELECTRA_DATA_DIR``; 2,000 sentences, the bundled checkpoint,
  the recipe's batch 32, padded per batch): eager and compiled (dynamic lengths) steps/s and
  the compile seconds.
- **the peak**: an fp32 2048^3 product through ``torch.mm`` (MKL, ``benchmarks/peak.py``) and
  through oneDNN, before and after the rest (the higher medians); each step's FLOP/s (the
  paper's count, ``objectives.flops``) as a fraction of both.
- **a profile** of each pre-training step (``torch.profiler``; compiled kernels named by
  inductor's kernel profile): the share of matrix products, attention, fused kernels, copies.

The ``rule`` block is what ``minielectra.training.compiling`` uses to decide when a CPU run
compiles; ``targets`` compares with the aims set for it. The speed page renders its tables from
this JSON (``docs/_ext/results.py``: ``cpu_pretrain``, ``cpu_finetune``, ``cpu_profile``).
"""

from __future__ import annotations

import os
import sys
import tempfile

# An empty compiler cache: the compile seconds a first run pays (set before torch loads).
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench_cpu_inductor_")
os.environ.setdefault("TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE", "1")  # kernels in the profile

import minielectra  # noqa: E402,F401  (first: its import sets OMP_WAIT_POLICY before torch loads)

import argparse  # noqa: E402
import datetime  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from bench_throughput import HFElectra  # noqa: E402
from cpu_profile import profile_shares  # noqa: E402
from minielectra.config import apply_overrides, preset  # noqa: E402
from minielectra.model import cpu as cpu_layers  # noqa: E402
from minielectra.model.electra import Electra  # noqa: E402
from minielectra.objectives.flops import train_flops_per_step  # noqa: E402
from minielectra.training.compiling import compile_module, finetune_flops  # noqa: E402
from minielectra.training.device import autocast  # noqa: E402
from minielectra.training.optim import build_optimizer, lr_at, set_lr  # noqa: E402
from minielectra.training.step import train_step  # noqa: E402
from peak import matmul_peak  # noqa: E402

CPU = torch.device("cpu")
MAX_LOAD = 1.5
RUN_MINUTES = 50  # the length of run the 1.4x target is stated for


def log(*parts) -> None:
    print(f"[{time.strftime('%H:%M:%S')}]", *parts, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------ measurement


def chunk_rate(step, steps: int) -> float:
    """Steps/s of ``steps`` consecutive calls (each returns a loss, read at the end)."""
    begin = time.perf_counter()
    for _ in range(steps):
        out = step()
    float(out)
    return steps / (time.perf_counter() - begin)


def interleaved(steps: dict, *, rounds: int, seconds: float) -> dict[str, list[float]]:
    """Each side's steps/s per round; chunks of about ``seconds`` each, the order flipped every
    round."""
    size = {k: max(1, round(seconds * chunk_rate(s, 2))) for k, s in steps.items()}
    rates = {k: [] for k in steps}
    names = list(steps)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            rates[name].append(chunk_rate(steps[name], size[name]))
    return rates


def spread(values: list[float]) -> dict:
    q1, med, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return {"median": round(med, 3), "q1": round(q1, 3), "q3": round(q3, 3)}


def paired(a: list[float], b: list[float]) -> dict:
    return spread([x / y for x, y in zip(a, b)])


def first_step(make) -> tuple[object, float]:
    """Build a step with ``make()`` and time its first call (compiling, for a compiled one)."""
    step = make()
    begin = time.perf_counter()
    float(step())
    return step, time.perf_counter() - begin


# ---------------------------------------------------------------------------- pre-training


def pretrain_setup(name: str):
    run = preset(name)
    apply_overrides(run, ["train.device=cpu", "train.grad_accum=1"])
    run.model.cls_token_id, run.model.sep_token_id, run.model.mask_token_id = 2, 3, 4
    b, n = run.train.batch_size, run.data.max_seq_len
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, run.model.vocab_size, (b, n), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids),
             "token_type_ids": torch.zeros_like(ids)}
    return run, itertools.repeat(batch)


def pretrain_step(run, batches, model_class, *, compiled: bool, onednn: bool = True):
    """One ``pretrain`` step of a fresh model (seed 0), as a callable returning the loss."""
    torch.manual_seed(0)
    model = model_class(run.model, run.objective).train()
    t = run.train
    optimizer = build_optimizer(model, t, CPU)
    net = compile_module(model, CPU, dynamic=False) if compiled else model  # as pretrain does
    counter = itertools.count()

    def step():
        i = next(counter)
        cpu_layers.ONEDNN = onednn  # read when a product runs (eager) or is traced (compiled)
        set_lr(optimizer, lr_at(i, t), t, i)
        return train_step(net, batches, optimizer, None, t=t, device=CPU, sampler=None,
                          step=i)["loss"]
    return step


def derived(eager: list[float], compiled: list[float], compile_s: float) -> dict:
    """Break-even and the speed-up of a ``RUN_MINUTES`` run, compile time included."""
    e, c = 1 / statistics.median(eager), 1 / statistics.median(compiled)
    steps = 60 * RUN_MINUTES / e
    saving = e - c
    return {"eager_ms": round(1e3 * e, 2), "compiled_ms": round(1e3 * c, 2),
            "saving_share": round(saving / e, 4),
            "break_even_steps": round(compile_s / saving) if saving > 0 else None,
            "break_even_minutes_eager": round(compile_s / saving * e / 60, 2) if saving > 0
            else None,
            f"speedup_{RUN_MINUTES}min_run": round(60 * RUN_MINUTES / (compile_s + steps * c), 3)}


def bench_pretrain(name: str, args, peaks: dict) -> dict:
    torch._dynamo.reset()  # each preset as a fresh process compiles it (its own shapes)
    run, batches = pretrain_setup(name)
    flops = train_flops_per_step(run)
    log(f"{name}: building eager, compiling (empty cache) ...")
    eager, eager_first = first_step(lambda: pretrain_step(run, batches, Electra, compiled=False))
    mkl, _ = first_step(lambda: pretrain_step(run, batches, Electra, compiled=False,
                                              onednn=False))
    compiled, cold = first_step(lambda: pretrain_step(run, batches, Electra, compiled=True))
    log(f"{name}: compiled in {cold:.0f} s; again with a warm cache ...")
    _, warm = first_step(lambda: pretrain_step(run, batches, Electra, compiled=True))
    log(f"{name}: compiling transformers' modules ...")
    hf, hf_cold = first_step(lambda: pretrain_step(run, batches, HFElectra, compiled=True))
    steps = {"eager": eager, "compiled": compiled, "transformers_compiled": hf,
             "eager_mkl": mkl}
    log(f"{name}: {args.rounds} interleaved rounds ...")
    rates = interleaved(steps, rounds=args.rounds, seconds=args.chunk_seconds)
    compile_s = max(0.0, cold - eager_first)
    out = {"batch": [run.train.batch_size, run.data.max_seq_len], "flops_per_step": flops,
           **{k: spread(v) for k, v in rates.items()},
           "compiled_vs_eager": paired(rates["compiled"], rates["eager"]),
           "vs_transformers_both_compiled": paired(rates["compiled"],
                                                   rates["transformers_compiled"]),
           "onednn_vs_mkl_eager": paired(rates["eager"], rates["eager_mkl"]),
           "compile_s": {"empty_cache": round(compile_s, 1), "warm_cache": round(warm, 1),
                         "transformers_empty_cache": round(hf_cold, 1)},
           **derived(rates["eager"], rates["compiled"], compile_s)}
    out["fraction_of_peak"] = {
        side: {lib: round(statistics.median(rates[side]) * flops / (p * 1e9), 3)
               for lib, p in peaks.items()}
        for side in ("eager", "compiled", "transformers_compiled")}
    if args.profile_steps:
        log(f"{name}: profiling ...")
        out["profile"] = {k: profile_shares(steps[k], args.profile_steps, flops)
                          for k in ("eager", "compiled")}
    return out


# ----------------------------------------------------------------------------- fine-tuning


def finetune_setup(examples: int):
    """SST-2's first ``examples`` training sentences (a fixed random subset), tokenised with
    the bundled checkpoint's vocabulary; None without the data."""
    from minielectra.finetune.classifier import FinetuneConfig
    from minielectra.finetune.glue.data import get_task
    from minielectra.finetune.train import prepare_data
    from minielectra.training.opening import open_checkpoint
    data_dir = os.environ.get("MINIELECTRA_DATA_DIR")
    if not data_dir or not (Path(data_dir) / "glue" / "SST-2").is_dir():
        return None
    pretrained, _ = open_checkpoint("bundled")
    cfg, task = FinetuneConfig(), get_task("sst2")
    data = prepare_data(task, pretrained.tokenizer, cfg, max_train_examples=examples)
    return pretrained, cfg, task, data


def finetune_step(pretrained, cfg, task, data, *, compiled: bool, precision: str = "fp32"):
    """The recipe's step (``train.train_classifier``'s body) over batches in a fixed order, in
    ``precision`` (``benchmarks/bench_bf16.py`` compares bf16 autocast)."""
    from minielectra.finetune.classifier import (build_classifier, collate,
                                                 layerwise_param_groups, optimizer_step,
                                                 task_loss)
    from minielectra.finetune.train import batch_order
    from minielectra.training.optim import AdamWeightDecay
    torch.manual_seed(0)
    model = build_classifier(pretrained, task, cfg).train()
    opt = AdamWeightDecay(layerwise_param_groups(model, cfg), lr=cfg.learning_rate,
                          eps=cfg.adam_eps)
    net = compile_module(model, CPU, dynamic=True) if compiled else model
    order = itertools.cycle(batch_order(len(data.train), cfg.batch_size, 3,
                                        torch.Generator().manual_seed(0)))
    labels = torch.tensor(data.train_labels)
    pad = pretrained.tokenizer.pad_id

    def step():
        idx = next(order)
        batch = collate([data.train[i] for i in idx], pad)
        with autocast(CPU, precision):
            logits = net(**batch)
        loss = task_loss(task, logits, labels[idx], reduction=cfg.loss_reduction)
        return torch.tensor(optimizer_step(model, opt, loss, cfg, len(idx)))
    return step


def bench_finetune(args, peaks: dict) -> dict:
    setup = finetune_setup(args.finetune_examples)
    if setup is None:
        return {"skipped": "MINIELECTRA_DATA_DIR with glue/SST-2 is not set"}
    pretrained, cfg, task, data = setup
    torch._dynamo.reset()
    lengths = [len(ids) for ids, _ in data.train]
    log("sst2: building eager, compiling (dynamic lengths) ...")
    eager, eager_first = first_step(lambda: finetune_step(*setup, compiled=False))
    compiled, cold = first_step(lambda: finetune_step(*setup, compiled=True))
    for _ in range(3):  # a second length: the one recompilation with symbolic lengths, if any
        compiled()
    log(f"sst2: compiled in {cold:.0f} s; {args.rounds} interleaved rounds ...")
    rates = interleaved({"eager": eager, "compiled": compiled}, rounds=args.rounds,
                        seconds=args.chunk_seconds)
    compile_s = max(0.0, cold - eager_first)
    flops = finetune_flops(pretrained.config, cfg.batch_size, statistics.mean(lengths))
    return {"task": "sst2", "train_examples": len(data.train), "batch": cfg.batch_size,
            "mean_length": round(statistics.mean(lengths), 1),
            "flops_per_step_at_mean_length": flops,
            **{k: spread(v) for k, v in rates.items()},
            "compiled_vs_eager": paired(rates["compiled"], rates["eager"]),
            "compile_s": {"empty_cache": round(compile_s, 1)},
            **derived(rates["eager"], rates["compiled"], compile_s),
            "eager_gflops": round(statistics.median(rates["eager"]) * flops / 1e9, 1)}


# -------------------------------------------------------------------------- peak, summary


def peaks_now(n: int) -> dict:
    """MKL (``torch.mm``) and oneDNN fp32 ``n^3`` rates, GFLOP/s."""
    mkl = matmul_peak(CPU, torch.float32, n=n, repeats=7)["tflops"] * 1e3
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(3):
        cpu_layers.cpu_matmul(a, b)
    times = []
    for _ in range(7):
        begin = time.perf_counter()
        cpu_layers.cpu_matmul(a, b)
        times.append(time.perf_counter() - begin)
    return {"mkl": round(mkl, 1), "onednn": round(2 * n ** 3 / statistics.median(times) / 1e9, 1)}


def rule(pretrain: dict, finetune: dict) -> dict:
    """The constants of ``training.compiling``: conservative over the presets (the smaller
    saving, the longer compile)."""
    pre = list(pretrain.values())
    out = {"pretrain": {
        "eager_gflops": round(statistics.median(
            p["flops_per_step"] * p["eager"]["median"] / 1e9 for p in pre), 1),
        "saving": round(min(p["saving_share"] for p in pre), 3),
        "compile_s": round(max(p["compile_s"]["empty_cache"] for p in pre), 1)}}
    if "skipped" not in finetune:
        out["finetune"] = {"eager_gflops": finetune["eager_gflops"],
                           "saving": round(finetune["saving_share"], 3),
                           "compile_s": finetune["compile_s"]["empty_cache"]}
    return out


def targets(mini: dict) -> dict:
    speedup = mini[f"speedup_{RUN_MINUTES}min_run"]
    ratio = mini["vs_transformers_both_compiled"]["median"]
    frac = mini["fraction_of_peak"]["compiled"]
    return {f"mini_{RUN_MINUTES}min_compiled_vs_eager": {"aim": 1.4, "measured": speedup,
                                                         "met": speedup >= 1.4},
            "mini_vs_transformers_both_compiled": {"aim": 2.5, "measured": ratio,
                                                   "met": ratio >= 2.5},
            "mini_fraction_of_fp32_peak": {"aim": 0.6, "measured": frac,
                                           "met_against_mkl": frac["mkl"] >= 0.6,
                                           "met_against_onednn": frac["onednn"] >= 0.6}}


def machine(load: list[float]) -> dict:
    model = next((line.split(":", 1)[1].strip() for line in
                  Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor()) \
        if Path("/proc/cpuinfo").exists() else platform.processor()
    return {"cpu": model, "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__, "python": platform.python_version(),
            "load_average_before": load,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def finish(result: dict, out: Path | None, begin: float) -> int:
    """The load and seconds at the end, then the JSON: printed, and written to ``out``."""
    result["machine"]["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    result["seconds"] = round(time.perf_counter() - begin)
    text = json.dumps(result, indent=1)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
        log(f"wrote {out}")
    print(text)
    return 0


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="the JSON (default: print only)")
    ap.add_argument("--presets", nargs="+", default=["nano", "mini"])
    ap.add_argument("--rounds", type=int, default=16, help="interleaved rounds per comparison")
    ap.add_argument("--chunk-seconds", type=float, default=0.6, help="each side's time a round")
    ap.add_argument("--finetune-examples", type=int, default=2000)
    ap.add_argument("--no-finetune", action="store_true")
    ap.add_argument("--profile-steps", type=int, default=5, help="0: no profile")
    ap.add_argument("--peak-n", type=int, default=2048)
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's, the cores)")
    ap.add_argument("--force", action="store_true", help=f"run above load {MAX_LOAD} (marked)")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    load = [round(x, 2) for x in os.getloadavg()]
    if load[0] > MAX_LOAD and not args.force:
        print(f"bench_cpu: load average {load[0]} > {MAX_LOAD}: the machine is busy, its figures "
              "would not be this machine's; wait, or --force (recorded)", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    begin = time.perf_counter()
    result = {"benchmark": "CPU training speed, eager vs compiled (benchmarks/bench_cpu.py)",
              "command": "python benchmarks/bench_cpu.py " + " ".join(
                  sys.argv[1:] if argv is None else argv),
              "machine": machine(load), "forced_above_load": load[0] > MAX_LOAD}
    log("peak ...")
    first_peaks = peaks_now(args.peak_n)
    pre = {name: bench_pretrain(name, args, first_peaks) for name in args.presets}
    fine = ({"skipped": "--no-finetune"} if args.no_finetune
            else bench_finetune(args, first_peaks))
    last_peaks = peaks_now(args.peak_n)
    peaks = {k: max(first_peaks[k], last_peaks[k]) for k in first_peaks}
    for p in pre.values():  # against the higher of the two peaks
        for side, fr in p["fraction_of_peak"].items():
            p["fraction_of_peak"][side] = {k: round(v * first_peaks[k] / peaks[k], 3)
                                           for k, v in fr.items()}
    result.update(peak_gflops=peaks, peak_measured={"before": first_peaks, "after": last_peaks},
                  pretrain=pre, finetune=fine, rule=rule(pre, fine))
    if "mini" in pre:
        result["targets"] = targets(pre["mini"])
    return finish(result, args.out, begin)


if __name__ == "__main__":
    sys.exit(main())
