#!/usr/bin/env python3
"""Times one PyTorch eager training step of gpt2-small and prints JSON.

    torch_gpt_step.py [--device cuda:0] [--batch 8] [--seq 1024] [--layers 12] [--embd 768]
                      [--heads 12] [--vocab 50257] [--math fp32,tf32,bf16]
                      [--attention matmul|sdpa|both] [--warmup 3] [--steps 10]
                      [--lr 0.05] [--momentum 0.9] [--out FILE]

The PyTorch side of scripts/gpu_check.sh's "ddpbench vs PyTorch" line. The model is
workloads/gpt.cpp's (models.Gpt): GPT-2 with pre-LN blocks (x + attn(ln_1(x)), x + mlp(ln_2(x))),
LayerNorm eps 1e-5, GELU tanh approximation, causal self-attention with q|k|v packed along
the last dim, a final ln_f and the LM head tied to wte (logits = h wte^T, no bias); GPT-2
init (N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 n_layer)), wpe N(0, 0.01)).
Loss: mean cross-entropy over all B*T tokens. Optimizer: torch.optim.SGD(lr, momentum 0.9),
ddpbench's defaults.

Attention (--attention):
  matmul  q k^T / sqrt(d), masked_fill(-inf), softmax, @ v: the [B, H, T, T] probabilities
          are materialised, as ddpbench's attention does. The default: same algorithm.
  sdpa    F.scaled_dot_product_attention(is_causal=True) (PyTorch >= 2.0; flash/efficient
          kernels), for reference: what a PyTorch user would get. Skipped with a note in the
          JSON when the installed PyTorch has no such function.
  both    matmul, then sdpa.

Math (--math, comma-separated, each timed in turn in this one process):
  fp32  TF32 off (exact fp32 GEMMs; measure.set_cuda_tf32);
  tf32  TF32 on (ddpbench's --precision tf32). Attention GEMMs follow the same switch.
  bf16  torch.autocast(dtype=torch.bfloat16) around forward + loss: PyTorch's bf16 mixed
        precision (f32 weights and optimizer state; GEMMs in bf16, their outputs stored in
        bf16). ddpbench's --precision bf16 computes its GEMMs in bf16 too but keeps every
        tensor in f32, so this side also saves activation memory traffic.

Timing: every step is zero_grad(set_to_none=True) + forward + loss + backward + step on a
batch already on the device (random tokens, made once), bracketed by CUDA events on the
current stream (on CPU: perf_counter). --warmup untimed steps first, then --steps timed ones;
the median is reported (with min/p90/mean). This matches ddpbench's forward + backward +
optimizer phases (the JSON's compute time), which also excludes loading the batch.

stdout carries only the JSON record (human lines go to stderr); --out also writes it.
Exit: 0 success, 1 runtime failure, 2 usage error.
"""
import argparse
import json
import os
import platform
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import Timer, set_cuda_tf32, summarize  # noqa: E402
from models import Gpt, gpt2_init_  # noqa: E402


def run_one(args, device, math_mode, kind):
    if device.type == "cuda":
        set_cuda_tf32(math_mode == "tf32")
    torch.manual_seed(args.seed)
    model = Gpt(args.vocab, args.seq, args.embd, args.layers, args.heads, use_sdpa=kind == "sdpa")
    gpt2_init_(model, args.layers)
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    gen = torch.Generator(device="cpu").manual_seed(args.seed + 1)
    x = torch.randint(0, args.vocab, (args.batch, args.seq), generator=gen).to(device)
    y = torch.randint(0, args.vocab, (args.batch * args.seq,), generator=gen).to(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    timer = Timer(device)
    times, losses = [], []
    for step in range(args.warmup + args.steps):
        timer.begin()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=math_mode == "bf16"):
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, args.vocab).float(), y)
        loss.backward()
        opt.step()
        ms = timer.end_ms()
        losses.append(loss.item())
        if step >= args.warmup:
            times.append(ms)
    rec = {"math": math_mode, "attention": kind, "step_time_ms": summarize(times),
           "first_loss": losses[0], "last_loss": losses[-1]}
    if device.type == "cuda":
        rec["peak_memory_bytes"] = torch.cuda.max_memory_allocated(device)
    print(f"torch_gpt_step: {math_mode} {kind}: median {rec['step_time_ms']['median']:.2f} ms, "
          f"loss {losses[0]:.4f} -> {losses[-1]:.4f}", file=sys.stderr)
    del model, opt, x, y
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--embd", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--math", default="fp32,tf32", help="comma-separated: fp32, tf32, bf16")
    ap.add_argument("--attention", default="matmul", choices=["matmul", "sdpa", "both"])
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="")
    args = ap.parse_args()

    modes = [m for m in args.math.split(",") if m]
    if not modes or any(m not in ("fp32", "tf32", "bf16") for m in modes):
        ap.error(f"--math takes fp32, tf32 and/or bf16, got {args.math!r}")
    if min(args.batch, args.seq, args.layers, args.embd, args.heads, args.vocab, args.steps) <= 0 \
            or args.warmup < 0 or args.embd % args.heads != 0:
        ap.error("sizes must be positive, --warmup >= 0, and --embd divisible by --heads")
    try:
        device = torch.device(args.device)
    except RuntimeError as e:
        ap.error(f"--device: {e}")
    if device.type == "cuda" and not torch.cuda.is_available():
        print(f"torch_gpt_step: {args.device} requested but torch.cuda.is_available() is False",
              file=sys.stderr)
        return 1
    if device.type == "cuda":
        torch.cuda.set_device(device)

    kinds = ["matmul", "sdpa"] if args.attention == "both" else [args.attention]
    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    results, notes = [], []
    for kind in kinds:
        if kind == "sdpa" and not has_sdpa:
            notes.append(f"sdpa skipped: torch {torch.__version__} has no "
                         "F.scaled_dot_product_attention")
            print(f"torch_gpt_step: {notes[-1]}", file=sys.stderr)
            continue
        for m in modes:
            results.append(run_one(args, device, m, kind))

    record = {
        "schema_version": 1,
        "implementation": "pytorch",
        "kind": "gpt_step",
        "context": {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "python": platform.python_version(),
            "host": platform.node(),
            "device": args.device,
            "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor(),
        },
        "config": {"batch": args.batch, "seq": args.seq, "layers": args.layers, "embd": args.embd,
                   "heads": args.heads, "vocab": args.vocab, "optimizer": "sgd", "lr": args.lr,
                   "momentum": args.momentum, "warmup": args.warmup, "steps": args.steps,
                   "zero_grad": "set_to_none", "timing": "cuda events" if device.type == "cuda" else "perf_counter"},
        "results": results,
        "notes": notes,
    }
    text = json.dumps(record, indent=2)
    print(text)
    if args.out:
        with open(args.out + ".tmp", "w") as f:
            f.write(text + "\n")
        os.replace(args.out + ".tmp", args.out)
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
