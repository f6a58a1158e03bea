#!/usr/bin/env python3
"""Drives PyTorch's own powerSGD_hook with the random Q of a ddpbench run and compares the
final parameters.

    powersgd_torch_hook.py DIR [--tolerance 1e-4] [--dtype float64|float32]

DIR is a `ddpbench run --mode ddp --comm-hook powersgd --dump DIR` (meta.json, init, the
per-rank batches, final.safetensors and powersgd_q.safetensors). The script starts the run's
world size of processes on Gloo (torch.multiprocessing, a file rendezvous), wraps the model in
torch.nn.parallel.DistributedDataParallel, registers
torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook.powerSGD_hook with a PowerSGDState
of the run's options, and trains every dumped step. The hook draws Q with torch.randn on a
seed of its own; while it runs, torch.randn is replaced by the dump's Q for the bucket's
parameters in the hook's order (iter{i}.{parameter}), which is how PyTorch's hook is fed the
Q ddpbench drew; each bucket's hook is waited for before the next starts (the collectives'
order, not the numbers, would otherwise vary between ranks on Gloo). Rank 0's final parameters are compared with ddpbench's by
replay_pytorch.update_diff (exit 0 within --tolerance, 1 beyond, 2 on a usage error).

PyTorch orthogonalises with QR above rank 2 (the same columns up to sign as ddpbench's
Gram-Schmidt, so not the same iterates): ranks 1 and 2 only. Models with buffers are refused.
Interpreter: Debian's /usr/bin/python3 (PyTorch 1.13).
"""
import argparse
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_lite  # noqa: E402
from models import make_optimizer, model_from_shapes  # noqa: E402
from powersgd_reference import should_compress  # noqa: E402
from replay_pytorch import as_input, cross_entropy, load_batches, update_diff  # noqa: E402


def fed_hook(names, drawn, rank_limit, rate):
    """powerSGD_hook with torch.randn answering from the dump while it runs."""
    def hook(state, bucket):
        queue = []
        drawing = state.iter >= state.start_powerSGD_iter and (
            not state.warm_start or bucket.index() not in state.p_memory_dict)
        if drawing:
            for p in bucket.parameters():
                rows = p.shape[0] if p.dim() > 0 else 1
                cols = p.numel() // rows
                r = min(rows, cols, rank_limit)
                if should_compress(rows, cols, r, rate):
                    queue.append(drawn[f"iter{state.iter}.{names[id(p)]}"])
        real = torch.randn

        def randn(*shape, dtype=None, device=None):
            q = queue.pop(0)
            if list(q.shape) != list(shape[-2:]):
                raise RuntimeError(f"the hook wants Q {list(shape)}, the dump has {list(q.shape)}")
            return q.reshape(shape).to(dtype=dtype, device=device)
        torch.randn = randn
        try:
            # Waited for before the next bucket's hook: the hook issues its P and Q AllReduces
            # from future callbacks, which on Gloo can reach the group in a different order on
            # each rank when two buckets are in flight (the message sizes then disagree).
            fut = psgd.powerSGD_hook(state, bucket)
            fut.wait()
            return fut
        finally:
            torch.randn = real
            if queue:
                raise RuntimeError(f"{len(queue)} dumped Q left unused in bucket {bucket.index()}")
    return hook


def worker(rank, world, rendezvous, d, dtype_name, result):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    cfg, family = meta["config"], meta["workload"]["family"]
    init, _ = safetensors_lite.load(os.path.join(d, "init.safetensors"))
    drawn, _ = safetensors_lite.load(os.path.join(d, "powersgd_q.safetensors"))
    dtype = torch.float64 if dtype_name == "float64" else torch.float32
    model = model_from_shapes(family, meta["workload"]["name"],
                              {k: list(v.shape) for k, v in init.items()},
                              meta.get("preset", {}).get("n_head")).to(dtype)
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(init[n].to(dtype))
    names = {id(p): n for n, p in model.named_parameters()}
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, bucket_cap_mb=cfg["bucket_cap_mb"], broadcast_buffers=False)
    o = cfg["powersgd"]
    state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=o["rank"],
                               start_powerSGD_iter=o["start_iter"],
                               min_compression_rate=o["min_compression_rate"],
                               use_error_feedback=o["error_feedback"], warm_start=o["warm_start"],
                               orthogonalization_epsilon=o["epsilon"])
    ddp.register_comm_hook(state, fed_hook(names, drawn, o["rank"], o["min_compression_rate"]))
    opt = make_optimizer(cfg["optimizer"], list(model.parameters()))
    batches = load_batches(d, cfg)[rank]
    for k in range(1, int(cfg["warmup"]) + int(cfg["steps"]) + 1):
        opt.zero_grad(set_to_none=False)
        loss = cross_entropy(ddp(as_input(batches[f"step{k}.x"], family, dtype)),
                             batches[f"step{k}.y"].long().reshape(-1))
        loss.backward()
        opt.step()
    if rank == 0:
        torch.save({n: p.detach().clone() for n, p in model.named_parameters()}, result)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dump_dir")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float64")
    args = ap.parse_args()
    d = args.dump_dir
    try:
        with open(os.path.join(d, "meta.json")) as f:
            meta = json.load(f)
        cfg = meta["config"]
        if cfg.get("comm_hook") != "powersgd" or cfg.get("mode") != "ddp":
            raise ValueError("not a --mode ddp --comm-hook powersgd dump")
        if int(cfg["powersgd"]["rank"]) > 2:
            raise ValueError("PyTorch orthogonalises with QR above rank 2: ranks 1 and 2 only")
        if meta.get("buffers") or int(cfg.get("accumulate", 1)) != 1:
            raise ValueError("models with buffers and --accumulate runs are not driven")
        final, _ = safetensors_lite.load(os.path.join(d, "final.safetensors"))
        init, _ = safetensors_lite.load(os.path.join(d, "init.safetensors"))
    except (OSError, KeyError, ValueError) as e:
        print(f"powersgd_torch_hook: {d}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    world = int(cfg["world_size"])
    # Loopback only: Gloo otherwise binds the interface of the hostname, which may not resolve.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        result = os.path.join(tmp, "final.pt")
        mp.spawn(worker, args=(world, os.path.join(tmp, "rendezvous"), d, args.dtype, result),
                 nprocs=world, join=True)
        ours = torch.load(result)
    worst_name, worst = "", 0.0
    for name in meta["parameters"]:
        diff = update_diff(ours[name], final[name], init[name])
        if diff > worst:
            worst_name, worst = name, diff
    ok = worst <= args.tolerance
    print(f"torch {torch.__version__} powerSGD_hook, {world} ranks, rank {cfg['powersgd']['rank']}, "
          f"start {cfg['powersgd']['start_iter']}")
    print(f"RESULT max_update_diff={worst:.3e} ({worst_name}) tolerance={args.tolerance:.1e} "
          f"{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
