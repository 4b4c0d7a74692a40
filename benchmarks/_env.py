"""Process settings every benchmark needs before torch is imported: ``import _env`` first.

- Idle OpenMP threads sleep (``OMP_WAIT_POLICY=PASSIVE``): with spinning threads, a 2-core
  machine shared with one other busy process ran ``nano`` ~10x slower.
- The data directory defaults to ``../shared/data`` beside the repository when it exists and
  ``MINIELECTRA_DATA_DIR`` is unset (the library itself falls back to the Hugging Face hub).
"""

import os
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

_SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
if "MINIELECTRA_DATA_DIR" not in os.environ and _SHARED.is_dir():
    os.environ["MINIELECTRA_DATA_DIR"] = str(_SHARED)
