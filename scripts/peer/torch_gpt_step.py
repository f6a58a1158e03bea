#!/usr/bin/env python3
"""Times one PyTorch eager training step of gpt2-small and prints JSON.

    torch_gpt_step.py [--device cuda:0] [--batch 8] [--seq 1024] [--layers 12] [--embd 768]
                      [--heads 12] [--vocab 50257] [--math fp32,tf32,bf16]
                      [--attention matmul|sdpa|both] [--warmup 3] [--steps 10]
                      [--lr 0.05] [--momentum 0.9] [--out FILE]

The PyTorch side of scripts/gpu_check.sh's "ddpbench vs PyTorch" line. The model is
workloads/gpt.cpp's: GPT-2 with pre-LN blocks (x + attn(ln_1(x)), x + mlp(ln_2(x))),
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
  fp32  TF32 off (exact fp32 GEMMs; set_cuda_tf32 below);
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
import math
import os
import platform
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

LAYERNORM_EPS = 1e-5


class Attention(nn.Module):
    def __init__(self, c, n_head, seq, kind):
        super().__init__()
        self.n_head = n_head
        self.kind = kind
        self.c_attn = nn.Linear(c, 3 * c)
        self.c_proj = nn.Linear(c, c)
        self.register_buffer("mask", torch.ones(seq, seq, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        hd = c // self.n_head
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, hd).transpose(1, 2) for z in (q, k, v))
        if self.kind == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            att = att.masked_fill(~self.mask[:t, :t], float("-inf")).softmax(dim=-1)
            y = att @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Mlp(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c, 4 * c)
        self.c_proj = nn.Linear(4 * c, c)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, c, n_head, seq, kind):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c, eps=LAYERNORM_EPS)
        self.attn = Attention(c, n_head, seq, kind)
        self.ln_2 = nn.LayerNorm(c, eps=LAYERNORM_EPS)
        self.mlp = Mlp(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self, vocab, seq, c, n_layer, n_head, kind):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(seq, c)
        self.h = nn.ModuleList(Block(c, n_head, seq, kind) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(c, eps=LAYERNORM_EPS)
        # Parameter names are ddpbench's (h.{i}.attn.c_attn, h.{i}.mlp.c_proj, ...).
        proj_std = 0.02 / math.sqrt(2.0 * n_layer)
        for name, p in self.named_parameters():
            if name == "wpe.weight":
                nn.init.normal_(p, 0.0, 0.01)
            elif p.dim() == 2 and not name.startswith("ln"):
                nn.init.normal_(p, 0.0, proj_std if name.endswith("c_proj.weight") else 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        h = self.wte(idx) + self.wpe(pos)[None]
        for block in self.h:
            h = block(h)
        return F.linear(self.ln_f(h), self.wte.weight)  # tied LM head, no bias



def set_cuda_tf32(enabled):
    """TF32 for CUDA GEMMs and convolutions: the fp32_precision API where torch has it
    (2.9 and later, which deprecate allow_tf32), else the allow_tf32 switches."""
    mode = "tf32" if enabled else "ieee"
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        matmul.fp32_precision = mode
        conv = getattr(torch.backends.cudnn, "conv", None)
        if conv is not None and hasattr(conv, "fp32_precision"):
            conv.fp32_precision = mode
    else:
        matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled

def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summary(values):
    s = sorted(values)
    return {"median": statistics.median(s), "min": s[0], "p90": percentile(s, 90),
            "mean": statistics.fmean(s), "count": len(s)}


class Timer:
    """CUDA events on the current stream, or perf_counter on CPU."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.start = torch.cuda.Event(enable_timing=True)
            self.stop = torch.cuda.Event(enable_timing=True)

    def begin(self):
        if self.cuda:
            self.start.record()
        else:
            self.t0 = time.perf_counter()

    def end_ms(self):
        if self.cuda:
            self.stop.record()
            self.stop.synchronize()
            return self.start.elapsed_time(self.stop)
        return (time.perf_counter() - self.t0) * 1e3


def run_one(args, device, math_mode, kind):
    if device.type == "cuda":
        set_cuda_tf32(math_mode == "tf32")
    torch.manual_seed(args.seed)
    model = Gpt(args.vocab, args.seq, args.embd, args.layers, args.heads, kind).to(device)
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
    rec = {"math": math_mode, "attention": kind, "step_time_ms": summary(times),
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
