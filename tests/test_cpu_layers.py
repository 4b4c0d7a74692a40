"""The CPU routes of minielectra.model.cpu against ``F.linear`` and ``F.embedding``."""

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from minielectra.model import cpu as lin


class Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def grads(fn, x, w, b):
    x, w, b = (t.detach().clone().requires_grad_() for t in (x, w, b))
    y = fn(x, w, b)
    y.backward(torch.linspace(-1, 1, y.numel()).view_as(y))
    return y.detach(), x.grad, w.grad, b.grad


@pytest.mark.parametrize("shape,out", [((4, 7, 16), 24), ((64, 32), 1), ((3, 8), 300)])
def test_values_and_gradients_match_f_linear(shape, out):
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(shape, generator=g), torch.randn(out, shape[-1], generator=g), \
        torch.randn(out, generator=g)
    for ours, ref in zip(grads(lin.linear, x, w, b), grads(F.linear, x, w, b)):
        torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
    # a transposed (strided) input and no bias
    xt = torch.randn(shape[-1], 5, generator=g).t()
    torch.testing.assert_close(lin.linear(xt, w), F.linear(xt, w), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not lin.ONEDNN, reason="this torch build has no oneDNN")
def test_cpu_float32_goes_through_onednn_and_the_rest_through_f_linear():
    x, w = torch.randn(6, 4, requires_grad=True), torch.randn(3, 4, requires_grad=True)
    with Ops() as ops:
        lin.linear(x, w).sum().backward()
    assert ops.seen.count("minielectra.cpu_matmul") == 3  # forward, dx, dW
    assert not {"aten.mm", "aten.addmm"} & set(ops.seen)
    with Ops() as ops:
        lin.linear(x.double(), w.double())
    assert "minielectra.cpu_matmul" not in ops.seen  # float64: F.linear


def test_linear_module_is_nn_linear_with_the_same_state():
    torch.manual_seed(0)
    ours = lin.Linear(8, 5)
    torch.manual_seed(0)
    ref = torch.nn.Linear(8, 5)
    assert isinstance(ours, torch.nn.Linear)
    assert ours.state_dict().keys() == ref.state_dict().keys()
    torch.testing.assert_close(ours.weight, ref.weight)
    x = torch.randn(2, 8)
    torch.testing.assert_close(ours(x), ref(x), rtol=1e-5, atol=1e-6)


def test_compiles_into_one_graph_with_its_gradient():
    """Traced by dynamo and AOTAutograd as one op with its backward (aot_eager: what inductor
    receives), no graph break."""
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    layer = lin.Linear(16, 8)
    x = torch.randn(4, 16, requires_grad=True)
    compiled = torch.compile(lambda t: F.gelu(layer(t)), backend="aot_eager")
    compiled(x).sum().backward()
    grad_x, grad_w = x.grad.clone(), layer.weight.grad.clone()
    x.grad, layer.weight.grad = None, None
    F.gelu(F.linear(x, layer.weight, layer.bias)).sum().backward()
    torch.testing.assert_close(grad_x, x.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grad_w, layer.weight.grad, rtol=1e-5, atol=1e-6)
    assert not counters["graph_break"]
    torch._dynamo.reset()


def test_embedding_values_and_gradient_match_f_embedding():
    g = torch.Generator().manual_seed(0)
    weight = torch.randn(11, 6, generator=g)
    ids = torch.tensor([[1, 2, 2, 0], [10, 1, 1, 1]])  # repeated rows: their gradients add
    grad = torch.randn(2, 4, 6, generator=g)
    ours, ref = (weight.clone().requires_grad_() for _ in range(2))
    y = lin.embedding(ids, ours)
    y.backward(grad)
    F.embedding(ids, ref).backward(grad)
    torch.testing.assert_close(y, F.embedding(ids, weight))
    torch.testing.assert_close(ours.grad, ref.grad)
    with Ops() as ops:
        lin.embedding(ids, ours).backward(grad)
    assert "minielectra.embedding_grad" in ops.seen  # the op compiled code keeps whole


def test_embedding_module_is_nn_embedding_with_the_same_state():
    torch.manual_seed(0)
    ours = lin.Embedding(7, 3)
    torch.manual_seed(0)
    ref = torch.nn.Embedding(7, 3)
    assert isinstance(ours, torch.nn.Embedding)
    torch.testing.assert_close(ours.weight, ref.weight)
    ids = torch.tensor([0, 6, 3])
    torch.testing.assert_close(ours(ids), ref(ids))
