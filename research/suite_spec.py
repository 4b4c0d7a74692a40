"""What the suite measures, shared by its runner (``suite.py``), its floor (``suite_floor.py``),
its report (``suite_report.py``) and the studies that read its runs (``laptop.py``,
``recipe_choice.py``): the tasks at their sizes, the recipes, the protocol, an arm's averages."""

import statistics

SUITE = (("cola", None), ("sst2", 8000), ("mrpc", None), ("stsb", None), ("rte", None))
FEW = tuple((task, 2000) for task, _ in SUITE)
EXTRA = (("sst2", 2000), ("sst2", None))
ROW_RECIPE = ("finetune.epochs=10", "finetune.reinit_layers=1")
RECIPES: dict[str, tuple[str, ...]] = {
    "reinit-1": ROW_RECIPE,  # the rule's recipe, every arm
    "paper": (),  # 3 epochs (10 for STS-B and RTE), no re-initialisation
    "epochs-10": ("finetune.epochs=10",),
}
# Every run: the last epoch's model (the paper's protocol), one thread.
PROTOCOL = ("finetune.keep_epoch=last", "finetune.num_threads=1")


def arm_name(run: dict) -> str:
    """An arm under the suite's recipe is its name; under another recipe, ``NAME-RECIPE``."""
    return run["arm"] if run["recipe"] == "reinit-1" else f"{run['arm']}-{run['recipe']}"


def suite_averages(runs: list[dict]) -> dict:
    """Per arm (and recipe): each task's score and the average, over the fine-tuning seeds all
    tasks have."""
    out = {}
    for arm in sorted({arm_name(r) for r in runs}):
        cells = {(r["task"], r["size"], r["seed"]): r["score"] for r in runs if arm_name(r) == arm}
        seeds = sorted(s for s in {k[2] for k in cells}
                       if all((t, n, s) in cells for t, n in SUITE))
        if not seeds:
            continue
        tasks = {t: round(statistics.mean(cells[t, n, s] for s in seeds), 2) for t, n in SUITE}
        out[arm] = {"seeds": seeds, "tasks": tasks,
                    "average": round(statistics.mean(
                        statistics.mean(cells[t, n, s] for t, n in SUITE) for s in seeds), 2)}
    return out
