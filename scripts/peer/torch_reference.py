#!/usr/bin/env python3
"""Runs a ddpbench workload/config in PyTorch (CPU or CUDA) and writes a record in ddpbench's layout.

    torch_reference.py --mode single|ddp|dp|fsdp|fsdp-grad-op|fsdp-no-shard|fsdp-hybrid
        --workload mlp-small [--device cpu|cuda] [--world-size N]
        [--global-batch B] [--steps S] [--warmup W] [--optimizer sgd|adamw] [--lr] [--momentum]
        [--weight-decay] [--backend gloo|nccl] [--bucket-cap-mb 25] [--first-bucket-mb 1]
        [--grad-as-bucket-view] [--zero-stage 0|1 | --zero] [--zero-bucket-view]
        [--fsdp-wrap block|model] [--no-forward-prefetch] [--shard-group-size N]
        [--seed] [--precision fp32|tf32|bf16[,...]]
        [--attention math|flash[,...]] [--threads N]
        [--workloads-json FILE | --ddpbench BIN] [--out FILE] [--quiet]

The PyTorch side of scripts/peer/compare_pytorch.sh and of the GPU check's "ddpbench vs
PyTorch" rows. Flags carry ddpbench's names and defaults (bench/run/run_config.h,
core/optim.h), so one argument list drives both programs.

Variants (single mode): --precision and --attention take comma-separated lists, and every
combination runs in turn in this one process (one PyTorch start, one CUDA context); --out
then holds "{variant}", replaced by "<precision>-<attention>" for each record. A flash
variant on a PyTorch without F.scaled_dot_product_attention is skipped with a note.
  precision  fp32: TF32 off (exact fp32 GEMMs); tf32: TF32 on; bf16: torch.autocast(bfloat16)
             around the forward (f32 weights and optimizer state; GEMM outputs stored in bf16),
             as ddpbench's --precision bf16 does (its attention computes in f32).
  attention  math: q k^T / sqrt(d), masked softmax, @ v, the [B, H, T, T] probabilities
             materialised (ddpbench's algorithm); flash: F.scaled_dot_product_attention
             (is_causal=True), what a PyTorch user gets.

Modes:
  single  one process, one thread: zero_grad, forward + loss, backward, optimizer step.
  ddp     WORLD_SIZE processes on this host (this script re-executes itself with RANK,
          LOCAL_RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1 and a free MASTER_PORT, as ddpbench's
          own launcher does; an external launcher that sets them works too), backend gloo on
          CPU and nccl on CUDA (rank r on GPU LOCAL_RANK; --backend gloo for several ranks on
          one GPU), torch.nn.parallel.DistributedDataParallel(bucket_cap_mb,
          gradient_as_bucket_view), each rank training on global_batch / world_size samples.
          Rank 0 writes the record.
          With --zero (--zero-redundancy, or ddpbench's own --zero-stage 1): ZeRO-1, the same
          DDP with torch.distributed.optim.ZeroRedundancyOptimizer(optimizer_class=SGD or
          AdamW, parameters_as_bucket_view=--zero-bucket-view (default False),
          overlap_with_ddp=False) in place of the optimizer: DDP's AllReduce in backward, each
          rank steps the parameters it owns (PyTorch's partition: largest first, to the rank
          with the fewest elements so far), then every rank broadcasts its own (one broadcast
          per parameter, or per rank's bucket with --zero-bucket-view). ddpbench's counterpart
          is --zero-stage 1 --zero-variant pytorch (the row zero1-pytorch); its default
          variant, paper, reduce-scatters and all-gathers instead. The record says so:
          config.zero_stage 1, config.zero_variant "pytorch", config.zero (the class and its
          arguments), mode.details.zero (the partition's elements per rank, this rank's
          optimizer state). PyTorch has no ZeRO-2 optimizer (--zero-stage 2 is refused).
  dp      torch.nn.DataParallel over GPUs 0..N-1 (--device cuda); on a CPU-only PyTorch it
          prints why and exits 2.
  fsdp, fsdp-grad-op, fsdp-no-shard, fsdp-hybrid
          ddpbench's FSDP rows against PyTorch's FSDP2: the ranks as in ddp, fully_shard on each
          of the workload's blocks and on the model (the root), the optimizer over the sharded
          parameters (scripts/peer/fsdp_peer.py: the units, the strategies on FSDP2's terms,
          prefetch, and the bytes each step's collectives put on the wire, in steps[].mode and
          summary.bus_bytes_per_step). A PyTorch without fully_shard (Debian's 1.13) gets one
          line, "torch_reference: skipped: ...", and exit status 3, after the arguments are
          checked and before any rank starts.

Timing: a steady clock on CPU (synchronous work); on CUDA, events recorded on the current
stream between the phases and read after the step's last event completes.

Inputs are synthetic (same shapes as ddpbench's datasets, different values): a small
in-memory dataset per rank, from which each step gathers its batch (the "data" phase).
Models are replay_pytorch.py's (parameter names and layer order match ddpbench's), with
PyTorch's default initialisation.

What one step's time covers, per mode, mirrors ddpbench (bench/run/runner_single.cpp,
bench/run/runner_ddp.cpp, bench/run/trainer.cpp): data + forward + backward + optimizer. In single
mode zero_grad runs inside the backward phase (as in ddpbench); in ddp mode it runs before
the timed region (ddpbench's DDP runner does not time it either). zero_grad uses PyTorch 1.13's
default (set_to_none=False), which was measured faster here than set_to_none=True
(docs/performance.md); a PyTorch 2.x runs its own default, set_to_none=True, and the record's
config.zero_grad_set_to_none says which ran. Times come from time.perf_counter (a steady
clock); CPU work is synchronous, so no device synchronisation is needed. With --zero, ZeroRedundancyOptimizer.step() is two phases, as
ddpbench's ZeRO rows split theirs: "optimizer" (the local step on this rank's shard) and
"param_broadcast" (kind communication: _sync_params, every rank's shard broadcast from its
owner), timed by wrapping the instance's _sync_params, which step() calls in PyTorch 1.13 and
2.x; where a PyTorch has no _sync_params the whole step is "optimizer".

PyTorch 2.x applies the first bucket's cap (dist._DEFAULT_FIRST_BUCKET_BYTES) only when
bucket_cap_mb is left at its default (None, 25 MiB); 1.13 always does. So at --bucket-cap-mb 25
the script passes None on such a PyTorch, and the buckets match 1.13's; at another cap such a
PyTorch makes the first bucket as large as the others (a note says so; the record's
mode.details.bucket_sizes has the buckets PyTorch made).

DDP communication (per step, under steps[].mode): PyTorch's own DDP logger, sampled every
iteration (_set_ddp_runtime_logging_sample_rate(1)), read through
ddp_model._get_ddp_logging_data(). PyTorch 1.13 has, in ns, backward_comm_time (first
bucket launched .. all buckets done), backward_compute_comm_overlap_time (first bucket
launched .. backward compute done) and their running averages avg_*; the logger records an
iteration's numbers in the next iteration's forward, so the script reads them one step late
and asks the logger once more after the last step. Per step:
    comm_ms          = backward_comm_time
    comm_exposed_ms  = backward_comm_time_end - max(backward_compute_time_end, comm start)
    overlap_ratio    = backward_compute_comm_overlap_time / backward_comm_time
ddpbench's comm_ms is the union of the collectives' busy intervals instead of one span, so
small differences in comm_ms are a matter of definition; the exposed part is defined alike.
With --zero these figures are backward's AllReduce alone (DDP's logger knows nothing of the
optimizer); ZeroRedundancyOptimizer's broadcasts are the phase param_broadcast.
"""
import argparse
import datetime
import json
import os
import platform
import socket
import subprocess
import sys
import time

# Debian's PyTorch calls OpenBLAS (pthread build) through libblas.so.3, and
# torch.set_num_threads() does not reach OpenBLAS's own pool: pin it before it loads.
# "--threads 0" keeps PyTorch's out-of-the-box threading (one thread per core in every
# process), which is what a script started without torchrun gets; it must be seen before
# torch is imported, so it is read from argv here and again by argparse below.

def _threads_from_argv():
    for i, a in enumerate(sys.argv):
        if a == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return "1"


if _threads_from_argv() != "0":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", _threads_from_argv())

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import openblas_threads, percentile, set_cuda_tf32, summarize  # noqa: E402
from models import Embed, Gpt, Mlp, gpt2_init_, make_optimizer, optimizer_spec  # noqa: E402
import fsdp_peer  # noqa: E402
import workload_table  # noqa: E402  (ddpbench's presets: ddpbench workloads --json)

DIST_MODES = ("ddp",) + tuple(fsdp_peer.MODES)  # a process per rank
DATASET_BATCHES = 8  # synthetic batches per rank to cycle through
SCHEMA_VERSION = 2   # reports/json_io.h kSchemaVersion


def build(spec, use_sdpa):
    f = spec["family"]
    if f == "mlp":
        return Mlp(workload_table.widths(spec))
    if f == "resnet":  # torchvision's own model, as ddpbench's workloads/resnet.cpp mirrors
        from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet
        return ResNet(Bottleneck if spec["bottleneck"] else BasicBlock, spec["blocks"],
                      num_classes=spec["classes"])
    if f == "gpt":
        model = Gpt(spec["vocab"], spec["seq_len"], spec["n_embd"], spec["n_layer"],
                    spec["n_head"], use_sdpa)
        gpt2_init_(model, spec["n_layer"])
        return model
    return Embed(spec["vocab"], spec["n_embd"], spec["ids_per_sample"], spec["hidden"][0],
                 spec["classes"])


def synthetic_data(spec, n, gen):
    """(x, y) with n samples in the shapes ddpbench's dataset for this family produces."""
    f = spec["family"]
    if f == "mlp":
        return (torch.randn(n, spec["in_features"], generator=gen),
                torch.randint(0, spec["classes"], (n,), generator=gen))
    if f == "resnet":
        side = spec["image_size"]
        return (torch.randn(n, 3, side, side, generator=gen),
                torch.randint(0, spec["classes"], (n,), generator=gen))
    if f == "gpt":
        shape = (n, spec["seq_len"])
        return (torch.randint(0, spec["vocab"], shape, generator=gen),
                torch.randint(0, spec["vocab"], shape, generator=gen))
    return (torch.randint(0, spec["vocab"], (n, spec["ids_per_sample"]), generator=gen),
            torch.randint(0, spec["classes"], (n,), generator=gen))


def tokens_per_sample(spec):
    return spec["seq_len"] if spec["family"] == "gpt" else 1


def train_flops_per_sample(spec):
    """6 x multiply-adds of the Linear layers, as ddpbench counts it for the MLP; 0 otherwise."""
    if spec["family"] != "mlp":
        return 0.0
    w = workload_table.widths(spec)
    return 6.0 * sum(a * b for a, b in zip(w[:-1], w[1:]))


def loss_of(logits, y):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def presets_for(argv):
    """ddpbench's presets that have a PyTorch twin here (mlp-skip's conditionally skipped
    branch has none), from the table --workloads-json or --ddpbench point at."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--workloads-json", default=None)
    pre.add_argument("--ddpbench", default=None)
    known, _ = pre.parse_known_args(argv)
    try:
        table = workload_table.load(known.workloads_json, known.ddpbench)
    except workload_table.TableError as e:
        sys.exit(f"torch_reference: {e}")
    return {k: v for k, v in table.items() if not v.get("conditional_branch")}


def parse_args(argv):
    presets = presets_for(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads-json", default=None,
                    help="ddpbench's preset table (ddpbench workloads --json > FILE)")
    ap.add_argument("--ddpbench", default=None,
                    help="or the ddpbench binary to ask for it (default: $DDPBENCH_BIN, then the "
                         "repository's build/ci)")
    ap.add_argument("--mode", choices=("single", "dp", "ddp") + tuple(fsdp_peer.MODES),
                    default="single")
    ap.add_argument("--workload", required=True, choices=sorted(presets))
    ap.add_argument("--device", default="cpu", help="cpu or cuda (a PyTorch built with CUDA)")
    ap.add_argument("--world-size", type=int, default=1)
    ap.add_argument("--backend", default="auto", help="gloo or nccl (default: nccl on cuda, gloo on cpu)")
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0)
    ap.add_argument("--first-bucket-mb", type=float, default=1.0)
    ap.add_argument("--grad-as-bucket-view", action="store_true")
    ap.add_argument("--zero-stage", type=int, default=0,
                    help="ddp: 1 is ZeRO-1, torch.distributed.optim.ZeroRedundancyOptimizer around "
                         "the optimizer (ddpbench's flag; 0: plain DDP, the default)")
    ap.add_argument("--zero", "--zero-redundancy", dest="zero_stage", action="store_const",
                    const=1, default=0, help="ddp: the same as --zero-stage 1")
    ap.add_argument("--zero-bucket-view", action="store_true",
                    help="--zero: parameters_as_bucket_view=True (one broadcast per rank's "
                         "bucket instead of one per parameter)")
    fsdp_peer.add_args(ap)
    ap.add_argument("--global-batch", type=int, default=0, help="default: the workload's")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--optimizer", choices=("sgd", "adamw"), default="sgd")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--precision", default="fp32",
                    help="fp32, tf32 or bf16, or a comma-separated list of them (variants). "
                         "bf16: torch.autocast(bfloat16) around the forward (f32 weights and "
                         "optimizer state), the counterpart of ddpbench --precision bf16")
    ap.add_argument("--attention", default="math",
                    help="math or flash, or a list (gpt: flash uses "
                         "F.scaled_dot_product_attention, PyTorch >= 2.0)")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads per process (default 1, as torchrun sets for several ranks "
                         "per node); 0 keeps PyTorch's default")
    ap.add_argument("--timeout", type=float, default=300.0, help="ddp: rendezvous timeout (s)")
    ap.add_argument("--out", default="", help="write the JSON record here (default: stdout)")
    ap.add_argument("--quiet", action="store_true", help="no per-step lines")
    args = ap.parse_args(argv)
    args.precisions = _choices(ap, "--precision", args.precision, ("fp32", "tf32", "bf16"))
    args.attentions = _choices(ap, "--attention", args.attention, ("math", "flash"))
    args.precision, args.attention = args.precisions[0], args.attentions[0]
    variants = len(args.precisions) * len(args.attentions)
    if variants > 1 and args.mode != "single":
        ap.error("several --precision/--attention variants run in --mode single only")
    if variants > 1 and "{variant}" not in args.out:
        ap.error("several variants need an --out holding {variant} (one record each)")
    args.spec = presets[args.workload]
    if not args.global_batch:
        args.global_batch = args.spec["default_batch"]
    args.device = args.device.split(":")[0]
    if args.device not in ("cpu", "cuda"):
        ap.error(f"--device {args.device}: expected cpu or cuda")
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error(f"--device cuda: this PyTorch ({torch.__version__}) sees no CUDA device")
    if args.mode == "dp" and args.device == "cuda" and args.world_size > torch.cuda.device_count():
        ap.error(f"--mode dp --world-size {args.world_size}: only {torch.cuda.device_count()} GPUs")
    if args.backend == "auto":
        args.backend = "nccl" if args.device == "cuda" else "gloo"
    if args.mode == "single" and args.world_size != 1:
        ap.error("--mode single runs on one device: drop --world-size")
    if args.zero_stage not in (0, 1):
        ap.error(f"--zero-stage {args.zero_stage}: PyTorch's torch.distributed.optim has ZeRO-1 "
                 "only (ZeroRedundancyOptimizer); ddpbench's stage 2 has no counterpart here")
    fsdp_peer.check_args(ap, args)
    if args.zero_stage and args.mode != "ddp":
        ap.error("--zero (ZeroRedundancyOptimizer) shards over DDP's ranks: it needs --mode ddp")
    if args.zero_bucket_view and not args.zero_stage:
        ap.error("--zero-bucket-view is ZeroRedundancyOptimizer's parameters_as_bucket_view: "
                 "it goes with --zero")
    if args.mode in DIST_MODES and args.global_batch % args.world_size:
        ap.error(f"--global-batch {args.global_batch} does not divide into --world-size "
                 f"{args.world_size} ranks")
    if args.steps <= 0 or args.warmup < 0 or args.world_size < 1:
        ap.error("--steps must be positive, --warmup >= 0, --world-size >= 1")
    return args


def _choices(ap, flag, text, allowed):
    values = [v for v in text.split(",") if v]
    if not values or any(v not in allowed for v in values) or len(set(values)) != len(values):
        ap.error(f"{flag} takes {', '.join(allowed)} (comma-separated, each once), got {text!r}")
    return values


def zero_grad_sets_to_none():
    """The default of Optimizer.zero_grad's set_to_none (1.13: False, 2.x: True): the one this
    script's opt.zero_grad() runs (ZeroRedundancyOptimizer inherits it)."""
    import inspect
    return bool(inspect.signature(torch.optim.Optimizer.zero_grad).parameters["set_to_none"].default)


def zero_json(args):
    """What --zero builds, as the record's config.zero states it."""
    cls, _ = optimizer_spec({"name": args.optimizer, "lr": args.lr, "momentum": args.momentum,
                             "weight_decay": args.weight_decay, "beta1": args.beta1,
                             "beta2": args.beta2, "eps": args.eps})
    return {"implementation": "torch.distributed.optim.ZeroRedundancyOptimizer",
            "optimizer_class": f"torch.optim.{cls.__name__}",
            "parameters_as_bucket_view": args.zero_bucket_view, "overlap_with_ddp": False,
            "process_group": "the default group (every rank)"}


def config_json(args):
    cfg = {"mode": args.mode, "workload": args.workload, "device": args.device,
            "world_size": args.world_size, "backend": args.backend if args.mode in DIST_MODES else "",
            "bucket_cap_mb": args.bucket_cap_mb, "first_bucket_mb": args.first_bucket_mb,
            "grad_as_bucket_view": args.grad_as_bucket_view, "global_batch": args.global_batch,
            "steps": args.steps, "warmup": args.warmup, "seed": args.seed,
            "optimizer": {"name": args.optimizer, "lr": args.lr, "momentum": args.momentum,
                          "weight_decay": args.weight_decay, "beta1": args.beta1,
                          "beta2": args.beta2, "eps": args.eps, "nesterov": False,
                          "dampening": 0.0},
            "precision": args.precision, "attention": args.attention,
            "zero_grad_set_to_none": zero_grad_sets_to_none(), "out": args.out,
            # ddpbench's names: ZeroRedundancyOptimizer is its --zero-variant pytorch.
            "zero_stage": args.zero_stage, "zero_variant": "pytorch" if args.zero_stage else ""}
    if args.zero_stage:
        cfg["zero"] = zero_json(args)
    if args.mode in fsdp_peer.MODES:  # ddpbench's names for its FSDP options
        cfg.update({"sharding_strategy": fsdp_peer.MODES[args.mode], "fsdp_wrap": args.fsdp_wrap,
                    "forward_prefetch": not args.no_forward_prefetch, "backward_prefetch": True,
                    "shard_group_size": args.shard_group_size})
    return cfg


def ddp_bucket_cap(args, rank):
    """DDP's bucket_cap_mb: None for the 25 MiB default on a PyTorch whose default is None
    (2.x), which applies the first bucket's cap only then; see the module's docstring."""
    import inspect
    default = inspect.signature(torch.nn.parallel.DistributedDataParallel.__init__)\
        .parameters["bucket_cap_mb"].default
    if default is not None:
        return args.bucket_cap_mb
    if args.bucket_cap_mb == 25.0:
        return None
    if rank == 0 and args.first_bucket_mb != args.bucket_cap_mb:
        print(f"torch_reference: note: torch {torch.__version__} applies no first-bucket cap with "
              f"a bucket_cap_mb other than its default, so --first-bucket-mb "
              f"{args.first_bucket_mb:g} may not apply (mode.details.bucket_sizes has the buckets)",
              file=sys.stderr)
    return args.bucket_cap_mb


def zero_details(args, opt):
    """The record's mode.details.zero: the configuration, the partition (elements each rank
    steps) and this rank's optimizer state. The partition comes from ZeroRedundancyOptimizer's
    _partition_parameters (None where a PyTorch lacks it)."""
    out = zero_json(args)
    try:
        out["partition_numel"] = [sum(p.numel() for g in groups for p in g["params"])
                                  for groups in opt._partition_parameters()]
    except (AttributeError, TypeError, KeyError):
        out["partition_numel"] = None
    out["local_state_bytes"] = sum(t.numel() * t.element_size() for st in opt.optim.state.values()
                                   for t in st.values() if torch.is_tensor(t))
    return out


# ---- DDP launcher -------------------------------------------------------------------------

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args, argv):
    """Starts world_size copies of this script as ranks and waits; the first failure ends all."""
    port = free_port()
    procs = []
    for rank in range(args.world_size):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(args.world_size),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OPENBLAS_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv, env=env))
    status = 0
    pending = list(enumerate(procs))
    while pending:
        for item in list(pending):
            rank, p = item
            rc = p.poll()
            if rc is None:
                continue
            pending.remove(item)
            if rc != 0 and status == 0:
                status = rc if rc > 0 else 1
                print(f"torch_reference: rank {rank} exited with {rc}; stopping the other ranks",
                      file=sys.stderr)
                for _, q in pending:
                    q.terminate()
        time.sleep(0.05)
    return status


# ---- Training loop ------------------------------------------------------------------------

def run(args):
    spec = args.spec
    if args.attention == "flash" and spec["family"] == "gpt":
        if not hasattr(F, "scaled_dot_product_attention"):
            print(f"torch_reference: --attention flash needs F.scaled_dot_product_attention "
                  f"(PyTorch >= 2.0); this is {torch.__version__}", file=sys.stderr)
            return 2
    ddp = args.mode == "ddp"
    fsdp = args.mode in fsdp_peer.MODES
    rank, world = 0, 1
    if ddp or fsdp:
        import torch.distributed as dist
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        if world != args.world_size:
            raise SystemExit(f"torch_reference: --world-size {args.world_size} but WORLD_SIZE={world}")
        dist.init_process_group(args.backend, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=args.timeout))
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)  # same on every rank; DDP broadcasts rank 0's anyway
    cuda = args.device == "cuda"
    # DDP rank r uses GPU LOCAL_RANK (ranks beyond the GPU count share them, as with gloo on
    # one GPU); DP and single use GPU 0 as the master.
    device = torch.device("cpu")
    if cuda:
        local = int(os.environ.get("LOCAL_RANK", "0")) if ddp or fsdp else 0
        device = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(device)
    if cuda:  # tf32 has no CPU counterpart (ddpbench's CPU GEMMs stay f32 as well)
        set_cuda_tf32(args.precision == "tf32")
        torch.cuda.empty_cache()  # a variant before this one in the process leaves nothing
        torch.cuda.reset_peak_memory_stats(device)
    use_sdpa = args.attention == "flash" and spec["family"] == "gpt"
    model = build(spec, use_sdpa).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    if args.mode == "dp":
        net = torch.nn.DataParallel(model, device_ids=list(range(args.world_size)))
    elif ddp:
        # The first bucket's cap is a module-level knob in PyTorch 1.13 (read in DDP's ctor).
        dist._DEFAULT_FIRST_BUCKET_BYTES = int(args.first_bucket_mb * 1024 * 1024)
        net = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if cuda else None,
            bucket_cap_mb=ddp_bucket_cap(args, rank),
            gradient_as_bucket_view=args.grad_as_bucket_view)
        net._set_ddp_runtime_logging_sample_rate(1)
    if args.mode == "single":
        net = model
    if fsdp:
        fsdp_units = fsdp_peer.shard(model, spec, args, world, device)
        net = model
        wire = fsdp_peer.WireCounter(gloo=args.backend == "gloo")
    opt_cfg = {"name": args.optimizer, "lr": args.lr, "momentum": args.momentum,
               "weight_decay": args.weight_decay, "beta1": args.beta1, "beta2": args.beta2,
               "eps": args.eps}
    if args.zero_stage:
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt_class, opt_kwargs = optimizer_spec(opt_cfg)
        opt = ZeroRedundancyOptimizer(list(net.parameters()), optimizer_class=opt_class,
                                      parameters_as_bucket_view=args.zero_bucket_view,
                                      overlap_with_ddp=False, **opt_kwargs)
    else:
        opt = make_optimizer(opt_cfg, list(net.parameters()))

    batch = args.global_batch // world
    gen = torch.Generator().manual_seed(args.seed * 1000003 + rank)
    data_x, data_y = synthetic_data(spec, DATASET_BATCHES * batch, gen)
    order = torch.randperm(DATASET_BATCHES * batch, generator=gen)
    data_x, data_y, order = data_x.to(device), data_y.to(device), order.to(device)
    if rank == 0:
        zero = (f", ZeroRedundancyOptimizer({type(opt.optim).__name__}, parameters_as_bucket_view="
                f"{args.zero_bucket_view})" if args.zero_stage else "")
        if fsdp:
            zero = (f", fully_shard({fsdp_peer.MODES[args.mode]}) on {len(fsdp_units) - 1} "
                    "units and the root")
        print(f"torch_reference: mode {args.mode}{zero}, workload {args.workload} ({n_params} "
              f"parameters), world size {world}, batch {batch} per rank, torch {torch.__version__}",
              file=sys.stderr)

    total = args.warmup + args.steps
    steps, logs = [], []
    cursor = 0
    # CPU: a steady clock (the work is synchronous). CUDA: events on the current stream, read
    # after the step's last one completes, as ddpbench times GPU work.
    if cuda:
        events = [torch.cuda.Event(enable_timing=True) for _ in range(6)]
        marks = iter(())

        def clock():
            e = next(marks)
            e.record()
            return e
    else:
        clock = time.perf_counter
    # --zero: step() = the local step, then _sync_params (the broadcasts); a mark between them.
    sync_marks = []
    if args.zero_stage and hasattr(opt, "_sync_params"):
        sync_params = opt._sync_params

        def timed_sync_params():
            sync_marks.append(clock())
            sync_params()
        opt._sync_params = timed_sync_params
    for k in range(1, total + 1):
        if ddp or fsdp:
            opt.zero_grad()  # untimed, as in ddpbench's DDP and FSDP runners
        if cuda:
            marks = iter(events)
        t0 = clock()
        if cursor + batch > data_x.shape[0]:
            cursor = 0
        idx = order[cursor:cursor + batch]
        cursor += batch
        x, y = data_x.index_select(0, idx), data_y.index_select(0, idx)
        t1 = clock()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            out = net(x)
        loss = loss_of(out.float(), y)
        t2 = clock()
        if not (ddp or fsdp):
            opt.zero_grad()  # inside the backward phase, as in ddpbench's single runner
        loss.backward()  # DDP: returns after every bucket's allreduce is done
        t3 = clock()
        sync_marks.clear()
        opt.step()  # --zero: marks sync_marks between the local step and the broadcasts
        t4 = clock()
        span = [t0, t1, t2, t3] + sync_marks[:1] + [t4]
        if cuda:
            t4.synchronize()
            span = [0.0] + [t0.elapsed_time(e) / 1e3 for e in span[1:]]
        names = ["data", "forward", "backward", "optimizer"]
        if len(span) == 6:
            names.append("param_broadcast")
        phases = {n: (b - a) * 1e3 for n, a, b in zip(names, span, span[1:])}
        rec = {"step": k, "measured": k > args.warmup, "loss": loss.item(),
               "time_ms": (span[-1] - span[0]) * 1e3, "phases_ms": phases}
        if fsdp:
            rec["mode"] = {"rank": rank, "collectives": wire.take()}
        steps.append(rec)
        if ddp:
            logs.append(net._get_ddp_logging_data())  # holds step k-1's numbers
        if rank == 0 and not args.quiet:
            print(f"step {k:>4}/{total} loss {rec['loss']:.6f} time {rec['time_ms']:.2f} ms"
                  f"{'' if rec['measured'] else ' (warm-up)'}", file=sys.stderr)

    details = {}
    if ddp:
        # Flush the last step's statistics (the logger records them in the next forward; an
        # extra forward without its backward left rank 0 hanging at exit).
        net.logger.set_runtime_stats_and_log()
        logs.append(net._get_ddp_logging_data())
        for k, rec in enumerate(steps):
            d = logs[k + 1]
            if d.get("iteration") != k + 1 or "backward_comm_time" not in d:
                continue  # not sampled for this step
            comm = d["backward_comm_time"] / 1e6
            overlap = d["backward_compute_comm_overlap_time"] / 1e6
            exposed = max(0.0, d["backward_comm_time_end"]
                          - max(d["backward_compute_time_end"], d["backward_comm_time_start"])) / 1e6
            rec["mode"] = {"rank": rank, "comm_ms": comm, "comm_exposed_ms": exposed,
                           "overlap_ms": overlap,
                           "backward_compute_ms": d["backward_compute_time"] / 1e6,
                           "overlap_ratio": overlap / comm if comm > 0 else 0.0}
        last = logs[-1]
        keys = ("avg_backward_comm_time", "avg_backward_compute_comm_overlap_time",
                "avg_backward_compute_time", "avg_forward_compute_time")
        avg = {k: last[k] for k in keys if k in last}
        details = {"backend": args.backend, "world_size": world, "launcher": "torch_reference.py",
                   "bucket_sizes": last.get("bucket_sizes"),
                   "rebuilt_bucket_sizes": last.get("rebuilt_bucket_sizes"),
                   "has_rebuilt_buckets": last.get("has_rebuilt_buckets"),
                   "gloo_num_threads": last.get("gloo_num_threads"),
                   "ddp_logging_avg_ns": avg,
                   "ddp_logging_overlap_ratio": (avg["avg_backward_compute_comm_overlap_time"]
                                                 / avg["avg_backward_comm_time"])
                   if avg.get("avg_backward_comm_time") else None}
        if args.zero_stage:
            details["zero"] = zero_details(args, opt)
    if fsdp:
        details = {"backend": args.backend, "world_size": world, "launcher": "torch_reference.py",
                   "fsdp": fsdp_peer.details(args, fsdp_units, list(model.parameters()), opt,
                                             world)}

    measured = [s for s in steps if s["measured"]]
    st = summarize([s["time_ms"] for s in measured])
    # Each phase with its kind, as ddpbench's records carry it (Note [Phase kinds]).
    kinds = {"data": "data", "param_broadcast": "communication"}
    phase_med = [{"phase": p, "kind": kinds.get(p, "compute"),
                  "median_ms": percentile([s["phases_ms"][p] for s in measured], 50)}
                 for p in measured[0]["phases_ms"]]
    samples_per_s = args.global_batch * 1000.0 / st["median"] if st["median"] > 0 else 0.0
    summary = {"step_time_ms": st, "phases_median_ms": phase_med, "samples_per_s": samples_per_s,
               "tokens_per_s": samples_per_s * tokens_per_sample(spec),
               "achieved_flops_per_s": samples_per_s * train_flops_per_sample(spec),
               "first_loss": steps[0]["loss"], "last_loss": steps[-1]["loss"]}
    with_mode = [s["mode"] for s in measured if "mode" in s]
    if fsdp:
        summary["bus_bytes_per_step"] = percentile(
            [s["mode"]["collectives"]["bus_bytes"] for s in measured], 50)
    if ddp and with_mode:
        summary["comm_median_ms"] = percentile([m["comm_ms"] for m in with_mode], 50)
        summary["comm_exposed_median_ms"] = percentile([m["comm_exposed_ms"] for m in with_mode], 50)
        summary["overlap_ratio_median"] = percentile([m["overlap_ratio"] for m in with_mode], 50)

    record = {
        "schema_version": SCHEMA_VERSION, "implementation": "pytorch", "kind": "run",
        "context": {"torch_version": torch.__version__, "python": platform.python_version(),
                    "host": platform.node(), "threads": torch.get_num_threads(),
                    "openblas_threads": openblas_threads(),
                    "date": datetime.datetime.now(datetime.timezone.utc).isoformat()},
        "config": config_json(args),
        "mode": {"name": args.mode, "details": details,
                 "devices": ",".join(f"cuda:{i}" for i in range(args.world_size)) if args.mode == "dp"
                 else ",".join([str(device)] * world)},
        "workload": {"name": args.workload, "family": spec["family"], "parameters": n_params,
                     "tokens_per_sample": tokens_per_sample(spec),
                     "train_flops_per_sample": train_flops_per_sample(spec)},
        "steps": steps, "summary": summary,
    }
    if cuda:
        record["memory"] = [{"device": str(device),
                             "peak_bytes": torch.cuda.max_memory_allocated(device),
                             "reserved_bytes": torch.cuda.max_memory_reserved(device)}]
    if ddp or fsdp:
        mine = {"rank": rank, "device": str(device), "step_time_ms": st, "phases_median_ms": phase_med}
        if fsdp:
            mine["fsdp"] = {k: details["fsdp"][k] for k in ("local_param_bytes",
                                                            "local_optimizer_state_bytes")}
        ranks = [None] * world
        dist.all_gather_object(ranks, mine)
        meds = [r["step_time_ms"]["median"] for r in ranks]
        record["ranks"] = ranks
        summary["straggler_skew"] = max(meds) / min(meds) if min(meds) > 0 else 0.0
        # No destroy_process_group(): that was the last collective, and main() leaves with
        # os._exit because PyTorch 1.13's gloo teardown can deadlock (see there).
    if rank != 0:
        return 0
    line = (f"summary: median step {st['median']:.3f} ms (p90 {st['p90']:.3f}), "
            f"{samples_per_s:.1f} samples/s, loss {summary['first_loss']:.4f} -> {summary['last_loss']:.4f}")
    if "bus_bytes_per_step" in summary:
        line += f"; {summary['bus_bytes_per_step'] / 1e6:.3f} MB bus bytes per step and rank"
    if "overlap_ratio_median" in summary:
        line += (f"; comm {summary['comm_median_ms']:.2f} ms, exposed {summary['comm_exposed_median_ms']:.2f} ms,"
                 f" overlap {summary['overlap_ratio_median']:.2f} (DDP logger average "
                 f"{details['ddp_logging_overlap_ratio'] or 0:.2f})")
    print(line, file=sys.stderr)
    print("phases (median ms):" + "".join(f" {p['phase']} {p['median_ms']:.2f}" for p in phase_med),
          file=sys.stderr)
    text = json.dumps(record, indent=1)
    if args.out:
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, args.out)
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        print(text)
    return 0


def run_variants(args):
    """Every --precision x --attention combination in turn, a record each; flash variants
    are skipped with a note where PyTorch has no scaled_dot_product_attention."""
    template, ran, rc = args.out, 0, 0
    for attention in args.attentions:
        if attention == "flash" and args.spec["family"] == "gpt" and \
                not hasattr(F, "scaled_dot_product_attention"):
            print(f"torch_reference: flash variants skipped: torch {torch.__version__} has no "
                  "F.scaled_dot_product_attention", file=sys.stderr)
            continue
        for precision in args.precisions:
            args.precision, args.attention = precision, attention
            args.out = template.replace("{variant}", f"{precision}-{attention}")
            print(f"torch_reference: variant {precision} {attention}", file=sys.stderr)
            rc = rc or run(args)
            ran += 1
    return rc if ran else 1


def main(argv):
    args = parse_args(argv)
    if args.mode == "dp" and args.device != "cuda":
        print("torch_reference: --mode dp needs CUDA: torch.nn.DataParallel replicates the module "
              f"onto GPUs, and this PyTorch ({torch.__version__}, cuda available: "
              f"{torch.cuda.is_available()}) runs on the CPU only. Compare DP on a CUDA machine; "
              "on the CPU use --mode single or --mode ddp.", file=sys.stderr)
        return 2
    if args.mode in fsdp_peer.MODES and fsdp_peer.fully_shard_api() is None:
        print(fsdp_peer.skip_line(args.mode), file=sys.stderr)
        return fsdp_peer.SKIPPED
    if args.mode in DIST_MODES and "RANK" not in os.environ:
        return launch(args, argv)
    if len(args.precisions) * len(args.attentions) > 1:
        return run_variants(args)
    rc = run(args)
    if args.mode in DIST_MODES:
        # PyTorch 1.13 can deadlock in interpreter shutdown here: ~Reducer destroys the gloo
        # process group, whose destructor joins a worker thread while holding the GIL, and
        # that thread waits for the GIL to free a tensor (seen on rank 1, twice in ~40 runs,
        # once with destroy_process_group() still called before).
        # Everything is written by now, so leave without running destructors.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
