"""The tables of scripts/bench/: the bucket-cap sweep against autotuning
(bucket_autotune.sh) and the communication hooks side by side (comm_hooks.sh), from the run
records those scripts wrote into one folder.

    sweep_tables.py best-cap OUT WORKLOAD ROUNDS CAP...
    sweep_tables.py autotune OUT WORKLOAD ROUNDS PAIRS BEST CAP...   (exit 3: target missed)
    sweep_tables.py hooks OUT WORKLOAD ROUNDS RANK HOOK...           (STRICT=1: exit 3 if missed)
"""
import os
import statistics
import sys

import perf_targets
import run_record


def load(out, stem):
    return run_record.load(f"{out}/{stem}.json")


def step_ms(out, stem):
    return run_record.step_ms_median(load(out, stem))


def sweep_medians(out, w, rounds, caps):
    """{cap: median over rounds of each run's median step}."""
    return {c: statistics.median(step_ms(out, f"{w}-sweep-{c}-{r}") for r in range(rounds))
            for c in caps}


def best_cap(out, w, rounds, caps):
    med = sweep_medians(out, w, rounds, caps)
    return min(med, key=med.get)


def autotune(out, w, rounds, pairs, best, caps):
    print(f"{w} (DDP, 2 ranks, CPU), sweep: median over {rounds} rounds of each run's median "
          "step ms")
    for c, ms in sweep_medians(out, w, rounds, caps).items():
        print(f"  --bucket-cap-mb {c:>5}: {ms:8.2f}" + ("   <- best fixed" if c == best else ""))
    chosen = [run_record.get(load(out, f"{w}-auto-{p}"), "bucket_autotune_chosen_mb")
              for p in range(pairs)]
    auto = statistics.median(step_ms(out, f"{w}-auto-{p}") for p in range(pairs))
    fixed = statistics.median(step_ms(out, f"{w}-best-{p}") for p in range(pairs))
    ratio = auto / fixed
    target = perf_targets.target("cpu.bucket_auto_vs_best")
    print(f"  {pairs} alternated pairs: auto {auto:.2f} ms (chose "
          f"{', '.join(f'{c:g}' for c in chosen)} MB), best fixed {best} MB {fixed:.2f} ms")
    print(f"  ratio auto / best fixed = {ratio:.3f} (target {target.goal}): "
          f"{'MET' if target.met(ratio) else 'MISSED'}")
    return 0 if target.met(ratio) else 3


def hooks(out, w, rounds, rank, names):
    print(f"{w} (DDP, 2 ranks, CPU), median over {rounds} rounds of each run's median step")
    base = None
    for h in names:
        runs = [load(out, f"{h}-{r}") for r in range(rounds)]
        ms = statistics.median(run_record.step_ms_median(r) for r in runs)
        nbytes = statistics.median(run_record.get(r, "comm_bytes_per_step") for r in runs)
        loss = statistics.median(r["steps"][-1]["loss"] for r in runs)
        base = base or (ms, nbytes)
        name = "fp32" if h == "none" else (f"powersgd rank {rank}" if h == "powersgd" else h)
        print(f"  {name:<16} {ms:8.2f} ms  x{ms / base[0]:.3f}   {nbytes / 2**20:8.3f} MiB/step "
              f"(x{base[1] / nbytes:.1f} fewer)   final loss {loss:.4f}")
    ratio = statistics.median(step_ms(out, f"powersgd-{r}") for r in range(rounds)) / base[0]
    target = perf_targets.target("cpu.powersgd_vs_fp32")
    print(f"  ratio powersgd / fp32 = {ratio:.3f} (target {target.goal}): "
          f"{'MET' if target.met(ratio) else 'MISSED'}")
    return 0 if target.met(ratio) or os.environ.get("STRICT") != "1" else 3


def main(argv):
    what, out, w, rounds = argv[1], argv[2], argv[3], int(argv[4])
    if what == "best-cap":
        print(best_cap(out, w, rounds, argv[5:]))
        return 0
    if what == "autotune":
        return autotune(out, w, rounds, int(argv[5]), argv[6], argv[7:])
    if what == "hooks":
        return hooks(out, w, rounds, argv[5], argv[6:])
    sys.exit(f"sweep_tables: unknown table '{what}' (best-cap, autotune or hooks)")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
