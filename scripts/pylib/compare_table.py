"""scripts/peer/compare_pytorch.sh's table: ddpbench against PyTorch on the same
configurations, from the run records the script collected.

    compare_table.py TMP PAIRS STEPS WARMUP JSON_OUT WITH_TARGETS GLOO_RATIO WORKLOAD

TMP holds records.<side>.<config>: one record path per line. One function builds the table;
the text and the JSON (JSON_OUT, when not empty) are two renderings of it.
"""
import json
import os
import statistics
import sys

import perf_targets
import run_record

# Those compare_pytorch.sh ran (all by default; ddp-w2-mpi where mpirun is installed; --configs
# picks some; fsdp where the PyTorch side has FSDP2) have records. zero1 and fsdp train with
# AdamW, the others with SGD.
CONFIGS = ["single", "ddp-w2", "ddp-w1", "ddp-w2-mpi", "zero1", "fsdp"]
SOLO_CONFIGS = ["ddp-w2-noovl", "single-b256", "dp-w2-b256"]  # ddpbench only
SIDES = ["ddpbench", "pytorch"]


def run_numbers(path):
    """One run record's figures: the median step and, where gradients are synchronised, the
    overlap figures."""
    r = run_record.load(path)
    modes = run_record.step_comm(r)
    out = {"step_ms": run_record.step_ms_median(r)}
    if modes:
        out["overlap"] = statistics.median(m["overlap_ratio"] for m in modes)
        out["comm_ms"] = statistics.median(m["comm_ms"] for m in modes)
        out["exposed_ms"] = statistics.median(m["comm_exposed_ms"] for m in modes)
        # PyTorch's logger definition (first launch .. last completion span); ddpbench records
        # it as span_overlap_ratio, PyTorch's overlap_ratio already is it.
        out["span_overlap"] = statistics.median(
            m.get("span_overlap_ratio", m["overlap_ratio"]) for m in modes)
    return out


def medians(tmp, side, cfg):
    with open(f"{tmp}/records.{side}.{cfg}") as f:
        runs = [run_numbers(p.strip()) for p in f if p.strip()]
    row = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    row["runs_step_ms"] = [r["step_ms"] for r in runs]
    return row


def build(tmp, pairs, steps, warmup, workload, with_targets, gloo_ratio):
    table = {"workload": workload, "pairs": pairs, "steps": steps, "warmup": warmup,
             "statistic": "median over pairs of each run's median", "configs": {}}
    for cfg in [c for c in CONFIGS if os.path.exists(f"{tmp}/records.ddpbench.{c}")]:
        row = {side: medians(tmp, side, cfg) for side in SIDES}
        row["ratio"] = row["ddpbench"]["step_ms"] / row["pytorch"]["step_ms"]
        table["configs"][cfg] = row
    c = table["configs"]
    if "ddp-w1" in c and "single" in c:
        table["ddp_w1_over_single"] = {s: c["ddp-w1"][s]["step_ms"] / c["single"][s]["step_ms"]
                                       for s in SIDES}
    if with_targets:
        table["ddpbench_only"] = {cfg: medians(tmp, "ddpbench", cfg) for cfg in SOLO_CONFIGS}
        table["targets"] = targets_of(table, gloo_ratio)
    return table


def targets_of(t, gloo_ratio):
    """The CPU targets (scripts/pylib/perf_targets.py): goal, measured value, status."""
    c, solo = t["configs"], t["ddpbench_only"]
    d2, p2 = c["ddp-w2"]["ddpbench"], c["ddp-w2"]["pytorch"]
    row = perf_targets.row
    r = c["ddp-w2"]["ratio"]
    over = c["ddp-w1"]["ddpbench"]["step_ms"] / c["single"]["ddpbench"]["step_ms"] - 1
    speed = solo["single-b256"]["step_ms"] / solo["dp-w2-b256"]["step_ms"]
    exposed = d2["exposed_ms"] / solo["ddp-w2-noovl"]["exposed_ms"]
    mpi = [row("cpu.ddp_mpi_vs_pytorch", c["ddp-w2-mpi"]["ratio"], f"{c['ddp-w2-mpi']['ratio']:.3f}")
           ] if "ddp-w2-mpi" in c else []
    zero1 = [row("cpu.zero1_vs_pytorch", c["zero1"]["ratio"],
                 f"{c['zero1']['ratio']:.3f} ({c['zero1']['ddpbench']['step_ms']:.2f} / "
                 f"{c['zero1']['pytorch']['step_ms']:.2f} ms)")] if "zero1" in c else []
    return mpi + zero1 + [
        row("cpu.ddp_w2_vs_pytorch", r, f"{r:.3f}"),
        row("cpu.ddp_w1_overhead", over, f"{100 * over:.1f}%"),
        row("cpu.dp_w2_speedup", speed, f"{speed:.2f}x"),
        row("cpu.span_overlap_vs_pytorch", d2["span_overlap"],
            f"{d2['span_overlap']:.3f} vs {p2['span_overlap']:.3f}",
            met=d2["span_overlap"] >= p2["span_overlap"]),
        row("cpu.exposed_comm_share", exposed,
            f"{d2['exposed_ms']:.2f} / {solo['ddp-w2-noovl']['exposed_ms']:.2f} ms = {exposed:.2f}"),
        row("cpu.gloo_pg_vs_raw", gloo_ratio,
            f"{gloo_ratio:.3f}" if gloo_ratio is not None else "-"),
    ]


def print_table(t):
    adamw = [c for c in ("zero1", "fsdp") if c in t["configs"]]
    adamw = f" ({', '.join(adamw)}: AdamW)" if adamw else ""
    print(f"{t['workload']}, SGD momentum 0.9{adamw}, one thread per process, {t['pairs']} "
          f"alternated pairs of {t['steps']} measured steps; median over pairs of each run's median")
    print(f"{'config':<8} {'ddpbench ms':>11} {'pytorch ms':>10} {'ratio':>6}   "
          f"{'overlap d/p':>11}   {'span-ovl d/p':>12}   {'comm ms d/p':>13}   "
          f"{'exposed ms d/p':>14}")
    for cfg, row in t["configs"].items():
        d, p = row["ddpbench"], row["pytorch"]
        line = f"{cfg:<8} {d['step_ms']:>11.2f} {p['step_ms']:>10.2f} {row['ratio']:>6.3f}"
        if "overlap" in d:
            line += (f"   {d['overlap']:>5.2f}/{p.get('overlap', 0):<5.2f}"
                     f"   {d['span_overlap']:>5.2f}/{p.get('span_overlap', 0):<5.2f} "
                     f"   {d['comm_ms']:>6.2f}/{p.get('comm_ms', 0):<6.2f}"
                     f"   {d['exposed_ms']:>6.2f}/{p.get('exposed_ms', 0):<6.2f}")
        print(line)
    if "ddp_w1_over_single" in t:
        o = t["ddp_w1_over_single"]
        print(f"DDP hooks+buckets overhead (ddp-w1 / single): ddpbench {o['ddpbench']:.3f}, "
              f"pytorch {o['pytorch']:.3f}")
    if "targets" in t:
        print("\nddpbench only (ms): " +
              ", ".join(f"{k} {v['step_ms']:.2f}" for k, v in t["ddpbench_only"].items()))
        print(f"\n{'CPU target':<56} {'goal':<8} {'measured':<32} status")
        for r in t["targets"]:
            print(f"{r['target']:<56} {r['goal']:<8} {r['measured']:<32} {r['status']}")


def main(argv):
    tmp, pairs, steps, warmup, json_out, with_targets, gloo, workload = argv[1:9]
    t = build(tmp, int(pairs), int(steps), int(warmup), workload, with_targets == "1",
              float(gloo) if gloo else None)
    print_table(t)
    if json_out:
        with open(json_out, "w") as f:
            json.dump(t, f, indent=1)
        print(f"wrote {json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
