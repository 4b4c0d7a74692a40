"""choose_device: the lessons' one device choice (CUDA if present, else the CPU)."""

import pytest
import torch

from minielectra.config import RunConfig, apply_overrides
from minielectra.training.device import choose_device, resolve_device


def test_cpu_when_no_gpu_and_the_overrides_put_a_run_there(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    choice = choose_device()
    assert (choice.device.type, choice.precision) == ("cpu", "fp32")
    assert "CPU" in choice.summary
    cfg = apply_overrides(RunConfig(), choice.overrides)
    assert resolve_device(cfg.train) == torch.device("cpu") and cfg.train.precision == "fp32"


@pytest.mark.parametrize("bf16, expected", [(True, "bf16"), (False, "fp16")])
def test_a_gpu_gets_bf16_where_supported_else_fp16(monkeypatch, bf16, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: bf16)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "Test GPU")
    choice = choose_device()
    assert (choice.device.type, choice.precision) == ("cuda", expected)
    assert "Test GPU" in choice.summary and expected in choice.summary
    assert choose_device("cpu").device.type == "cpu"  # the committed outputs are the CPU's


def test_bad_preference_and_missing_gpu_are_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="prefer must be"):
        choose_device("tpu")
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        choose_device("cuda")
