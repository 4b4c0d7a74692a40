"""The tutorial's code is code: chapters' ```python blocks run, and excerpts match the source.

A chapter (``tutorial/NN_topic.md``) runs top to bottom in one namespace, as a reader would paste
its blocks into one session. The line before a fence may say what the block is:

- ``<!-- excerpt: minielectra/model/electra.py -->``: lines quoted from that file; each non-blank
  line must still be in it (so the chapter cannot drift from the code it explains);
- ``<!-- skip: reason -->``: shown, not run (only for what is too heavy for a test);
- nothing: the block is run.

Heavy work is written as ```bash blocks, which are never run here.
"""

import os
import re
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "tutorial").glob("[0-9][0-9]_*.md"))
FENCE = re.compile(r"(?:<!--\s*(?P<kind>excerpt|skip):\s*(?P<arg>[^>]*?)\s*-->\s*\n)?"
                   r"^```python\n(?P<code>.*?)^```", re.S | re.M)


def blocks(path: Path) -> list[tuple[str | None, str, str, int]]:
    """(kind, argument, code, line number) of each python block, in order."""
    text = path.read_text()
    return [(m["kind"], m["arg"], m["code"], text.count("\n", 0, m.start("code")) + 1)
            for m in FENCE.finditer(text)]


def test_the_parser_sees_every_python_fence():
    for path in CHAPTERS:
        assert len(blocks(path)) == path.read_text().count("```python"), path.name


LINK = re.compile(r"\]\((?!https?://|#)([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("path", [*CHAPTERS, ROOT / "tutorial" / "README.md"],
                         ids=lambda p: p.stem)
def test_relative_links_resolve(path):
    missing = [t for t in LINK.findall(path.read_text()) if not (path.parent / t).exists()]
    assert not missing, f"{path.name}: broken links {missing}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_excerpts_match_the_source(path):
    for kind, arg, code, line in blocks(path):
        if kind != "excerpt":
            continue
        source = ROOT / arg
        assert source.is_file(), f"{path.name}:{line}: no such file {arg}"
        lines = {s.strip() for s in source.read_text().splitlines()}
        missing = [s for s in code.splitlines() if s.strip() and s.strip() != "..." and
                   s.strip() not in lines]
        assert not missing, f"{path.name}:{line}: not in {arg}: {missing}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_code_runs(path, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # a block that writes files writes them here
    monkeypatch.setenv("MINIELECTRA_CACHE", os.environ.get("MINIELECTRA_CACHE") or
                       str(tmp_path / "cache"))
    threads = torch.get_num_threads()
    namespace: dict = {"__name__": f"tutorial_{path.stem}"}
    ran = 0
    try:
        for kind, _, code, line in blocks(path):
            if kind is None:
                exec(compile(code, f"{path.name}:{line}", "exec"), namespace)
                ran += 1
    finally:
        torch.set_num_threads(threads)
    # Every chapter teaches with runnable code (a block that raised has failed the test above).
    assert ran > 0, f"{path.name} has no runnable python block"
