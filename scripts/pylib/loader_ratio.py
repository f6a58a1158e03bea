"""The table of scripts/peer/loader_ratio.sh: ddpbench's image loader against PyTorch's
DataLoader on one image folder, in alternated pairs at each worker count.

    python3 loader_ratio.py RESULTS_FILE

RESULTS_FILE holds one line per measurement, "<side> <workers> <images/s>", side "ddpbench" or
"pytorch", in the order they ran. Prints per worker count the medians of both sides and the
median of the pairs' ratios (ddpbench / PyTorch), and the target (perf_targets
cpu.loader_vs_pytorch). STRICT=1 exits 3 when a worker count misses it.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perf_targets  # noqa: E402


def pairs(lines):
    """{workers: [(ddpbench, pytorch), ...]}: consecutive measurements of one worker count."""
    out, pending = {}, {}
    for line in lines:
        parts = line.split()
        if len(parts) != 3:
            continue
        side, workers, rate = parts[0], int(parts[1]), float(parts[2])
        pending.setdefault(workers, {})[side] = rate
        if len(pending[workers]) == 2:
            p = pending.pop(workers)
            out.setdefault(workers, []).append((p["ddpbench"], p["pytorch"]))
    return out


def table(by_workers):
    target = perf_targets.TARGETS["cpu.loader_vs_pytorch"]
    rows, ok = [], True
    for workers in sorted(by_workers):
        ps = by_workers[workers]
        ratio = statistics.median(d / t for d, t in ps)
        met = target.met(ratio)
        ok &= met
        rows.append(f"{workers:>7} {statistics.median(d for d, _ in ps):>14.1f} "
                    f"{statistics.median(t for _, t in ps):>14.1f} {ratio:>7.2f} {len(ps):>5} "
                    f"{'met' if met else 'NOT met'} ({target.goal})")
    head = f"{'workers':>7} {'ddpbench img/s':>14} {'PyTorch img/s':>14} {'ratio':>7} {'pairs':>5}"
    return "\n".join([head] + rows), ok


def main(argv):
    with open(argv[0]) as f:
        text, ok = table(pairs(f.read().splitlines()))
    print(text)
    return 3 if os.environ.get("STRICT") == "1" and not ok else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
