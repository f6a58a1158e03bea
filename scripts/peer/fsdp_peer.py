"""PyTorch's FSDP2 (torch.distributed.fsdp.fully_shard) as ddpbench's FSDP rows build it: the
FSDP side of torch_reference.py (--mode fsdp, fsdp-grad-op, fsdp-no-shard, fsdp-hybrid).

Units. fully_shard on each of the workload's blocks, then on the model (the root), as ddpbench's
harness wraps them (workloads/families.cpp, each family's `blocks`; bench/run/fsdp_config.cpp):
    mlp     each Linear, layers.0 .. layers.N (mlp-skip's `skip` stays in the root)
    gpt     each transformer block, h.0 .. h.N-1 (wte, wpe and ln_f stay in the root)
    embed   emb, then head.0 + head.1 as one unit
    resnet  each stage, layer1 .. layer4 (the stem and fc stay in the root)
--fsdp-wrap model: the root alone.

Strategies (ddpbench's names, FSDP1's ShardingStrategy) on FSDP2's terms:
    full_shard     (fsdp)          1-D mesh over the world, reshard_after_forward left at
                                   FSDP2's default (see below)
    shard_grad_op  (fsdp-grad-op)  1-D mesh over the world, reshard_after_forward=False
    hybrid_shard   (fsdp-hybrid)   2-D mesh (replicate, shard), shard groups of
                                   --shard-group-size ranks (default: the world, as ddpbench
                                   on one host), reshard_after_forward at FSDP2's default
    no_shard       (fsdp-no-shard) 2-D mesh (replicate=world, shard=1): every rank holds the
                                   whole model and the gradients are all-reduced (DDP's
                                   arithmetic, FSDP2's HSDP with shard groups of one)
FSDP2's default reshards every unit after forward but the root (it would be gathered again at
once for backward: FSDPState._lazy_init), so the root is gathered once a step and the other
units twice, as in ddpbench. Passing reshard_after_forward=True explicitly would reshard the
root too on PyTorch 2.9 and later (2.15: `auto_reshard_after_forward`), one more all-gather of
the root a step (gpt's wte, wpe and ln_f): not what ddpbench does nor what a user gets.

Prefetch. ddpbench's forward prefetch (on unless --no-forward-prefetch) is FSDP2's explicit
set_modules_to_forward_prefetch: each unit prefetches the next one. Backward prefetch is FSDP2's
default (one unit ahead, in reverse forward order); FSDP2 has no way to turn it off (an empty
set_modules_to_backward_prefetch list means the default), so --no-backward-prefetch is refused.
--limit-all-gathers is FSDP1's rate limiter; FSDP2 has none (accepted, recorded, unused).

Bytes on the wire. WireCounter wraps torch.distributed's all_gather_single,
all_gather_into_tensor, reduce_scatter_single, reduce_scatter_tensor and all_reduce (FSDP2's
_fsdp_collectives calls them through the module, `dist.x(...)`) and counts each call's payload
per step. Bus bytes per rank follow nccl-tests' conventions: an all-gather of an output of S
bytes moves S (n-1)/n; an AllReduce of S moves 2 S (n-1)/n; and a reduce-scatter on Gloo is an
AllReduce: ProcessGroupGloo has no reduce-scatter algorithm, it clones the whole input,
all-reduces it and copies this rank's chunk out (checked by timing on torch 2.15:
docs/performance.md, "FSDP against PyTorch FSDP2 and DDP (CPU)"), so it moves 2 S (n-1)/n of
its input S, not S (n-1)/n. Over NCCL (--device cuda) a reduce-scatter moves S (n-1)/n.
"""
import os
import sys

import torch
import torch.distributed as dist

MODES = {"fsdp": "full_shard", "fsdp-grad-op": "shard_grad_op", "fsdp-no-shard": "no_shard",
         "fsdp-hybrid": "hybrid_shard"}
SKIPPED = 3  # torch_reference.py's exit status when this PyTorch has no FSDP2


def fully_shard_api():
    """FSDP2's fully_shard, or None on a PyTorch without it (1.13 has FSDP1 only). Public as
    torch.distributed.fsdp.fully_shard from 2.6, under torch.distributed._composable.fsdp in
    2.4 and 2.5."""
    # Not only ImportError: 1.13's torch.distributed.fsdp fails to import on Python 3.11
    # (a dataclass with a mutable default raises ValueError).
    try:
        from torch.distributed.fsdp import fully_shard
        return fully_shard
    except Exception:  # noqa: BLE001
        pass
    try:
        from torch.distributed._composable.fsdp import fully_shard
        return fully_shard
    except Exception:  # noqa: BLE001
        return None


def skip_line(mode):
    """The one line a PyTorch without FSDP2 gets (torch_reference.py exits with SKIPPED)."""
    return (f"torch_reference: skipped: --mode {mode} runs PyTorch's FSDP2 "
            f"(torch.distributed.fsdp.fully_shard, PyTorch >= 2.4); torch {torch.__version__} "
            "has none (scripts/peer/setup_torch2.sh makes a PyTorch 2.x)")


def block_names(spec):
    """ddpbench's units for this preset: lists of module names (workloads/families.cpp)."""
    f = spec["family"]
    if f == "mlp":
        return [[f"layers.{i}"] for i in range(len(spec["hidden"]) + 1)]
    if f == "gpt":
        return [[f"h.{i}"] for i in range(spec["n_layer"])]
    if f == "resnet":
        return [[f"layer{s + 1}"] for s in range(len(spec["blocks"]))]
    return [["emb"], ["head.0", "head.1"]]


def _mesh(strategy, world, shard_group_size):
    from torch.distributed.device_mesh import init_device_mesh
    if strategy in ("full_shard", "shard_grad_op"):
        return init_device_mesh("cpu", (world,))
    size = 1 if strategy == "no_shard" else (shard_group_size or world)
    if world % size:
        raise SystemExit(f"torch_reference: hybrid_shard: shard groups of {size} ranks do not "
                         f"divide the world of {world} (--shard-group-size)")
    return init_device_mesh("cpu", (world // size, size), mesh_dim_names=("replicate", "shard"))


def shard(model, spec, args, world, device):
    """fully_shard on each unit, then the root; returns the unit names (root last)."""
    fully_shard = fully_shard_api()
    strategy = MODES[args.mode]
    mesh = _mesh(strategy, world, args.shard_group_size)
    if device.type != "cpu":
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh(device.type, tuple(mesh.shape), mesh_dim_names=mesh.mesh_dim_names)
    # full_shard, hybrid_shard, no_shard: FSDP2's default (see the module's docstring).
    reshard = {"reshard_after_forward": False} if strategy == "shard_grad_op" else {}
    units, names = [], []
    if args.fsdp_wrap == "block":
        for block in block_names(spec):
            modules = [model.get_submodule(n) for n in block]
            fully_shard(modules if len(modules) > 1 else modules[0], mesh=mesh, **reshard)
            units.append(modules[0])
            names.append("+".join(block))
    fully_shard(model, mesh=mesh, **reshard)
    if not args.no_forward_prefetch:
        for unit, nxt in zip(units, units[1:]):
            unit.set_modules_to_forward_prefetch([nxt])
    return names + ["root"]


def _local(t):
    return t.to_local() if hasattr(t, "to_local") else t


def local_bytes(params, opt):
    """This rank's parameter shards and optimizer state, in bytes."""
    p = sum(_local(t).numel() * _local(t).element_size() for t in params)
    s = sum(_local(v).numel() * _local(v).element_size() for st in opt.state.values()
            for v in st.values() if torch.is_tensor(v) and _local(v).dim() > 0)
    return p, s


class WireCounter:
    """Counts the payload of FSDP2's collectives (see the module's docstring); take() returns
    and clears one step's counts."""

    OPS = {"all_gather_single": "all_gather", "all_gather_into_tensor": "all_gather",
           "reduce_scatter_single": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
           "all_reduce": "all_reduce"}

    def __init__(self, gloo):
        self.gloo = gloo
        self.counts = {}
        for name, op in self.OPS.items():
            fn = getattr(dist, name, None)
            if fn is not None:
                setattr(dist, name, self._wrap(fn, op))

    def _wrap(self, fn, op):
        def counted(*a, **kw):
            # all_gather: the output (the gathered unit); reduce_scatter: the input (the unit's
            # gradients); all_reduce: its one tensor.
            t = (kw.get("output_tensor", kw.get("output")) if op == "all_gather" else
                 kw.get("input_tensor", kw.get("input")) if op == "reduce_scatter" else
                 kw.get("tensor"))
            if t is None:
                t = a[0] if op in ("all_gather", "all_reduce") else a[1]
            group = kw.get("group")
            n = dist.get_world_size(group) if group is not None else dist.get_world_size()
            c = self.counts.setdefault(op, {"calls": 0, "bytes": 0, "bus_bytes": 0.0})
            c["calls"] += 1
            size = t.numel() * t.element_size()
            c["bytes"] += size
            factor = {"all_gather": 1.0, "all_reduce": 2.0,
                      "reduce_scatter": 2.0 if self.gloo else 1.0}[op]
            c["bus_bytes"] += size * factor * (n - 1) / n if n > 1 else 0.0
            return fn(*a, **kw)
        return counted

    def take(self):
        out, self.counts = self.counts, {}
        out["bus_bytes"] = sum(c["bus_bytes"] for c in out.values())
        return out


def details(args, unit_names, params, opt, world):
    p, s = local_bytes(params, opt)
    return {"implementation": "torch.distributed.fsdp.fully_shard (FSDP2)",
            "sharding_strategy": MODES[args.mode], "fsdp_wrap": args.fsdp_wrap,
            "units": unit_names, "forward_prefetch": not args.no_forward_prefetch,
            "backward_prefetch": True, "limit_all_gathers": args.limit_all_gathers,
            "reduce_scatter": "an AllReduce on Gloo (ProcessGroupGloo)" if args.backend == "gloo"
            else "reduce_scatter", "world_size": world,
            "local_param_bytes": p, "local_optimizer_state_bytes": s,
            "torch_num_threads": torch.get_num_threads(),
            "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS", "")}


def check_args(ap, args):
    """FSDP's flags (ddpbench's names) against --mode: parse_args's part for the fsdp modes."""
    fsdp = args.mode in MODES
    if args.sharding_strategy:
        want = {v: k for k, v in MODES.items()}.get(args.sharding_strategy)
        if want is None:
            ap.error(f"--sharding-strategy {args.sharding_strategy}: expected one of "
                     f"{', '.join(MODES.values())}")
        if not fsdp or args.mode not in (want, "fsdp"):
            ap.error(f"--sharding-strategy {args.sharding_strategy} is --mode {want}, "
                     f"not --mode {args.mode}")
        args.mode = want
    given = [f for f, v in (("--fsdp-wrap", args.fsdp_wrap != "block"),
                            ("--no-forward-prefetch", args.no_forward_prefetch),
                            ("--shard-group-size", args.shard_group_size),
                            ("--limit-all-gathers", args.limit_all_gathers is not None)) if v]
    if given and not fsdp:
        ap.error(f"{given[0]} is an FSDP option: it needs --mode fsdp, fsdp-grad-op, "
                 "fsdp-no-shard or fsdp-hybrid")
    if args.no_backward_prefetch:
        ap.error("--no-backward-prefetch: FSDP2 always prefetches one unit in backward (an "
                 "empty set_modules_to_backward_prefetch means its default); no counterpart")
    if args.shard_group_size and args.mode != "fsdp-hybrid":
        ap.error("--shard-group-size goes with --mode fsdp-hybrid")
    if fsdp and args.zero_stage:
        ap.error("--zero is ZeroRedundancyOptimizer over DDP; FSDP shards the optimizer itself")
    if fsdp and args.mode == "fsdp-hybrid" and args.shard_group_size and \
            args.world_size % args.shard_group_size:
        ap.error(f"--shard-group-size {args.shard_group_size} does not divide --world-size "
                 f"{args.world_size}")


def add_args(ap):
    ap.add_argument("--sharding-strategy", default="",
                    help="fsdp: full_shard, shard_grad_op, no_shard or hybrid_shard (the same as "
                         "--mode fsdp, fsdp-grad-op, fsdp-no-shard or fsdp-hybrid)")
    ap.add_argument("--fsdp-wrap", choices=("block", "model"), default="block",
                    help="fsdp: fully_shard each of the workload's blocks and the root (block, "
                         "the default) or the root alone (model)")
    ap.add_argument("--no-forward-prefetch", action="store_true",
                    help="fsdp: no set_modules_to_forward_prefetch (each unit gathered when its "
                         "forward runs)")
    ap.add_argument("--no-backward-prefetch", action="store_true",
                    help="refused: FSDP2 has no way to turn its backward prefetch off")
    ap.add_argument("--limit-all-gathers", type=int, default=None,
                    help="ddpbench's flag, accepted and recorded: FSDP2 has no all-gather limiter")
    ap.add_argument("--shard-group-size", type=int, default=0,
                    help="fsdp-hybrid: ranks per shard group (default: the world)")


if __name__ == "__main__":
    print("fsdp_peer.py is torch_reference.py's FSDP side: run torch_reference.py --mode fsdp",
          file=sys.stderr)
    sys.exit(2)
