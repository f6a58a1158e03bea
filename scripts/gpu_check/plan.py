"""The GPU check's training runs, as the suite file `ddpbench suite` runs (named runs, key
"runs": docs/suite-format.md), plus a small single/DP/DDP matrix at world size 1 whose DP
and DDP runs are checked against single.

The runs keep the GPU workloads' names (they name the performance tables and the --only
tags); in the selftest (GPU_CHECK_SELFTEST=1, a CPU machine) each runs a small stand-in on
the CPU, except the runs that need a GPU by their nature (cuda:0 device lists, NCCL), which
then fail as they must.
"""
import fnmatch

# The selftest's stand-ins for the workloads too big for a 2-core CPU.
STAND_IN = {"mlp-wide": "mlp-small", "gpt2-small": "gpt-tiny", "resnet50": "resnet-tiny"}
RESNET_BATCH = {False: 64, True: 8}  # ResNet-50 at 64 images, its published benchmarks' batch
STEPS = {False: (10, 3), True: (2, 1)}  # (measured, warm-up) steps of every run
MATRIX_TAG = "suite"  # the --only tag of the matrix

SUITE_IMAGE_FOLDER = "data/imagefolder"  # bench/suite/suite_spec.h kSuiteImageFolder
TWO_ON_GPU0 = "cuda:0,cuda:0"  # two ranks sharing the GPU: DDP must use Gloo (NCCL refuses)


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
    ]
    for name, fields in out:
        fields.setdefault("workload", "mlp-small")
        if selftest:
            fields["workload"] = STAND_IN.get(fields["workload"], fields["workload"])
    return out


def selected(name, patterns):
    return not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns)


def suite_file(selftest, patterns, timeout_s=60):
    """The suite file: the selected named runs and, when MATRIX_TAG is selected, the matrix
    (mlp-small and gpt-tiny: single, DP, DDP at world size 1, with the correctness check)."""
    steps, warmup = STEPS[selftest]
    runs = [dict(name=name, **fields) for name, fields in training_runs(selftest)
            if selected(name, patterns)]
    matrix = selected(MATRIX_TAG, patterns)
    return {
        "name": "gpu-check" + ("-selftest" if selftest else ""),
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
