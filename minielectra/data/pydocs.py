"""``pydocs``: the built-in, offline corpus of the running Python's standard-library docstrings.

Run on its own in a fresh isolated interpreter (``python -I``), so it imports only the stdlib.
"""

from __future__ import annotations

import re
import sys
from typing import Iterator

_PYDOCS_VERSION = 1  # bump when the collector changes, so cached copies are rebuilt


_PYDOCS_SKIP = {  # side effects on import (browser, prints, GUI), tests, or platform-only
    "antigravity", "this", "tkinter", "_tkinter", "turtle", "turtledemo", "idlelib", "test",
    "lib2to3", "ensurepip", "pydoc_data", "encodings", "msilib", "winreg", "winsound", "msvcrt",
    "distutils", "__main__"}


_SIGNATURE = re.compile(r"^[\w.]+\(.*\)(\s*->.*)?$")  # "sorted(iterable, /, *, key=None)": not prose


def _docstring_paragraphs(doc: str) -> Iterator[str]:
    """Prose paragraphs of a docstring, one line each; code, doctests and signatures dropped."""
    import inspect

    for para in re.split(r"\n\s*\n", inspect.cleandoc(doc)):
        lines = para.splitlines()
        if not lines or lines[0][:1].isspace() or any(
                ln.lstrip().startswith((">>>", "...")) for ln in lines):
            continue
        text = " ".join(para.split())
        if text and not _SIGNATURE.match(text):
            yield text


def _documented_objects(module) -> Iterator[object]:
    """The module, then its own classes (with their attributes) and functions, in sorted order."""
    import inspect

    yield module
    for name, obj in sorted(vars(module).items()):
        if name.startswith("__") or getattr(obj, "__module__", None) != module.__name__:
            continue  # re-exports are documented where they are defined
        if inspect.isclass(obj):
            yield obj
            yield from (value for _, value in sorted(vars(obj).items()))
        elif inspect.isroutine(obj):
            yield obj


def _collect_pydocs(out_path: str) -> None:
    """Write the stdlib's docstrings in the official format. Runs in a fresh ``python -I``."""
    import contextlib
    import importlib
    import io
    import pkgutil
    import warnings

    warnings.simplefilter("ignore")
    todo = sorted(n for n in sys.stdlib_module_names if n not in _PYDOCS_SKIP and "test" not in n)
    seen: set[str] = set()
    with open(out_path, "w", encoding="utf-8") as out:
        while todo:
            name = todo.pop(0)
            try:
                with contextlib.redirect_stdout(io.StringIO()), \
                        contextlib.redirect_stderr(io.StringIO()):
                    module = importlib.import_module(name)
            except BaseException:  # missing C extension, wrong platform, ...: skip the module
                continue
            if hasattr(module, "__path__"):  # a package: its submodules come right after it
                subs = sorted(m.name for m in pkgutil.iter_modules(module.__path__))
                todo[:0] = [f"{name}.{s}" for s in subs if s not in _PYDOCS_SKIP and "test" not in s]
            paragraphs = []
            for obj in _documented_objects(module):
                doc = getattr(obj, "__doc__", None)
                if isinstance(doc, str) and doc not in seen:  # the same text once only
                    seen.add(doc)
                    paragraphs.extend(_docstring_paragraphs(doc))
            if paragraphs:
                out.write("\n".join(paragraphs) + "\n\n")


if __name__ == "__main__":  # what corpus.py runs, in a fresh `python -I`
    _collect_pydocs(sys.argv[1])
