#!/usr/bin/env python3
"""Times one PyTorch training step of mlp-small on one CPU thread and prints JSON.

    torch_single_step.py [--batch 64] [--warmup 5] [--steps 50] [--lr 0.01] [--momentum 0.9]

The PyTorch side of "one single-device mlp-small step is no slower than PyTorch 1.13 on one
thread" (scripts/peer/compare_single_step.sh runs both). The model mirrors mlp-small in
workloads/registry.cpp (Linear 1024 -> 1024 -> 1024 -> 1024 -> 10, ReLU between, PyTorch's
default Linear init, which has the same U(+-1/sqrt(in)) bounds as ddpbench's), the optimizer
is torch.optim.SGD (dampening 0, no nesterov) and the loss mean cross-entropy.

One timed step covers what ddpbench's step time covers (start of the data phase to the end
of the optimizer): take the next batch (a gather from a synthetic in-memory dataset), then
zero_grad, forward, loss, backward, optimizer step. step_time_ms is the whole step;
compute_time_ms leaves out the batch gather, like ddpbench's forward + backward + optimizer
phases. It runs `warmup` untimed steps, then `steps` timed ones, and reports the median (and
min/p90/mean) in milliseconds.
"""
import argparse
import json
import os
import platform
import sys
import time

# Debian's PyTorch calls OpenBLAS (pthread build) through libblas.so.3, and
# torch.set_num_threads() does not reach OpenBLAS's own pool: pin it to one thread before
# the library loads, as ddpbench does for its CPU devices.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import openblas_threads, summarize  # noqa: E402
from models import Mlp  # noqa: E402

MLP_SMALL_WIDTHS = [1024, 1024, 1024, 1024, 10]
DATASET_SIZE = 4096  # synthetic samples to draw batches from


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    widths = MLP_SMALL_WIDTHS
    model = Mlp(widths)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    data_x = torch.randn(DATASET_SIZE, widths[0])
    data_y = torch.randint(0, widths[-1], (DATASET_SIZE,))
    order = torch.randperm(DATASET_SIZE)

    times_ms, compute_ms, losses = [], [], []
    cursor = 0
    for step in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        if cursor + args.batch > DATASET_SIZE:
            cursor = 0
        idx = order[cursor : cursor + args.batch]
        cursor += args.batch
        x, y = data_x.index_select(0, idx), data_y.index_select(0, idx)
        t_data = time.perf_counter()
        # PyTorch 1.13's default (zero in place). set_to_none=True, ddpbench's semantics, was
        # measured slower here (fresh 12 MB gradient buffers page-fault every step), so the
        # comparison uses PyTorch's faster setting.
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        t1 = time.perf_counter()
        if step >= args.warmup:
            times_ms.append((t1 - t0) * 1e3)
            compute_ms.append((t1 - t_data) * 1e3)
        losses.append(loss.item())  # outside the timed region

    flops_per_step = 3.0 * 2.0 * args.batch * sum(a * b for a, b in zip(widths[:-1], widths[1:]))
    step = summarize(times_ms)
    print(json.dumps({
        "implementation": "pytorch",
        "workload": "mlp-small",
        "context": {"torch_version": torch.__version__, "threads": torch.get_num_threads(),
                    "python": platform.python_version(), "host": platform.node(),
                    "openblas_threads": openblas_threads()},
        "config": {"global_batch": args.batch, "steps": args.steps, "warmup": args.warmup,
                   "optimizer": {"name": "sgd", "lr": args.lr, "momentum": args.momentum}},
        "summary": {"step_time_ms": step, "compute_time_ms": summarize(compute_ms),
                    "achieved_flops_per_s": flops_per_step / (step["median"] / 1e3),
                    "first_loss": losses[0], "last_loss": losses[-1]},
    }, indent=1))


if __name__ == "__main__":
    main()
