"""Stage 7: the training lessons (05, 07, 08) executed on the GPU, each timed beside the CPU.

Each lesson's code cells, in order, become one Python script (the lesson's own code, unchanged)
run in a fresh interpreter; nbclient would need a Jupyter kernel and its dozen packages on a
machine that can download nothing, and nbval's compared outputs are the CPU's anyway. A short
prelude lets a script draw nothing: ``Figure.show`` does nothing and ``FigureWidget`` (which
needs a notebook's widget machinery) is a plain ``Figure``. A lesson passes when its script
exits 0: every number a lesson shows is checked by an ``assert`` in its cell.

Times: the lesson on the GPU, the same script with the GPU hidden on the same machine's CPU
(when the call has time left), and the README's figure for the 2-core machine the course is
tuned on. The dry run converts all three lessons, compiles them, and runs the first two cells
of lesson 08.
"""

from __future__ import annotations

import re
import sys
import time

from minielectra.safeio import write_file

from .common import REPO, Context, check, sh

LESSONS = ("05_training_electra", "07_fine_tuning", "08_scaling_up")

PRELUDE = '''\
# A lesson's code cells as a script (tools/gpu/lessons.py): figures are built, not drawn.
try:
    import plotly.basedatatypes as _basedatatypes
    import plotly.graph_objects as _go
    _basedatatypes.BaseFigure.show = lambda self, *args, **kwargs: None
    _go.FigureWidget = _go.Figure
except ImportError:  # a lesson that draws nothing needs no plotly
    pass
'''


def script(name: str, *, cells: int | None = None) -> str:
    """The lesson's code cells (the first ``cells`` of them), in order, after the prelude; each
    cell marked by a comment."""
    import json
    notebook = json.loads((REPO / "notebooks" / f"{name}.ipynb").read_text())["cells"]
    code = [c for c in notebook if c["cell_type"] == "code"][:cells]
    parts = [PRELUDE]
    for i, cell in enumerate(code):
        source = "".join(cell["source"])
        parts.append(f"# ---- code cell {i + 1}\n{source}\n")
    return "\n".join(parts)


def readme_cpu_seconds() -> dict[str, float]:
    """The lessons' times in the notebooks' table (the 2-core CPU machine's)."""
    times = {}
    for line in (REPO / "notebooks" / "README.md").read_text().splitlines():
        m = re.match(r"\| (\d\d) \| .*\| (\d+) s \|$", line)
        if m:
            times[m.group(1)] = float(m.group(2))
    return times


def run(ctx: Context, *, seconds_left: float) -> dict:
    begin = time.perf_counter()
    folder = ctx.work / "lessons"
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in LESSONS:
        path = folder / f"{name}.py"
        write_file(path, script(name))
        compile(path.read_text(), str(path), "exec")  # a syntax error fails here, not later
        paths[name] = path
    readme = readme_cpu_seconds()
    out, checks = {}, {}
    if ctx.dry:  # the path, not the lesson: lesson 08's first two cells, as a script
        write_file(folder / "dry_run.py", script(LESSONS[-1], cells=2))
        paths = {**paths, LESSONS[-1]: folder / "dry_run.py"}
    for name in (LESSONS[-1:] if ctx.dry else LESSONS):
        r = {"gpu" if ctx.cuda else "cpu": sh(ctx, [sys.executable, str(paths[name])],
                                              timeout=5 * 60)}
        r["readme_2core_cpu_s"] = readme.get(name[:2])
        out[name] = r
    if ctx.cuda:  # the same scripts on this machine's CPU, while the call has time
        for name in LESSONS:
            if time.perf_counter() - begin > seconds_left - 150:
                out[name]["cpu_same_machine"] = "not run: the call's time was spent"
                continue
            out[name]["cpu_same_machine"] = sh(ctx, [sys.executable, str(paths[name])],
                                               timeout=4 * 60, CUDA_VISIBLE_DEVICES="")
    for name, r in out.items():
        first = r.get("gpu") or r.get("cpu")
        checks[name] = check(first["exit"] == 0, seconds=first["seconds"])
    return {"lessons": out, "converted": [str(p) for p in paths.values()], "checks": checks}
