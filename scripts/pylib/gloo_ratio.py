"""scripts/peer/gloo_ratio.sh's table: one 64 MiB allreduce through ProcessGroupGloo against
raw Gloo (bench/micro/gloo_raw_bench.cpp).

    gloo_ratio.py GLOO_RAW_BENCH_JSON     (env STRICT=1: exit 3 when the target is missed)

Per side: the median, quartiles and minimum over repetitions of the per-iteration time (the
max over ranks), the bandwidths at the median; ratio = PG median / raw median with a
bootstrap 90% interval, and the ratio of the minima.
"""
import os
import random
import statistics
import sys

import gbench
import perf_targets

TARGET = "cpu.gloo_pg_vs_raw"


def runs_of(doc):
    """({"raw": [s, ...], "pg": [...]}, bytes, ranks) from the iteration rows."""
    runs = {"raw": [], "pg": []}
    nbytes = ranks = None
    for b in doc["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        side = b["run_name"].split("/")[1]
        runs[side].append(gbench.seconds(b, "real_time"))  # manual time: max over ranks
        nbytes, ranks = b["bytes"], int(b["ranks"])
    for side, times in runs.items():
        if not times:
            sys.exit(f"gloo_ratio: no '{side}' results (was the filter overridden?)")
    return runs, nbytes, ranks


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def bootstrap_interval(pg, raw, draws=2000):
    """The 5th and 95th percentiles of the ratio of medians over resampled repetitions."""
    rng = random.Random(0)
    boot = sorted(statistics.median(rng.choices(pg, k=len(pg))) /
                  statistics.median(rng.choices(raw, k=len(raw))) for _ in range(draws))
    return boot[draws // 20], boot[draws - draws // 20 - 1]


def main(argv):
    doc = gbench.load(argv[1], "gloo_ratio")
    runs, nbytes, ranks = runs_of(doc)
    load = ", ".join(f"{x:.1f}" for x in doc["context"].get("load_avg", []))
    print(f"{gbench.context_line(doc, 'gloo_raw_bench')}, load {load}; {ranks} ranks (threads), "
          f"{nbytes / 2**20:.0f} MiB f32 sum, {len(runs['raw'])} repetitions per side")
    print(f"{'side':<5} {'median ms':>10} {'p25 ms':>8} {'p75 ms':>8} {'min ms':>8} "
          f"{'algbw GB/s':>11} {'busbw GB/s':>11}")
    median = {}
    for side in ("raw", "pg"):
        t = runs[side]
        median[side] = statistics.median(t)
        algbw = nbytes / median[side] / 1e9
        busbw = algbw * 2 * (ranks - 1) / ranks
        print(f"{side:<5} {median[side] * 1e3:>10.2f} {quantile(t, 0.25) * 1e3:>8.2f} "
              f"{quantile(t, 0.75) * 1e3:>8.2f} {min(t) * 1e3:>8.2f} {algbw:>11.3f} "
              f"{busbw:>11.3f}")
    ratio = median["pg"] / median["raw"]
    lo, hi = bootstrap_interval(runs["pg"], runs["raw"])
    target = perf_targets.target(TARGET)
    verdict = "within target" if target.met(ratio) else "ABOVE target"
    print(f"ratio PG/raw (median time): {ratio:.3f}  90% interval {lo:.3f}-{hi:.3f}  "
          f"({verdict}: {target.goal})")
    print(f"ratio PG/raw (min time):    {min(runs['pg']) / min(runs['raw']):.3f}")
    return 3 if not target.met(ratio) and os.environ.get("STRICT") == "1" else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
