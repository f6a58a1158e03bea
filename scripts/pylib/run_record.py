"""The run record (`ddpbench run --out`) as the Python side reads it.

The field names are those of reports/run_record.h and reports/schema/run.schema.json, written
here once: every script that reads a run record (the GPU check's summary and projection line,
the benchmark tables, compare_pytorch.sh's table) goes through these paths, and
tests/scripts/test_pylib.py checks each path against the schema. torch_reference.py writes
its records with the same names, so these read PyTorch's records too.
"""
import json
import statistics

# name -> the keys that lead to it from the top of a run record.
PATHS = {
    "step_time_ms": ("summary", "step_time_ms"),
    "step_ms_median": ("summary", "step_time_ms", "median"),
    "samples_per_s": ("summary", "samples_per_s"),
    "tokens_per_s": ("summary", "tokens_per_s"),
    "achieved_flops_per_s": ("summary", "achieved_flops_per_s"),
    "first_loss": ("summary", "first_loss"),
    "last_loss": ("summary", "last_loss"),
    "phases_median_ms": ("summary", "phases_median_ms"),
    "mfu": ("summary", "mfu", "mfu"),
    "mfu_source": ("summary", "mfu", "source"),
    "comm": ("summary", "comm"),
    "overlap_ratio": ("summary", "comm", "overlap_ratio"),
    "comm_bytes_per_step": ("summary", "comm", "bytes_per_step"),
    "workload": ("workload", "name"),
    "mode": ("mode", "name"),
    "devices": ("mode", "devices"),
    "bucket_autotune_chosen_mb": ("mode", "details", "bucket_autotune", "chosen_mb"),
    "precision": ("config", "precision"),
    "attention": ("config", "attention"),
    "global_batch": ("config", "global_batch"),
    "memory": ("memory",),
    "steps": ("steps",),
}

# reports::StepTimeStats, in the schema's order; scripts/peer/measure.py's summarize() too.
STEP_TIME_STATS = ("median", "mean", "p90", "p99", "min", "max", "stddev", "count")
# Keys of steps[] and of steps[].mode that the readers use.
STEP_KEYS = ("step", "measured", "loss", "time_ms", "phases_ms", "mode")
STEP_MODE_KEYS = ("overlap_ratio", "comm_ms", "comm_exposed_ms")


def load(path):
    with open(path) as f:
        return json.load(f)


def get(record, name, default=None):
    """The value PATHS[name] leads to, or `default` where a key on the way is missing."""
    node = record
    for key in PATHS[name]:
        if not isinstance(node, dict) or key not in node:
            return default
        node = node[key]
    return node


def step_ms_median(record):
    return get(record, "step_ms_median")


def measured_steps(record):
    return [s for s in get(record, "steps", []) if s.get("measured")]


def phase_medians(record):
    """{phase: median ms} of the summary."""
    return {p["phase"]: p["median_ms"] for p in get(record, "phases_median_ms", [])}


def compute_ms(record):
    """Median over the measured steps of the step time less its data phase."""
    v = [s["time_ms"] - s["phases_ms"].get("data", 0.0) for s in measured_steps(record)]
    return statistics.median(v) if v else float("nan")


def peak_bytes(record):
    """The largest peak of any device the record names, DDP ranks included."""
    peaks = [m["peak_bytes"] for m in get(record, "memory", [])]
    for rank in record.get("ranks", []):
        peaks += [m["peak_bytes"] for m in rank.get("memory", [])]
    return max(peaks) if peaks else 0


def step_comm(record):
    """The per-step communication figures of the measured steps of a design that synchronises
    gradients (DDP's buckets, DP's reduce; Note [Step stats])."""
    return [s["mode"] for s in measured_steps(record)
            if "overlap_ratio" in s.get("mode", {})]
