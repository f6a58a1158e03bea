#!/usr/bin/env python3
"""The GPU check's evidence (Note [GPU check evidence] in scripts/gpu_check.sh).

    summary.py WORK [--mode TEXT] [--budget S] [--elapsed S] [--only TAGS] [--again CMD]
               [--publish OUT]

Reads the step table (WORK/steps.tsv) and every record the steps wrote (the training suites'
run records under WORK/suite/*/runs, the benchmarks' and PyTorch's JSON), and writes into
WORK: gpu_check.json (steps, training, targets, GEMM, PyTorch, the follow-up call),
summary.txt (every table) and failures.txt (per failed step its detail, the first line
naming a CUDA, cuBLAS, cuDNN or NCCL error, the first failing test's block and the last 40
lines of its log). It prints the last screen of a GPU call: the performance targets, the
step table, the first lines of each failure and the follow-up command (`--again CMD --only
TAGS`: what failed or did not run). Works on whatever is there: an early stop has only a
few steps. With --publish OUT it writes gpu_check.json, summary.txt and failures.txt into
OUT instead, each by an atomic rename, and prints nothing: the refresh after every step
(Note [GPU check evidence] in scripts/gpu_check.sh).
"""
import argparse
import datetime
import errno
import json
import os
import pathlib
import platform
import re
import shlex
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "pylib"))
import perf_targets  # noqa: E402  (the one definition of every target)
import plan  # noqa: E402  (the --only tags, where each part of the training ran)
import run_record  # noqa: E402  (the run record's field names, checked against its schema)

TRAINING = ["single-mlp-small", "single-mlp-wide", "single-gpt-tiny", "single-gpt2-small",
            "single-gpt2-small-tf32", "single-gpt2-small-bf16", "single-gpt2-small-flash",
            "single-gpt2-small-graph", "single-gpt-tiny-graph", "single-embed", "dp-mlp-small",
            "single-resnet50", "single-resnet50-files"]
# (row, ddpbench run, PyTorch precision): flash is ddpbench --attention flash in fp32.
VS_TORCH = (("fp32", "single-gpt2-small", "fp32"), ("tf32", "single-gpt2-small-tf32", "tf32"),
            ("bf16", "single-gpt2-small-bf16", "bf16"), ("flash", "single-gpt2-small-flash", "fp32"))
FAILURE_WORDS = ("FAILED", "rror", "ailure", "Expected", "SKIPPED", "not found", "what()")
TAIL_LINES, TEST_BLOCK_LINES = 40, 60
# The first line of a failed log that names a CUDA, cuBLAS, cuDNN or NCCL error: our own texts
# (core/cuda/cuda_check.h: "CUDA error cudaErrorX (...)", "cuBLAS error CUBLAS_STATUS_X", "NCCL
# error ..."), the libraries' names for them, the driver API's CUDA_ERROR_X, NCCL's warnings.
# Case matters: "cuda" alone is in binaries' and devices' names. cuDNN's warnings (lines "w! "
# under CUDNN_LOGLEVEL_DBG=2) name the engines it rejects while a plan is chosen: not errors.
GPU_ERROR = re.compile(
    r"CUDA error|CUDA_ERROR_[A-Z_]+|cudaError[A-Z]\w*|cuBLAS error|CUBLAS_STATUS_(?!SUCCESS)[A-Z_]+|"
    r"CUDNN_STATUS_(?!SUCCESS)[A-Z_]+|\bcuDNN\b.*\b(error|failed|no engine)|NCCL (WARN|error)|"
    r"nccl(InternalError|UnhandledCudaError|SystemError|InvalidUsage|InvalidArgument|RemoteError)")
ERROR_LABEL = "-- first CUDA/cuDNN/NCCL error: "
CUDNN_NOTE = re.compile(r"^\s*[wWiI]! ")
GTEST_LINE = re.compile(r"^\[ +(RUN|OK|FAILED|SKIPPED) +\] ([A-Za-z_]\S*)")


class Work:
    def __init__(self, path):
        self.path = pathlib.Path(path)

    def load(self, name):
        try:
            return json.loads((self.path / name).read_text())
        except (OSError, ValueError):
            return None

    def run(self, name):
        """The record of training run `name`, from whichever suite ran it (plan.PARTS)."""
        path = plan.run_path(self.path, name)
        return self.load(os.path.relpath(path, self.path)) if path else None


def read_steps(work):
    steps = []
    try:
        lines = (work.path / "steps.tsv").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        name, status, secs, detail, log = (line.split("\t") + [""] * 5)[:5]
        steps.append({"step": name, "status": status, "seconds": int(secs or 0),
                      "detail": detail, "log": log})
    return steps


def training_row(tag, r):
    field = lambda name, default=None: run_record.get(r, name, default)  # noqa: E731
    return {
        "run": tag, "workload": field("workload"), "mode": field("mode"),
        "devices": field("devices"), "math": field("precision", "fp32"),
        "attention": field("attention", "math"), "global_batch": field("global_batch"),
        "step_ms_median": field("step_ms_median"), "compute_ms_median": run_record.compute_ms(r),
        "samples_per_s": field("samples_per_s"), "tokens_per_s": field("tokens_per_s"),
        "tflops": (field("achieved_flops_per_s") or 0) / 1e12,
        "mfu": field("mfu"), "mfu_source": field("mfu_source"),
        "peak_mib": run_record.peak_bytes(r) / 1048576.0,
        "first_loss": field("first_loss"), "last_loss": field("last_loss"),
        "phases_median_ms": run_record.phase_medians(r),
    }


def vs_torch_rows(work, training):
    rows = []
    for label, tag, math in VS_TORCH:
        ours = training.get(tag)
        row = {"math": label, "ddpbench_compute_ms": ours and ours["compute_ms_median"],
               "ddpbench_step_ms": ours and ours["step_ms_median"],
               "ddpbench_peak_mib": ours and ours["peak_mib"]}
        for attention, key in (("math", "matmul"), ("flash", "sdpa")):
            theirs = work.load(f"torch-gpt2-small-{math}-{attention}.json")
            if theirs:
                row[f"pytorch_{key}_ms"] = run_record.compute_ms(theirs)
                if ours:
                    row[f"ratio_vs_{key}"] = ours["compute_ms_median"] / row[f"pytorch_{key}_ms"]
        if any(k.startswith("pytorch_") for k in row):
            rows.append(row)
    return rows


def graph_rows(work, training):
    rows = []
    for eager_tag, graph_tag in (("single-gpt-tiny", "single-gpt-tiny-graph"),
                                 ("single-gpt2-small", "single-gpt2-small-graph")):
        e, g = training.get(eager_tag), training.get(graph_tag)
        if not (e and g):
            continue
        # Replays must train like eager steps: every step's loss within 1e-3 (relative; not
        # bitwise, atomics make the embedding and some reductions order-dependent).
        el = [s["loss"] for s in work.run(eager_tag)["steps"]]
        gl = [s["loss"] for s in work.run(graph_tag)["steps"]]
        worst = max((abs(x - y) / max(abs(x), 1e-12) for x, y in zip(el, gl)), default=float("inf"))
        rows.append({"workload": e["workload"], "eager_ms": e["compute_ms_median"],
                     "graph_ms": g["compute_ms_median"],
                     "ratio": g["compute_ms_median"] / e["compute_ms_median"],
                     "losses_match": len(el) == len(gl) and worst <= 1e-3,
                     "worst_loss_rel_diff": worst})
    return rows


def targets(work, training, vs_torch, graphs, gemm, bn, plans):
    """The performance issue's GPU targets, each with what was measured (perf_targets)."""
    out = []

    def target(key, value, text, suffix=""):
        out.append(perf_targets.row(key, value, text, suffix=suffix))

    for s in (gemm or {}).get("step_summary", []) or [None]:
        if s:
            target("gpu.gemm_vs_cublas", s["ratio"], f"{s['ratio']:.3f}", f", {s['workload']} {s['math']}")
        else:
            target("gpu.gemm_vs_cublas", None, "-")
    for r in vs_torch:
        v = r.get("ratio_vs_matmul")
        target("gpu.gpt2_vs_eager", v, f"{v:.3f}" if v is not None else "-", f" ({r['math']})")
    resnet, torch_resnet = training.get("single-resnet50"), work.load("torch-resnet50.json")
    if resnet and torch_resnet:
        v = resnet["step_ms_median"] / run_record.step_ms_median(torch_resnet)
        target("gpu.resnet50_vs_eager", v, f"{v:.3f}")
    else:
        target("gpu.resnet50_vs_eager", None, "-")
    files = training.get("single-resnet50-files")
    if resnet and files:
        v = files["step_ms_median"] / resnet["step_ms_median"]
        target("gpu.real_vs_synthetic_step", v, f"{v:.3f} (data wait "
               f"{files['phases_median_ms'].get('data', 0.0):.2f} ms)", ", resnet50 on JPEGs")
    else:
        target("gpu.real_vs_synthetic_step", None, "-")
    for tag in ("single-gpt2-small", "single-gpt2-small-tf32", "single-gpt2-small-bf16"):
        mfu = (training.get(tag) or {}).get("mfu")
        target("gpu.mfu", mfu, f"{100 * mfu:.1f}%" if mfu else "-", f", {tag}")
    single, ddp1 = training.get("single-mlp-small"), work.run("ddp-nccl-mlp-small")
    if single and ddp1:
        over = run_record.compute_ms(ddp1) / single["compute_ms_median"] - 1
        target("gpu.ddp_w1_overhead", over, f"{100 * over:.1f}%", ", mlp-small")
    else:
        target("gpu.ddp_w1_overhead", None, "-")
    comm = run_record.get(work.run("ddp-gloo-mlp-small") or {}, "comm")
    if comm:
        target("gpu.ddp_w2_overlap", comm["overlap_ratio"],
               f"{comm['overlap_ratio']:.2f} (exposed {comm['comm_exposed_ms']:.2f} of "
               f"{comm['comm_ms']:.2f} ms)")
    else:
        target("gpu.ddp_w2_overlap", None, "-")
    for g in graphs:
        target("gpu.cuda_graph", g["ratio"],
               f"{g['ratio']:.3f}" + ("" if g["losses_match"] else " (losses differ!)"),
               f", {g['workload']}")
    flash, plain = training.get("single-gpt2-small-flash"), training.get("single-gpt2-small")
    if flash and plain:
        ratio = flash["compute_ms_median"] / plain["compute_ms_median"]
        target("gpu.flash_attention", ratio,
               f"time {ratio:.3f}, peak {flash['peak_mib']:.0f} / {plain['peak_mib']:.0f} MiB")
    for k in ("stats", "backward_reduce") if bn else ():
        worst = min(r[k]["of_copy"] for r in bn["rows"])
        target("gpu.batch_norm_bandwidth", worst, f"{worst:.2f}", f", {k}")
    if plans:
        build = sum(p["build_ms"] for p in plans)
        target("gpu.cudnn_plan_build", build,
               f"{build:.0f} ms, max workspace {max(p['workspace_bytes'] for p in plans) / 1048576:.0f} MiB")
    act = [r for r in (gemm or {}).get("rows", []) if r.get("activation_pass_ms", -1) >= 0]
    for math in sorted({r["math"] for r in act}):
        rows = [r for r in act if r["math"] == math]
        cost = sum(r["calls_per_step"] * r["activation_pass_ms"] for r in rows)
        step = sum(r["calls_per_step"] * r["ddpbench_ms"] for r in rows)
        target("gpu.gemm_activation_pass", cost, f"{cost:.3f} ms of {step:.3f} ms GEMM", f", {math}")
    return out


def f(x, spec):
    return format(x, spec) if isinstance(x, (int, float)) else "-"


def step_table(steps):
    lines = [f"{'step':<30} {'status':<6} {'s':>4}  detail"]
    for s in steps:
        lines.append(f"{s['step'][:30]:<30} {s['status']:<6} {s['seconds']:>4}  {s['detail'][:110]}")
    return lines


def tables(training, graphs, gemm, vs_torch, bn, plans, cfg):
    """Every table but the targets and the steps, as lines."""
    out = []
    if bn:
        out.append("\nbatch norm at resnet50's shapes (cuda_bn_bench; ms, and GB/s as a fraction of the copy's)")
        keys = ("stats", "elemt", "backward_reduce", "backward_elemt")
        out.append(f"{'layout':<6} {'C':>5} {'HW':>4} {'copy GB/s':>9}  " + "  ".join(f"{k:>22}" for k in keys))
        for r in bn["rows"]:
            out.append(f"{r['layout']:<6} {r['channels']:>5} {r['side']:>4} {r['copy_gb_per_s']:>9.0f}  " +
                       "  ".join(f"{r[k]['ms']:>14.3f} ({r[k]['of_copy']:.2f})" for k in keys))
    if plans:
        out.append(f"\ncuDNN plans of single-resnet50 ({len(plans)} shapes x directions; engine, workspace, build ms)")
        for p in plans:
            out.append(f"{p['direction']:<16} {','.join(str(d) for d in p['dims']):<28} {p['layout']:<5} "
                       f"{p['engine'][:60]:<60} {p['workspace_bytes'] / 1048576:8.1f} MiB {p['build_ms']:8.1f} ms "
                       f"(tried {p['tried']} of {p['allowed']}, {p['candidates']} offered)")
    if training:
        out.append(f"\ntraining ({cfg.get('steps')} measured steps after {cfg.get('warmup')} warm-up; "
                   "medians; compute = step - data phase)")
        out.append(f"{'run':<24} {'math':<4} {'batch':>5} {'step ms':>9} {'compute':>9} {'samples/s':>10} "
                   f"{'tokens/s':>10} {'TFLOP/s':>8} {'MFU %':>6} {'peak MiB':>9}  loss")
        for t in training.values():
            out.append(f"{t['run']:<24} {str(t['math']):<4} {f(t['global_batch'], '>5')} "
                       f"{f(t['step_ms_median'], '>9.2f')} {f(t['compute_ms_median'], '>9.2f')} "
                       f"{f(t['samples_per_s'], '>10.1f')} {f(t['tokens_per_s'], '>10.0f')} "
                       f"{t['tflops']:>8.2f} {f(t['mfu'] and 100 * t['mfu'], '6.1f'):>6} {t['peak_mib']:>9.0f}  "
                       f"{f(t['first_loss'], '.3f')} -> {f(t['last_loss'], '.3f')}")
        sources = sorted({t["mfu_source"] for t in training.values() if t["mfu_source"]})
        if sources:
            out.append("MFU = model training FLOPs/s over the datasheet peak: " + "; ".join(sources))
        for t in training.values():
            if t["mode"] == "dp":
                out.append(f"dp {t['workload']} on {t['devices']}: " + " ".join(
                    f"{k} {v:.2f}" for k, v in t["phases_median_ms"].items()) + " (median ms)")
    if graphs:
        out.append("\n--cuda-graph: the steady-state step captured once and replayed (compute medians; "
                   "the launch overhead a graph removes)")
        for r in graphs:
            out.append(f"{str(r['workload']):<11} eager {r['eager_ms']:9.2f} ms  graph {r['graph_ms']:9.2f} ms  "
                       f"ratio {r['ratio']:.3f}  losses {'match' if r['losses_match'] else 'DIFFER'} "
                       f"(worst {r['worst_loss_rel_diff']:.1e})")
    if gemm:
        out.append("\nGEMM time of one training step, ddpb::ops::gemm vs cuBLAS (cuda_gemm_bench; "
                   "ratio = throughput ddpbench/cuBLAS)")
        out.append(f"{'workload':<11} {'math':<4} {'ddpbench ms':>12} {'cuBLAS ms':>10} {'ddpb TF/s':>10} "
                   f"{'cuBLAS TF/s':>12} {'ratio':>6}")
        for s in gemm["step_summary"]:
            out.append(f"{s['workload']:<11} {s['math']:<4} {s['ddpbench_ms']:>12.3f} {s['cublas_ms']:>10.3f} "
                       f"{s['ddpbench_tflops']:>10.2f} {s['cublas_tflops']:>12.2f} {s['ratio']:>6.3f}")
    if vs_torch:
        out.append("\ngpt2-small batch 8, single GPU: ddpbench compute time / PyTorch eager compute time "
                   "(medians; compute = step - data; < 1 = ddpbench faster)")
        out.append("(flash: ddpbench --attention flash, fp32, against PyTorch fp32)")
        out.append(f"{'math':<5} {'ddpbench ms':>12} {'peak MiB':>9} {'torch matmul':>13} {'ratio':>6} "
                   f"{'torch sdpa':>11} {'ratio':>6}")
        for r in vs_torch:
            out.append(f"{r['math']:<5} {f(r['ddpbench_compute_ms'], '12.2f'):>12} "
                       f"{f(r.get('ddpbench_peak_mib'), '9.0f'):>9} {f(r.get('pytorch_matmul_ms'), '13.2f'):>13} "
                       f"{f(r.get('ratio_vs_matmul'), '6.3f'):>6} {f(r.get('pytorch_sdpa_ms'), '11.2f'):>11} "
                       f"{f(r.get('ratio_vs_sdpa'), '6.3f'):>6}")
    return out


def first_gpu_error(lines):
    """The first line naming a CUDA, cuBLAS, cuDNN or NCCL error (GPU_ERROR); "" when none."""
    return next((l.strip()[:300] for l in lines if GPU_ERROR.search(l) and not CUDNN_NOTE.match(l)), "")


def first_failing_test(lines, limit=TEST_BLOCK_LINES):
    """(how, lines) of the first test that failed the step, from its "[ RUN      ]" line to its
    "[  FAILED  ]" line; without one, a test that never ended (a crash, a hang), else the first
    skipped one (a skip fails a GPU step). At most `limit` lines; None when no test qualifies."""
    ends, start = {}, None
    for i, line in enumerate(lines):
        m = GTEST_LINE.match(line)
        if not m:
            continue
        if m.group(1) == "RUN":
            start = i
        elif start is not None:
            if m.group(1) != "OK":
                ends.setdefault(m.group(1), (start, i))
            start = None
    if start is not None:
        ends.setdefault("never ended", (start, len(lines) - 1))
    for how in ("FAILED", "never ended", "SKIPPED"):
        if how in ends:
            block = lines[ends[how][0]:ends[how][1] + 1]
            if len(block) > limit:
                block = block[:limit - 2] + [f"... ({len(block) - limit + 1} lines left out)", block[-1]]
            return how, block
    return None


def failures(steps):
    """failures.txt: per failed step its detail, the first GPU library error of its log, the
    first failing test's block and the last TAIL_LINES lines of its log."""
    out = []
    for s in steps:
        if s["status"] != "FAIL":
            continue
        out.append(f"== {s['step']}: {s['detail']}")
        try:
            lines = pathlib.Path(s["log"]).read_text(errors="replace").splitlines()
        except (OSError, ValueError):
            out += ["(no log)", ""]
            continue
        error, test = first_gpu_error(lines), first_failing_test(lines)
        if error:
            out.append(ERROR_LABEL + error)
        if test:
            out.append(f"-- first failing test ({test[0]}):")
            out += test[1]
        out.append(f"-- last {TAIL_LINES} lines of {s['log']}:")
        out += lines[-TAIL_LINES:]
        out.append("")
    return out


def follow_up_tags(steps, patterns=()):
    """The --only tags of a second call (Note [GPU check order]): every tag `patterns` select
    whose step failed or did not run (WARN "not run ...", or no line at all: a stop, a kill),
    in the check's order. A matrix run (its id "workload/mode/wN") stands for the matrix's tag;
    steps that always run (libraries, device) and a suite's own line name no tag."""
    tags = plan.all_tags()
    done, redo = set(), set()
    for s in steps:
        name = s["step"]
        tag = name if name in tags else plan.MATRIX_TAG if name.count("/") == 2 else None
        if tag is None:
            continue
        if s["status"] == "FAIL" or (s["status"] == "WARN" and s["detail"].startswith("not run")):
            redo.add(tag)
        else:
            done.add(tag)
    return [t for t in tags if plan.selected(t, patterns) and (t in redo or t not in done)]


def follow_up(steps, patterns, again):
    """(tags, command) of the follow-up call; the command is `again` alone when it would rerun
    everything, "" when nothing is left."""
    tags = follow_up_tags(steps, patterns)
    if not tags:
        return tags, ""
    if not patterns and tags == plan.all_tags():
        return tags, again
    return tags, f"{again} --only {shlex.quote(','.join(tags))}"


def follow_up_lines(command):
    if not command:
        return ["", "== follow-up: none (every selected step ran and passed)"]
    return ["", "== follow-up: a second call for what failed or did not run", command]


def failure_heads(failure_lines, limit=4000):
    """Each failure's header and its telling lines (a failed test, an error), at most 2, none
    twice (the first GPU error's line is also in the log's tail). Over `limit` characters the
    telling lines go first, down to one a failure and then none, so that every failure keeps
    its header: the last failures are as visible as the first."""
    blocks, seen = [], set()
    for line in failure_lines:
        if line.startswith("== "):
            blocks.append([line[:140]])
            seen = set()
            continue
        if not blocks:
            continue
        error = line.startswith(ERROR_LABEL)
        telling = error or (not line.startswith("-- ") and any(w in line for w in FAILURE_WORDS))
        if len(blocks[-1]) < 3 and telling and line.strip() not in seen:
            blocks[-1].append("    " + line[:130])
            seen.add(line[len(ERROR_LABEL):].strip() if error else line.strip())
    for keep in (3, 2, 1):
        text = "\n".join(line for block in blocks for line in block[:keep])
        if len(text) <= limit:
            return text
    return text[:limit]


def build(work, context, only="", again="scripts/gpu_check.sh"):
    """(gpu_check.json's record, summary.txt's lines, failures.txt's lines, the last screen)."""
    steps = read_steps(work)
    training = {}
    for tag in TRAINING:
        r = work.run(tag)
        if r:
            training[tag] = training_row(tag, r)
    gemm, bn = work.load("cuda_gemm_bench.json"), work.load("cuda_bn_bench.json")
    plans = (work.run("single-resnet50") or {}).get("conv_plans") or []
    vs_torch, graphs = vs_torch_rows(work, training), graph_rows(work, training)
    for g in graphs:
        if not g["losses_match"]:
            steps.append({"step": "cuda-graph losses", "status": "FAIL", "seconds": 0, "log": "",
                          "detail": f"{g['workload']}: --cuda-graph losses differ from eager by up to "
                                    f"{g['worst_loss_rel_diff']:.2e} (relative)"})
    rows = targets(work, training, vs_torch, graphs, gemm, bn, plans)
    first = next(iter(training), None)
    cfg = (work.run(first) or {}).get("config", {}) if first else {}
    target_lines = ["", "performance targets (GPU)",
                    f"{'target':<66} {'goal':<7} {'measured':<34} status"]
    target_lines += [f"{t['target'][:66]:<66} {t['goal']:<7} {t['measured'][:34]:<34} {t['status']}"
                     for t in rows]
    tags, again_cmd = follow_up(steps, [p for p in only.split(",") if p], again)
    summary = (step_table(steps) + tables(training, graphs, gemm, vs_torch, bn, plans, cfg) +
               target_lines + follow_up_lines(again_cmd))
    fail = failures(steps)
    screen = target_lines + ["", "== steps"] + step_table(steps)
    failed = [s["step"] for s in steps if s["status"] == "FAIL"]
    if failed:
        screen += ["", "== failures (the first lines of each; all of them in failures.txt)",
                   failure_heads(fail)]
    screen += follow_up_lines(again_cmd)
    torch_ctx = next((r.get("context") for r in map(work.load, sorted(
        p.name for p in work.path.glob("torch-gpt2-small-*.json"))) if r), None)
    record = {
        "schema_version": 1, "kind": "gpu_check", "ok": not failed,
        "context": dict(context, date=datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ"), host=platform.node(), device=_device(work)),
        "steps": [{k: s[k] for k in ("step", "status", "seconds", "detail")} for s in steps],
        "training": list(training.values()), "cuda_graph": graphs, "targets": rows,
        "gemm": {k: gemm[k] for k in ("step_summary", "rows", "context")} if gemm else None,
        "vs_pytorch": {"rows": vs_torch, "pytorch": torch_ctx,
                       "attention_note": "matmul = q k^T, masked softmax, @ v (ddpbench's algorithm); "
                                         "sdpa = F.scaled_dot_product_attention(is_causal=True)"},
        "failed": failed,
        "follow_up": again_cmd or None, "follow_up_tags": tags,
    }
    return record, summary, fail, screen


def _device(work):
    try:
        return (work.path / "device.txt").read_text().strip()
    except OSError:
        return ""


def write_atomic(path, text):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def publish(work_dir, out_dir, name, text):
    """OUT/name := text by a rename (Note [GPU check evidence]): of a temp file in WORK when one
    filesystem holds both, so that OUT never holds a partial file, else of OUT/.name.partial
    (a dotfile that deliver removes should a kill leave it)."""
    tmp = pathlib.Path(work_dir) / f".publish-{name}"
    tmp.write_text(text)
    try:
        os.replace(tmp, pathlib.Path(out_dir) / name)
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
        tmp.unlink()
        write_atomic(pathlib.Path(out_dir) / f".{name}.partial", text)
        os.replace(pathlib.Path(out_dir) / f".{name}.partial", pathlib.Path(out_dir) / name)


def texts(record, summary, fail):
    return {"gpu_check.json": json.dumps(record, indent=2) + "\n",
            "summary.txt": "\n".join(summary) + "\n", "failures.txt": "\n".join(fail) + "\n"}


def refresh(work_dir, out_dir, context, only="", again="scripts/gpu_check.sh"):
    """The evidence of the steps so far, into OUT (what a hard kill leaves there)."""
    record, summary, fail, _ = build(Work(work_dir), context, only, again)
    for name, text in texts(record, summary, fail).items():
        publish(work_dir, out_dir, name, text)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("work")
    ap.add_argument("--mode", default="")
    ap.add_argument("--budget", type=int, default=0)
    ap.add_argument("--elapsed", type=int, default=0)
    ap.add_argument("--only", default="", help="the check's --only (the follow-up's tags)")
    ap.add_argument("--again", default="scripts/gpu_check.sh",
                    help="the follow-up command without --only")
    ap.add_argument("--publish", metavar="OUT", help="refresh OUT's files, print nothing")
    a = ap.parse_args(argv)
    context = {"mode": a.mode, "budget_s": a.budget, "elapsed_s": a.elapsed}
    if a.publish:
        refresh(a.work, a.publish, context, a.only, a.again)
        return 0
    work = Work(a.work)
    record, summary, fail, screen = build(work, context, a.only, a.again)
    for name, text in texts(record, summary, fail).items():
        write_atomic(work.path / name, text)
    print("\n".join(screen))
    if record["failed"]:
        print(f"gpu_check: FAILED: {', '.join(record['failed'])}", file=sys.stderr)
    return 1 if record["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
