"""Training steps per second: minielectra vs the same ELECTRA objective built from transformers.

The reference is what one writes with transformers' modules: ElectraForMaskedLM as the generator
(vocabulary logits at every position, then the masked ones picked out), ElectraForPreTraining as
the discriminator, embeddings tied by assignment, the same masking, Gumbel-max sampling, loss
weights, AdamW and precision. Both run alternately in one process on the same batches, so
machine noise hits both alike; the figure is the median of the rounds.

    python benchmarks/bench_throughput.py --preset nano            # CPU, 2 cores
    python benchmarks/bench_throughput.py --preset small --device cuda --precision bf16 --compile

Prints one JSON object: steps/s of each and ``ratio`` = minielectra / transformers.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch
import torch.nn.functional as F

from minielectra.config import preset
from minielectra.electra import Electra, gumbel_max_sample, mask_tokens, replace_tokens


def hf_models(cfg):
    """ElectraForMaskedLM + ElectraForPreTraining of the same shapes, embeddings tied."""
    from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

    def hf_config(m):
        return ElectraConfig(vocab_size=m.vocab_size, embedding_size=m.embedding_size,
                             hidden_size=m.hidden_size, num_hidden_layers=m.num_layers,
                             num_attention_heads=m.num_heads, intermediate_size=m.intermediate_size,
                             max_position_embeddings=m.max_position_embeddings,
                             hidden_dropout_prob=m.dropout,
                             attention_probs_dropout_prob=m.attention_dropout,
                             layer_norm_eps=m.layer_norm_eps, attn_implementation="sdpa")
    gen = ElectraForMaskedLM(hf_config(cfg.generator()))
    disc = ElectraForPreTraining(hf_config(cfg))
    gen.electra.embeddings = disc.electra.embeddings  # tie word/position/segment + LayerNorm
    gen.generator_lm_head.weight = disc.electra.embeddings.word_embeddings.weight
    return torch.nn.ModuleDict({"generator": gen, "discriminator": disc})


def hf_objective(models, cfg, obj, ids, am, types, g):
    """The ELECTRA loss written the straightforward way on top of transformers."""
    masked = mask_tokens(ids, am, cfg, obj, generator=g)
    logits = models["generator"](input_ids=masked.input_ids, attention_mask=am,
                                 token_type_ids=types).logits  # (b, n, v): every position
    picked = logits.gather(1, masked.positions[..., None].expand(-1, -1, logits.shape[-1]))
    ce = F.cross_entropy(picked.float().transpose(1, 2), masked.targets, reduction="none")
    gen_loss = (ce * masked.weights).sum() / (masked.weights.sum() + 1e-6)
    sampled = gumbel_max_sample(picked, generator=g)
    corrupted, is_replaced = replace_tokens(ids, am, masked, sampled)
    disc_logits = models["discriminator"](input_ids=corrupted, attention_mask=am,
                                          token_type_ids=types).logits
    bce = F.binary_cross_entropy_with_logits(disc_logits.float(), is_replaced.float(),
                                             reduction="none")
    disc_loss = (bce * am).sum() / (am.sum() + 1e-6)
    return gen_loss + obj.disc_weight * disc_loss


def make_step(loss_fn, params, device, precision):
    opt = torch.optim.AdamW(params, lr=1e-4, eps=1e-6, weight_decay=0.01,
                            fused=device.type == "cuda")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)

    def step(batch, g):
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = loss_fn(*batch, g)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return loss
    return step


def timed(step, batch, g, steps, device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(steps):
        loss = step(batch, g)
    float(loss)  # wait for the last step
    return steps / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="nano")
    ap.add_argument("--batch-size", type=int)
    ap.add_argument("--seq-len", type=int)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--steps", type=int, default=10, help="steps per timed round")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    run = preset(args.preset)
    cfg, obj = run.model, run.objective
    cfg.cls_token_id, cfg.sep_token_id, cfg.mask_token_id = 2, 3, 4
    b = args.batch_size or run.train.batch_size
    n = args.seq_len or run.data.max_seq_len
    device = torch.device(args.device)
    torch.manual_seed(0)
    ids = torch.randint(5, cfg.vocab_size, (b, n), device=device)
    ids[:, 0], ids[:, -1] = 2, 3
    batch = (ids, torch.ones_like(ids), torch.zeros_like(ids))

    ours = Electra(cfg, obj).to(device).train()
    ref = hf_models(cfg).to(device).train()
    ours_fn = lambda i, a, t, g: ours(i, a, t, generator=g).loss  # noqa: E731
    ref_fn = lambda i, a, t, g: hf_objective(ref, cfg, obj, i, a, t, g)  # noqa: E731
    if args.compile:
        ours_fn, ref_fn = torch.compile(ours_fn), torch.compile(ref_fn)
    steps = {"minielectra": make_step(ours_fn, list(ours.parameters()), device, args.precision),
             "transformers": make_step(ref_fn, list(ref.parameters()), device, args.precision)}
    g = torch.Generator(device).manual_seed(0)
    for step in steps.values():  # warm-up (and compilation)
        timed(step, batch, g, 3, device)
    rates = {k: [] for k in steps}
    for _ in range(args.rounds):
        for name, step in steps.items():
            rates[name].append(timed(step, batch, g, args.steps, device))
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(json.dumps({
        "benchmark": "training steps/s, ELECTRA objective",
        "preset": args.preset, "batch": [b, n], "device": args.device,
        "device_name": torch.cuda.get_device_name() if device.type == "cuda" else platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(), "precision": args.precision, "compile": args.compile,
        "minielectra_steps_per_s": round(med["minielectra"], 3),
        "transformers_steps_per_s": round(med["transformers"], 3),
        "ratio": round(med["minielectra"] / med["transformers"], 3),
        "rounds": {k: [round(x, 3) for x in v] for k, v in rates.items()},
    }, indent=2))


if __name__ == "__main__":
    main()
