#!/usr/bin/env python3
"""Replays a `ddpbench run --dump DIR` in PyTorch and compares the final parameters.

    replay_pytorch.py DIR [--tolerance 1e-4] [--n-head H] [--write-final PATH] [--quiet]

DIR holds what bench/run/run_dump.h writes: meta.json, init.safetensors, the batches
(batches.safetensors, or batches.rank{r}.safetensors for DDP, ZeRO and FSDP) and
final.safetensors; any mode (single, dp, ddp; the ZeRO rows zero1, zero2 and zero1-pytorch, and
FSDP's rows fsdp, fsdp-grad-op, fsdp-no-shard and fsdp-hybrid, which dump DDP's layout (FSDP's
final.safetensors is its full state dict, gathered on rank 0) and are replayed as DDP: sharding
the optimizer state, the gradients or the parameters changes where the arithmetic runs, not its
result), without --accumulate; runs that ended at --epochs; DDP with
--uneven-inputs join (join_step_loss); DDP with --comm-hook powersgd through the float64
reference in powersgd_reference.py, fed the dumped random Q (powersgd_q.safetensors). Each step is replayed as the mode ran it (step_loss):
that matters for models with BatchNorm, whose statistics are per replica or per rank.

The script rebuilds the workload's model in PyTorch (models.py: mlp, gpt, embed, and
torchvision's own ResNet; sizes come from the tensor shapes in init.safetensors, and for GPT
the head count, which no shape carries, from the dump's meta.json preset or --n-head), loads
init.safetensors (parameters and buffers),
runs every dumped step (zero_grad, forward, loss, backward, optimizer step) with
torch.optim.SGD or torch.optim.AdamW configured from meta.json, and compares the result
with final.safetensors.

Difference metric, per parameter tensor (ours = PyTorch replay, ref = ddpbench's final,
init = the common starting point, norms are L2 over the whole tensor):

    update_diff = ||ours - ref|| / max(||ref - init||, 1e-3 * ||ref||)

i.e. the norm-wise relative error of what training did to the parameter (ours - ref equals
the difference of the two updates, since both start from init). The gate is its maximum over
all parameters: exit status 0 when it is <= --tolerance (default 1e-4), 1 when it is larger,
2 on a usage or format error, 3 when it is larger but a ReLU or max-pool decision of the
replay came within --min-margin of its boundary (inconclusive; see DecisionMargins).
Why this definition:
  * Measured against the update, not the parameter: after a few steps at lr 0.01 the update
    is ~1e-3 of a weight, so an element-wise error relative to the weights would let a 5%
    gradient error pass at 1e-4. Here a 1% error in the update reads 1e-2.
  * Norm-wise, not element-wise: AdamW normalises every element by sqrt(v) + eps, so an
    element whose gradient is ~1e-10 (float32 rounding level, near eps = 1e-8) gets an update
    that depends on rounding noise; its element-wise difference is a few percent of lr
    without any bug (measured: 6e-4 of the weights' scale on mlp-small). In the norm such
    elements are few and weigh little, while a single element off by its own update size in
    a 1M-element tensor still reads ~1e-3.
  * The floor 1e-3 * ||ref|| covers a parameter that barely moved: float32 rounding of the
    parameter itself (~6e-8 of it) would otherwise dominate a near-zero update.
The table also shows, for information, elem_diff = max_i |ours_i - ref_i| / max_i |ref_i|
(the largest element error relative to the tensor's scale) and the worst element.

Runs on one CPU thread in float32. Interpreter: Debian's /usr/bin/python3 (PyTorch 1.13).
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_lite  # noqa: E402
from models import make_optimizer, model_from_shapes  # noqa: E402
from powersgd_reference import PowerSgdReference  # noqa: E402

UPDATE_FLOOR = 1e-3   # update_diff's denominator is at least this fraction of ||ref||


def as_input(t, family, dtype=torch.float32):
    """ddpbench stores token/id inputs as i32; PyTorch's embedding wants int64."""
    return t.to(dtype) if family in ("mlp", "resnet") else t.long()


def is_fsdp(cfg):
    """Whether the run was one of FSDP's rows (meta.json says fsdp, fsdp-grad-op, fsdp-no-shard
    or fsdp-hybrid, with its sharding_strategy)."""
    return cfg.get("mode", "single").startswith("fsdp")


def per_rank(cfg):
    """Whether the run was processes that train as DDP does, a rank each: --mode ddp, the ZeRO
    rows (meta.json says zero1, zero2 or zero1-pytorch, with zero_stage 1 or 2) and FSDP's rows
    (each rank's gradients averaged over the world, rank 0's buffers broadcast, SyncBatchNorm over
    the world: DDP's arithmetic, Note [FSDP's step])."""
    mode = cfg.get("mode", "single")
    return (mode == "ddp" or mode.startswith("zero") or is_fsdp(cfg)
            or int(cfg.get("zero_stage", 0)) > 0)


def load_batches(d, cfg):
    """The dumped batches, one dict per rank: DDP ranks (ZeRO's too) write
    batches.rank{r}.safetensors, single and DP runs one batches.safetensors with the global
    batches."""
    if not per_rank(cfg):
        return [safetensors_lite.load(os.path.join(d, "batches.safetensors"))[0]]
    return [safetensors_lite.load(os.path.join(d, f"batches.rank{r}.safetensors"))[0]
            for r in range(int(cfg["world_size"]))]


def mode_label(cfg):
    """The mode as the replay line names it: a ZeRO or FSDP row says it is replayed as DDP."""
    mode = cfg.get("mode", "single")
    if is_fsdp(cfg):
        return f"{mode} ({cfg.get('sharding_strategy', '?')}, replayed as ddp)"
    if mode != "ddp" and per_rank(cfg):
        return f"{mode} (ZeRO stage {cfg.get('zero_stage', '?')}, replayed as ddp)"
    return mode


def cross_entropy(logits, y):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y)


def forward_keeping_buffers(model, x):
    """model(x) on copies of the buffers, so that its updates (BatchNorm's running statistics)
    do not reach the model: the work of a replica or rank whose buffers are not the model's.
    The copies are swapped in and out rather than written back, because autograd saved the
    tensors the forward used."""
    originals = []
    for module in model.modules():
        for name, b in list(module._buffers.items()):
            if b is not None:
                originals.append((module, name, b))
                module._buffers[name] = b.clone()
    out = model(x)
    for module, name, b in originals:
        module._buffers[name] = b
    return out


class DecisionMargins:
    """The smallest relative margin of the replay's discrete decisions (Note [Replay seeds] in
    tests/bench/run/test_replay.cpp): how close any ReLU input came to 0, and any max-pool window's
    two largest inputs to each other, relative to the tensor's largest magnitude. float32
    rounding in ddpbench can put a decision within ~1e-7 of its boundary on the other side, and
    then one gradient element goes another way; a margin below --min-margin marks a failed
    comparison as inconclusive instead of wrong."""

    def __init__(self, model):
        self.relu = self.pool = float("inf")
        for module in model.modules():
            if isinstance(module, (torch.nn.ReLU, torch.nn.MaxPool2d)):
                module.register_forward_pre_hook(self.observe)  # before an in-place ReLU

    def observe(self, module, inputs):
        with torch.no_grad():
            x = inputs[0]
            scale = x.abs().max().item() or 1.0
            if isinstance(module, torch.nn.ReLU):
                self.relu = min(self.relu, x.abs().min().item() / scale)
                return
            # Padding never wins a window; a window whose largest input is <= 0 sends its
            # gradient into a ReLU that drops it, whichever input wins.
            pad = module.padding
            padded = F.pad(x, (pad, pad, pad, pad), value=float("-inf"))
            cols = F.unfold(padded, module.kernel_size, stride=module.stride)
            cols = cols.view(x.shape[0], x.shape[1], -1, cols.shape[-1])
            top = cols.topk(2, dim=2).values
            live = top[:, :, 0] > 0
            if live.any():
                gap = (top[:, :, 0] - top[:, :, 1])[live] / scale
                self.pool = min(self.pool, gap.min().item())

    def smallest(self):
        return min(self.relu, self.pool)


def step_loss(model, cfg, xs, ys):
    """The loss whose gradient is the step's, with the buffers updated as the run updated
    the ones it dumped:
      single, and DDP with --sync-bn: one forward over the whole batch (SyncBatchNorm
        normalises with the statistics of every rank's batch, in rank order);
      dp: one forward per replica on torch.chunk's parts, logits gathered, one loss; only
        replica 0's buffer updates survive (Note [DP buffers]);
      ddp (and ZeRO, per_rank): one forward per rank on its batch, the mean of the per-rank
        mean losses (DDP averages the ranks' gradients, ZeRO reduce-scatters the same average);
        the dump is rank 0's, so are the buffers."""
    mode = cfg.get("mode", "single")
    if mode == "single" or (per_rank(cfg) and cfg.get("sync_bn", False)):
        return cross_entropy(model(torch.cat(xs)), torch.cat(ys))
    if mode == "dp":
        devices = cfg.get("devices") or ""
        n = len(devices.split(",")) if devices else int(cfg["world_size"])
        size = -(-xs[0].shape[0] // n)
        parts = xs[0].split(size)
        logits = [model(parts[0])] + [forward_keeping_buffers(model, p) for p in parts[1:]]
        return cross_entropy(torch.cat(logits), ys[0])
    losses = [cross_entropy(model(xs[0]), ys[0])]
    losses += [cross_entropy(forward_keeping_buffers(model, x), y) for x, y in zip(xs[1:], ys[1:])]
    return sum(losses) / len(losses)


def dumped_steps(batches, cfg):
    """The steps each rank dumped (step1..stepN, no gaps), and a problem or None. A run of
    --steps trains warmup + steps on every rank; with --epochs it may end sooner, and under
    --uneven-inputs join the ranks that ran out have fewer."""
    counts = []
    for rank, part in enumerate(batches):
        n = 0
        while f"step{n + 1}.x" in part and f"step{n + 1}.y" in part:
            n += 1
        if any(k.startswith("step") and int(k[4:].split(".")[0]) > n for k in part):
            return counts, f"the batches of rank {rank} skip a step after step{n}"
        counts.append(n)
    planned = int(cfg["warmup"]) + int(cfg["steps"])
    if min(counts) < 1:
        return counts, "a rank dumped no step"
    if cfg.get("uneven_inputs") != "join" and len(set(counts)) > 1:
        return counts, f"the ranks dumped different step counts {counts} without join"
    if int(cfg.get("epochs", 0)) == 0 and max(counts) != planned:
        return counts, f"the dump has {max(counts)} steps, the run planned {planned}"
    return counts, None


def join_step_loss(model, cfg, xs, ys, active):
    """One DDP step under PyTorch's Join: the ranks that ran out shadow the AllReduce with zero
    gradients and do not step; the active ones average over the initial world size
    (divide_by_initial_world_size, the default) or over the active ranks. Each active rank's
    loss is its own batch's mean (no buffers: Join with BatchNorm is refused)."""
    losses = [cross_entropy(model(x), y) for x, y, a in zip(xs, ys, active) if a]
    divide = len(active) if cfg.get("join_divide_by_initial_world_size", True) else len(losses)
    return sum(losses) / divide


def powersgd_step(model, params, xs, ys, reference):
    """One DDP step under --comm-hook powersgd: every rank's own gradient (PowerSGD combines
    the ranks' gradients, not their mean), combined by the float64 reference; the buffers are
    rank 0's. Returns the mean loss."""
    per_rank = []
    losses = []
    for rank, (x, y) in enumerate(zip(xs, ys)):
        model.zero_grad(set_to_none=True)
        logits = model(x) if rank == 0 else forward_keeping_buffers(model, x)
        loss = cross_entropy(logits, y)
        loss.backward()
        losses.append(loss.detach())
        per_rank.append({n: p.grad.detach().clone() for n, p in params.items()})
    for n, p in params.items():
        p.grad = reference.combine(n, [g[n] for g in per_rank])
    reference.end_iteration()
    return sum(losses) / len(losses)


def update_diff(ours, ref, init):
    """||ours - ref|| / max(||ref - init||, UPDATE_FLOOR * ||ref||), in float64."""
    ours, ref, init = ours.double(), ref.double(), init.double()
    denom = max((ref - init).norm().item(), UPDATE_FLOOR * ref.norm().item(), 1e-30)
    return (ours - ref).norm().item() / denom


def elem_diff(ours, ref):
    """max |ours - ref| / max |ref|, and the flat index of the worst element."""
    if ref.numel() == 0:
        return 0.0, 0
    err = (ours - ref).abs().flatten()
    worst = int(err.argmax())
    return err[worst].item() / max(ref.abs().max().item(), 1e-30), worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dump_dir")
    ap.add_argument("--tolerance", type=float, default=1e-4,
                    help="gate on the max over parameters of update_diff (default 1e-4)")
    ap.add_argument("--n-head", type=int, default=0, help="GPT head count (default: from the preset)")
    ap.add_argument("--write-final", default="", help="also write the replayed parameters here")
    ap.add_argument("--quiet", action="store_true", help="no per-step losses")
    ap.add_argument("--min-margin", type=float, default=0.0,
                    help="a failed comparison whose smallest ReLU / max-pool decision margin is "
                         "below this is inconclusive (exit 3), not wrong (default 0: off)")
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                    help="replay precision. float64 is the tighter reference: with AdamW, PyTorch "
                         "1.13's float32 replay here drifts from its own float64 result by ~1e-2 "
                         "(update_diff) while ddpbench's float32 run stays within ~2e-5 of it")
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(0)  # nothing here is random; set for good measure
    d = args.dump_dir
    try:
        with open(os.path.join(d, "meta.json")) as f:
            meta = json.load(f)
        cfg = meta["config"]
        if int(cfg.get("accumulate", 1)) != 1:
            raise ValueError("dumps of --accumulate runs cannot be replayed")
        family, workload = meta["workload"]["family"], meta["workload"]["name"]
        init, _ = safetensors_lite.load(os.path.join(d, "init.safetensors"))
        final, _ = safetensors_lite.load(os.path.join(d, "final.safetensors"))
        batches = load_batches(d, cfg)
        names = list(meta["parameters"])
        # The head count, which no shape carries: the dump's own preset (meta.json "preset",
        # ddpbench's workload table) unless --n-head overrides it.
        n_head = args.n_head or meta.get("preset", {}).get("n_head")
        model = model_from_shapes(family, workload, {k: list(v.shape) for k, v in init.items()}, n_head)
        dtype = torch.float64 if args.dtype == "float64" else torch.float32
        model = model.to(dtype)
    except (OSError, KeyError, ValueError) as e:
        print(f"replay: cannot set up the replay of {d}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2

    # Parameters and buffers (BatchNorm's running statistics), as ddpbench's state dict.
    own = dict(model.named_parameters())
    own.update(dict(model.named_buffers()))
    names = names + list(meta.get("buffers", []))
    for label, keys in (("meta.json parameters and buffers", names), ("init.safetensors", list(init)),
                        ("final.safetensors", list(final))):
        if sorted(keys) != sorted(own):
            missing = sorted(set(own) - set(keys))
            extra = sorted(set(keys) - set(own))
            print(f"replay: {label} does not match the PyTorch {family} model: "
                  f"missing {missing}, unexpected {extra}", file=sys.stderr)
            return 2
    with torch.no_grad():
        for name, p in own.items():
            if list(p.shape) != list(init[name].shape):
                print(f"replay: {name}: PyTorch shape {list(p.shape)} vs init {list(init[name].shape)}",
                      file=sys.stderr)
                return 2
            p.copy_(init[name].to(p.dtype))

    steps_of, problem = dumped_steps(batches, cfg)
    if problem:
        print(f"replay: {problem}", file=sys.stderr)
        return 2
    total_steps = max(steps_of)
    if cfg.get("uneven_inputs") == "join" and list(model.buffers()):
        print("replay: a Join run of a model with buffers (BatchNorm) is not replayed: which "
              "rank's statistics survive depends on who joined when", file=sys.stderr)
        return 2

    margins = DecisionMargins(model)
    trained = [n for n in names if own[n].is_floating_point() and own[n].requires_grad]
    opt = make_optimizer(cfg["optimizer"], [own[n] for n in trained])
    powersgd = None
    if cfg.get("comm_hook") == "powersgd":
        try:
            drawn_q, _ = safetensors_lite.load(os.path.join(d, "powersgd_q.safetensors"))
        except OSError as e:
            print(f"replay: a powersgd run's dump needs powersgd_q.safetensors: {e}", file=sys.stderr)
            return 2
        powersgd = PowerSgdReference(cfg["powersgd"], len(batches), drawn_q)
    print(f"replay: {workload} ({family}, {sum(p.numel() for p in own.values())} parameters), "
          f"{total_steps} steps, {mode_label(cfg)} batch {list(batches[0]['step1.x'].shape)} "
          f"x {len(batches)}, optimizer {cfg['optimizer']['name']} "
          f"lr {cfg['optimizer']['lr']:g} momentum {cfg['optimizer']['momentum']:g} "
          f"weight_decay {cfg['optimizer']['weight_decay']:g}, torch {torch.__version__}")
    for k in range(1, total_steps + 1):
        # Under Join a rank that ran out has no batch; join_step_loss knows it as inactive.
        xs = [as_input(part[f"step{k}.x"], family, dtype) if k <= n else None
              for part, n in zip(batches, steps_of)]
        ys = [part[f"step{k}.y"].long().reshape(-1) if k <= n else None
              for part, n in zip(batches, steps_of)]
        opt.zero_grad(set_to_none=False)
        if powersgd:
            loss = powersgd_step(model, {n: own[n] for n in trained}, xs, ys, powersgd)
        elif len(batches) > 1 and cfg.get("uneven_inputs") == "join":
            loss = join_step_loss(model, cfg, xs, ys, [k <= n for n in steps_of])
            loss.backward()
        else:
            loss = step_loss(model, cfg, xs, ys)
            loss.backward()
        opt.step()
        if not args.quiet:
            print(f"step {k:>4}/{total_steps} loss {loss.item():.6f}")

    if args.write_final:
        safetensors_lite.save(args.write_final, {n: own[n].detach().to(final[n].dtype) for n in names},
                              {"source": "replay_pytorch.py"})

    print(f"{'parameter':<28} {'shape':<14} {'max|ref|':>10} {'elem_diff':>10} {'update_diff':>11}")
    worst_name, worst = "", -1.0
    elem_name, elem_worst, elem_idx = "", -1.0, 0
    for name in names:
        if not own[name].is_floating_point():  # num_batches_tracked: a count, equal or not
            ok_count = int(own[name].item()) == int(final[name].item())
            print(f"{name:<28} {'[]':<14} {int(final[name].item()):>10} "
                  f"{'equal' if ok_count else 'DIFFERS':>10} {0.0 if ok_count else 1.0:>11.3e}")
            if not ok_count:
                worst_name, worst = name, float("inf")
            continue
        ours, ref, start = own[name].detach().double(), final[name].double(), init[name].double()
        udiff = update_diff(ours, ref, start)
        ediff, idx = elem_diff(ours, ref)
        print(f"{name:<28} {str(list(ref.shape)):<14} {ref.abs().max().item():>10.3e} "
              f"{ediff:>10.3e} {udiff:>11.3e}")
        if udiff > worst:
            worst_name, worst = name, udiff
        if ediff > elem_worst:
            elem_name, elem_worst, elem_idx = name, ediff, idx
    if powersgd:
        print(f"powersgd: {powersgd.iteration} iterations, compression from iteration "
              f"{powersgd.start_iter}, {powersgd.draws_used} random Q draws fed from the dump")
    ok = worst <= args.tolerance
    ours_v = own[elem_name].detach().flatten()[elem_idx].item()
    ref_v = final[elem_name].float().flatten()[elem_idx].item()
    init_v = init[elem_name].float().flatten()[elem_idx].item()
    print(f"worst element: {elem_name}[{elem_idx}] pytorch {ours_v:.9g} ddpbench {ref_v:.9g} "
          f"(init {init_v:.9g}), elem_diff {elem_worst:.3e}")
    inconclusive = not ok and margins.smallest() < args.min_margin
    print(f"MARGIN relu={margins.relu:.2e} maxpool={margins.pool:.2e}")
    print(f"RESULT max_update_diff={worst:.3e} ({worst_name}) tolerance={args.tolerance:.1e} "
          f"{'PASS' if ok else 'INCONCLUSIVE' if inconclusive else 'FAIL'}")
    return 0 if ok else 3 if inconclusive else 1


if __name__ == "__main__":
    sys.exit(main())
