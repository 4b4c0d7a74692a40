"""The committed results files name what made them: every script a file's commands run exists in
the checkout, so a reader can re-run it."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = re.compile(r"(?:python3? |^)((?:research|benchmarks|tools)/[\w/]+\.py)\b")


def strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def scripts_named(value) -> set[str]:
    return {m for s in strings(value) for m in SCRIPT.findall(s)}


def test_the_pattern_finds_a_script_in_a_command():
    got = scripts_named({"cmd": ["python research/sst2.py --seeds 5", "benchmarks/peak.py", "x.py"]})
    assert got == {"research/sst2.py", "benchmarks/peak.py"}


def test_every_script_a_results_file_names_exists():
    files = sorted((ROOT / "research" / "results").rglob("*.json")) + sorted(
        (ROOT / "benchmarks" / "results").rglob("*.json"))
    assert files
    missing = {str(f.relative_to(ROOT)): sorted(s for s in scripts_named(json.loads(f.read_text()))
                                                 if not (ROOT / s).is_file())
               for f in files}
    assert not {f: m for f, m in missing.items() if m}
