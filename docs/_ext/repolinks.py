"""Links written for the repository, resolved in the site.

The course's notebooks and chapters link the way a reader of the checkout needs: to each other
(``../tutorial/01_text_to_examples.md#solutions``), to the code (``../minielectra/data/corpus.py``,
``../minielectra/viz/``) and to files such as the bundled model card. The site reads them through
the symbolic links ``docs/course/notebooks`` and ``docs/course/tutorial`` (and pages it includes
whole, such as ``guides/small.md``), so MyST resolves a link relative to where the page sits in
``docs/``, not where its file lives. This post-transform runs before MyST's resolver and takes
every link MyST could not place, resolves it from the file the text really comes from, and:

- a file the site renders (under any name) -> that page, keeping ``#anchor``;
- a file in :data:`MOVED` (included elsewhere, or shown under another name) -> that page;
- a module or package folder of ``minielectra/`` -> its API entry (a ``py:mod`` reference,
  which fails the build if the module is not documented);
- a folder whose ``README.md`` the site renders -> that page;
- any other file of the checkout -> its name as code, unlinked (the site has no address for
  test files or data);
- anything that does not exist -> left to MyST, which warns: a broken link fails ``-W``.
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.transforms.post_transforms import SphinxPostTransform

ROOT = Path(__file__).resolve().parents[2]

# Repository files that the site shows under another page's name.
MOVED = {
    "README.md": "index",
    "tutorial/reproduce_small.md": "guides/small",
    "minielectra/assets/bundled/MODEL_CARD.md": "guides/pretraining",
}


def _real_docs(env) -> dict[Path, str]:
    """Every rendered file's real path (through the links) -> its page name."""
    found = getattr(env, "_repolinks_real", None)
    if found is None or len(found) != len(env.found_docs):
        found = {Path(env.doc2path(d)).resolve(): d for d in env.found_docs}
        env._repolinks_real = found
    return found


def _page_of(env, stem: str) -> str | None:
    """The page of a file named by its real path without suffix (``/repo/tutorial/01_x``)."""
    for suffix in env.config.source_suffix:
        path = Path(stem + suffix)
        if path.is_absolute() and path.exists():
            found = _real_docs(env).get(path.resolve())
            if found:
                return found
            rel = path.resolve().relative_to(ROOT).as_posix() if path.resolve().is_relative_to(
                ROOT) else None
            if rel in MOVED:
                return MOVED[rel]
    return None


def _module_name(path: Path) -> str | None:
    """``minielectra/data/corpus.py`` -> ``minielectra.data.corpus``; a package folder -> its
    dotted name; anything else None."""
    rel = path.relative_to(ROOT)
    if rel.parts[0] != "minielectra":
        return None
    if path.is_dir() and (path / "__init__.py").is_file():
        return ".".join(rel.parts)
    if path.suffix == ".py" and path.is_file():
        parts = rel.with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return None


def resolve(env, source: str, target: str) -> tuple[str, str | None, str | None]:
    """Where a link ``target`` written in the file ``source`` leads: ``("doc", page, anchor)``,
    ``("mod", module, None)``, ``("text", None, None)`` or ``("missing", None, None)``."""
    path_part, _, anchor = target.partition("#")
    if not path_part or "://" in path_part:
        return "missing", None, None
    path = (Path(source).resolve().parent / path_part).resolve()
    try:
        rel = path.relative_to(ROOT).as_posix()
    except ValueError:
        return "missing", None, None
    docs = _real_docs(env)
    if path in docs:
        return "doc", docs[path], anchor or None
    if rel in MOVED:
        return "doc", MOVED[rel], anchor or None
    module = _module_name(path) if path.exists() else None
    if module:
        return "mod", module, None
    if path.is_dir() and (path / "README.md").resolve() in docs:
        return "doc", docs[(path / "README.md").resolve()], anchor or None
    if path.exists():
        return "text", rel, None
    return "missing", None, None


class RepoLinks(SphinxPostTransform):
    default_priority = 8  # before MyST's resolver (9) and Sphinx's (10)

    def run(self, **kwargs) -> None:
        for node in list(self.document.findall(addnodes.pending_xref)):
            if node.get("reftype") != "myst":
                continue
            if node.get("refdomain") == "doc":
                # MyST found the file through the link and named it by its real path, which is
                # no page name: the page that renders that file
                if node["reftarget"] in self.env.all_docs:
                    continue
                page = _page_of(self.env, node["reftarget"])
                if page:
                    node["reftarget"] = page
                continue
            if node.get("refdomain") not in (None, ""):
                continue
            source = node.source or self.env.doc2path(node.get("refdoc", self.env.docname))
            kind, name, anchor = resolve(self.env, source, node["reftarget"])
            if kind == "doc":
                node["refdomain"], node["reftarget"], node["reftargetid"] = "doc", name, anchor
            elif kind == "mod":
                new = addnodes.pending_xref("", *node.children, refdomain="py", reftype="mod",
                                            reftarget=name, refexplicit=True, refwarn=True,
                                            refdoc=node.get("refdoc", self.env.docname))
                new.source, new.line = node.source, node.line
                node.replace_self(new)
            elif kind == "text":
                node.replace_self(nodes.inline("", "", *node.children) if node.astext()
                                  else nodes.literal(name, name))


def setup(app):
    app.add_post_transform(RepoLinks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
