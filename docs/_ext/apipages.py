"""The API pages: every module of the package, by layer, from its docstrings.

``.. api-modules:: minielectra.model minielectra.config`` documents each named module, and each
module of a named package, as a section titled by its dotted name holding ``automodule`` with
its members. The pages list packages, not modules, so a new module appears without an edit; at
the end of reading, a module of ``minielectra`` that no page documents is a warning (so ``-W``
fails the build rather than leave it out).
"""

from __future__ import annotations

import importlib
import pkgutil

from docutils import nodes
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles
from sphinx.util import logging

logger = logging.getLogger(__name__)

# Not documented: the ``python -m minielectra`` entry point (it only calls cli.main).
SKIP = {"minielectra.__main__"}


def modules_of(name: str) -> list[str]:
    """``name`` and, for a package, every module below it (sorted, packages before their
    modules); symbolic-link folders (the shipped lessons) are not code."""
    module = importlib.import_module(name)
    found = [name]
    if hasattr(module, "__path__"):
        for info in pkgutil.walk_packages(module.__path__, prefix=name + "."):
            found.append(info.name)
    return [m for m in sorted(found, key=lambda m: m.split(".")) if m not in SKIP]


def all_modules() -> set[str]:
    return set(modules_of("minielectra"))


class ApiModules(SphinxDirective):
    required_arguments = 1
    optional_arguments = 50
    has_content = False

    def run(self) -> list[nodes.Node]:
        documented = self.env.__dict__.setdefault("apipages_documented", {})
        lines = []
        for name in self.arguments:
            for module in modules_of(name):
                documented[module] = self.env.docname
                title = f"``{module}``"
                lines += [title, "-" * len(title), "",
                          f".. automodule:: {module}", "   :members:", ""]
        container = nodes.section()
        container.document = self.state.document
        nested_parse_with_titles(self.state, StringList(lines, source=self.env.docname),
                                 container)
        return container.children


class RelativeNames(SphinxPostTransform):
    """A docstring's ``:mod:`.report``` means what ``from . import report`` would: the sibling
    in the module's own package (Sphinx would otherwise search every ``*.report`` and find
    ``experiments.report`` and ``viz.report``). Rewritten only when that name exists."""
    default_priority = 5

    def run(self, **kwargs) -> None:
        objects = self.env.get_domain("py").objects
        for node in self.document.findall(addnodes.pending_xref):
            # the role strips the leading dot and marks the reference "specific"
            target, module = node.get("reftarget", ""), node.get("py:module")
            if node.get("refdomain") != "py" or not node.get("refspecific") or not module:
                continue
            package = module if hasattr(importlib.import_module(module), "__path__") \
                else module.rpartition(".")[0]
            candidate = f"{package}.{target}"
            if candidate in objects:
                node["reftarget"], node["refspecific"] = candidate, False


def check_all_documented(app, env) -> None:
    documented = getattr(env, "apipages_documented", {})
    if not documented:
        return  # a partial build (another builder, a single page) documents nothing
    missing = sorted(all_modules() - set(documented) - {"minielectra"})
    for module in missing:
        logger.warning(f"module {module} is on no API page (add its package to one in "
                       "docs/reference/api/)")


def purge(app, env, docname) -> None:
    documented = getattr(env, "apipages_documented", {})
    for module in [m for m, d in documented.items() if d == docname]:
        del documented[module]


def merge(app, env, docnames, other) -> None:
    env.__dict__.setdefault("apipages_documented", {}).update(
        getattr(other, "apipages_documented", {}))


def setup(app):
    app.add_directive("api-modules", ApiModules)
    app.add_post_transform(RelativeNames)
    app.connect("env-check-consistency", check_all_documented)
    app.connect("env-purge-doc", purge)
    app.connect("env-merge-info", merge)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
