"""scripts/peer/gemm_ratio.sh's table: ddpbench's CPU GEMMs against raw OpenBLAS.

    gemm_ratio.py GEMM_BENCH_JSON

Per shape, GFLOP/s of each side and ratio = ddpbench / openblas; overall, each shape weighted
by how often one training step runs it (calls_per_step): ratio = sum(openblas time) /
sum(ddpbench time). Times are CPU times; with repetitions, the medians.
"""
import sys

import gbench


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


def overall(rows):
    """(ddpbench seconds, openblas seconds) of one training step's GEMMs."""
    ours = blas = 0.0
    for (impl, shape), b in rows.items():
        if impl != "ddpbench":
            continue
        calls = int(b["calls_per_step"])
        ours += calls * gbench.seconds(b)
        blas += calls * gbench.seconds(rows[("openblas", shape)])
    return ours, blas


def main(argv):
    doc = gbench.load(argv[1], "gemm_ratio")
    rows, aggregated = rows_of(doc)
    ctx = doc["context"]
    print(f"{gbench.context_line(doc, 'gemm_bench')}, library build "
          f"{ctx.get('library_build_type', '?')}, {ctx.get('workload', '')}; "
          f"{'median of repetitions' if aggregated else 'one run'} per benchmark")
    print(f"{'shape':<11} {'M':>5} {'N':>5} {'K':>5} {'calls':>5} {'ddpbench':>10} "
          f"{'openblas':>10} {'ratio':>6}")
    print(f"{'':<11} {'':>5} {'':>5} {'':>5} {'':>5} {'GFLOP/s':>10} {'GFLOP/s':>10} {'':>6}")
    for (impl, shape), ours in rows.items():
        if impl != "ddpbench":
            continue
        blas = rows[("openblas", shape)]
        print(f"{shape:<11} {int(ours['M']):>5} {int(ours['N']):>5} {int(ours['K']):>5} "
              f"{int(ours['calls_per_step']):>5} {ours['FLOPS'] / 1e9:>10.1f} "
              f"{blas['FLOPS'] / 1e9:>10.1f} {ours['FLOPS'] / blas['FLOPS']:>6.3f}")
    ours_s, blas_s = overall(rows)
    print(f"overall (GEMM time of one training step): ddpbench {ours_s * 1e3:.3f} ms, "
          f"openblas {blas_s * 1e3:.3f} ms, ratio {blas_s / ours_s:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
