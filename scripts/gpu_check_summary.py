#!/usr/bin/env python3
"""The GPU check's summary (scripts/gpu_check.sh runs it last, and on an early stop).

Reads the step table (steps.tsv) and every record the check wrote into its work folder
($GPU_CHECK_WORK), writes gpu_check.json (steps, training, targets, GEMM, PyTorch) and
summary.txt (every table) there, and prints the performance-targets table, which must fit
the last screen of a GPU call. Field names of the run records are the ones
reports/schema/run.schema.json defines.
"""
import datetime
import json
import os
import pathlib
import platform
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "pylib"))
import perf_targets  # noqa: E402  (the one definition of every target)
import run_record  # noqa: E402  (the run record's field names, checked against its schema)

TARGETS_TITLE = "\nperformance targets (GPU)"
lines = []


def emit(text=""):
    lines.append(text)



out = pathlib.Path(os.environ["GPU_CHECK_WORK"])
def load(name):
    p = out / name
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None

steps = []
for line in (out / "steps.tsv").read_text().splitlines():
    name, status, secs, detail = (line.split("\t") + ["", "", "", ""])[:4]
    steps.append({"step": name, "status": status, "seconds": int(secs or 0), "detail": detail})
ok = all(s["status"] != "FAIL" for s in steps)

compute_ms = run_record.compute_ms

training = []
for tag in ["single-mlp-small", "single-mlp-wide", "single-gpt-tiny", "single-gpt2-small",
            "single-gpt2-small-tf32", "single-gpt2-small-bf16", "single-gpt2-small-flash",
            "single-gpt2-small-graph", "single-gpt-tiny-graph", "single-embed", "dp-mlp-small",
            "single-resnet50"]:
    r = load(tag + ".json")
    if not r:
        continue
    field = lambda name, default=None: run_record.get(r, name, default)  # noqa: E731
    training.append({
        "run": tag, "workload": field("workload"), "mode": field("mode"),
        "devices": field("devices"), "math": field("precision", "fp32"),
        "attention": field("attention", "math"), "global_batch": field("global_batch"),
        "step_ms_median": field("step_ms_median"), "compute_ms_median": compute_ms(r),
        "samples_per_s": field("samples_per_s"), "tokens_per_s": field("tokens_per_s"),
        "tflops": field("achieved_flops_per_s") / 1e12,
        "mfu": field("mfu"), "mfu_source": field("mfu_source"),
        "peak_mib": run_record.peak_bytes(r) / 1048576.0,
        "first_loss": field("first_loss"), "last_loss": field("last_loss"),
        "phases_median_ms": run_record.phase_medians(r),
    })

gemm = load("cuda_gemm_bench.json")
torch_rec = load("torch-gpt2-small.json")
vs_torch = []
if torch_rec:
    # (row label, ddpbench run, PyTorch precision): flash is ddpbench --attention flash in fp32.
    for label, tag, math in (("fp32", "single-gpt2-small", "fp32"),
                             ("tf32", "single-gpt2-small-tf32", "tf32"),
                             ("bf16", "single-gpt2-small-bf16", "bf16"),
                             ("flash", "single-gpt2-small-flash", "fp32")):
        ours = next((t for t in training if t["run"] == tag), None)
        row = {"math": label, "ddpbench_compute_ms": ours["compute_ms_median"] if ours else None,
               "ddpbench_step_ms": ours["step_ms_median"] if ours else None,
               "ddpbench_peak_mib": ours["peak_mib"] if ours else None}
        for r in torch_rec["results"]:
            if r["math"] == math:
                row[f"pytorch_{r['attention']}_ms"] = r["step_time_ms"]["median"]
                if ours:
                    row[f"ratio_vs_{r['attention']}"] = ours["compute_ms_median"] / r["step_time_ms"]["median"]
        vs_torch.append(row)

graph_rows = []
for eager_tag, graph_tag in (("single-gpt-tiny", "single-gpt-tiny-graph"),
                             ("single-gpt2-small", "single-gpt2-small-graph")):
    e = next((t for t in training if t["run"] == eager_tag), None)
    g = next((t for t in training if t["run"] == graph_tag), None)
    if e and g:
        # Replays must train like eager steps: every step's loss within 1e-3 (relative; not
        # bitwise, atomics make the embedding and some reductions order-dependent).
        el = [s["loss"] for s in load(eager_tag + ".json")["steps"]]
        gl = [s["loss"] for s in load(graph_tag + ".json")["steps"]]
        worst = max((abs(x - y) / max(abs(x), 1e-12) for x, y in zip(el, gl)), default=float("inf"))
        same = len(el) == len(gl) and worst <= 1e-3
        graph_rows.append({"workload": e["workload"], "eager_ms": e["compute_ms_median"],
                           "graph_ms": g["compute_ms_median"],
                           "ratio": g["compute_ms_median"] / e["compute_ms_median"],
                           "losses_match": same, "worst_loss_rel_diff": worst})
        if not same:
            ok = False
            detail = f"{graph_tag}: losses differ from {eager_tag} by up to {worst:.2e} (relative)"
            steps.append({"step": "cuda-graph losses", "status": "FAIL", "seconds": 0,
                          "detail": detail})
            with open(out / "steps.tsv", "a") as f:  # the exit status reads steps.tsv
                f.write(f"cuda-graph losses\tFAIL\t0\t{detail}\n")

# The performance issue's GPU targets, each with what was measured: printed last, and in the
# JSON as "targets". status: met / not met / reported (no threshold) / not measured.
def by_run(tag):
    return next((t for t in training if t["run"] == tag), None)

targets = []
def target(key, value, text, suffix=""):
    targets.append(perf_targets.row(key, value, text, suffix=suffix))

if gemm:
    for s in gemm["step_summary"]:
        target("gpu.gemm_vs_cublas", s["ratio"], f"{s['ratio']:.3f}",
               f", {s['workload']} {s['math']}")
else:
    target("gpu.gemm_vs_cublas", None, "-")
for r in vs_torch:
    v = r.get("ratio_vs_matmul")
    target("gpu.gpt2_vs_eager", v, f"{v:.3f}" if v is not None else "-", f" ({r['math']})")
resnet, torch_resnet = by_run("single-resnet50"), load("torch-resnet50.json")
if resnet and torch_resnet:
    v = resnet["step_ms_median"] / run_record.step_ms_median(torch_resnet)
    target("gpu.resnet50_vs_eager", v, f"{v:.3f}")
else:
    target("gpu.resnet50_vs_eager", None, "-")
for tag in ("single-gpt2-small", "single-gpt2-small-tf32", "single-gpt2-small-bf16"):
    t = by_run(tag)
    mfu = t and t["mfu"]
    target("gpu.mfu", mfu, f"{100 * mfu:.1f}%" if mfu else "-", f", {tag}")
single, ddp1 = by_run("single-mlp-small"), load("ddp-nccl-mlp-small.json")
if single and ddp1:
    over = compute_ms(ddp1) / single["compute_ms_median"] - 1
    target("gpu.ddp_w1_overhead", over, f"{100 * over:.1f}%", ", mlp-small")
else:
    target("gpu.ddp_w1_overhead", None, "-")
ddp2 = load("ddp-gloo-mlp-small.json")
comm = (ddp2 or {}).get("summary", {}).get("comm")
if comm:
    target("gpu.ddp_w2_overlap", comm["overlap_ratio"],
           f"{comm['overlap_ratio']:.2f} (exposed {comm['comm_exposed_ms']:.2f} of "
           f"{comm['comm_ms']:.2f} ms)")
else:
    target("gpu.ddp_w2_overlap", None, "-")
for g in graph_rows:
    target("gpu.cuda_graph", g["ratio"],
           f"{g['ratio']:.3f}" + ("" if g["losses_match"] else " (losses differ!)"),
           f", {g['workload']}")
flash, plain = by_run("single-gpt2-small-flash"), by_run("single-gpt2-small")
if flash and plain:
    target("gpu.flash_attention", flash["compute_ms_median"] / plain["compute_ms_median"],
           f"time {flash['compute_ms_median'] / plain['compute_ms_median']:.3f}, "
           f"peak {flash['peak_mib']:.0f} / {plain['peak_mib']:.0f} MiB")


bn = load("cuda_bn_bench.json")
if bn:
    emit("\nbatch norm at resnet50's shapes (cuda_bn_bench; ms, and GB/s as a fraction of the copy's)")
    emit(f"{'layout':<6} {'C':>5} {'HW':>4} {'copy GB/s':>9}  " +
         "  ".join(f"{k:>22}" for k in ("stats", "elemt", "backward_reduce", "backward_elemt")))
    for r in bn["rows"]:
        emit(f"{r['layout']:<6} {r['channels']:>5} {r['side']:>4} {r['copy_gb_per_s']:>9.0f}  " +
             "  ".join(f"{r[k]['ms']:>14.3f} ({r[k]['of_copy']:.2f})"
                       for k in ("stats", "elemt", "backward_reduce", "backward_elemt")))
    for k in ("stats", "backward_reduce"):
        worst = min(r[k]["of_copy"] for r in bn["rows"])
        target("gpu.batch_norm_bandwidth", worst, f"{worst:.2f}", f", {k}")

resnet_rec = load("single-resnet50.json")
plans = (resnet_rec or {}).get("conv_plans") or []
if plans:
    emit(f"\ncuDNN plans of single-resnet50 ({len(plans)} shapes x directions; engine, workspace, build ms)")
    for p in plans:
        emit(f"{p['direction']:<16} {','.join(str(d) for d in p['dims']):<28} {p['layout']:<5} "
             f"{p['engine'][:60]:<60} {p['workspace_bytes'] / 1048576:8.1f} MiB {p['build_ms']:8.1f} ms "
             f"(tried {p['tried']} of {p['allowed']}, {p['candidates']} offered)")
    build = sum(p["build_ms"] for p in plans)
    target("gpu.cudnn_plan_build", build,
           f"{build:.0f} ms, max workspace {max(p['workspace_bytes'] for p in plans) / 1048576:.0f} MiB")

if gemm:
    act = [r for r in gemm["rows"] if r.get("activation_pass_ms", -1) >= 0]
    for math in sorted({r["math"] for r in act}):
        rows = [r for r in act if r["math"] == math]
        cost = sum(r["calls_per_step"] * r["activation_pass_ms"] for r in rows)
        step = sum(r["calls_per_step"] * r["ddpbench_ms"] for r in rows)
        target("gpu.gemm_activation_pass", cost, f"{cost:.3f} ms of {step:.3f} ms GEMM",
               f", {math}")

def f(x, fmt):
    return format(x, fmt) if isinstance(x, (int, float)) else "-"

emit(f"{'step':<30} {'status':<6} {'s':>4}  detail")
for s in steps:
    emit(f"{s['step']:<30} {s['status']:<6} {s['seconds']:>4}  {s['detail'][:110]}")
if training:
    cfg = load(training[0]["run"] + ".json")["config"]
    emit(f"\ntraining ({cfg['steps']} measured steps after {cfg['warmup']} warm-up; medians; "
          "compute = step - data phase)")
    emit(f"{'run':<24} {'math':<4} {'batch':>5} {'step ms':>9} {'compute':>9} {'samples/s':>10} "
          f"{'tokens/s':>10} {'TFLOP/s':>8} {'MFU %':>6} {'peak MiB':>9}  loss")
    for t in training:
        emit(f"{t['run']:<24} {t['math']:<4} {t['global_batch']:>5} {t['step_ms_median']:>9.2f} "
              f"{t['compute_ms_median']:>9.2f} {t['samples_per_s']:>10.1f} {t['tokens_per_s']:>10.0f} "
              f"{t['tflops']:>8.2f} {f(t['mfu'] and 100 * t['mfu'], '6.1f'):>6} {t['peak_mib']:>9.0f}  "
              f"{t['first_loss']:.3f} -> {t['last_loss']:.3f}")
    sources = sorted({t["mfu_source"] for t in training if t["mfu_source"]})
    if sources:
        emit("MFU = model training FLOPs/s over the datasheet peak: " + "; ".join(sources))
    for t in training:
        if t["mode"] == "dp":
            emit(f"dp {t['workload']} on {t['devices']}: " +
                  " ".join(f"{k} {v:.2f}" for k, v in t["phases_median_ms"].items()) + " (median ms)")
if graph_rows:
    emit("\n--cuda-graph: the steady-state step captured once and replayed (compute medians; "
          "the launch overhead a graph removes)")
    for r in graph_rows:
        emit(f"{r['workload']:<11} eager {r['eager_ms']:9.2f} ms  graph {r['graph_ms']:9.2f} ms  "
              f"ratio {r['ratio']:.3f}  losses {'match' if r['losses_match'] else 'DIFFER'} "
              f"(worst {r['worst_loss_rel_diff']:.1e})")
if gemm:
    emit("\nGEMM time of one training step, ddpb::ops::gemm vs cuBLAS (cuda_gemm_bench; ratio = throughput ddpbench/cuBLAS)")
    emit(f"{'workload':<11} {'math':<4} {'ddpbench ms':>12} {'cuBLAS ms':>10} {'ddpb TF/s':>10} {'cuBLAS TF/s':>12} {'ratio':>6}")
    for s in gemm["step_summary"]:
        emit(f"{s['workload']:<11} {s['math']:<4} {s['ddpbench_ms']:>12.3f} {s['cublas_ms']:>10.3f} "
              f"{s['ddpbench_tflops']:>10.2f} {s['cublas_tflops']:>12.2f} {s['ratio']:>6.3f}")
if vs_torch:
    emit("\ngpt2-small batch 8, single GPU: ddpbench compute time / PyTorch eager step time (medians; < 1 = ddpbench faster)")
    emit("(flash: ddpbench --attention flash, fp32, against PyTorch fp32)")
    emit(f"{'math':<5} {'ddpbench ms':>12} {'peak MiB':>9} {'torch matmul':>13} {'ratio':>6} {'torch sdpa':>11} {'ratio':>6}")
    for r in vs_torch:
        emit(f"{r['math']:<5} {f(r['ddpbench_compute_ms'], '12.2f'):>12} {f(r.get('ddpbench_peak_mib'), '9.0f'):>9} "
              f"{f(r.get('pytorch_matmul_ms'), '13.2f'):>13} "
              f"{f(r.get('ratio_vs_matmul'), '6.3f'):>6} {f(r.get('pytorch_sdpa_ms'), '11.2f'):>11} "
              f"{f(r.get('ratio_vs_sdpa'), '6.3f'):>6}")

emit(TARGETS_TITLE)
emit(f"{'target':<66} {'goal':<7} {'measured':<34} status")
for t in targets:
    emit(f"{t['target'][:66]:<66} {t['goal']:<7} {t['measured'][:34]:<34} {t['status']}")

device = (out / "device.txt").read_text().strip() if (out / "device.txt").exists() else ""
record = {
    "schema_version": 1,
    "kind": "gpu_check",
    "ok": ok,
    "context": {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "host": platform.node(), "mode": os.environ["GPU_CHECK_MODE"], "device": device,
                "budget_s": int(os.environ["GPU_CHECK_BUDGET"]),
                "elapsed_s": int(os.environ["GPU_CHECK_ELAPSED"])},
    "steps": steps,
    "training": training,
    "cuda_graph": graph_rows,
    "targets": targets,
    "gemm": {"step_summary": gemm["step_summary"], "rows": gemm["rows"], "context": gemm["context"]} if gemm else None,
    "vs_pytorch": {"rows": vs_torch, "pytorch": torch_rec["context"] if torch_rec else None,
                   "attention_note": "matmul = q k^T, masked softmax, @ v (ddpbench's algorithm); "
                                     "sdpa = F.scaled_dot_product_attention(is_causal=True)"},
}
tmp = out / "gpu_check.json.tmp"
tmp.write_text(json.dumps(record, indent=2) + "\n")
tmp.replace(out / "gpu_check.json")
(out / "summary.txt").write_text("\n".join(lines) + "\n")
# The screen gets the targets only; the step table and the failures follow from gpu_check.sh.
print("\n".join(lines[lines.index(TARGETS_TITLE):]))
