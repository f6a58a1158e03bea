"""The table of scripts/bench/real_vs_synthetic.sh: one workload's step on real files (an image
folder through the loader) against the same step on synthetic data, in alternated pairs.

    python3 real_vs_synthetic.py SYNTHETIC_1.json REAL_1.json [SYNTHETIC_2.json REAL_2.json ...]

Each pair is a synthetic run and then a real one, in the order they ran. Prints both sides'
median step, the median of the pairs' ratios (real / synthetic), the real runs' median data
wait, and the target (perf_targets cpu.real_vs_synthetic_step). STRICT=1 exits 3 when the
ratio misses it.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perf_targets  # noqa: E402
import run_record  # noqa: E402


def table(records):
    """records: [(synthetic, real), ...] run records. Returns (text, met)."""
    target = perf_targets.TARGETS["cpu.real_vs_synthetic_step"]
    syn = [run_record.step_ms_median(s) for s, _ in records]
    real = [run_record.step_ms_median(r) for _, r in records]
    waits = [r["summary"]["loader"]["data_wait_ms_median"] for _, r in records]
    ratio = statistics.median(r / s for s, r in zip(syn, real))
    met = target.met(ratio)
    workload = run_record.get(records[0][1], "workload")
    text = (f"{workload}: synthetic step {statistics.median(syn):.2f} ms, on files "
            f"{statistics.median(real):.2f} ms (data wait {statistics.median(waits):.2f} ms), "
            f"ratio {ratio:.3f} over {len(records)} pairs: "
            f"{'met' if met else 'NOT met'} ({target.goal})")
    return text, met


def main(argv):
    if len(argv) < 2 or len(argv) % 2:
        print("usage: real_vs_synthetic.py SYNTHETIC.json REAL.json [...]", file=sys.stderr)
        return 2
    records = [run_record.load(p) for p in argv]
    text, ok = table(list(zip(records[0::2], records[1::2])))
    print(text)
    return 3 if os.environ.get("STRICT") == "1" and not ok else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
