"""Fixtures shared by the test modules. Keep this small: module-specific fixtures live with their tests."""

import os
from pathlib import Path

import pytest

# ../shared/data next to the checkout (this file is <checkout>/tests/conftest.py).
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"


# Handmade stand-ins for what can be faked small (tests/fixtures/make_glue.py writes the GLUE ones).
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _real_data_dir() -> Path:
    return Path(os.environ.get("MINIELECTRA_DATA_DIR") or DEFAULT_DATA_DIR)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real data dir (env MINIELECTRA_DATA_DIR, else ../shared/data); skips when absent."""
    path = _real_data_dir()
    if not path.is_dir():
        pytest.skip("needs the real data files: set MINIELECTRA_DATA_DIR to a data directory "
                    "(docs/guides/install.md, 'Offline, with or without a data directory')")
    return path


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    """A fresh cache dir for this test; MINIELECTRA_CACHE points at it so nothing lands in ~."""
    path = tmp_path / "cache"
    monkeypatch.setenv("MINIELECTRA_CACHE", str(path))
    return path


@pytest.fixture(scope="session")
def glue_slice_dir(tmp_path_factory) -> Path:
    """A data dir with the first 40 data rows of every real GLUE file (test_glue, test_finetune),
    or, without a data dir, the handmade GLUE-format files of tests/fixtures/glue (same tasks,
    40 rows each).

    Headers and MRPC's BOM are kept byte for byte; CoLA is written plain, the rest gzipped, as
    the loader accepts both.
    """
    import gzip

    data_dir = _real_data_dir()
    root = tmp_path_factory.mktemp("glue_slice")
    if not (data_dir / "glue").is_dir():
        for src in sorted((FIXTURES / "glue").glob("*/*.tsv")):
            dst = root / "glue" / src.parent.name / src.name
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.parent.name == "CoLA":
                dst.write_bytes(src.read_bytes())
            else:
                dst.with_suffix(".tsv.gz").write_bytes(gzip.compress(src.read_bytes()))
        return root
    for src in sorted((data_dir / "glue").glob("*/*.tsv.gz")):
        header = src.parent.name != "CoLA"  # CoLA has no header line
        with gzip.open(src, "rb") as f:
            keep = b"\n".join(f.read().split(b"\n")[:40 + header]) + b"\n"
        dst = root / "glue" / src.parent.name / src.name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if header:
            dst.write_bytes(gzip.compress(keep))
        else:
            dst.with_suffix("").write_bytes(keep)
    return root


@pytest.fixture
def tiny_model_config():
    """A factory of one-layer ModelConfigs (vocab 50, width 16), keyword overrides allowed."""
    from minielectra.config import ModelConfig

    def make(**kw) -> ModelConfig:
        base = dict(vocab_size=50, embedding_size=8, hidden_size=16, num_layers=1, num_heads=2,
                    intermediate_size=32, max_position_embeddings=32, generator_size=0.5,
                    pad_token_id=0, cls_token_id=2, sep_token_id=3, mask_token_id=4)
        base.update(kw)
        return ModelConfig(**base)
    return make


TINY_WORDS = ("the cat dog sat on mat ran far away quick brown fox jumps over lazy river tree "
              "house green blue red small big old new day night sun moon star sky").split()


@pytest.fixture(scope="session")
def tiny_words() -> list[str]:
    return TINY_WORDS


@pytest.fixture(scope="session")
def write_tiny_corpus():
    """A function ``(path, documents=40) -> path`` writing documents of 3-6 random 'sentences'
    of ``TINY_WORDS`` in the official format (a sentence a line, a blank line between documents)."""
    import random

    def write(path: Path, documents: int = 40) -> Path:
        rng = random.Random(0)
        docs = ["\n".join(" ".join(rng.choices(TINY_WORDS, k=rng.randint(4, 12)))
                          for _ in range(rng.randint(3, 6))) for _ in range(documents)]
        path.write_text("\n\n".join(docs) + "\n")
        return path
    return write


@pytest.fixture(scope="module")
def char_run_dir(tmp_path_factory) -> Path:
    """A ``pretrain --out`` run dir of a tiny random ELECTRA with a character vocabulary
    (every lower-case word spelt in pieces), checkpoints at steps 3 and 7 (the latest)."""
    import string

    import torch

    from minielectra.config import ModelConfig, RunConfig
    from minielectra.data.tokenizer import WordPieceTokenizer
    from minielectra.model.electra import Electra
    from minielectra.training.checkpoints import save_checkpoint

    chars = list(string.ascii_lowercase + string.digits)
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + list(".,'!?-;:()\"`$&/")
    root = tmp_path_factory.mktemp("pretrain")
    (root / "vocab.txt").write_text("\n".join(tokens + ["##" + c for c in chars]) + "\n")
    tok = WordPieceTokenizer.from_vocab_file(root / "vocab.txt")
    for step in (3, 7):
        torch.manual_seed(step)
        model = Electra(ModelConfig(
            vocab_size=tok.vocab_size, embedding_size=16, hidden_size=32, num_layers=2,
            num_heads=2, intermediate_size=64, max_position_embeddings=128, generator_size=0.5,
            pad_token_id=tok.pad_id, cls_token_id=tok.cls_id, sep_token_id=tok.sep_id,
            mask_token_id=tok.mask_id))
        model.tokenizer = tok
        save_checkpoint(root / "run", step, model, {}, RunConfig())
    return root / "run"
