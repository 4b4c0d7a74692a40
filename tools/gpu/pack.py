"""``gpu_check.py --pack DIR``: what the stages need on a machine that can download nothing.

The GPU machine is bare (Python 3.12, torch, transformers, tokenizers, safetensors, einops,
numpy, tqdm: no data folder, no internet), and only the repository plus a few ignored folders
travel, 64 MiB in all. The pack holds:

- ``data/``: from ``MINIELECTRA_DATA_DIR``, ``pretrain-en`` (stages 4-6), the GLUE tasks the
  stages fine-tune on (SST-2, RTE) and the BERT vocabulary;
- ``wheels/``: what the image lacks. The library's training and fine-tuning path imports
  nothing beyond the image (``datasets`` and ``plotly`` are imported only where the hub or a
  figure needs them); only the lessons draw, so ``plotly`` is the one wheel (its needs,
  ``narwhals`` and ``packaging``, are in the image).

It reports the pack's size and the size of what a call sends (the repository's tracked and
untracked-not-ignored files, plus the pack), and refuses a pack over the limit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from .common import REPO

LIMIT = 64 * 2 ** 20
DATA = ("pretrain-en", "glue/SST-2", "glue/RTE", "vocab/bert-base-uncased-vocab.txt")
WHEELS = ("plotly",)  # missing from the GPU image; pinned to the version installed here
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "any")


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def repo_bytes() -> int:
    """What a call sends besides carried folders: tracked and untracked-not-ignored files."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    return sum((REPO / n).stat().st_size for n in names if n and (REPO / n).is_file())


def copy_data(source: Path, dest: Path) -> list[str]:
    copied = []
    for rel in DATA:
        src = source / rel
        if not src.exists():
            raise FileNotFoundError(f"--pack: {src} is missing (MINIELECTRA_DATA_DIR={source})")
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, target, dirs_exist_ok=True)
        else:
            shutil.copy2(src, target)
        copied.append(rel)
    return copied


def download_wheels(dest: Path) -> list[str]:
    """``pip download`` of the missing packages for CPython 3.12 on x86-64 Linux."""
    from importlib.metadata import version
    dest.mkdir(parents=True, exist_ok=True)
    specs = [f"{name}=={version(name)}" for name in WHEELS]
    platforms = [x for p in PLATFORMS for x in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                    "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
                    *platforms, "-d", str(dest), *specs], check=True)
    return sorted(p.name for p in dest.glob("*.whl"))


def pack(dest: Path, *, wheels: bool = True) -> dict:
    source = os.environ.get("MINIELECTRA_DATA_DIR")
    if not source or not Path(source).is_dir():
        raise FileNotFoundError("--pack needs MINIELECTRA_DATA_DIR, a folder holding "
                                "pretrain-en/, glue/ and vocab/")
    data = copy_data(Path(source), dest / "data")
    got = download_wheels(dest / "wheels") if wheels else []
    size, repo = folder_bytes(dest), repo_bytes()
    result = {"pack": str(dest), "data": data, "wheels": got, "pack_mib": round(size / 2 ** 20, 2),
              "repo_mib": round(repo / 2 ** 20, 2),
              "total_mib": round((size + repo) / 2 ** 20, 2), "limit_mib": LIMIT / 2 ** 20}
    if size + repo > LIMIT:
        raise RuntimeError(f"--pack: {result['total_mib']} MiB with the repository, over the "
                           f"{LIMIT / 2 ** 20:.0f} MiB a call carries")
    return result


def install_wheels(pack_dir: Path, work: Path) -> list[str]:
    """On the GPU machine: the pack's wheels into ``work/site`` (on the path of this process
    and its subprocesses). Only what does not import already."""
    wheels = sorted((pack_dir / "wheels").glob("*.whl")) if pack_dir else []
    missing = [w for w in wheels if not _importable(w.name.split("-")[0])]
    if not missing:
        return []
    site = work / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                    "--no-compile", "--target", str(site), *map(str, missing)], check=True)
    sys.path.insert(0, str(site))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(site)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    return [w.name for w in missing]


def _importable(name: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(name.lower().replace("-", "_")) is not None
