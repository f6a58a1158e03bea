"""PyTorch's own allreduce, timed as `ddpbench collectives` times its own (Note [Collectives
measurement]): the yardstick for --backend nccl in the GPU check (world size 1 on one GPU,
where NCCL refuses two ranks), and for gloo on the CPU in its selftest.

    python3 torch_allreduce.py --backend nccl|gloo --device cuda|cpu MIN_BYTES MAX_BYTES
                               [--iters 20] [--warmup 5] [--factor 4]

One rank (a FileStore in a temporary folder). For each size (times FACTOR from MIN_BYTES): WARMUP
untimed calls, then ITERS calls back to back with async_op and a wait on the last, and a device
synchronize: (end - start) / ITERS. Prints "bytes time_us" per size.
"""
import argparse
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["nccl", "gloo"], required=True)
    ap.add_argument("--device", choices=["cuda", "cpu"], required=True)
    ap.add_argument("min_bytes", type=int)
    ap.add_argument("max_bytes", type=int)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--factor", type=int, default=4)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group(a.backend, init_method="file://" + os.path.join(tmp, "store"),
                                rank=0, world_size=1)
        device = torch.device("cuda:0" if a.device == "cuda" else "cpu")
        sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
        size = a.min_bytes
        while size <= a.max_bytes:
            t = torch.zeros(size // 4, dtype=torch.float32, device=device)
            for _ in range(a.warmup):
                dist.all_reduce(t)
            sync()
            start = time.perf_counter()
            works = [dist.all_reduce(t, async_op=True) for _ in range(a.iters)]
            for w in works:
                w.wait()
            sync()
            print(f"{size} {(time.perf_counter() - start) * 1e6 / a.iters:.3f}", flush=True)
            size *= a.factor
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
