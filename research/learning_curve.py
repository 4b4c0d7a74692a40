"""Held-out discriminator ROC-AUC against wall-clock time, for the CPU presets.

Learners should *see* the discriminator learn, so the ``nano`` and ``mini`` presets are tuned for
AUC per minute on a 2-core CPU. This script measures that: it runs
:func:`minielectra.training.loop.pretrain` with periodic held-out evaluation and records
``(elapsed seconds, step, disc_auc, disc_auc_text, ...)`` from the run's ``metrics.jsonl``. The
wall clock starts when ``pretrain`` is called, so data preparation and tokenizer training are
included.

Targets: ``nano`` >= 0.65 held-out AUC after its 5-minute job; ``mini`` >= 0.85 within 60
minutes. Writes ``learning_curve_<presets>.json``, an ``.svg`` of the curve (shown on the
learning-curves page) and, with plotly, an interactive ``.html`` into ``--out``
(``research/results``; run directories go to ``--runs``). The committed
``research/results/learning_curve_nano_mini.*``:

    python research/learning_curve.py --presets nano mini --eval-every 250      # ~30 min
    python research/learning_curve.py --from-runs runs/bench/nano runs/bench/mini  # re-plot only

Besides the JSON it prints (on stderr) and writes (``.md``) the Markdown table of the results
page.
A fresh run replaces the preset's earlier run directory under ``--runs`` (``pretrain`` refuses to
mix two runs' checkpoints); ``--from-runs`` only reads.

Timings depend on the machine and on anything else running on it; the JSON records the CPU
count, torch threads and load average at the start so that a reader can judge. Idle OpenMP
threads are set to sleep (``OMP_WAIT_POLICY=PASSIVE``) before torch is imported: with spinning
threads, a 2-core machine shared with one other busy process ran ``nano`` ~10x slower.
``mini`` reads ``pretrain-en`` from the data dir (``MINIELECTRA_DATA_DIR``).
"""

from __future__ import annotations

import minielectra  # noqa: F401  (first: its import sets OMP_WAIT_POLICY before torch loads)

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

from minielectra.safeio import write_file

TARGETS = {"nano": 0.65, "mini": 0.85}


def read_curve(run_dir: Path) -> dict:
    """The eval records of a run directory, as a curve."""
    records = [json.loads(line) for line in open(run_dir / "metrics.jsonl") if line.strip()]
    evals = [r for r in records if r["kind"] == "eval"]
    config = json.loads((run_dir / "config.json").read_text())
    keys = ("step", "elapsed_s", "disc_auc", "disc_auc_text", "disc_accuracy", "gen_accuracy",
            "replaced_fraction", "disc_loss", "gen_loss")
    train = [r for r in records if r["kind"] == "train"]
    return {
        "preset": config["preset"], "run_dir": str(run_dir),
        "points": [{k: r.get(k) for k in keys} for r in evals],
        "final_auc": evals[-1]["disc_auc"] if evals else None,
        "final_auc_text": evals[-1].get("disc_auc_text") if evals else None,
        "final_step": evals[-1]["step"] if evals else None,
        "first_train_log_s": train[0]["elapsed_s"] if train else None,
        "mean_tokens_per_s": (sum(r["tokens_per_s"] for r in train) / len(train)
                              if train else None),
        "target_auc": TARGETS.get(config["preset"]),
        "config": config,
    }


def run(preset_name: str, runs_root: Path, *, minutes: float | None, eval_every: int | None,
        overrides: list[str]) -> dict:
    from minielectra.config import apply_overrides, preset
    from minielectra.training.loop import pretrain

    cfg = preset(preset_name)
    run_dir = runs_root / preset_name
    if run_dir.exists():  # this benchmark's own earlier run of the preset: start afresh
        print(f"replacing the earlier run in {run_dir}", file=sys.stderr)
        shutil.rmtree(run_dir)
    extra = [f"train.out_dir={run_dir}"]
    if minutes is not None:
        extra.append(f"train.max_minutes={minutes}")
    if eval_every is not None:
        extra.append(f"train.eval_every={eval_every}")
    apply_overrides(cfg, extra + overrides)
    start = time.perf_counter()
    result = pretrain(cfg, progress=sys.stderr.isatty())
    curve = read_curve(run_dir)
    curve["wall_s"] = round(time.perf_counter() - start, 1)
    curve["stopped_by"] = result["stopped_by"]
    return curve


def markdown_table(curves: list[dict]) -> str:
    """The README's table: one row per preset, its final held-out figures and the target."""
    rows = ["| preset | corpus | steps | minutes | held-out AUC | AUC without [CLS]/[SEP] | "
            "target | first reached |", "|---|---|---|---|---|---|---|---|"]
    for c in curves:
        last = c["points"][-1] if c["points"] else {}
        target = c.get("target_auc")
        first = next((p for p in c["points"] if target and p["disc_auc"] >= target), None)
        reached = (f"{first['elapsed_s'] / 60:.1f} min (step {first['step']})" if first
                   else "not reached" if target else "")
        rows.append("| `{}` | {} | {} | {:.1f} | {} | {} | {} | {} |".format(
            c["preset"], c["config"]["data"]["corpus"], last.get("step", ""),
            last.get("elapsed_s", 0) / 60, _fmt(last.get("disc_auc")),
            _fmt(last.get("disc_auc_text")), target or "", reached))
    return "\n".join(rows)


def _fmt(x) -> str:
    return f"{x:.3f}" if isinstance(x, (int, float)) else ""


def plot(curves: list[dict], path: Path) -> Path | None:
    """An HTML plotly figure: AUC against minutes, one line per preset, targets dashed."""
    try:
        import plotly.graph_objects as go
    except ImportError:
        return None
    fig = go.Figure()
    for c in curves:
        xs = [p["elapsed_s"] / 60 for p in c["points"]]
        fig.add_trace(go.Scatter(x=xs, y=[p["disc_auc"] for p in c["points"]],
                                 mode="lines+markers", name=f"{c['preset']} (held-out AUC)",
                                 text=[f"step {p['step']}" for p in c["points"]]))
        if any(p.get("disc_auc_text") is not None for p in c["points"]):
            fig.add_trace(go.Scatter(x=xs, y=[p.get("disc_auc_text") for p in c["points"]],
                                     mode="lines", line_dash="dot",
                                     name=f"{c['preset']} (AUC without [CLS]/[SEP])"))
        if c.get("target_auc"):
            fig.add_hline(y=c["target_auc"], line_dash="dash",
                          annotation_text=f"{c['preset']} target {c['target_auc']}")
    fig.update_layout(title="ELECTRA discriminator: held-out ROC-AUC vs wall clock (CPU)",
                      xaxis_title="minutes since `pretrain` started (data prep included)",
                      yaxis_title="held-out discriminator ROC-AUC", yaxis_range=[0.45, 1.0],
                      template="plotly_white")
    write_file(path, fig.to_html(include_plotlyjs="cdn"))
    return path


def svg(curves: list[dict], path: Path, width: int = 640, height: int = 360) -> Path:
    """The same figure as a dependency-free SVG, so that the README can show it."""
    left, right, top, bottom = 56, 16, 28, 44
    t_max = max(p["elapsed_s"] for c in curves for p in c["points"]) / 60
    t_max = max(1.0, t_max * 1.05)
    lo, hi = 0.45, 1.0

    def xy(minutes: float, auc: float) -> str:
        x = left + (width - left - right) * minutes / t_max
        y = top + (height - top - bottom) * (hi - auc) / (hi - lo)
        return f"{x:.1f},{y:.1f}"

    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="11"><rect width="100%" height="100%" '
             f'fill="white"/><text x="{left}" y="16" font-size="13">Held-out discriminator '
             f'ROC-AUC vs wall-clock minutes (2-core CPU)</text>']
    for auc in (0.5, 0.6, 0.7, 0.8, 0.9, 1.0):  # grid and y labels
        a, b = xy(0, auc), xy(t_max, auc)
        parts.append(f'<polyline points="{a} {b}" stroke="#ddd" fill="none"/>'
                     f'<text x="{left - 6}" y="{float(a.split(",")[1]) + 4:.1f}" '
                     f'text-anchor="end">{auc:.1f}</text>')
    step = 1 if t_max <= 8 else 5 if t_max <= 40 else 10
    for m in range(0, int(t_max) + 1, step):  # x labels
        x, y = xy(m, lo).split(",")
        parts.append(f'<text x="{x}" y="{float(y) + 16:.1f}" text-anchor="middle">{m}</text>')
    parts.append(f'<text x="{(width + left) / 2:.0f}" y="{height - 8}" text-anchor="middle">'
                 f'minutes since pretrain started (data preparation included)</text>')
    for i, c in enumerate(curves):
        colour = colours[i % len(colours)]
        pts = " ".join(xy(p["elapsed_s"] / 60, p["disc_auc"]) for p in c["points"])
        parts.append(f'<polyline points="{pts}" stroke="{colour}" stroke-width="2" fill="none"/>')
        if c.get("target_auc"):
            a, b = xy(0, c["target_auc"]), xy(t_max, c["target_auc"])
            parts.append(f'<polyline points="{a} {b}" stroke="{colour}" stroke-dasharray="5,4" '
                         f'fill="none"/>')
        last = c["points"][-1] if c["points"] else None
        if last:
            x, y = xy(last["elapsed_s"] / 60, last["disc_auc"]).split(",")
            parts.append(f'<text x="{float(x) - 4:.1f}" y="{float(y) - 8:.1f}" fill="{colour}" '
                         f'text-anchor="end">{c["preset"]} {last["disc_auc"]:.3f}'
                         f'{" (dashed: target)" if c.get("target_auc") else ""}</text>')
    parts.append("</svg>")
    write_file(path, "\n".join(parts) + "\n")
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--presets", nargs="+", default=["nano"])
    p.add_argument("--minutes", type=float, help="override train.max_minutes")
    p.add_argument("--eval-every", type=int, help="override train.eval_every (steps)")
    p.add_argument("--out", default="research/results", help="where the JSON and HTML go")
    p.add_argument("--runs", default="runs/bench", help="run directories (checkpoints, logs)")
    p.add_argument("--set", action="append", default=[], help="extra config overrides")
    p.add_argument("--from-runs", nargs="+", help="only read these run dirs and plot")
    args = p.parse_args(argv)

    import torch

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    machine = {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
               "torch": torch.__version__, "python": platform.python_version(),
               "load_average_at_start": os.getloadavg(), "cuda": torch.cuda.is_available(),
               "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}
    if args.from_runs:
        curves = [read_curve(Path(d)) for d in args.from_runs]
    else:
        curves = [run(name, Path(args.runs), minutes=args.minutes, eval_every=args.eval_every,
                      overrides=args.set) for name in args.presets]
    report = {"benchmark": "learning_curve", "machine": machine, "curves": curves}
    stem = "learning_curve_" + "_".join(c["preset"] for c in curves)
    write_file(out / f"{stem}.json", json.dumps(report, indent=2) + "\n")
    html = plot(curves, out / f"{stem}.html")
    svg(curves, out / f"{stem}.svg")
    summary = {c["preset"]: {"final_auc": c["final_auc"], "final_auc_text": c["final_auc_text"],
                             "final_step": c["final_step"],
                             "wall_s": c.get("wall_s"), "target_auc": c["target_auc"],
                             "reached": (c["final_auc"] or 0) >= (c["target_auc"] or 0)}
               for c in curves}
    table = markdown_table(curves)
    write_file(out / f"{stem}.md", table + "\n")
    print(json.dumps({"summary": summary, "json": str(out / f"{stem}.json"),
                      "html": str(html) if html else None, "readme_table": str(out / f"{stem}.md")},
                     indent=2))
    print(table, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
