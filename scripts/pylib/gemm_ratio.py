"""scripts/peer/gemm_ratio.sh's table: ddpbench's CPU GEMMs against the raw libraries.

    gemm_ratio.py GEMM_BENCH_JSON

Per shape, GFLOP/s of ddpbench and of each raw library in the run (oneDNN's sgemm call, and
OpenBLAS's, which PyTorch's CPU build calls; ddpbench's Linear GEMMs run oneDNN's matmul
primitive), and ratio = ddpbench / library; overall, each shape weighted by how often one training step runs it
(calls_per_step): ratio = sum(library time) / sum(ddpbench time). Times are CPU times; with
repetitions, the medians.
"""
import sys

import gbench

LIBRARIES = ("onednn", "openblas")  # the raw sides gemm_bench may have run, in this order


def rows_of(doc):
    """{(impl, shape): benchmark row}, the medians where there are repetitions."""
    aggregated = any(b.get("run_type") == "aggregate" for b in doc["benchmarks"])
    rows = {}
    for b in doc["benchmarks"]:
        if aggregated and b.get("aggregate_name") != "median":
            continue
        _, impl, shape = b["run_name"].split("/")
        rows[(impl, shape)] = b
    return rows, aggregated


def overall(rows, library):
    """(ddpbench seconds, library seconds) of one training step's GEMMs."""
    ours = theirs = 0.0
    for (impl, shape), b in rows.items():
        if impl != "ddpbench":
            continue
        calls = int(b["calls_per_step"])
        ours += calls * gbench.seconds(b)
        theirs += calls * gbench.seconds(rows[(library, shape)])
    return ours, theirs


def main(argv):
    doc = gbench.load(argv[1], "gemm_ratio")
    rows, aggregated = rows_of(doc)
    libraries = [lib for lib in LIBRARIES if any(impl == lib for impl, _ in rows)]
    ctx = doc["context"]
    print(f"{gbench.context_line(doc, 'gemm_bench')}, library build "
          f"{ctx.get('library_build_type', '?')}, {ctx.get('workload', '')}; "
          f"{'median of repetitions' if aggregated else 'one run'} per benchmark")
    head = "".join(f" {lib:>10} {'ratio':>6}" for lib in libraries)
    unit = "".join(f" {'GFLOP/s':>10} {'':>6}" for _ in libraries)
    print(f"{'shape':<11} {'M':>5} {'N':>5} {'K':>5} {'calls':>5} {'ddpbench':>10}{head}")
    print(f"{'':<11} {'':>5} {'':>5} {'':>5} {'':>5} {'GFLOP/s':>10}{unit}")
    for (impl, shape), ours in rows.items():
        if impl != "ddpbench":
            continue
        cells = ""
        for lib in libraries:
            theirs = rows[(lib, shape)]
            cells += f" {theirs['FLOPS'] / 1e9:>10.1f} {ours['FLOPS'] / theirs['FLOPS']:>6.3f}"
        print(f"{shape:<11} {int(ours['M']):>5} {int(ours['N']):>5} {int(ours['K']):>5} "
              f"{int(ours['calls_per_step']):>5} {ours['FLOPS'] / 1e9:>10.1f}{cells}")
    for lib in libraries:
        ours_s, theirs_s = overall(rows, lib)
        print(f"overall (GEMM time of one training step): ddpbench {ours_s * 1e3:.3f} ms, "
              f"{lib} {theirs_s * 1e3:.3f} ms, ratio {theirs_s / ours_s:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
