"""The README is the front door: short, its links lead to the site's pages, its set-up is what
CI runs, and every measured number it states is on the results page it links.

The site has no public address yet, so the README links the site's source pages by relative
path (`docs/results/speed.md`): they render in a checkout and on a repository host, and Sphinx
builds the same files into the site. Links go to `docs/` only (a page of the site, which exists),
and images to files of the checkout with alt text.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?x?(?![\w.])")


def test_a_landing_page_of_at_most_250_lines():
    assert len(README.splitlines()) <= 250


def test_relative_links_lead_to_pages_of_the_site():
    relative = [m.group(3) for m in LINK.finditer(README)
                if not m.group(1) and not m.group(3).startswith(("http://", "https://", "#"))]
    assert relative  # the site's pages are linked
    outside = [t for t in relative if not t.startswith("docs/") or not t.endswith(".md")]
    assert not outside, outside
    missing = [t for t in relative if not (ROOT / t).is_file()]
    assert not missing, missing


def test_images_exist_and_have_alt_text():
    images = [(m.group(2), m.group(3)) for m in LINK.finditer(README) if m.group(1)]
    assert images
    for alt, target in images:
        assert alt.strip(), target
        assert target.startswith(("http://", "https://")) or (ROOT / target).is_file(), target


def page_text(page: Path) -> str:
    """A results page as the site shows it: its own text, the figures its roles render and the
    tables its directives render from the results files (docs/_ext/results.py, the code the build runs)."""
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    import results
    text = re.sub(r"\{result\}`([^`]+)`", lambda m: results.render_result(m.group(1)),
                  page.read_text())
    for m in re.finditer(r"```\{results-table\} (\S+)\n((?::\w+: .*\n)*)```", text):
        options = dict(re.findall(r":(\w+): (.*)", m.group(2)))
        text += "\n" + results.render_table(m.group(1), table_name=options.get("table"),
                                            tables=options.get("tables"),
                                            rename=options.get("rename"))
    return text


def test_every_number_beside_a_results_link_is_on_that_page():
    """A sentence that quotes a measurement links its results page; each number in it must be
    one the page shows (most of them generated from the page's results files)."""
    checked = 0
    for paragraph in re.split(r"\n\s*\n", README):
        pages = set(re.findall(r"\]\((docs/results/[\w-]+\.md)\)", paragraph))
        if not pages:
            continue
        prose = LINK.sub(lambda m: m.group(2), paragraph)
        numbers = [n for n in NUMBER.findall(prose) if n not in ("0", "1", "2")]
        shown = "\n".join(page_text(ROOT / p) for p in pages)
        missing = [n for n in numbers if n not in shown]
        assert not missing, (sorted(pages), missing)
        checked += len(numbers)
    assert checked >= 4


def test_files_named_in_the_readme_exist():
    """Paths written as code (`benchmarks/results/x.json`) must be real files of the checkout."""
    named = set(re.findall(r"`((?:benchmarks|research|tools|tutorial|notebooks|tests|minielectra)/[\w./-]+\.\w+)`",
                           README))
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, missing


def test_ci_runs_the_readme_test_command_first():
    command = "python -m pytest -q --nbval tests notebooks"
    assert f"\n{command}\n```" in README
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    runs = [line for line in ci if line.startswith("python -m pytest")
            or "python -m pytest" in line.split("#")[0]]
    assert runs and runs[0] == command, runs
    assert ("env -u MINIELECTRA_DATA_DIR python -m pytest -q -p no:cacheprovider --nbval-lax "
            "notebooks") in runs  # then the course again, as a learner without a data directory


CHANGE_LOG = re.compile(r"\(before[:,]|\bbefore:|\bissues?\b|\bBoth targets\b|\bno longer (?:fails|"
                        r"crashes|skips)\b|\bwas fixed\b", re.I)


def test_says_what_is_not_what_changed():
    """No change-log sentences ("before: 43 skipped") and no references to the tracker's issues:
    a reader of the README meets the project as it is."""
    hits = [line.strip() for line in README.splitlines() if CHANGE_LOG.search(line)]
    assert not hits, hits


def test_the_change_log_pattern_catches_what_it_is_for():
    caught = ["instead (before: 43 skipped).", "Both targets of the issue are met.",
              "as issue 12 asked", "The crash was fixed."]
    assert all(CHANGE_LOG.search(s) for s in caught)
    assert not CHANGE_LOG.search("it takes no longer on a slower machine (see #51)")
