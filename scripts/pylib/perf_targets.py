"""The performance targets, defined once: every script that checks one reads it from here
(scripts/peer/compare_pytorch.sh, gloo_ratio.sh, scripts/bench/*.sh, the GPU check's
summary), and docs/performance.md states the same goals.

A target is a ratio or a share measured side by side in one run (README: speed is measured
in benchmarks); `status(key, value)` says met / not met / not measured, or reported for the
figures that have no threshold.
"""
import operator
from dataclasses import dataclass
from typing import Optional

_OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}


@dataclass(frozen=True)
class Target:
    name: str
    op: str                    # "<=", "<", ">=", ">", or "report" (no threshold)
    threshold: Optional[float] = None
    percent: bool = False      # the goal reads as a percentage ("<= 3%")
    against: str = ""          # the goal is another measured figure ("PyTorch's"), not a number

    @property
    def goal(self) -> str:
        if self.op == "report":
            return "report"
        if self.against:
            return f"{self.op} {self.against}"
        if self.percent:
            return f"{self.op} {100 * self.threshold:g}%"
        return f"{self.op} {self.threshold:.2f}"

    def met(self, value: float) -> bool:
        return _OPS[self.op](value, self.threshold)


TARGETS = {
    # CPU (scripts/peer/compare_pytorch.sh --targets, gloo_ratio.sh, scripts/bench/)
    "cpu.ddp_w2_vs_pytorch": Target("DDP 2 ranks step / PyTorch DDP", "<=", 0.70),
    "cpu.ddp_w1_overhead": Target("DDP world size 1 overhead over single", "<=", 0.03, True),
    "cpu.dp_w2_speedup": Target("DP 2 devices speed-up over single, batch 256", ">=", 1.0),
    "cpu.span_overlap_vs_pytorch": Target(
        "overlap ratio >= PyTorch's (PyTorch's span definition)", ">=", against="PT"),
    "cpu.exposed_comm_share": Target("exposed comm with overlap / --no-overlap", "<=", 0.50),
    "cpu.gloo_pg_vs_raw": Target("Gloo allreduce through the group / raw Gloo, 64 MiB", "<=", 1.05),
    "cpu.collectives_vs_raw": Target(
        "ddpbench collectives busbw / the bare library's, every size >= 64 KiB", ">=", 0.95),
    "cpu.ddp_mpi_vs_pytorch": Target("DDP 2 ranks over MPI step / PyTorch DDP over Gloo", "<=", 0.60),
    "cpu.zero1_vs_pytorch": Target(
        "ZeRO-1 step / PyTorch ZeroRedundancyOptimizer (AdamW)", "<=", 0.80),
    "cpu.bucket_auto_vs_best": Target("bucket autotune / best fixed bucket cap", "<=", 1.05),
    "cpu.powersgd_vs_fp32": Target("PowerSGD step / fp32 step", "<", 1.0),
    "cpu.loader_vs_pytorch": Target(
        "image loader images/s / PyTorch DataLoader's, same workers", ">=", 1.5),
    "cpu.real_vs_synthetic_step": Target(
        "step on an image folder / synthetic step, loader not the bottleneck", "<=", 1.05),
    # scripts/cluster/validate_projection.sh: the projection against runs across emulated hosts
    "cpu.projection_hosts_median": Target(
        "median |error| of the projected step across emulated hosts", "<=", 0.10, True),
    "cpu.projection_hosts_max": Target(
        "largest |error| of the projected step across emulated hosts", "<=", 0.25, True),
    # GPU (scripts/gpu_check/summary.py)
    "gpu.gemm_vs_cublas": Target("GEMM step time vs cuBLAS", ">=", 0.85),
    "gpu.gpt2_vs_eager": Target("gpt2-small step vs PyTorch eager", "<=", 0.8),
    "gpu.resnet50_vs_eager": Target("resnet50 step vs PyTorch eager (fp32, 64 images)", "<=", 1.0),
    "gpu.ddp_w1_overhead": Target("DDP world size 1 (NCCL) overhead over single", "<=", 0.02, True),
    "gpu.ddp_w2_overlap": Target("DDP 2 ranks on one GPU (Gloo): overlap ratio", ">", 0.5),
    "gpu.real_vs_synthetic_step": Target(
        "resnet50 step on JPEGs (8 workers, pinned, normalized on the GPU) / synthetic", "<=", 1.05),
    "gpu.mfu": Target("MFU", "report"),
    "gpu.cuda_graph": Target("--cuda-graph step / eager", "report"),
    "gpu.flash_attention": Target(
        "flash attention: step and peak memory / math attention, gpt2-small", "report"),
    "gpu.batch_norm_bandwidth": Target(
        "batch norm: worst fraction of copy bandwidth (resnet50 shapes)", "report"),
    "gpu.cudnn_plan_build": Target("cuDNN plan building, single-resnet50 (all shapes)", "report"),
    "gpu.gemm_activation_pass": Target(
        "GEMM activation pass (separate NaN-keeping kernel)", "report"),
}


def target(key: str) -> Target:
    return TARGETS[key]


def status(key: str, value: Optional[float], met: Optional[bool] = None) -> str:
    """met / not met / reported / not measured. `met` overrides the threshold where the
    comparison is against another measured figure (the overlap against PyTorch's)."""
    t = TARGETS[key]
    if value is None:
        return "not measured"
    if t.op == "report":
        return "reported"
    ok = t.met(value) if met is None else met
    return "met" if ok else "not met"


def row(key: str, value: Optional[float], measured: str, met: Optional[bool] = None,
        suffix: str = "") -> dict:
    """One line of a targets table, as the JSON outputs carry it."""
    t = TARGETS[key]
    return {"target": t.name + suffix, "goal": t.goal, "value": value, "measured": measured,
            "status": status(key, value, met)}
