"""The official optimiser and schedule (minielectra.training.optim).

Every reference is independent of the code under test: the schedule against its closed form, the
optimiser against the update written out by hand with plain tensors (and torch.optim.AdamW),
a resumed optimiser against an uninterrupted one.
"""

import pytest
import torch
from torch import nn

from minielectra.config import TrainConfig
from minielectra.model.electra import Electra
from minielectra.training.optim import (AdamWeightDecay, build_optimizer, load_optimizer_state,
                                        lr_at, official_adam_hparams, param_groups)

# ------------------------------------------------------------------------------ schedule


@pytest.mark.parametrize("warmup", [0, 10])
def test_official_schedule_closed_form(warmup):
    t = TrainConfig(learning_rate=1e-3, max_steps=100, warmup_steps=warmup, schedule="official")
    for step in [0, 1, 5, 9, 10, 11, 50, 99, 100, 150]:
        s = min(step, 100)
        want = 1e-3 * (1 - s / 100) * (min(1.0, s / warmup) if warmup else 1.0)
        assert lr_at(step, t) == pytest.approx(want, abs=1e-15)
    if warmup:  # the ramp multiplies an already decaying line: the peak is never reached
        assert max(lr_at(s, t) for s in range(100)) < 1e-3 * (1 - warmup / 100) + 1e-12


def test_linear_schedule_values():
    t = TrainConfig(learning_rate=2.0, max_steps=110, warmup_steps=10, schedule="linear")
    assert [lr_at(s, t) for s in (0, 5, 10, 60, 110, 200)] == pytest.approx(
        [0.0, 1.0, 2.0, 1.0, 0.0, 0.0])


# ----------------------------------------------------------------------------- optimiser


def reference_adam(params, grads_per_step, *, lr, wd, b1=0.9, b2=0.999, eps=1e-6, correct):
    """The update written out with plain tensors, one parameter at a time."""
    params = [p.clone() for p in params]
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    for t, grads in enumerate(grads_per_step, start=1):
        for i, g in enumerate(grads):
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            m_hat, v_hat = (m[i] / (1 - b1 ** t), v[i] / (1 - b2 ** t)) if correct else (m[i], v[i])
            params[i] = params[i] - lr * (m_hat / (v_hat.sqrt() + eps) + wd[i] * params[i])
    return params


def _run(opt_params, opt, grads_per_step, before_step=None):
    for t, grads in enumerate(grads_per_step):
        for p, g in zip(opt_params, grads):
            p.grad = g.clone()
        if before_step:
            before_step(t)
        opt.step()
    return [p.detach() for p in opt_params]


@pytest.mark.parametrize("correct", [False, True])
def test_adam_weight_decay_matches_hand_written_update(correct):
    torch.manual_seed(0)
    init = [torch.randn(4, 3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)]
    grads = [[torch.randn_like(p) for p in init] for _ in range(6)]
    params = [p.clone().requires_grad_() for p in init]
    opt = AdamWeightDecay([{"params": params[:1], "weight_decay": 0.01},
                           {"params": params[1:], "weight_decay": 0.0}],
                          lr=0.05, eps=1e-6, bias_correction=correct)
    got = _run(params, opt, grads)
    want = reference_adam(init, grads, lr=0.05, wd=[0.01, 0.0], correct=correct)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)
    if not correct:  # the difference is real: the first uncorrected step is ~10x smaller
        corrected = reference_adam(init, grads, lr=0.05, wd=[0.01, 0.0], correct=True)
        assert not torch.allclose(got[0], corrected[0], atol=1e-3)


def test_bias_corrected_mode_equals_torch_adamw():
    torch.manual_seed(1)
    init = [torch.randn(5, 2), torch.randn(2)]
    grads = [[torch.randn_like(p) for p in init] for _ in range(5)]
    a = [p.clone().requires_grad_() for p in init]
    b = [p.clone().requires_grad_() for p in init]
    ours = _run(a, AdamWeightDecay(a, lr=0.01, weight_decay=0.01, bias_correction=True), grads)
    theirs = _run(b, torch.optim.AdamW(b, lr=0.01, eps=1e-6, weight_decay=0.01), grads)
    for x, y in zip(ours, theirs):
        torch.testing.assert_close(x, y)


@pytest.mark.parametrize("fused", [False, True])
def test_rescaled_adamw_is_the_uncorrected_update(fused):
    """What the GPU runs: torch's (fused) AdamW with per-step lr/eps/wd = official update."""
    torch.manual_seed(2)
    init = [torch.randn(6, 4, dtype=torch.float64)]
    grads = [[torch.randn_like(init[0])] for _ in range(8)]
    params = [init[0].clone().requires_grad_()]
    try:
        opt = torch.optim.AdamW(params, lr=0.0, eps=1e-6, fused=fused)
    except RuntimeError as e:  # fused AdamW for CPU tensors needs a recent torch
        pytest.skip(str(e))

    def rescale(t):
        lr, eps, wd = official_adam_hparams(0.02, 1e-6, 0.01, (0.9, 0.999), t + 1)
        opt.param_groups[0].update(lr=lr, eps=eps, weight_decay=wd)

    got = _run(params, opt, grads, before_step=rescale)
    want = reference_adam(init, grads, lr=0.02, wd=[0.01], correct=False)
    torch.testing.assert_close(got[0], want[0], rtol=1e-10, atol=1e-10)



@pytest.mark.parametrize("tying", ["embeddings", "all", "none"])
def test_weight_decay_excludes_layernorm_and_bias_and_counts_shared_once(tying, tiny_model_config):
    model = Electra(tiny_model_config(tying=tying, generator_size=1.0 if tying == "all" else 0.5))
    decay, no_decay = param_groups(model, 0.01)
    all_ids = [id(p) for g in (decay, no_decay) for p in g["params"]]
    unique = {id(p) for p in model.parameters()}
    assert len(all_ids) == len(set(all_ids)) == len(unique)  # every tensor exactly once
    names = {id(p): n for n, p in model.named_parameters(remove_duplicate=False)}
    norm_ids = {id(p) for m in model.modules() if isinstance(m, nn.LayerNorm)
                for p in m.parameters()}
    for p in no_decay["params"]:
        assert id(p) in norm_ids or names[id(p)].endswith("bias")
    for p in decay["params"]:
        assert id(p) not in norm_ids and p.dim() == 2  # matrices: dense and embedding weights
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    assert any(names[id(p)].endswith("output_bias") for p in no_decay["params"])
    word = model.discriminator.encoder.embeddings.word.weight
    assert word is model.generator.encoder.embeddings.word.weight or tying == "none"
    assert sum(p is word for p in decay["params"]) == 1


def test_decay_is_not_applied_to_excluded_parameters(tiny_model_config):
    """With a zero gradient only the decay moves a weight: decayed ones shrink, others stay."""
    model = Electra(tiny_model_config())
    opt = build_optimizer(model, TrainConfig(learning_rate=0.1, weight_decay=0.5),
                          torch.device("cpu"))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    for n, p in model.named_parameters():
        excluded = "norm" in n or n.endswith("bias")
        want = before[n] if excluded else before[n] * (1 - 0.1 * 0.5)
        torch.testing.assert_close(p.detach(), want, msg=n)




# ----------------------------------------------------------------------------- resume


def _gpu_style_adamw(params):
    """What ``build_optimizer`` returns on a GPU: fused AdamW rescaled to the official update
    (fused AdamW runs on CPU tensors too in recent torch; otherwise the foreach kernel)."""
    try:
        return torch.optim.AdamW(params, lr=0.0, eps=1e-6, fused=True)
    except RuntimeError:
        return torch.optim.AdamW(params, lr=0.0, eps=1e-6, foreach=True)


def _rescale(opt, t):
    lr, eps, wd = official_adam_hparams(0.02, 1e-6, 0.01, (0.9, 0.999), t + 1)
    opt.param_groups[0].update(lr=lr, eps=eps, weight_decay=wd)


def test_state_from_a_gpu_optimizer_resumes_with_this_devices_settings():
    """3 updates with the GPU's fused AdamW, its state saved and loaded into the CPU optimiser,
    3 more updates == 6 uncorrected updates written out by hand. The loaded optimiser keeps its
    own settings (no ``fused``/``foreach`` from the GPU, its ``bias_correction`` flag kept)."""
    torch.manual_seed(3)
    init = [torch.randn(6, 4, dtype=torch.float64)]
    grads = [[torch.randn_like(init[0])] for _ in range(6)]
    gpu_params = [init[0].clone().requires_grad_()]
    gpu = _gpu_style_adamw(gpu_params)
    _run(gpu_params, gpu, grads[:3], before_step=lambda t: _rescale(gpu, t))
    saved = gpu.state_dict()
    assert saved["param_groups"][0].get("fused") or saved["param_groups"][0].get("foreach")

    cpu_params = [gpu_params[0].detach().clone().requires_grad_()]
    cpu = AdamWeightDecay(cpu_params, lr=0.02, weight_decay=0.01, bias_correction=False)
    load_optimizer_state(cpu, saved)
    group = cpu.param_groups[0]
    assert "fused" not in group and "foreach" not in group and group["bias_correction"] is False
    assert group["params"][0] is cpu_params[0]
    got = _run(cpu_params, cpu, grads[3:])
    want = reference_adam(init, grads, lr=0.02, wd=[0.01], correct=False)
    torch.testing.assert_close(got[0], want[0], rtol=1e-10, atol=1e-10)

    # and back: the CPU optimiser's state into a fused AdamW keeps fused=True
    back_params = [cpu_params[0].detach().clone().requires_grad_()]
    back = _gpu_style_adamw(back_params)
    fused = back.param_groups[0].get("fused")
    load_optimizer_state(back, cpu.state_dict())
    assert back.param_groups[0].get("fused") == fused and "bias_correction" not in \
        back.param_groups[0]
    assert float(back.state[back_params[0]]["step"]) == 6
