"""The README is also the package's PyPI page, and its test command is what CI runs.

On PyPI a relative link leads nowhere, so files are named as text (`path`), never linked; images
are the one exception (they render from a checkout and on the repository's page), and each must
exist and carry alt text, which is what PyPI shows in its place.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def test_no_relative_links_only_images():
    relative = [m.group(0) for m in LINK.finditer(README)
                if not m.group(1) and not m.group(3).startswith(("http://", "https://", "#"))]
    assert not relative, relative


def test_images_exist_and_have_alt_text():
    images = [(m.group(2), m.group(3)) for m in LINK.finditer(README) if m.group(1)]
    assert images
    for alt, target in images:
        assert alt.strip(), target
        assert target.startswith(("http://", "https://")) or (ROOT / target).is_file(), target


def test_files_named_in_the_readme_exist():
    """Paths written as code (`benchmarks/results/x.json`) must be real files of the checkout."""
    named = set(re.findall(r"`((?:benchmarks|research|tools|tutorial|notebooks|tests|minielectra)/[\w./-]+\.\w+)`",
                           README))
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, missing


def test_ci_runs_the_readme_test_command():
    command = "python -m pytest -q --nbval tests notebooks"
    assert f"```bash\n{command}\n```" in README
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    runs = [line for line in ci if "pytest" in line and not line.startswith("#")]
    assert runs[0] == command  # first; then the course again without a data directory
    assert runs[1:] == ["env -u MINIELECTRA_DATA_DIR python -m pytest -q -p no:cacheprovider "
                        "--nbval-lax notebooks"]


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
