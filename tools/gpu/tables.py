"""``gpu_check.py --fill JSON``: the measured GPU figures into the README and the Small guide.

Both documents hold a block between ``<!-- gpu-check -->`` and ``<!-- /gpu-check -->``; the
fill step replaces it with a table rendered from a results JSON, each row saying what was
measured, on which device and when. A stage not run (or failed) says so: estimates elsewhere
stay marked as estimates, and nothing unmeasured is called measured.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from minielectra.safeio import write_file

from .common import REPO

TARGETS = (REPO / "docs" / "results" / "speed.md", REPO / "tutorial" / "reproduce_small.md")
BLOCK = re.compile(r"(<!-- gpu-check -->\n)(.*?)(<!-- /gpu-check -->)", re.S)


def _stage(results: dict, n: int) -> dict | None:
    e = results.get("stages", {}).get(str(n))
    return e.get("result") if e and e.get("status") in ("done", "partial") else None


def _ok(r: dict, name: str) -> str:
    c = r.get("checks", {}).get(name)
    return "" if c is None else (" (met)" if c["ok"] else " (**not met**)")


def rows(results: dict) -> list[str]:
    out = []
    s1, s2, s3 = _stage(results, 1), _stage(results, 2), _stage(results, 3)
    if s1:
        p, a = s1["parity"], s1["adamw"]
        pk = s1["peak"]
        out.append(f"| {pk['dtype']} matmul peak, {pk['n']}^3 (stage 1) | "
                   f"{pk['tflops']:.4g} TFLOP/s | the MFU denominator below |")
        out.append(f"| bf16 autocast vs fp32, `small`, {p['steps']} steps from one state | loss "
                   f"rel. diff. mean {p['loss_rel_diff_mean']:.2e}, max "
                   f"{p['loss_rel_diff_max']:.2e}; first gradient cosine "
                   f"{p['first_grad_cosine']:.4f} | <= 0.02, <= 0.05; >= 0.99"
                   f"{_ok(s1, 'bf16_loss_parity')} |")
        out.append(f"| fused AdamW vs the library's optimiser, {a.get('steps', 20)} steps | "
                   f"largest difference "
                   f"{a['relative']:.1e} of the largest update | <= 1e-3"
                   f"{_ok(s1, 'fused_adamw_matches')} |")
    if s2:
        out.append(f"| `torch.compile` over {s2['steps']} steps of changing masks (stage 2) | "
                   f"{s2['unique_graphs']} graph, {sum(s2['graph_breaks'].values())} graph "
                   f"breaks, {len(s2['host_syncs'])} host syncs | 1, 0, 0"
                   f"{_ok(s2, 'no_host_syncs')} |")
    for batch, r in (s3 or {}).get("by_batch", {}).items():
        m, h = r["minielectra"], r["transformers"]
        mfu = f", MFU {100 * m['mfu']:.1f}%" if m.get("mfu") else ""
        mem = {k: f", {v} GiB" if v is not None else ""
               for k, v in r.get("peak_memory_gib (warm-up steps)", {}).items()}
        shape = (f"batch {r['batch'][0]} x {r['batch'][1]}, {r['precision']}"
                  + (" + compile" if r["compile"] else ""))
        out.append(f"| `small` training, {shape} (stage 3) | "
                   f"{m['steps_per_s']:.1f} steps/s ({m['spread'][0]:.1f}-{m['spread'][1]:.1f})"
                   f"{mfu}{mem.get('minielectra', '')}; transformers' modules "
                   f"{h['steps_per_s']:.1f} steps/s{mem.get('transformers', '')}: "
                   f"**{r['ratio']:.2f}x** | "
                   + (f">= 150 steps/s{_ok(s3, 'steps_per_s_target')}, >= 2x"
                      f"{_ok(s3, 'ratio_vs_transformers_target')} |" if batch == "128" else " |"))
    out += variant_rows(_stage(results, 8)) + run_rows(results)
    return out


def variant_rows(r: dict | None) -> list[str]:
    """Stage 8: each variant's sequences/s against the default compile at batch 128."""
    if not r:
        return []
    out, speedup = [], r.get("speedup_vs_b128_default", {})
    for name, v in r["variants"].items():
        if "error" in v:
            out.append(f"| `small`, {name} (stage 8) | failed: {v['error'][:80]} | |")
            continue
        mfu = f", MFU {100 * v['mfu']:.1f}%" if v.get("mfu") else ""
        mem = f", {v['peak_memory_gib']} GiB" if v.get("peak_memory_gib") is not None else ""
        gain = f"{speedup[name]:.2f}x of batch 128, default compile" if name in speedup else ""
        out.append(f"| `small`, batch {v['batch']}, compile mode {v['mode']} (stage 8) | "
                   f"{v['steps_per_s']:.1f} steps/s, {v['sequences_per_s']:.0f} sequences/s"
                   f"{mfu}{mem} | {gain} |")
    if r.get("winner"):
        out.append(f"| fastest (stage 8) | {r['winner']}; at the paper's batch 128: "
                   f"{r['same_recipe_winner']} | what the `small` preset should run |")
    return out


def run_rows(results: dict) -> list[str]:
    out = []
    for n, what in ((4, "`pretrain --preset small` on pretrain-en"), (5, "the same, `--resume`")):
        r = _stage(results, n)
        if r:
            auc = r["evals"][-1]["disc_auc"] if r.get("evals") else None
            out.append(f"| {what} (stage {n}) | to step {r['last_step']} in {r['seconds']:.0f} s "
                       f"(compile included); held-out AUC {auc:.3f} | runs and resumes |"
                       if auc is not None else f"| {what} (stage {n}) | exit {r['exit']} | |")
    r6 = _stage(results, 6)
    if r6:
        score = {t: ("failed" if r6[t]["score"] is None else f"{r6[t]['score']:.1f}")
                 for t in ("sst2", "rte")}
        out.append(f"| fine-tuning that checkpoint (stage 6) | SST-2 dev {score['sst2']}, "
                   f"RTE dev {score['rte']}; `torchrun --nproc_per_node=1` exit "
                   f"{r6['torchrun']['exit']} | runs |")
    r7 = _stage(results, 7)
    for name, r in (r7 or {}).get("lessons", {}).items():
        where = "GPU" if "gpu" in r else "CPU (dry run)"
        first, cpu = r.get("gpu", r.get("cpu")), r.get("cpu_same_machine")
        cpu_s = f"{cpu['seconds']} s" if isinstance(cpu, dict) else "not run"
        out.append(f"| lesson {name[:2]} as a script (stage 7) | {where} {first['seconds']} s "
                   f"(exit {first['exit']}); same machine's CPU {cpu_s}; 2-core CPU (README) "
                   f"{r['readme_2core_cpu_s']} s | runs |")
    return out


def render(results: dict) -> str:
    measured = rows(results)
    if not measured:
        return ("GPU figures: **not measured** (no GPU has run `python tools/gpu_check.py` "
                "yet; its stages and targets are in that file).\n")
    dates = sorted(e["started"][:10] for e in results["stages"].values() if "started" in e)
    head = (f"Measured by `python tools/gpu_check.py` on {results['device']}, "
            f"{dates[0]}{' to ' + dates[-1] if dates[-1] != dates[0] else ''} "
            f"(raw figures: `benchmarks/results/gpu/`):\n\n"
            "| what | measured | target |\n|---|---|---|\n")
    return head + "\n".join(measured) + "\n"


def fill(json_path: Path, targets: tuple[Path, ...] = TARGETS) -> dict:
    results = json.loads(Path(json_path).read_text())
    if results.get("device") == "cpu-dry-run":
        raise ValueError(f"{json_path}: a dry run's figures are toy-sized, not measurements")
    text = render(results)
    filled = []
    for path in targets:
        doc = path.read_text()
        if not BLOCK.search(doc):
            raise ValueError(f"{path}: no <!-- gpu-check --> block to fill")
        write_file(path, BLOCK.sub(lambda m: m.group(1) + text + m.group(3), doc, count=1))
        filled.append(str(path))
    return {"filled": filled, "rows": text.count("\n| ")}
