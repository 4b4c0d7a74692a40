"""What the suite measures, shared by its runner (``suite.py``), its floor (``suite_floor.py``)
and its report (``suite_report.py``): the tasks at their sizes, the recipes, the protocol."""

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
