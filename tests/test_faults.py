"""Faults and bad input, through the command line as a user meets them.

Each scenario of the battery runs ``minielectra`` (in-process through ``cli.main``) on something
broken: a bad flag value, a missing or damaged file, a full disk, a run directory in use. The
promise for each: exit code 2, exactly one ``error:`` line on stderr that names the culprit (the
file, line, column, flag or key), no traceback, and nothing written earlier damaged (every file
under the shared fixtures hashes the same before and after). Ctrl-C and a second process need
real processes: they are the tests at the end.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import shutil
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
import torch
from safetensors.torch import load_file

from minielectra import cli
from minielectra.data import hub as data_hub
from minielectra.model import checkpoint as model_checkpoint
from minielectra.safeio import FolderLock

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = FIXTURES / "corpus.txt"
# A run that takes a few seconds: 1 layer, a 300-token vocabulary, batches of 8 x 16 tokens.
TINY = ["--preset", "nano", "--corpus", str(CORPUS), "--set", "data.vocab_size=300",
        "--set", "train.batch_size=8", "--set", "data.held_out_fraction=0.2",
        "--set", "train.eval_examples=16", "--set", "model.num_layers=1",
        "--set", "train.log_every=2", "--set", "data.num_workers=1", "--set", "train.eval_every=0",
        "--set", "train.max_minutes=0", "--set", "train.save_every=4"]
FAST_FT = ["--set", "finetune.epochs=1", "--set", "finetune.num_threads=1"]


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def tree_sums(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != "run.lock"}


@dataclass
class World:
    """What the scenarios break copies of: a finished run and a fine-tuned model."""

    root: Path
    run: Path  # a `pretrain --out` dir with checkpoints at steps 4 and 8
    model: Path  # a `finetune --out` dir (reviews, 2 classes)
    data: Path  # an empty data dir: nothing there, as on a fresh machine

    @property
    def ckpt(self) -> Path:
        return self.run / "checkpoints" / "step_0000008"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("world")
    with pytest.MonkeyPatch.context() as m:
        m.setenv("MINIELECTRA_CACHE", str(root / "cache"))
        m.setenv("MINIELECTRA_DATA_DIR", str(root / "data"))
        (root / "data").mkdir()
        assert cli.main(["pretrain", *TINY, "--max-steps", "8", "--out", str(root / "run")]) == 0
        assert cli.main(["finetune", "--checkpoint", str(root / "run"),
                         "--train", str(FIXTURES / "reviews_train.csv"),
                         "--dev", str(FIXTURES / "reviews_dev.csv"), "--out",
                         str(root / "model"), *FAST_FT]) == 0
        yield World(root, root / "run", root / "model", root / "data")


@pytest.fixture
def env(world, monkeypatch):
    monkeypatch.setenv("MINIELECTRA_CACHE", str(world.root / "cache"))
    monkeypatch.setenv("MINIELECTRA_DATA_DIR", str(world.data))
    return world


def offline(monkeypatch) -> None:
    """The hub unreachable, as on a machine without network (no 25 s of retries either)."""
    monkeypatch.setattr(data_hub, "_PROBED", ["no connection to huggingface.co:443: test"])
    for name in ("huggingface_hub.constants", "datasets.config"):
        module = pytest.importorskip(name)
        monkeypatch.setattr(module, "HF_HUB_OFFLINE", True)


# ---------------------------------------------------------------------- building bad inputs


def write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def copy_run(w: World, tmp: Path) -> Path:
    shutil.copytree(w.run, tmp / "run", ignore=shutil.ignore_patterns("run.lock"))
    return tmp / "run"


def copy_ckpt(w: World, tmp: Path) -> Path:
    shutil.copytree(w.ckpt, tmp / "ckpt")
    return tmp / "ckpt"


def truncate(path: Path, keep: float = 0.5) -> None:
    path.write_bytes(path.read_bytes()[:int(path.stat().st_size * keep)])


def nan_checkpoint(w: World, tmp: Path) -> Path:
    from minielectra import Electra
    from minielectra.model.checkpoint import save_pretrained
    model = Electra.from_pretrained(w.ckpt)
    with torch.no_grad():
        model.discriminator.head_out.weight[0, 0] = float("nan")
    return save_pretrained(model, tmp / "nan")


def pickle_payload(w: World, tmp: Path) -> Path:
    """A transformers directory whose pytorch_model.bin runs code when unpickled unsafely."""
    hf = tmp / "hf"
    cli.main(["convert", "--to-hf", str(w.ckpt), "--out", str(hf)])
    disc = hf / "discriminator" if (hf / "discriminator").is_dir() else hf
    (disc / "model.safetensors").unlink()

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {tmp / 'PWNED'}",))
    torch.save({"x": Payload()}, disc / "pytorch_model.bin")
    return disc


def bad_glue(tmp: Path, task_dir: str, text: str) -> Path:
    write(tmp / "glue" / task_dir / "train.tsv", text)
    write(tmp / "glue" / task_dir / "dev.tsv", text)
    return tmp


def finetune_files(w, train: Path, dev: Path | None = None, *extra) -> list:
    return ["finetune", "--checkpoint", w.run, "--train", train,
            "--dev", dev or FIXTURES / "reviews_dev.csv", *extra]


def reviews(w, *extra) -> list:
    """finetune on the handmade reviews, with ``extra`` flags."""
    return finetune_files(w, FIXTURES / "reviews_train.csv", None, *extra)


def csv_file(tmp, name, text):
    return write(tmp / name, text)


# ----------------------------------------------------------------------------- the battery


@dataclass
class Scenario:
    name: str
    argv: Callable[[World, Path], list]  # may write the broken input into the tmp dir first
    culprit: str  # what the error line must name
    patch: Callable | None = None  # (monkeypatch, world, tmp) -> None


S = Scenario
REVIEWS_DEV = FIXTURES / "reviews_dev.csv"
SCENARIOS = [
    # ------------------------------------------------------------ pretrain: flags and config
    S("out is a file", lambda w, t: ["pretrain", *TINY, "--out", write(t / "f", "x")],
      "is a file"),
    S("out below a file", lambda w, t: ["pretrain", *TINY, "--out", write(t / "f", "x") / "run"],
      "Not a directory"),
    S("unknown preset", lambda w, t: ["pretrain", "--preset", "nanoo"], "nano"),
    S("mistyped --set key", lambda w, t: ["pretrain", *TINY, "--set", "train.max_stepz=3"],
      "did you mean train.max_steps"),
    S("mistyped --set section", lambda w, t: ["pretrain", *TINY, "--set", "trian.max_steps=3"],
      "did you mean train.max_steps"),
    S("dropout out of range", lambda w, t: ["pretrain", *TINY, "--set", "model.dropout=2.0",
                                           "--out", t / "never"], "model.dropout"),
    S("--set value of the wrong type", lambda w, t: ["pretrain", *TINY, "--set",
                                                     "train.max_steps=ten"], "train.max_steps"),
    S("--set without =", lambda w, t: ["pretrain", *TINY, "--set", "train.max_steps"],
      "section.key=value"),
    S("max-steps 0", lambda w, t: ["pretrain", *TINY, "--max-steps", "0"], "train.max_steps"),
    S("max-steps negative", lambda w, t: ["pretrain", *TINY, "--max-steps", "-5"],
      "train.max_steps"),
    S("fp16 on a CPU", lambda w, t: ["pretrain", *TINY, "--precision", "fp16", "--device", "cpu",
                                     "--out", t / "x"], "fp16"),
    S("corpus path missing", lambda w, t: ["pretrain", *TINY[:2], "--corpus", t / "nope.txt",
                                           "--out", t / "x"], "nope.txt"),
    S("corpus empty", lambda w, t: ["pretrain", *TINY[:2], "--corpus", write(t / "e.txt", ""),
                                    *TINY[4:], "--out", t / "x"], "e.txt"),
    S("corpus binary", lambda w, t: ["pretrain", *TINY[:2], "--corpus",
                                     write(t / "b.txt", bytes(range(256)) * 50), *TINY[4:],
                                     "--out", t / "x"], "b.txt: a binary file"),
    S("corpus UTF-16", lambda w, t: ["pretrain", *TINY[:2], "--corpus",
                                     write(t / "u.txt", "one two three\n\nfour\n".encode("utf-16")),
                                     *TINY[4:], "--out", t / "x"], "u.txt: UTF-16 text"),
    S("corpus UTF-16 without a byte-order mark", lambda w, t: [
        "pretrain", *TINY[:2], "--corpus", write(t / "u.txt", "one two\n".encode("utf-16-le")),
        *TINY[4:], "--out", t / "x"], "u.txt: UTF-16 text"),
    S("corpus of NUL bytes", lambda w, t: ["pretrain", *TINY[:2], "--corpus",
                                           write(t / "z.txt", bytes(4096)), *TINY[4:],
                                           "--out", t / "x"], "z.txt: only NUL bytes"),
    S("corpus of NUL bytes, given vocabulary", lambda w, t: [
        "evaluate", "--checkpoint", w.ckpt, "--corpus", write(t / "z.txt", bytes(4096))],
      "z.txt: only NUL bytes"),
    S("pretrain-en without a data dir", lambda w, t: ["pretrain", "--preset", "nano", "--corpus",
                                                      "pretrain-en", "--out", t / "x"],
      "pretrain-en"),
    S("wikitext-2 offline", lambda w, t: ["pretrain", *TINY[:2], "--corpus", "wikitext-2",
                                          "--out", t / "x"], "hub is unreachable",
      lambda m, w, t: offline(m)),
    S("resume without a checkpoint", lambda w, t: ["pretrain", *TINY, "--out", t / "empty",
                                                   "--resume"], "no checkpoint"),
    S("fresh run over an earlier one", lambda w, t: ["pretrain", *TINY, "--max-steps", "8",
                                                     "--out", copy_run(w, t)], "earlier run"),
    S("resume with another config", lambda w, t: ["pretrain", *TINY, "--max-steps", "8",
                                                  "--set", "train.learning_rate=0.5",
                                                  "--out", copy_run(w, t), "--resume"],
      "train.learning_rate"),
    S("every checkpoint damaged", lambda w, t: [
        "pretrain", *TINY, "--max-steps", "8", "--out", _damage_all(w, t), "--resume"],
      "every checkpoint"),
    S("disk full while saving", lambda w, t: ["pretrain", *TINY, "--max-steps", "8",
                                              "--out", _back_to_step_4(w, t), "--resume"],
      "No space left on device", lambda m, w, t: m.setattr(model_checkpoint, "save_model",
                                                             _disk_full)),
    S("run dir held by another run", lambda w, t: ["pretrain", *TINY, "--out", t / "busy"],
      "in use by another run (pid", lambda m, w, t: _hold_lock(m, t / "busy")),
    # ------------------------------------------------------------------------- evaluate
    S("checkpoint missing", lambda w, t: ["evaluate", "--checkpoint", t / "nope"], "nope"),
    S("weights truncated", lambda w, t: ["evaluate", "--checkpoint", _truncated(w, t)],
      "model.safetensors"),
    S("weights altered in place", lambda w, t: ["evaluate", "--checkpoint", _flipped(w, t)],
      "model.safetensors: damaged"),
    S("weights truncated, no checksums", lambda w, t: [
        "evaluate", "--checkpoint", _truncated(w, t, sums=False)], "model.safetensors"),
    S("vocab.txt truncated", lambda w, t: ["evaluate", "--checkpoint", _cut_vocab(w, t)],
      "vocab.txt"),
    S("NaN weights", lambda w, t: ["evaluate", "--checkpoint", nan_checkpoint(w, t)],
      "holds NaN"),
    S("pickle payload in pytorch_model.bin", lambda w, t: [
        "evaluate", "--checkpoint", pickle_payload(w, t)], "pytorch_model.bin"),
    S("config.json not JSON", lambda w, t: ["evaluate", "--checkpoint", _bad_config(w, t, "{")],
      "config.json"),
    S("config.json of another version", lambda w, t: [
        "evaluate", "--checkpoint", _bad_config(w, t, None)], "version 99"),
    S("trainer_state.pt damaged, resume", lambda w, t: [
        "pretrain", *TINY, "--max-steps", "8", "--out", _bad_state(w, t), "--resume"],
      "every checkpoint"),
    S("evaluate corpus missing", lambda w, t: ["evaluate", "--checkpoint", w.ckpt, "--corpus",
                                               t / "nope.txt"], "nope.txt"),
    S("evaluate max-examples 0", lambda w, t: ["evaluate", "--checkpoint", w.ckpt,
                                               "--max-examples", "0"], "max_examples"),
    # ------------------------------------------------------------------------- finetune
    S("max-train-examples 0", lambda w, t: reviews(w, "--max-train-examples", "0"),
      "--max-train-examples"),
    S("max-train-examples negative", lambda w, t: reviews(w, "--max-train-examples", "-5"),
      "--max-train-examples"),
    S("seeds 0", lambda w, t: reviews(w, "--seeds", "0"), "--seeds"),
    S("unknown GLUE task", lambda w, t: ["finetune", "--checkpoint", w.run, "--task", "sst3"],
      "sst3"),
    S("train file missing", lambda w, t: finetune_files(w, t / "nope.csv"), "nope.csv"),
    S("train without dev", lambda w, t: ["finetune", "--checkpoint", w.run, "--train",
                                         FIXTURES / "reviews_train.csv"], "--dev"),
    S("task and train together", lambda w, t: ["finetune", "--checkpoint", w.run, "--task",
                                               "sst2", "--train", REVIEWS_DEV, "--dev",
                                               REVIEWS_DEV], "--task"),
    S("no label column", lambda w, t: finetune_files(
        w, csv_file(t, "t.csv", "text,stars\na,1\nb,2\n")), "t.csv: line 2: no label column"),
    S("renamed text column absent", lambda w, t: reviews(w, "--text-column", "review"),
      "'review'"),
    S("empty train file", lambda w, t: finetune_files(w, csv_file(t, "t.csv", "")),
      "t.csv: the file is empty"),
    S("header only", lambda w, t: finetune_files(w, csv_file(t, "t.csv", "text,label\n")),
      "t.csv: a header but no data rows"),
    S("header names a column twice", lambda w, t: finetune_files(
        w, csv_file(t, "t.csv", "text,text,label\ngood,bad,1\nbad,good,0\n")),
      "t.csv: line 1: the header names column 'text' twice"),
    S("TSV header names a column twice", lambda w, t: finetune_files(
        w, csv_file(t, "t.tsv", "text\tlabel\tlabel\ngood\t1\t0\nbad\t0\t1\n")),
      "t.tsv: line 1: the header names column 'label' twice"),
    S("JSONL object names a key twice", lambda w, t: finetune_files(
        w, csv_file(t, "t.jsonl", '{"text": "a", "label": 1}\n'
                    '{"text": "b", "text": "c", "label": 0}\n')),
      "t.jsonl: line 2: the object names 'text' twice"),
    S("empty text cell", lambda w, t: finetune_files(
        w, csv_file(t, "t.csv", "text,label\ngood,1\n,0\nbad,0\n")),
      "t.csv: line 3, column 'text': the text is empty"),
    S("blank text cell in dev", lambda w, t: finetune_files(
        w, FIXTURES / "reviews_train.csv", csv_file(t, "d.csv", "text,label\nfine,positive\n"
                                                    "   ,negative\n")),
      "d.csv: line 3, column 'text': the text is empty"),
    S("empty pair text", lambda w, t: finetune_files(
        w, csv_file(t, "t.csv", "text,text_pair,label\na,b,1\nc,,0\n")),
      "t.csv: line 3, column 'text_pair': the text is empty"),
    S("a folder as --train", lambda w, t: finetune_files(w, t), ": a folder, not a file"),
    S("text and label the same column", lambda w, t: reviews(w, "--text-column", "label"),
      "--text-column and --label-column both name the column 'label'"),
    S("text pair the text column", lambda w, t: reviews(w, "--text-pair-column", "text"),
      "--text-column and --text-pair-column both name the column 'text'"),
    S("a SQuAD 2.0 file for --task squad", lambda w, t: _squad(w, t, "squad", "v2.0"),
      "is SQuAD 2.0, but --task squad is SQuAD 1.1: use --task squad_v2"),
    S("a SQuAD 1.1 file for --task squad_v2", lambda w, t: _squad(w, t, "squad_v2", "1.1"),
      "is SQuAD 1.1, but --task squad_v2 is SQuAD 2.0: use --task squad"),
    S("glue --tasks naming one twice", lambda w, t: ["glue", "--checkpoint", w.run, "--tasks",
                                                     "sst2", "rte", "sst2"],
      "--tasks names sst2 twice"),
    S("train UTF-16", lambda w, t: finetune_files(
        w, csv_file(t, "t.csv", "text,label\ngood,1\nbad,0\n".encode("utf-16"))),
      "t.csv: UTF-16 text"),
    S("dev label unseen in training", lambda w, t: finetune_files(
        w, FIXTURES / "reviews_train.csv", csv_file(t, "d.csv", "text,label\na,positive\n"
                                                    "b,neutral\n")),
      "d.csv: line 3, column 'label': label 'neutral'"),
    S("train not UTF-8", lambda w, t: finetune_files(
        w, csv_file(t, "t.csv", b"text,label\ngood,1\nbad \xff\xfe,0\n")),
      "t.csv: line 3, column 5"),
    S("train binary", lambda w, t: finetune_files(
        w, csv_file(t, "t.csv", b"\x00\x01\x02" * 100)), "t.csv: a binary file"),
    S("unknown extension", lambda w, t: finetune_files(w, csv_file(t, "t.txt", "a,b\n")),
      "t.txt: unknown format"),
    S("row with too many fields", lambda w, t: finetune_files(
        w, csv_file(t, "t.csv", "text,label\na,1\nb,0,extra\n")), "t.csv: line 3: 3 fields"),
    S("empty label", lambda w, t: finetune_files(
        w, csv_file(t, "t.csv", "text,label\na,1\nb,\n")), "t.csv: line 3, column 'label'"),
    S("JSONL line not JSON", lambda w, t: finetune_files(
        w, csv_file(t, "t.jsonl", '{"text": "a", "label": 1}\n{"text": "b", label: 0}\n')),
      "t.jsonl: line 2, column"),
    S("JSONL line not an object", lambda w, t: finetune_files(
        w, csv_file(t, "t.jsonl", '{"text": "a", "label": 1}\n[1, 2]\n')),
      "t.jsonl: line 2: a JSON list"),
    S("regression label not a number", lambda w, t: reviews(w, "--regression"),
      "reviews_train.csv: line 2, column 'label': label 'positive' is not a number"),
    S("one class only", lambda w, t: finetune_files(
        w, csv_file(t, "t.csv", "text,label\na,yes\nb,yes\n")), "at least two classes"),
    S("mistyped finetune key", lambda w, t: reviews(w, "--set", "finetune.learnig_rate=1"),
      "did you mean finetune.learning_rate"),
    S("head dropout out of range", lambda w, t: reviews(w, "--set",
                                                        "finetune.head_dropout=1.5"),
      "finetune.head_dropout"),
    S("GLUE label outside the task's", lambda w, t: [
        "finetune", "--checkpoint", w.run, "--task", "sst2"],
      "SST-2/train.tsv: line 3, column 2: SST-2 label '2'",
      lambda m, w, t: m.setenv("MINIELECTRA_DATA_DIR", str(bad_glue(
          t, "SST-2", "sentence\tlabel\ngood\t1\nodd\t2\n")))),
    S("STS-B score not a number", lambda w, t: ["finetune", "--checkpoint", w.run, "--task",
                                                "stsb"],
      "STS-B/train.tsv: line 2, column 10: STS-B label 'high'",
      lambda m, w, t: m.setenv("MINIELECTRA_DATA_DIR", str(bad_glue(
          t, "STS-B", "h\th\th\th\th\th\th\ts1\ts2\tscore\n0\t0\t0\t0\t0\t0\t0\ta\tb\thigh\n")))),
    S("GLUE offline without a data dir", lambda w, t: ["finetune", "--checkpoint", w.run,
                                                       "--task", "sst2"], "hub is unreachable",
      lambda m, w, t: (m.delenv("MINIELECTRA_DATA_DIR"), offline(m))),
    S("glue offline, no task's data", lambda w, t: ["glue", "--checkpoint", w.run, "--tasks",
                                                    "sst2", "rte"], "no GLUE task has its data",
      lambda m, w, t: (m.delenv("MINIELECTRA_DATA_DIR"), offline(m))),
    S("hub dataset offline", lambda w, t: ["finetune", "--checkpoint", w.run, "--task",
                                           "hf:someone/reviews"], "hub is unreachable",
      lambda m, w, t: offline(m)),
    S("column flags with a GLUE task", lambda w, t: ["finetune", "--checkpoint", w.run, "--task",
                                                     "sst2", "--label-column", "y"],
      "--label-column"),
    S("finetune --out is a file", lambda w, t: reviews(w, "--out", write(t / "f", "x"), *FAST_FT),
      "/f: --out is a file"),
    S("checkpoint is no checkpoint", lambda w, t: finetune_files(
        w, FIXTURES / "reviews_train.csv")[:2] + [t] + finetune_files(
        w, FIXTURES / "reviews_train.csv")[3:], "not a checkpoint directory"),
    # -------------------------------------------------------------------------- predict
    S("model dir missing", lambda w, t: ["predict", "--model", t / "nope", "hello"], "nope"),
    S("predict file binary", lambda w, t: ["predict", "--model", w.model, "--file",
                                           write(t / "in.txt", b"\x00\x01" * 50)],
      "in.txt: a binary file"),
    S("predict file not UTF-8", lambda w, t: ["predict", "--model", w.model, "--file",
                                              write(t / "in.txt", b"fine\nbad \xc3\n")],
      "in.txt: line 2, column 5"),
    S("predict file empty", lambda w, t: ["predict", "--model", w.model, "--file",
                                          write(t / "in.txt", "\n\n")], "in.txt: no input"),
    S("predict file with three fields", lambda w, t: ["predict", "--model", w.model, "--file",
                                                      write(t / "in.txt", "a\tb\tc\n")],
      "in.txt: line(s) [1]"),
    S("finetune.json damaged", lambda w, t: ["predict", "--model", _bad_meta(w, t), "hello"],
      "finetune.json: damaged"),
    S("fine-tuned weights truncated", lambda w, t: ["predict", "--model", _cut_model(w, t),
                                                    "hello"], "model.safetensors"),
    S("a pair for a single-sentence task", lambda w, t: ["predict", "--model", w.model, "-"],
      "input 0 is a pair",
      lambda m, w, t: m.setattr("sys.stdin", io.StringIO("a\tb\n"))),
    S("neither sentences nor --file", lambda w, t: ["predict", "--model", w.model],
      "--file"),
    # -------------------------------------------------------------------------- convert
    S("convert from a missing dir", lambda w, t: ["convert", "--from-hf", t / "nope", "--out",
                                                  t / "out"], "nope"),
    S("convert a non-checkpoint", lambda w, t: ["convert", "--to-hf", write(t / "d" / "x", "")
                                                .parent, "--out", t / "out"], "/d"),
    # -------------------------------------------------------------------- checksums.json
    S("a sum naming a file outside the checkpoint", lambda w, t: [
        "evaluate", "--checkpoint", _sum_outside(w, t, "../secret.bin")],
      "entry '../secret.bin' names a file outside"),
    S("a sum naming an absolute path", lambda w, t: [
        "evaluate", "--checkpoint", _sum_outside(w, t, str(t / "secret.bin"))],
      "names a file outside"),
    S("a sum naming a link out of the checkpoint", lambda w, t: [
        "evaluate", "--checkpoint", _sum_outside(w, t, "linked.bin")],
      "entry 'linked.bin' names a file outside"),
    S("a resume whose sums name a file outside", lambda w, t: [
        "pretrain", *TINY, "--max-steps", "8", "--out", _run_sum_outside(w, t), "--resume"],
      "every checkpoint"),
    S("sums that are a list", lambda w, t: ["evaluate", "--checkpoint", _sums_list(w, t)],
      "checksums.json: damaged"),
]


def _sum_outside(w, t, name: str, ckpt: Path | None = None) -> Path:
    """A checkpoint whose checksums.json also names ``name``, a file outside it, with its true
    sum: hashed, it would match."""
    from minielectra.data.files import file_sha256
    ckpt = ckpt or copy_ckpt(w, t)
    secret = write(t / "secret.bin", b"not yours to read")
    digest = file_sha256(secret)
    if name == "linked.bin":
        (ckpt / name).symlink_to(secret)
    sums = json.loads((ckpt / "checksums.json").read_text())
    sums["sha256"][name] = digest
    (ckpt / "checksums.json").write_text(json.dumps(sums))
    return ckpt


def _run_sum_outside(w, t):
    run = _back_to_step_4(w, t)
    _sum_outside(w, t, "../../../secret.bin", run / "checkpoints" / "step_0000004")
    return run


def _squad(w, t, task: str, version: str) -> list:
    from test_squad import fixture_file
    data = fixture_file(t / "squad.json", version)
    return ["finetune", "--checkpoint", w.run, "--task", task, "--train", data, "--dev", data]


def _sums_list(w, t):
    ckpt = copy_ckpt(w, t)
    (ckpt / "checksums.json").write_text('{"sha256": ["model.safetensors"]}')
    return ckpt


def _damage_all(w, t):
    run = copy_run(w, t)
    for ckpt in (run / "checkpoints").glob("step_*"):
        truncate(ckpt / "model.safetensors")
    return run


def _back_to_step_4(w, t):
    """A copy of the run as it was at step 4: resuming it writes step 8 again."""
    run = copy_run(w, t)
    shutil.rmtree(run / "checkpoints" / "step_0000008")
    return run


def _bad_state(w, t):
    run = copy_run(w, t)
    for ckpt in (run / "checkpoints").glob("step_*"):
        truncate(ckpt / "trainer_state.pt")
    return run


def _disk_full(model, filename, **kwargs):
    Path(filename).write_bytes(b"\0" * 64)  # part of the file, then the disk is full
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), filename)


def _hold_lock(monkeypatch, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    lock = FolderLock(out).acquire()  # as a run holds its folder
    monkeypatch.setattr(sys.modules[__name__], "_HELD", lock, raising=False)  # closed at undo


def _truncated(w, t, sums=True):
    ckpt = copy_ckpt(w, t)
    truncate(ckpt / "model.safetensors")
    if not sums:
        (ckpt / "checksums.json").unlink()
    return ckpt


def _flipped(w, t):
    ckpt = copy_ckpt(w, t)
    data = bytearray((ckpt / "model.safetensors").read_bytes())
    data[-50] ^= 0x55
    (ckpt / "model.safetensors").write_bytes(data)
    return ckpt


def _cut_vocab(w, t):
    ckpt = copy_ckpt(w, t)
    lines = (ckpt / "vocab.txt").read_text().splitlines()
    (ckpt / "vocab.txt").write_text("\n".join(lines[:100]) + "\n")
    return ckpt


def _bad_config(w, t, text):
    ckpt = copy_ckpt(w, t)
    if text is None:
        config = json.loads((ckpt / "config.json").read_text())
        text = json.dumps({**config, "version": 99})
    (ckpt / "config.json").write_text(text)
    return ckpt


def _bad_meta(w, t):
    shutil.copytree(w.model, t / "model")
    (t / "model" / "finetune.json").write_text('{"task": "reviews_train.csv", ')
    return t / "model"


def _cut_model(w, t):
    shutil.copytree(w.model, t / "model")
    truncate(t / "model" / "model.safetensors")
    return t / "model"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_bad_input_gets_one_line_naming_the_culprit(scenario, env, tmp_path, capsys,
                                                    monkeypatch):
    before = tree_sums(env.root / "run") | tree_sums(env.root / "model")
    if scenario.patch is not None:
        scenario.patch(monkeypatch, env, tmp_path)
    argv = scenario.argv(env, tmp_path)
    code, _, err = run_cli(capsys, *argv)
    errors = [line for line in err.splitlines() if " error: " in line]
    assert code == 2, err
    assert len(errors) == 1 and scenario.culprit in errors[0], err
    assert "Traceback" not in err
    assert not (tmp_path / "PWNED").exists()  # the pickle payload was refused, never run
    assert tree_sums(env.root / "run") | tree_sums(env.root / "model") == before
    if scenario.name == "dropout out of range":  # refused before any work: no run dir made
        assert not (tmp_path / "never").exists()


def test_the_battery_counts(record_property):
    """The README's figure: how many scenarios the battery holds."""
    record_property("scenarios", len(SCENARIOS))
    assert len(SCENARIOS) >= 60 and len({s.name for s in SCENARIOS}) == len(SCENARIOS)


# ------------------------------------------------------- interruptions, locks and fallbacks


def weights(ckpt: Path) -> dict[str, torch.Tensor]:
    return load_file(ckpt / "model.safetensors")


def assert_same_weights(a: Path, b: Path) -> None:
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_ctrl_c_in_a_step_saves_the_last_step_and_resume_is_bit_identical(env, tmp_path,
                                                                            capsys, monkeypatch):
    from minielectra.training import loop
    real, calls = loop.train_step, []

    def interrupted_in_step_6(*args, **kwargs):
        calls.append(1)
        if len(calls) == 6:
            raise KeyboardInterrupt  # as Ctrl-C would arrive inside a step
        return real(*args, **kwargs)
    argv = ["pretrain", *TINY, "--max-steps", "8", "--out", tmp_path / "run"]
    monkeypatch.setattr(loop, "train_step", interrupted_in_step_6)
    code, _, err = run_cli(capsys, *argv)
    assert code == 130 and "Traceback" not in err
    (line,) = [x for x in err.splitlines() if "interrupted" in x]
    saved = tmp_path / "run" / "checkpoints" / "step_0000005"
    assert f"interrupted at step 5; checkpoint saved to {saved}; continue with: minielectra " \
           f"pretrain " in line and line.endswith(" --resume")
    monkeypatch.setattr(loop, "train_step", real)
    code, _, err = run_cli(capsys, *argv, "--resume")
    assert code == 0, err
    assert f"minielectra evaluate --checkpoint {tmp_path / 'run'}" in err  # what to run next
    # The interrupted-and-resumed run ends where the straight run (the world's) ended.
    assert_same_weights(tmp_path / "run" / "checkpoints" / "step_0000008", env.ckpt)


def test_resume_falls_back_to_the_newest_intact_checkpoint(env, tmp_path, capsys, caplog):
    run = copy_run(env, tmp_path)
    truncate(run / "checkpoints" / "step_0000008" / "model.safetensors")
    code, _, err = run_cli(capsys, "pretrain", *TINY, "--max-steps", "8", "--out", run,
                           "--resume")
    assert code == 0, err
    assert "step_0000008 is damaged" in caplog.text and "model.safetensors" in caplog.text
    assert (run / "checkpoints" / "step_0000008.damaged").is_dir()  # set aside, kept
    assert_same_weights(run / "checkpoints" / "step_0000008", env.ckpt)  # redone from step 4


def _wait_for(predicate, proc, log, seconds=300.0):
    deadline = time.monotonic() + seconds
    while not predicate():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            log.seek(0)
            pytest.fail(f"the run ended or never started: {log.read()[-2000:]}")
        time.sleep(0.2)


@pytest.mark.slow
def test_a_second_run_is_refused_and_ctrl_c_saves_a_real_run(env, tmp_path, capsys):
    """Two processes: the first holds the run dir; Ctrl-C (a real SIGINT) stops it cleanly."""
    out = tmp_path / "run"
    # stderr goes to a file: the progress bar of a long run would fill a pipe and block the
    # child. SIGINT is reset to its default in the child: a shell that starts this test suite in
    # the background (`cmd &` without job control) makes children ignore SIGINT, and Python then
    # installs no KeyboardInterrupt handler at all.
    log = open(tmp_path / "stderr.txt", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "minielectra", "pretrain", *TINY,
                             "--max-steps", "100000", "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=log, text=True,
                            env=dict(os.environ),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    metrics = out / "metrics.jsonl"
    _wait_for(lambda: metrics.is_file() and metrics.read_text().count("\n") >= 2, proc,
              log=log)
    code, _, err = run_cli(capsys, "pretrain", *TINY, "--max-steps", "8", "--out", out)
    assert code == 2 and f"is in use by another run (pid {proc.pid} on " in err
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=300)
    finally:
        proc.kill()
    log.seek(0)
    err = log.read()
    assert proc.returncode == 130 and "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("minielectra pretrain: interrupted at step ") and \
        last.endswith(f"--out {out} --resume")
    step = int(last.split("interrupted at step ")[1].split(";")[0])
    from minielectra import Electra
    Electra.from_pretrained(out / "checkpoints" / f"step_{step:07d}")  # whole, and loads
    FolderLock(out).acquire().close()  # the lock went with the process


def test_offline_hub_fails_at_once_in_one_line(tmp_path):
    """The real thing, in a fresh process: no data dir, HF_HUB_OFFLINE set."""
    env = {k: v for k, v in os.environ.items() if k != "MINIELECTRA_DATA_DIR"}
    env.update(HF_HUB_OFFLINE="1", MINIELECTRA_CACHE=str(tmp_path / "cache"))
    for argv in (["finetune", "--checkpoint", "bundled", "--task", "sst2"],
                 ["evaluate", "--checkpoint", "bundled", "--corpus", "wikitext-2"]):
        done = subprocess.run([sys.executable, "-m", "minielectra", *argv], env=env, text=True,
                              capture_output=True, timeout=120)
        errors = [x for x in done.stderr.splitlines() if " error: " in x]
        assert done.returncode == 2 and len(errors) == 1, done.stderr
        assert "hub is unreachable (HF_HUB_OFFLINE is set)" in errors[0]
        assert "MINIELECTRA_DATA_DIR" in errors[0] and "Retrying" not in done.stderr


# ---------------------------------------------------- what used to fail and now works


def test_evaluate_takes_a_transformers_dir_with_only_pytorch_model_bin(env, tmp_path, capsys):
    cli.main(["convert", "--to-hf", str(env.ckpt), "--out", str(tmp_path / "st")])
    shutil.copytree(tmp_path / "st", tmp_path / "bin")
    for part in ("discriminator", "generator"):
        d = tmp_path / "bin" / part
        torch.save(load_file(d / "model.safetensors"), d / "pytorch_model.bin")
        (d / "model.safetensors").unlink()
    capsys.readouterr()
    results = []
    for variant in ("bin", "st"):
        code, out, err = run_cli(capsys, "evaluate", "--checkpoint", tmp_path / variant,
                                 "--corpus", CORPUS, "--split", "all")
        assert code == 0, err
        results.append(json.loads(out))
    assert results[0]["disc_auc"] == results[1]["disc_auc"] and results[0]["split"] == "all"


def test_evaluate_split_all_scores_every_document(env, capsys):
    from minielectra.data.corpus import open_corpus
    counts = {}
    for split in ("heldout", "train", "all"):
        code, out, err = run_cli(capsys, "evaluate", "--checkpoint", env.ckpt, "--split", split)
        assert code == 0, err
        counts[split] = json.loads(out)["examples"]
    # held-out and training documents are disjoint and together the whole file
    docs = list(open_corpus(str(CORPUS)).documents())
    assert counts["heldout"] < counts["all"] and counts["train"] < counts["all"] and len(docs) > 2
    assert counts["heldout"] + counts["train"] >= counts["all"] - 2  # packing at the edges


def test_bundled_evaluates_without_a_data_dir_on_pydocs(monkeypatch, capsys, caplog):
    monkeypatch.delenv("MINIELECTRA_DATA_DIR", raising=False)
    code, out, err = run_cli(capsys, "evaluate", "--checkpoint", "bundled", "--max-examples", 64)
    assert code == 0, err
    result = json.loads(out)
    assert result["corpus"] == "pydocs" and "'pydocs' instead" in caplog.text
    from minielectra.training.evaluate import evaluate
    explicit = evaluate("bundled", corpus="pydocs", max_examples=64)
    assert result["disc_auc"] == explicit["disc_auc"] and result["disc_auc"] > 0.7


def test_an_interrupted_experiment_names_a_command_that_parses(tmp_path, capsys, monkeypatch):
    """`experiment` resumes its runs by running the same command: the line after Ctrl-C (or
    SIGTERM) must not add `--resume`, which it has no option for."""
    def interrupted(args):
        e = KeyboardInterrupt(f"interrupted at step 7; checkpoint saved to {tmp_path}")
        e.checkpoint = tmp_path
        raise e
    monkeypatch.setattr(cli, "cmd_experiment", interrupted)
    argv = ["experiment", "table5", "--budget", "8", "--out", str(tmp_path)]
    code, _, err = run_cli(capsys, *argv)
    (line,) = [x for x in err.splitlines() if "continue with" in x]
    again = shlex.split(line.split("continue with: ")[1])
    assert code == 130 and again[1:] == argv  # the same command, nothing added
    cli.build_parser().parse_args(again[1:])  # and it parses

