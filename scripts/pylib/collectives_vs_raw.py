"""The table of scripts/bench/collectives_vs_raw.sh: `ddpbench collectives` against the bare
library's allreduce (bench/micro/raw_allreduce.cpp) at the same sizes, in alternated pairs.

    python3 collectives_vs_raw.py LIBRARY OURS_1.json RAW_1.txt [OURS_2.json RAW_2.txt ...]

OURS is a collectives record (-J), RAW the raw program's "bytes time_us" lines. Per size, the
median over the pairs of raw time / our time, which is our busbw over the library's; the
target (perf_targets cpu.collectives_vs_raw) holds at every size of 64 KiB and more.
STRICT=1 exits 3 when it is missed.
"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perf_targets  # noqa: E402

MIN_TARGET_BYTES = 64 * 1024


def our_times(path):
    with open(path) as f:
        record = json.load(f)
    return {r["size_bytes"]: r["time_us"] for r in record["results"] if r["op"] == "allreduce"}


def raw_times(path):
    times = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2 and parts[0].isdigit():
                times[int(parts[0])] = float(parts[1])
    return times


def table(library, pairs, yardstick="raw"):
    """pairs: [(ours {bytes: us}, yardstick's {bytes: us}), ...]. Returns (text, met)."""
    target = perf_targets.TARGETS["cpu.collectives_vs_raw"]
    sizes = sorted(set.intersection(*(set(o) & set(r) for o, r in pairs)))
    lines = [f"{library}: allreduce, {len(pairs)} alternated pairs (median per size)",
             f"{'bytes':>10} {'ddpbench us':>12} {yardstick + ' us':>10} {yardstick + '/ddpbench':>15}"]
    met = True
    for size in sizes:
        ours = statistics.median(o[size] for o, _ in pairs)
        raw = statistics.median(r[size] for _, r in pairs)
        ratio = statistics.median(r[size] / o[size] for o, r in pairs)
        judged = size >= MIN_TARGET_BYTES
        ok = target.met(ratio)
        met = met and (ok or not judged)
        verdict = ("met" if ok else "NOT met") if judged else "(not judged)"
        lines.append(f"{size:>10} {ours:>12.1f} {raw:>10.1f} {ratio:>15.3f} {verdict}")
    lines.append(f"target {target.goal} at every size >= 64 KiB: {'met' if met else 'NOT met'}")
    return "\n".join(lines), met


def main(argv):
    if len(argv) < 3 or len(argv) % 2 == 0:
        print("usage: collectives_vs_raw.py LIBRARY OURS.json RAW.txt [...]", file=sys.stderr)
        return 2
    library = argv[0]
    pairs = [(our_times(argv[i]), raw_times(argv[i + 1])) for i in range(1, len(argv), 2)]
    text, met = table(library, pairs)
    print(text)
    return 3 if os.environ.get("STRICT") == "1" and not met else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
