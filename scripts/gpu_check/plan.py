"""The GPU check's training runs, as the suite files `ddpbench suite` runs (named runs, key
"runs": docs/suite-format.md), plus a small single/DP/DDP matrix at world size 1 whose DP
and DDP runs are checked against single; and the order of every step (Note [GPU check
order]).

The runs keep the GPU workloads' names (they name the performance tables and the --only
tags); in the selftest (GPU_CHECK_SELFTEST=1, a CPU machine) each runs a small stand-in on
the CPU, except the runs that need a GPU by their nature (cuda:0 device lists, NCCL), which
then fail as they must.
"""
import fnmatch
import glob
import os

# The selftest's stand-ins for the workloads too big for a 2-core CPU.
STAND_IN = {"mlp-wide": "mlp-small", "gpt2-small": "gpt-tiny", "resnet50": "resnet-tiny"}
RESNET_BATCH = {False: 64, True: 8}  # ResNet-50 at 64 images, its published benchmarks' batch
STEPS = {False: (10, 3), True: (2, 1)}  # (measured, warm-up) steps of every run
MATRIX_TAG = "suite"  # the --only tag of the matrix

SUITE_IMAGE_FOLDER = "data/imagefolder"  # bench/suite/suite_spec.h kSuiteImageFolder
TWO_ON_GPU0 = "cuda:0,cuda:0"  # two ranks sharing the GPU: DDP must use Gloo (NCCL refuses)

# Note [GPU check order]
# A first GPU call may be cut short (its limit, a lost machine), so the steps run in the order
# of the figures that matter most: (1) the CUDA tests; (2) DDP and DP against single on
# mlp-small (the DDP world-size-1 overhead); (3) ddpbench's gpt2-small and resnet50 runs, then
# the same workloads in PyTorch (the vs-PyTorch rows, the MFU); (4) GEMM against cuBLAS;
# (5) the rest. The training runs are therefore three `ddpbench suite` invocations, the
# PARTS below, each its own results folder WORK/suite/PART (`ddpbench suite --resume` takes
# the matrix from the folder, so one folder cannot grow a suite file); whatever reads a run
# record finds it with run_path, in whichever part ran it. all_tags lists every --only tag in
# this order; the follow-up command names, in it, each selected tag that did not pass (failed,
# left out by the budget, or never reached: summary.py's follow_up_tags).
PARTS = (
    ("ddp-dp", ("single-mlp-small", "dp-mlp-small", "ddp-nccl-mlp-small")),
    ("vs-pytorch", ("single-gpt2-small", "single-gpt2-small-tf32", "single-gpt2-small-bf16",
                    "single-gpt2-small-flash", "single-resnet50")),
    ("rest", None),  # every other run, and the matrix
)
TEST_TAGS = ("test_cuda_parity", "test_dp_cuda", "test_dataloader_cuda", "test_process_group_nccl")
LATE_TAGS = ("bn-bench", "projection", "collectives", "collectives-mpi", "nccl-vs-pytorch",
             "memcheck", "racecheck")


def training_runs(selftest):
    """[(name, run fields)]: every single-device run on the suite's device (one on JPEG files),
    then DP over two
    logical replicas, then DDP over Gloo (two ranks on GPU 0) and NCCL (world size 1), each
    also with PowerSGD, its kernels and its two collectives per bucket, from step 3."""
    gpt = "gpt2-small"
    runs = [(f"single-{w}", {"workload": w}) for w in
            ("mlp-small", "mlp-wide", "gpt-tiny", gpt, "embed")]
    runs += [
        (f"single-{gpt}-tf32", {"workload": gpt, "precision": "tf32"}),
        (f"single-{gpt}-bf16", {"workload": gpt, "precision": "bf16"}),
        (f"single-{gpt}-flash", {"workload": gpt, "attention": "flash"}),
        (f"single-{gpt}-graph", {"workload": gpt, "cuda_graph": True}),
        ("single-resnet50", {"workload": "resnet50", "global_batch": RESNET_BATCH[selftest]}),
        ("single-gpt-tiny-graph", {"workload": "gpt-tiny", "cuda_graph": True}),
        # ResNet-50 on JPEGs (the image folder the suite makes): loader workers, page-locked
        # staging with asynchronous copies, u8 images normalized by the CUDA kernel. Against
        # single-resnet50 it is the real-vs-synthetic step.
        ("single-resnet50-files", {"workload": "resnet50", "global_batch": RESNET_BATCH[selftest],
                                   "data": SUITE_IMAGE_FOLDER, "num_workers": 1 if selftest else 8,
                                   "pin_memory": True, "normalize_on_device": True}),
    ]
    out = [(name, dict(fields, mode="single")) for name, fields in runs]
    dp_devices = "cpu:0,cpu:1" if selftest else TWO_ON_GPU0
    out += [
        ("dp-mlp-small", {"mode": "dp", "world_size": 2, "devices": dp_devices}),
        ("ddp-gloo-mlp-small", {"mode": "ddp", "world_size": 2, "devices": TWO_ON_GPU0,
                                "backend": "gloo"}),
        ("ddp-nccl-mlp-small", {"mode": "ddp", "world_size": 1, "backend": "nccl"}),
        ("ddp-powersgd-nccl", {"mode": "ddp", "world_size": 1, "backend": "nccl",
                               "comm_hook": "powersgd", "powersgd_start_iter": 2,
                               "powersgd_rank": 2}),
        ("ddp-powersgd-gloo", {"mode": "ddp", "world_size": 2, "devices": TWO_ON_GPU0,
                               "backend": "gloo", "comm_hook": "powersgd",
                               "powersgd_start_iter": 2}),
        # ZeRO (Note [ZeRO in DDP]): NCCL's reduce-scatter and coalesced all-gather on the GPU,
        # and two padded shards over Gloo on one GPU.
        ("ddp-zero2-nccl", {"mode": "zero2", "world_size": 1, "backend": "nccl"}),
        ("ddp-zero1-gloo", {"mode": "zero1", "world_size": 2, "devices": TWO_ON_GPU0,
                            "backend": "gloo"}),
        # FSDP (Note [FSDP's step]): NCCL's all-gathers and reduce-scatters on the GPU with
        # prefetch and the rate limiter's events, and two padded shards over Gloo on one GPU.
        ("fsdp-nccl-gpt", {"mode": "fsdp", "world_size": 1, "backend": "nccl",
                           "workload": "gpt-tiny"}),
        ("fsdp-gloo-mlp-small", {"mode": "fsdp", "world_size": 2, "devices": TWO_ON_GPU0,
                                 "backend": "gloo"}),
    ]
    for name, fields in out:
        fields.setdefault("workload", "mlp-small")
        if selftest:
            fields["workload"] = STAND_IN.get(fields["workload"], fields["workload"])
    return out


def selected(name, patterns):
    return not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns)


def part_runs(part):
    """The named runs of a part of the training (PARTS), in the plan's order."""
    names = [name for name, _ in training_runs(False)]
    listed = dict(PARTS)[part]
    if listed is not None:
        return [n for n in names if n in listed]
    earlier = {n for _, runs in PARTS if runs for n in runs}
    return [n for n in names if n not in earlier]


def all_tags():
    """Every --only tag, in the order the check runs them (Note [GPU check order])."""
    return [*TEST_TAGS, *part_runs("ddp-dp"), *part_runs("vs-pytorch"), "pytorch",
            "pytorch-resnet50", "gemm", *part_runs("rest"), MATRIX_TAG, *LATE_TAGS]


def run_path(work, name):
    """WORK/suite/PART/runs/NAME.json of whichever part ran `name`; "" when none did."""
    found = sorted(glob.glob(os.path.join(glob.escape(str(work)), "suite", "*", "runs",
                                          glob.escape(name) + ".json")))
    return found[0] if found else ""


def suite_file(selftest, patterns, part="rest", timeout_s=60):
    """The suite file of a part (PARTS): its selected named runs and, in the last part when
    MATRIX_TAG is selected, the matrix (mlp-small and gpt-tiny: single, DP, DDP at world
    size 1, with the correctness check)."""
    steps, warmup = STEPS[selftest]
    mine = set(part_runs(part))
    runs = [dict(name=name, **fields) for name, fields in training_runs(selftest)
            if name in mine and selected(name, patterns)]
    matrix = part == PARTS[-1][0] and selected(MATRIX_TAG, patterns)
    return {
        "name": f"gpu-check-{part}" + ("-selftest" if selftest else ""),
        "workloads": ["mlp-small", "gpt-tiny"] if matrix else [],
        "world_sizes": [1],
        "steps": steps, "warmup": warmup,
        "bucket_sweep_mb": [], "bucket_autotune": False, "overlap_off": False,
        "comm_hooks": [], "comm_hook_workloads": [], "bf16_workloads": [], "flags": [],
        # A DDP collective's limit; a run's wall limit is twice this plus 60 s.
        "timeout_s": timeout_s,
        "runs": runs,
    }


def is_empty(suite):
    return not suite["runs"] and not suite["workloads"]
