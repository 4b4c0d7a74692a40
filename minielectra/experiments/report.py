"""An experiment's results as JSON, Markdown tables and figures (plotly HTML + static SVG).

Per arm (and budget): mean and sample sd over seeds of every score and of the compute; the
difference to the first arm is *paired* by seed. ``efficiency`` also reads the arms at equal wall
time: MLM's score interpolated linearly in log time between its budgets (never extrapolated).
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from ..outputs import output_folder
from ..ownership import Layout
from ..safeio import read_json, write_file
from . import svg
from .stats import paired_t, sign_flip
from .specs import Experiment

# An experiment's report folder (OUT/NAME, or toy-grammar's OUT): replaced as a whole, so the
# tables, figures and results.json always come from one run of the command.
REPORT = Layout("experiment", ("results.json", "results.md", "*.html", "*.svg"),
                lambda folder: "setup" in read_json(folder / "results.json"))


def _stats(values: list[float]) -> tuple[float, float]:
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return float("nan"), float("nan")
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def heldout_metric(heldout: dict) -> tuple[str, float | None]:
    if "disc_auc" in heldout:
        return "disc AUC", heldout["disc_auc"]
    if "mlm_accuracy" in heldout:
        return "MLM acc", heldout["mlm_accuracy"]
    return "", None


def aggregate(exp: Experiment, results: list[dict], controls: list[dict]) -> list[dict]:
    """One row per (budget, arm), in run order, then the control."""
    rows, keys = [], list(dict.fromkeys((r["budget"], r["arm"]) for r in results))
    paper = {a.label: a.paper for a in exp.arms}
    for budget, arm in keys + [(0.0, controls[0]["arm"])]:
        runs = [r for r in results + controls if r["budget"] == budget and r["arm"] == arm]
        ref = {r["seed"]: r for r in results if r["budget"] == budget
               and r["arm"] == exp.arms[0].label}
        row = {"budget": budget, "arm": arm, "seeds": [r["seed"] for r in runs],
               "paper": paper.get(arm), "probe_tasks": list(runs[0]["probe"]),
               "finetune_tasks": list(runs[0]["finetune"])}
        for k in ("steps", "train_flops", "train_seconds", "tokens"):
            row[k] = statistics.fmean(r[k] for r in runs)
        for k in ("probe_avg", "finetune_avg", "swap_score"):
            row[k], row[k + "_sd"] = _stats([r.get(k) for r in runs])
            paired = [r[k] - ref[r["seed"]][k] for r in runs if r["seed"] in ref
                      and r.get(k) is not None and ref[r["seed"]].get(k) is not None]
            row[k + "_delta"], row[k + "_delta_sd"] = _stats(paired)
            # seed-paired tests of "no difference to the first arm" (two-sided)
            row[k + "_p"] = paired_t(paired)["p"] if len(paired) > 1 else float("nan")
            row[k + "_p_flip"] = sign_flip(paired) if paired else float("nan")
        for task in runs[0]["probe"]:
            row[f"probe_{task}"], row[f"probe_{task}_sd"] = _stats(
                [r["probe"][task]["score"] for r in runs])
        for task in runs[0]["finetune"]:
            row[f"finetune_{task}"], row[f"finetune_{task}_sd"] = _stats(
                [r["finetune"][task]["score"] for r in runs])
        name, _ = heldout_metric(runs[0]["heldout"])
        row["heldout_name"] = name
        row["heldout"], row["heldout_sd"] = _stats([heldout_metric(r["heldout"])[1]
                                                    for r in runs])
        rows.append(row)
    return rows


def equal_time(rows: list[dict], a: str, b: str) -> list[dict]:
    """``b``'s probe average at each of ``a``'s training times, from ``b``'s budgets."""
    pts = sorted((r["train_seconds"], r["probe_avg"]) for r in rows if r["arm"] == b)
    out = []
    for r in (r for r in rows if r["arm"] == a):
        t, value = r["train_seconds"], None
        for (t0, v0), (t1, v1) in zip(pts, pts[1:]):
            if t0 <= t <= t1 and t1 > t0:
                w = (math.log(t) - math.log(t0)) / (math.log(t1) - math.log(t0))
                value = v0 + w * (v1 - v0)
        out.append({"seconds": t, a: r["probe_avg"], b: value,
                    "delta": None if value is None else r["probe_avg"] - value})
    return out


def _pm(mean: float, sd: float, digits: int = 1) -> str:
    return "n/a" if mean is None or math.isnan(mean) else f"{mean:.{digits}f} ± {sd:.{digits}f}"


def _p(row: dict, key: str) -> str:
    p, flip = row.get(key + "_p"), row.get(key + "_p_flip")
    if not _finite(p) or not row.get(key + "_delta_sd"):
        return ""  # the reference arm itself, or one seed
    return f"{p:.3f} / {flip:.3f}"


def _flops_line(setup: dict) -> str:
    checks = setup.get("flops_check") or {}
    if not checks:
        return ""
    worst = max(abs(c["ratio"] - 1) for c in checks.values())
    return (f"Training FLOPs per step are counted from the config; against "
            f"`torch.utils.flop_counter.FlopCounterMode` on one step of each arm they differ by "
            f"at most {100 * worst:.2f}%.")


def markdown(exp: Experiment, rows: list[dict], setup: dict) -> str:
    tasks, ft = rows[0]["probe_tasks"], rows[0]["finetune_tasks"]
    swap = any(_finite(r.get("swap_score")) for r in rows)
    ref = exp.arms[0].label
    head = ["budget", "arm", "steps", "train FLOPs", "train min", "probe avg",
            f"Δ vs {ref} (paired)", "p (t / sign-flip)",
            *(["swap probe", f"Δ swap vs {ref}", "p (t / sign-flip)"] if swap else []),
            *[f"probe {t}" for t in tasks],
            *[f"fine-tune {t}" for t in ft], "held-out", "paper GLUE"]
    lines = [f"### {exp.name}: {exp.question}", "",
             f"Preset `{setup['preset']}`, budget {setup['budget']} reference steps, "
             f"{setup['seeds']} seed(s), mean ± sd over seeds; scores in % (CoLA: MCC, STS-B: "
             "Spearman). " + exp.paper_note, "", _flops_line(setup), "",
             *([f"Not judged: {'; '.join(setup['skipped'])}.", ""] if setup.get("skipped") else []),
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [f"{r['budget']:g}", r["arm"], f"{r['steps']:.0f}", f"{r['train_flops']:.2e}",
                 f"{r['train_seconds'] / 60:.1f}", _pm(r["probe_avg"], r["probe_avg_sd"]),
                 _pm(r["probe_avg_delta"], r["probe_avg_delta_sd"]), _p(r, "probe_avg"),
                 *([_pm(r["swap_score"], r["swap_score_sd"]),
                    _pm(r["swap_score_delta"], r["swap_score_delta_sd"]), _p(r, "swap_score")]
                   if swap else []),
                 *[_pm(r[f"probe_{t}"], r[f"probe_{t}_sd"]) for t in tasks],
                 *[_pm(r[f"finetune_{t}"], r[f"finetune_{t}_sd"]) for t in ft],
                 (f"{r['heldout_name']} {_pm(r['heldout'], r['heldout_sd'], 3)}"
                  if r["heldout_name"] else "n/a"),
                 "" if r["paper"] is None else f"{r['paper']}"]
        lines.append("| " + " | ".join(cells) + " |")
    if exp.name == "efficiency":
        a, b = exp.arms[0].label, exp.arms[1].label
        lines += ["", f"At equal wall time ({b}'s probe average interpolated at {a}'s training "
                  "time; n/a outside the times measured):", "",
                  f"| train min | {a} | {b} | Δ |", "|---|---|---|---|"]
        for e in equal_time(rows, a, b):
            fmt = (lambda v: "n/a" if v is None else f"{v:.1f}")
            lines.append(f"| {e['seconds'] / 60:.1f} | {fmt(e[a])} | {fmt(e[b])} | "
                         f"{fmt(e['delta'])} |")
    return "\n".join(lines) + "\n"


def _finite(v) -> bool:
    return v is not None and math.isfinite(v)


def plotly_figure(spec: dict):
    """Lines with error bars: ``spec`` holds ``series`` (:func:`.svg.line_chart`'s), ``title``,
    ``xlabel``, ``ylabel``, ``logx`` and maybe ``hline``, a labelled dashed reference line."""
    import plotly.graph_objects as go
    fig = go.Figure([go.Scatter(x=s["x"], y=s["y"], name=s["name"], mode="lines+markers",
                                error_y={"type": "data", "array": s["err"]})
                     for s in spec["series"]])
    if spec.get("hline"):
        fig.add_hline(y=spec["hline"][1], line_dash="dash", annotation_text=spec["hline"][0])
    fig.update_layout(title=spec["title"], xaxis_title=spec["xlabel"],
                      yaxis_title=spec["ylabel"], xaxis_type="log" if spec["logx"] else "linear")
    return fig


def svg_figure(spec: dict) -> str:
    """The static twin of :func:`plotly_figure`."""
    return svg.line_chart(spec["series"], title=spec["title"], xlabel=spec["xlabel"],
                          ylabel=spec["ylabel"], logx=spec["logx"], hline=spec.get("hline"))


def figures(exp: Experiment, rows: list[dict], out: Path) -> list[Path]:
    """Plotly HTML and a static SVG of each figure."""
    import plotly.graph_objects as go

    trained = [r for r in rows if r["steps"]]
    arms = list(dict.fromkeys(r["arm"] for r in trained))
    written = []
    control = [r for r in rows if not r["steps"]]
    if len(set(r["budget"] for r in trained)) > 1:
        for key, what, label, axis, title in (
                ("probe_avg", "probe", "linear-probe average", "train_flops", "training FLOPs"),
                ("probe_avg", "probe", "linear-probe average", "train_seconds",
                 "training seconds"),
                ("finetune_avg", "finetune", "fine-tuning score", "train_flops", "training FLOPs"),
                ("swap_score", "word_order", "word-order probe", "train_flops", "training FLOPs")):
            series = [{"name": arm, "x": [r[axis] for r in trained if r["arm"] == arm],
                       "y": [r[key] for r in trained if r["arm"] == arm],
                       "err": [r[key + "_sd"] for r in trained if r["arm"] == arm]}
                      for arm in arms]
            if not any(_finite(y) for s in series for y in s["y"]):
                continue  # e.g. no fine-tuning tasks were asked for: nothing to draw
            spec = {"series": series, "xlabel": title, "ylabel": f"{label} (%)", "logx": True,
                    "title": f"{exp.name}: {label} vs {title} (mean ± sd over seeds)",
                    "hline": ("random init", control[0][key]) if control else None}
            written += save_figure(plotly_figure(spec), svg_figure(spec),
                                   out / f"{exp.name}_{what}_vs_{axis}")
        return written
    top = [r for r in rows if r["budget"] == max(x["budget"] for x in rows) or not r["steps"]]
    metrics = [("probe_avg", "probe average"), ("swap_score", "word-order probe")] + [
        (f"finetune_{t}", f"fine-tune {t}") for t in top[0]["finetune_tasks"]]
    series = [{"name": label, "y": [r[k] for r in top], "err": [r[k + "_sd"] for r in top]}
              for k, label in metrics if not any(math.isnan(r[k]) for r in top)]
    if not series:  # no judge ran (no data dir): the tables say which were skipped
        return []
    groups = [r["arm"] for r in top]
    fig = go.Figure([go.Bar(x=groups, y=s["y"], name=s["name"],
                            error_y={"type": "data", "array": s["err"]}) for s in series])
    fig.update_layout(title=f"{exp.name}: downstream scores (%)", barmode="group")
    return save_figure(fig, svg.bar_chart(groups, series, title=fig.layout.title.text,
                                          ylabel="score (%)"), out / f"{exp.name}_scores")


def save_figure(fig, svg_text: str, stem: Path) -> list[Path]:
    """``stem.html`` (plotly.js from its CDN) and ``stem.svg``."""
    write_file(stem.with_suffix(".html"), fig.to_html(include_plotlyjs="cdn"))
    write_file(stem.with_suffix(".svg"), svg_text)
    return [stem.with_suffix(".html"), stem.with_suffix(".svg")]


def write_report(exp: Experiment, results: list[dict], controls: list[dict], *, out: Path,
                 setup: dict) -> dict[str, Any]:
    """``out/results.json``, ``results.md`` and the figures, replacing ``out`` as a whole."""
    rows = aggregate(exp, results, controls)
    text = markdown(exp, rows, setup)
    summary = {"experiment": exp.name, "question": exp.question, "setup": setup, "rows": rows,
               "runs": results, "controls": controls}
    with output_folder(out, REPORT, replace=True) as tmp:
        write_file(tmp / "results.json", json.dumps(summary, indent=2, default=str) + "\n")
        write_file(tmp / "results.md", text)
        files = ["results.json", "results.md", *(f.name for f in figures(exp, rows, tmp))]
    return {"markdown": text, "files": [str(out / f) for f in files], "summary": rows}
