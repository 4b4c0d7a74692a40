"""The house keeps its layout: the package reads in layers (no import circles, each layer importing
only layers below it), never imports the lab, keeps modules short and its import light, and the
layout page (docs/guides/layout.md) names every room with the layer this test enforces.

Every ``import`` in every module counts, including those inside functions (a lazy import hides a
circle from Python, not from a reader). The graph is built with ``ast`` from the source, so the
test needs no imports of the package and sees code paths that never run here.
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "minielectra"
LAYOUT = ROOT / "docs" / "guides" / "layout.md"

# Bottom to top, as the lessons meet them (docs/guides/layout.md). A module may import its own
# layer and any layer below it.
LAYERS = {"config": 0, "overrides": 0, "presets": 0, "safeio": 0, "ownership": 0, "outputs": 0,
          "progress": 0, "course": 0,
          "data": 1, "model": 2,
          "objectives": 3, "training": 4, "commands": 8,
          "distributed": 4, "finetune": 5, "experiments": 6, "viz": 7, "cli": 8, "usage": 8,
          "lessons": 8, "exercises": 8, "__main__": 8, "__init__": 8}


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the package modules it imports (anywhere in its source)."""
    files = {module_name(p, root): p for p in root.rglob("*.py")}
    graph = {}
    for name, path in files.items():
        is_pkg = path.name == "__init__.py"
        package = name if is_pkg else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                # `from pkg import sub` imports the submodule when there is one.
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in files else mod
                           for a in node.names]
            edges |= {t for t in targets if t in files and t != name}
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a path ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def layer_of(module: str) -> int:
    parts = module.split(".")
    key = parts[1] if len(parts) > 1 else "__init__"
    if key not in LAYERS:
        raise AssertionError(f"{module}: not in a known layer; add its folder to LAYERS "
                             "(and to docs/guides/layout.md)")
    return LAYERS[key]


def test_no_import_cycles():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_each_layer_imports_only_layers_below():
    wrong = [f"{a} (layer {layer_of(a)}) imports {b} (layer {layer_of(b)})"
             for a, targets in import_graph().items() for b in sorted(targets)
             if layer_of(b) > layer_of(a)]
    assert not wrong, "\n".join(wrong)


def test_the_package_never_imports_the_lab():
    """``research/`` (our own studies), ``tools/`` (release and GPU tooling) and ``benchmarks/``
    are not installed: the package must run without them."""
    outside = {"research", "tools", "benchmarks"}
    wrong = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                     else [])
            wrong += [f"{path.relative_to(PACKAGE)} imports {n}" for n in names
                      if n.split(".")[0] in outside]
    assert not wrong, wrong


def private_imports(*folders: str) -> list[str]:
    """``from M import _name``: a module reaching into another's private names."""
    found = []
    for folder in folders:
        for f in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(f.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                    found += [f"{f.relative_to(ROOT)}:{node.lineno} {a.name}" for a in node.names
                              if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_module_imports_another_modules_private_name():
    """What one module uses of another is public (no leading underscore), so a reader sees
    which names a module offers; the lab keeps to the package's public names too."""
    assert private_imports("minielectra", "research") == []


def test_subpackage_inits_hold_no_code():
    """A layer's ``__init__`` is its docstring only: code there would run on every import of
    any module of the layer, and re-exports there would hide where a name lives."""
    for init in PACKAGE.glob("*/**/__init__.py"):
        body = ast.parse(init.read_text()).body
        assert all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
                   for n in body), f"{init} holds code"


def test_modules_stay_short():
    """One concept a module; the house style's ~100-400 lines (docs/guides/layout.md)."""
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 420}
    assert not long, long


# Folders at the top of a checkout that are no room of the house: what runs and builds leave there.
NOT_ROOMS = {"runs", "experiments", "build", "dist"}


def test_the_layout_page_names_every_room_with_its_layer():
    """A reader finds their room from the tree: every folder of the repository, every folder
    and top-level module of the package is on the page, each layer the number enforced here."""
    text = LAYOUT.read_text()
    repo = {p.name + "/" for p in ROOT.iterdir() if p.is_dir() and p.name not in NOT_ROOMS
            and not p.name.startswith((".", "_")) and not p.name.endswith(".egg-info")}
    package = {p.name + "/" for p in PACKAGE.iterdir() if p.is_dir() and not p.is_symlink()
               and p.name != "__pycache__"}
    package |= {p.name for p in PACKAGE.glob("*.py") if not p.name.startswith("__")}
    package |= {p.parent.name + "/" for p in PACKAGE.glob("*/*/__init__.py")}  # finetune/glue
    missing = sorted(n for n in repo | package if not re.search(rf"(?<![\w/]){re.escape(n)}", text))
    assert not missing, f"{LAYOUT.relative_to(ROOT)} does not name {missing}"
    tree = text[text.index("## The package"):text.index("## What you want")]
    shown = {m[1]: int(m[2]) for m in re.finditer(r"^  (\w+)(?:/|\.py)\s+(\d)\s", tree, re.M)}
    assert shown == {k: v for k, v in LAYERS.items() if k not in ("__init__", "__main__")}


# What `import minielectra` loads: the model and its config, nothing above them (the data, training,
# checkpoint files and interop, views, fine-tuning and experiments load when first used).
LIGHT = {"minielectra", "minielectra.config", "minielectra.overrides", "minielectra.presets",
         "minielectra.safeio", "minielectra.model", "minielectra.model.electra",
         "minielectra.model.transformer", "minielectra.model.attention",
         "minielectra.model.cpu"}

SPY = """
import os, sys
class Spy:  # reports the OpenMP setting at the moment torch is first imported
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            print("torch imported with OMP_WAIT_POLICY =", os.environ.get("OMP_WAIT_POLICY"))
sys.meta_path.insert(0, Spy())
import minielectra
print(sorted(m for m in sys.modules if m.startswith("minielectra")))
minielectra.minimal_pretrain  # a public name from a layer above, loaded when asked for
print("training" in " ".join(sys.modules))
"""


def test_import_minielectra_loads_the_model_and_config_only():
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["PYTHONPATH"] = str(PACKAGE.parent)
    done = subprocess.run([sys.executable, "-c", SPY], env=env, capture_output=True, text=True,
                          check=True)
    first, loaded, later = done.stdout.splitlines()
    assert first == "torch imported with OMP_WAIT_POLICY = PASSIVE"
    assert set(json.loads(loaded.replace("'", '"'))) == LIGHT
    assert later == "True"


# What the learner's loop (`training.minimal`) loads: the model, the data it trains on and the
# optimiser; no output folders, prepared shards, hub code, progress bars or fine-tuning.
LEARNERS_LOOP = LIGHT | {
    "minielectra.data", "minielectra.data.alphabet", "minielectra.data.corpus",
    "minielectra.data.dataset", "minielectra.data.documents", "minielectra.data.examples",
    "minielectra.data.files", "minielectra.data.tokenizer", "minielectra.training",
    "minielectra.training.device", "minielectra.training.inputs", "minielectra.training.minimal",
    "minielectra.training.optim", "minielectra.training.ranks"}


def test_the_learners_loop_loads_twenty_modules():
    import os
    import subprocess
    import sys

    code = ("import sys, minielectra.training.minimal\n"
            "print(sorted(m for m in sys.modules if m.startswith('minielectra')))")
    env = {**os.environ, "PYTHONPATH": str(PACKAGE.parent)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True)
    loaded = set(eval(done.stdout))  # a list of module names
    assert loaded == LEARNERS_LOOP, (loaded - LEARNERS_LOOP, LEARNERS_LOOP - loaded)
    packages = {"minielectra", "minielectra.model", "minielectra.data", "minielectra.training"}
    assert len(loaded - packages) <= 20


# ------------------------------------------------------------------- the checker itself can fail


def _write(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "minielectra"
    for name, text in files.items():
        path = pkg / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return pkg


def test_cycle_checker_finds_a_lazy_circle(tmp_path):
    pkg = _write(tmp_path, {
        "__init__.py": "", "model/__init__.py": "",
        "model/electra.py": "from . import checkpoint\n",
        "model/checkpoint.py": "def load():\n    from .electra import Electra\n"})
    assert find_cycle(import_graph(pkg)) == [
        "minielectra.model.checkpoint", "minielectra.model.electra",
        "minielectra.model.checkpoint"]


def test_cycle_checker_passes_a_clean_tree(tmp_path):
    pkg = _write(tmp_path, {
        "__init__.py": "from .model.electra import Electra\n", "model/__init__.py": "",
        "model/electra.py": "from . import checkpoint\nfrom ..config import X\n",
        "model/checkpoint.py": "import json\n", "config.py": ""})
    graph = import_graph(pkg)
    assert graph["minielectra.model.electra"] == {"minielectra.model.checkpoint",
                                                  "minielectra.config"}
    assert find_cycle(graph) is None


@pytest.mark.parametrize("importer,imported,ok", [
    ("minielectra.training.loop", "minielectra.model.electra", True),
    ("minielectra.model.electra", "minielectra.training.loop", False),
    ("minielectra.data.corpus", "minielectra.config", True),
    ("minielectra.data.corpus", "minielectra.model.hf", False),
])
def test_layer_order(importer, imported, ok):
    assert (layer_of(imported) <= layer_of(importer)) is ok


def test_every_config_section_is_in_config_py():
    """One file holds every section a ``--set SECTION.KEY=VALUE`` reaches (a dataclass named
    ``...Config`` with a ``validate``), under the one override machine."""
    found = [f"{p.relative_to(PACKAGE)}:{n.name}" for p in PACKAGE.rglob("*.py")
             for n in ast.parse(p.read_text()).body
             if isinstance(n, ast.ClassDef) and n.name.endswith("Config")
             and any(isinstance(f, ast.FunctionDef) and f.name == "validate" for f in n.body)]
    assert found and all(f.startswith("config.py:") for f in found), found
