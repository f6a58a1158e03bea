"""Timing and environment helpers shared by the peer scripts, with ddpbench's definitions."""
import ctypes
import statistics

import torch


def percentile(values, q):
    """The q-th percentile (0-100), linear between order statistics, as bench/measure/stats.cpp;
    0 for no values."""
    if not values:
        return 0.0
    v = sorted(values)
    pos = q / 100.0 * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def summarize(values):
    """The summary ddpbench's records carry for a series of step times (ms)."""
    if not values:
        return {"median": 0.0, "mean": 0.0, "p90": 0.0, "p99": 0.0, "min": 0.0, "max": 0.0,
                "stddev": 0.0, "count": 0}
    return {"median": percentile(values, 50), "mean": statistics.fmean(values),
            "p90": percentile(values, 90), "p99": percentile(values, 99), "min": min(values),
            "max": max(values), "stddev": statistics.stdev(values) if len(values) > 1 else 0.0,
            "count": len(values)}


def openblas_threads():
    """OpenBLAS's thread count as seen by the loaded library, or None when not found."""
    for lib in ("libopenblas.so.0", "libblas.so.3"):
        try:
            return int(ctypes.CDLL(lib).openblas_get_num_threads())
        except (OSError, AttributeError):
            continue
    return None


def set_cuda_tf32(enabled):
    """TF32 for CUDA GEMMs and convolutions: the fp32_precision API where torch has it
    (2.9 and later, which deprecate allow_tf32), else the allow_tf32 switches."""
    mode = "tf32" if enabled else "ieee"
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        matmul.fp32_precision = mode
        conv = getattr(torch.backends.cudnn, "conv", None)
        if conv is not None and hasattr(conv, "fp32_precision"):
            conv.fp32_precision = mode
    else:
        matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled
