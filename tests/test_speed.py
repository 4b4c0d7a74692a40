"""Speed by design, checked where it can be on a CPU: what would stall a GPU step.

- **Host syncs per training step: 0.** A read of a tensor's value on the host (``.item()``,
  ``bool()``, ``float()``, ``.tolist()``, and inside torch the ops that need one: nonzero,
  masked_select, ...) makes the CPU wait until the GPU has finished, emptying its queue. The real
  loop runs with every such read counted, except inside the places that read on purpose (log
  lines, the NaN check, evaluation, checkpoints), which come every ``log_every`` steps. On a CPU
  the reads are counted by patching the tensor methods and by a dispatch mode that sees every op
  (``_local_scalar_dense`` is what all scalar reads become); with CUDA present the same run goes
  through ``torch.cuda.set_sync_debug_mode("error")``, which raises on any sync.
- **One compiled graph per run**, no graph break, no recompile through evaluations and
  checkpoints (dynamo's own counters; ``aot_eager`` traces exactly what inductor would get).
- **The generator's vocabulary logits only at masked positions**: no (b*n, v) product is ever
  computed in a step (the ops' shapes, seen by a dispatch mode).
"""

import contextlib
import os

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from minielectra.config import apply_overrides, preset
from minielectra.model.electra import max_predictions
from minielectra.training import loop
from minielectra.training.optim import build_optimizer
from minielectra.training.step import MetricsLog, NanGuard

aten = torch.ops.aten
# Ops whose result size or value the host must know: each waits for the device.
SYNC_OPS = {aten._local_scalar_dense.default, aten.nonzero.default, aten.masked_select.default,
            aten.is_nonzero.default, aten.equal.default, aten._unique2.default,
            aten.unique_consecutive.default, aten.unique_dim.default,
            aten.repeat_interleave.Tensor, aten.allclose.default}
READS = ("item", "tolist", "__bool__", "__float__", "__int__", "__index__")


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory, write_tiny_corpus):
    return write_tiny_corpus(tmp_path_factory.mktemp("corpus") / "tiny.txt")


def tiny(corpus_file, out, *overrides):
    return apply_overrides(preset("tiny"), [
        f"data.corpus={corpus_file}", f"data.cache_dir={out.parent / 'cache'}",
        "train.max_steps=8", "train.log_every=10", f"train.out_dir={out}", *overrides])


class SyncCounter(TorchDispatchMode):
    """Counts host reads while ``armed``; the loop's deliberate read points disarm it."""

    def __init__(self):
        super().__init__()
        self.armed, self.found = False, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.armed and func in SYNC_OPS:
            self.found.append(str(func))
        return func(*args, **(kwargs or {}))

    @contextlib.contextmanager
    def disarmed(self):
        armed, self.armed = self.armed, False
        try:
            yield
        finally:
            self.armed = armed


def allow_reads_in(monkeypatch, disarm):
    """The loop's deliberate read points run with counting switched off."""
    for owner, name in ((MetricsLog, "flush"), (NanGuard, "check"), (loop.Run, "evaluate"),
                        (loop.Run, "checkpoint"), (loop.Run, "finish")):
        real = getattr(owner, name)

        def wrapped(*args, _real=real, **kw):
            with disarm():
                return _real(*args, **kw)
        monkeypatch.setattr(owner, name, wrapped)


@pytest.fixture
def gpu_optimizer(monkeypatch):
    """The GPU's optimiser (torch's fused AdamW, which runs on a CPU too). The CPU's readable
    optimiser reads its CPU-resident step count, which is no GPU sync but would count here."""
    monkeypatch.setattr(loop, "build_optimizer",
                        lambda model, t, device: build_optimizer(model, t, torch.device("cuda")))


def test_a_training_step_makes_no_host_sync(corpus_file, tmp_path, monkeypatch, gpu_optimizer):
    """The real loop: 8 steps, log lines and NaN checks every 4, an evaluation and a checkpoint
    every 4; no read in between."""
    counter = SyncCounter()
    steps = {"n": 0}

    def note(*args, **kw):
        counter.found.append("a Tensor read: " + "".join(f"{a!r}"[:60] for a in args[1:]))
        raise AssertionError("host read in a training step")

    real_train = loop.Run.train

    def counted_train(self, until_step=None):
        with counter, monkeypatch.context() as m:
            for name in READS:
                real = getattr(torch.Tensor, name)

                def guarded(tensor, *a, _real=real, **kw):
                    if counter.armed:
                        note(tensor, *a)
                    return _real(tensor, *a, **kw)
                m.setattr(torch.Tensor, name, guarded)
            counter.armed = True
            try:
                return real_train(self, until_step)
            finally:
                counter.armed = False

    real_step = loop.train_step

    def counting_step(*args, **kw):
        steps["n"] += 1
        return real_step(*args, **kw)

    monkeypatch.setattr(loop.Run, "train", counted_train)
    monkeypatch.setattr(loop, "train_step", counting_step)
    allow_reads_in(monkeypatch, counter.disarmed)
    loop.pretrain(tiny(corpus_file, tmp_path / "run", "train.log_every=4", "train.eval_every=4",
                       "train.save_every=4"), progress=False)
    assert steps["n"] == 8
    assert counter.found == [], counter.found[:5]


def test_the_counter_sees_a_read_when_there_is_one(corpus_file, tmp_path, monkeypatch,
                                                   gpu_optimizer):
    """The check above can fail: a loss read at every step (the classic ``loss.item()``) is
    found."""
    real_step = loop.train_step
    monkeypatch.setattr(loop, "train_step",
                        lambda *a, **kw: (lambda s: (s["loss"].item(), s)[1])(real_step(*a, **kw)))
    counter = SyncCounter()
    real_train = loop.Run.train

    def counted_train(self, until_step=None):
        with counter:
            counter.armed = True
            return real_train(self, until_step)
    monkeypatch.setattr(loop.Run, "train", counted_train)
    allow_reads_in(monkeypatch, counter.disarmed)
    loop.pretrain(tiny(corpus_file, tmp_path / "run", "train.max_steps=3"), progress=False)
    assert counter.found.count("aten._local_scalar_dense.default") == 3


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (sync debug mode)")
def test_a_training_step_makes_no_cuda_sync(corpus_file, tmp_path, monkeypatch):
    @contextlib.contextmanager
    def disarm():
        torch.cuda.set_sync_debug_mode(0)
        try:
            yield
        finally:
            torch.cuda.set_sync_debug_mode("error")
    real_train = loop.Run.train

    def strict_train(self, until_step=None):
        torch.cuda.set_sync_debug_mode("error")
        try:
            return real_train(self, until_step)
        finally:
            torch.cuda.set_sync_debug_mode(0)
    monkeypatch.setattr(loop.Run, "train", strict_train)
    allow_reads_in(monkeypatch, disarm)
    summary = loop.pretrain(tiny(corpus_file, tmp_path / "run", "train.device=cuda",
                                 "train.precision=bf16", "train.log_every=4",
                                 "train.eval_every=4", "train.save_every=4"), progress=False)
    # Any sync inside a step would have raised; the run went through every read point too.
    assert summary["step"] == 8 and summary["stopped_by"] == "max_steps"


def test_one_compiled_graph_per_run(corpus_file, tmp_path, monkeypatch):
    """Masking and sampling draw from the global RNG inside the graph (an explicit generator
    would break it at each draw); 8 steps with evaluations and checkpoints compile 1 graph."""
    dynamo = pytest.importorskip("torch._dynamo")
    from torch._dynamo.utils import counters

    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile",
                        lambda model, **kw: real_compile(model, backend="aot_eager", **kw))
    dynamo.reset()
    counters.clear()
    try:
        with dynamo.config.patch(error_on_recompile=True):
            loop.pretrain(tiny(corpus_file, tmp_path / "run", "train.compile=true",
                               "train.eval_every=3", "train.save_every=4"), progress=False)
        graphs, breaks = counters["stats"]["unique_graphs"], dict(counters["graph_break"])
    finally:
        dynamo.reset()
    assert breaks == {}, list(breaks)[:2]
    assert graphs == 1


class Shapes(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.outputs = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in (aten.mm.default, aten.addmm.default, aten.bmm.default) or \
                "cpu_matmul" in str(func):  # minielectra's oneDNN product (model/cpu.py)
            self.outputs.append(tuple(out.shape))
        return out


def test_generator_vocabulary_logits_only_at_masked_positions(tiny_model_config):
    """The (., v) products of a step have b*p rows (p masked slots per sequence), never b*n."""
    from minielectra.model.electra import Electra
    from minielectra.objectives.compute import compute
    cfg = tiny_model_config(vocab_size=97)
    model = Electra(cfg)
    b, n = 4, 32
    ids = torch.randint(5, 97, (b, n))
    ids[:, 0], ids[:, -1] = 2, 3
    with Shapes() as shapes:
        out = compute(model, ids, torch.ones_like(ids), torch.zeros_like(ids))
        out.loss.backward()
    p = max_predictions(n, model.objective.mask_prob)
    vocab_rows = [rows for rows, cols in (s[-2:] for s in shapes.outputs) if cols == 97]
    # b*p rows in the forward and dx products; the weight gradient's product (e, v) sums them
    assert b * p in vocab_rows and b * n not in vocab_rows, (vocab_rows, b * p, b * n)
    assert set(vocab_rows) <= {b * p, cfg.embedding_size}, vocab_rows


@pytest.mark.skipif(not os.environ.get("MINIELECTRA_TEST_INDUCTOR"),
                    reason="inductor's C++ code generation takes ~45 s on 2 cores; "
                           "set MINIELECTRA_TEST_INDUCTOR=1 to run it")
def test_one_inductor_graph_per_run(corpus_file, tmp_path):
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    loop.pretrain(tiny(corpus_file, tmp_path / "run", "train.compile=true", "train.max_steps=3"),
                  progress=False)
    assert counters["stats"]["unique_graphs"] == 1 and not counters["graph_break"]


def test_prefetch_serves_the_same_batches_in_order_and_raises_errors():
    """Data loading overlapped with the step (a thread gathers ahead): nothing else changes."""
    from minielectra.data.dataset import prefetch

    def batches(fail_at=None):
        for i in range(7):
            if i == fail_at:
                raise ValueError("shard 3 is damaged")
            yield {"input_ids": torch.full((2, 3), i)}
    got = [b["input_ids"][0, 0].item() for b in prefetch(batches(), depth=2)]
    assert got == list(range(7))
    with pytest.raises(ValueError, match="shard 3"):
        list(prefetch(batches(fail_at=3)))


def test_gpu_presets_default_to_bf16_and_compile_on_a_gpu_only(monkeypatch):
    """`pretrain --preset small` on a GPU: bf16 autocast + torch.compile, unless the command line
    says otherwise; fp32 where the GPU lacks bf16; a CPU run (or `--device cpu`) keeps fp32 and
    compiles by the measured rule (a million steps: yes; nano's 2,000: no)."""
    from minielectra import cli, commands

    from minielectra.training import device as device_mod

    def config(*argv, gpu=True, bf16=True, cpu_bf16=False):
        monkeypatch.setattr(commands, "_on_gpu", lambda device: gpu and device != "cpu")
        monkeypatch.setattr(commands, "_bf16_ok", lambda: bf16)
        monkeypatch.setattr(device_mod, "cpu_bf16_missing",
                            lambda: None if cpu_bf16 else "no native bfloat16")
        t = cli.pretrain_config(cli.build_parser().parse_args(["pretrain", *argv])).train
        return t.precision, t.compile
    assert config("--preset", "small") == ("bf16", True)
    assert config("--preset", "base") == ("bf16", True)
    assert config("--preset", "small", bf16=False) == ("fp32", True)
    assert config("--preset", "small", "--precision", "fp16") == ("fp16", True)
    assert config("--preset", "small", "--set", "train.compile=false") == ("bf16", False)
    assert config("--preset", "small", "--device", "cpu") == ("fp32", True)
    assert config("--preset", "small", gpu=False) == ("fp32", True)
    assert config("--preset", "nano") == ("fp32", False)  # the CPU presets stay as they are
    # a CPU with native bf16: a run of a minute or more takes it, unless told; a short one not
    cpu = dict(gpu=False, cpu_bf16=True)
    assert config("--preset", "nano", **cpu) == ("bf16", False)
    assert config("--preset", "small", **cpu) == ("bf16", True)
    assert config("--preset", "nano", "--precision", "fp32", **cpu) == ("fp32", False)
    assert config("--preset", "nano", "--max-steps", "20", **cpu) == ("fp32", False)
    assert config("--preset", "tiny", **cpu) == ("fp32", False)
