"""Attention: the SDPA path, the written-out reference path and a naive per-head loop agree."""

import math

import pytest
import torch

from minielectra.model.attention import MultiHeadAttention, padding_mask


def naive_attention(mha: MultiHeadAttention, x: torch.Tensor, attention_mask=None) -> torch.Tensor:
    """One head and one sequence at a time, with plain Python loops: no einops, no batching."""
    b, n, d = x.shape
    h = mha.num_heads
    e = d // h
    wq, wk, wv = mha.qkv.weight.split(d, dim=0)
    bq, bk, bv = mha.qkv.bias.split(d, dim=0)
    out = torch.zeros(b, n, d, dtype=torch.float64)
    for i in range(b):
        heads = []
        for j in range(h):
            sl = slice(j * e, (j + 1) * e)
            q = x[i] @ wq[sl].T + bq[sl]
            k = x[i] @ wk[sl].T + bk[sl]
            v = x[i] @ wv[sl].T + bv[sl]
            scores = q @ k.T / math.sqrt(e)
            if attention_mask is not None and attention_mask[i].any():
                keep = attention_mask[i].bool()
                scores = scores[:, keep]
                v = v[keep]
            elif attention_mask is not None:  # no key to attend to: every key weighs the same
                scores = torch.zeros_like(scores)
            heads.append(torch.softmax(scores, dim=-1) @ v)
        out[i] = torch.cat(heads, dim=-1) @ mha.out.weight.T + mha.out.bias
    return out


@pytest.mark.parametrize("heads", [1, 4])
@pytest.mark.parametrize("padded", [False, True])
def test_sdpa_reference_and_naive_agree(heads, padded):
    torch.manual_seed(0)
    b, n, d = 3, 7, 16
    mha = MultiHeadAttention(d, heads, dropout=0.0).double().eval()
    x = torch.randn(b, n, d, dtype=torch.float64)
    am = torch.ones(b, n, dtype=torch.long)
    if padded:
        am[0, 4:] = 0
        am[2, 1:] = 0  # a sequence with a single real token
        am[1, :] = 0  # all padding: every path averages all values uniformly, none gives zeros
    mask = padding_mask(am) if padded else None
    mha.impl = "sdpa"
    y_sdpa = mha(x, mask)
    mha.impl = "reference"
    y_ref = mha(x, mask)
    y_naive = naive_attention(mha, x, am if padded else None)
    torch.testing.assert_close(y_sdpa, y_ref, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(y_ref, y_naive, rtol=1e-10, atol=1e-10)


def test_padding_keys_do_not_change_real_outputs():
    torch.manual_seed(1)
    mha = MultiHeadAttention(8, 2, dropout=0.0).eval()
    x = torch.randn(1, 5, 8)
    am = torch.tensor([[1, 1, 1, 0, 0]])
    y1 = mha(x, padding_mask(am))
    x2 = x.clone()
    x2[:, 3:] = torch.randn(1, 2, 8) * 100  # garbage in padding positions
    y2 = mha(x2, padding_mask(am))
    torch.testing.assert_close(y1[:, :3], y2[:, :3])


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="not divisible"):
        MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="impl"):
        MultiHeadAttention(8, 2, impl="flash")
