#!/usr/bin/env python3
"""The GPU check's steps after the device probe (scripts/gpu_check.sh runs this; see there).

In the order of their value: the CUDA tests (a skip fails them), the training runs as one
`ddpbench suite` (plan.py), the GEMM and batch-norm benchmarks, PyTorch side by side, the
projection, and compute-sanitizer with what is left. Every step appends its line to
WORK/steps.tsv (steps.py); summary.py turns the folder into the evidence afterwards.
Exit: 0 when every step ran (failed steps are in steps.tsv), 1 when stopped by a signal,
2 on bad arguments.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plan  # noqa: E402
import steps as st  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SCRIPTS, "pylib"))
import collectives_vs_raw  # noqa: E402
import run_record  # noqa: E402

# cuDNN says why an engine or plan fails (Note [cuDNN engine choice]).
CUDNN_LOG = {"CUDNN_LOGLEVEL_DBG": "2", "CUDNN_LOGDEST_DBG": "stderr"}
MEMCHECK = ("CudaParity.Arithmetic:CudaParity.Activations:CudaParity.Softmax:CudaParity.LayerNorm:"
            "CudaParity.Embedding:CudaParity.Attention:CudaParity.CrossEntropy:CudaParity.SgdStep:"
            "CudaParity.GemmUnalignedViewsUseTheFallbackCorrectly")
# The kernels that use shared memory (block reductions, attention tiles).
RACECHECK = ("CudaParity.Softmax:CudaParity.LayerNorm:CudaParity.Attention:CudaParity.CrossEntropy:"
             "CudaParity.FlashAttention*:CudaParity.BatchNormReductionsOverManyChunksInBothLayouts")


class Binaries:
    """Our binaries and how to start them: the bundle's bin/ or the build tree, with
    LD_LIBRARY_PATH set for them alone, through the bundled glibc loader when there is one."""

    def __init__(self, a):
        self.bin_dir, self.build_root = a.bin_dir, a.build_root
        self.ld_path, self.loader, self.loader_dirs = a.ld_path, a.loader, a.loader_dirs

    def path(self, name):
        if self.bin_dir:
            return os.path.join(self.bin_dir, name)
        for d in ("bench", "tests", "tests/impl_dp", "bench/micro", "."):
            p = os.path.join(self.build_root, d, name)
            if os.access(p, os.X_OK):
                return p
        for d, dirs, files in sorted(os.walk(self.build_root)):
            dirs[:] = sorted(x for x in dirs if x != "CMakeFiles")
            if name in files and os.access(os.path.join(d, name), os.X_OK):
                return os.path.join(d, name)
        return ""

    def argv(self, *args):
        if self.loader:
            return [self.loader, "--library-path", f"{self.loader_dirs}:{self.ld_path}", *args]
        return list(args)

    def env(self, extra=None):
        env = dict(os.environ, **(extra or {}))
        if self.ld_path and not self.loader:
            env["LD_LIBRARY_PATH"] = self.ld_path
        return env


def gtest_step(c, b, name, binary, gfilter, want):
    if not c.selected(name):
        return
    c.header(name)
    log = os.path.join(c.work, name + ".log")
    t = c.timeout_for(want)
    if not binary or not os.access(binary, os.X_OK):
        return c.record(name, "FAIL", 0, "binary not found")
    if t is None:
        return c.not_run(name)
    print(f"filter: {gfilter}")
    r = c.run(b.argv(binary, f"--gtest_filter={gfilter}", "--gtest_color=no"), t, log,
              env=b.env(CUDNN_LOG))
    text = st.read_text(log)
    failed, skipped = st.gtest_names(text, "FAILED"), st.gtest_names(text, "SKIPPED")
    for n in failed + skipped:
        print(f"  {'FAILED' if n in failed else 'SKIPPED'}: {n}")
    if r.rc != 0:
        c.record(name, "FAIL", r.seconds, r.text(t) + (f"; failed: {' '.join(failed)}" if failed else ""), log)
    elif skipped:
        c.record(name, "FAIL", r.seconds, f"skipped on a GPU machine (nothing tested): {' '.join(skipped)}", log)
    elif st.gtest_passed(text) == 0:
        c.record(name, "FAIL", r.seconds, "no test ran", log)
    else:
        c.record(name, "PASS", r.seconds, f"{st.gtest_passed(text)} passed, 0 skipped", log)


def tests(c, b, gpus):
    excluded = ["CudaRuntime.NoDeviceMeansCudaErrorNotCrash"]  # needs a machine without a GPU
    if gpus < 2:
        excluded.append("CudaParity.PeerCopy")
    print(f"\nexcluded as not applicable here ({gpus} GPU): {', '.join(excluded)}")
    gtest_step(c, b, "test_cuda_parity", b.path("test_cuda_parity"), "*-" + ":".join(excluded), 150)
    gtest_step(c, b, "test_dp_cuda", b.path("test_dp"), "*Cuda*", 150)
    gtest_step(c, b, "test_dataloader_cuda", b.path("test_dataloader"), "*Cuda*", 60)
    # NCCL: world 1 and the two-ranks-on-one-GPU refusal on one GPU; more with 2+ GPUs.
    gtest_step(c, b, "test_process_group_nccl", b.path("test_process_group_nccl"),
               "*" + ("-*TwoGpus*" if gpus < 2 else ""), 120)


def suite_rows(c, suite_dir):
    """A step line per run of suite.json: ok PASS, failed FAIL (its log), else WARN."""
    try:
        with open(os.path.join(suite_dir, "suite.json")) as f:
            suite = json.load(f)
    except (OSError, ValueError):
        return None
    for run in suite["runs"]:
        status, log = run.get("status"), os.path.join(suite_dir, run.get("log", ""))
        m = run.get("metrics") or {}
        if status == "ok":
            detail = f"median step {m.get('step_time_ms', {}).get('median', float('nan')):.2f} ms"
            corr = run.get("correctness") or {}
            if corr.get("passed") is False:
                status, detail = "failed", f"{detail}; parameters differ from {corr.get('reference')}"
            c.record(run["id"], "PASS" if status == "ok" else "FAIL", run.get("duration_s", 0),
                     detail, log)
        elif status == "failed":
            c.record(run["id"], "FAIL", run.get("duration_s", 0), run.get("error", ""), log)
        else:
            c.record(run["id"], "WARN", 0, f"not run ({status}): time budget or a stop")
    return suite


def training_suite(c, b, selftest):
    spec = plan.suite_file(selftest, c.patterns)
    if plan.is_empty(spec):
        return
    c.header(f"training: ddpbench suite ({len(spec['runs'])} named runs"
             f"{' and the world-size-1 matrix' if spec['workloads'] else ''})")
    t = c.timeout_for(420)
    if t is None:
        return c.not_run("suite")
    path, out = os.path.join(c.work, "suite-gpu-check.json"), os.path.join(c.work, "suite")
    with open(path, "w") as f:
        json.dump(spec, f, indent=1)
    shutil.rmtree(out, ignore_errors=True)
    log = os.path.join(c.work, "suite.log")
    device = "cpu" if selftest else "cuda"
    r = c.run(b.argv(b.path("ddpbench"), "suite", path, "--device", device, "--out", out), t, log,
              env=b.env(CUDNN_LOG))
    suite = suite_rows(c, out)
    if suite is None:
        c.record("suite", "FAIL", r.seconds, f"{r.text(t)}, no suite.json: {st.first_line(st.read_text(log))}", log)
    elif r.timed_out or r.stopped or not suite.get("complete"):
        c.record("suite", "WARN", r.seconds, f"{r.text(t)}: runs left out; suite.json kept", log)
    elif r.rc not in (0, 1):  # 1: a run failed, which its own line says
        c.record("suite", "FAIL", r.seconds, f"{r.text(t)}: {st.first_line(st.read_text(log))}", log)
    else:
        ok = sum(run.get("status") == "ok" for run in suite["runs"])
        c.record("suite", "PASS", r.seconds,
                 f"{ok} of {len(suite['runs'])} runs ok; suite.json and report in gpu_check.tgz", log)


def bench_step(c, b, tag, name, want, rows_prefixes):
    """A plain-main benchmark writing WORK/NAME.json."""
    if not c.selected(tag):
        return
    c.header(f"{tag} ({name})")
    path, log = b.path(name), os.path.join(c.work, name + ".log")
    t = c.timeout_for(want)
    if not path or not os.access(path, os.X_OK):
        return c.record(tag, "FAIL", 0, f"{name} not built (bench/micro/cuda.cmake)")
    if t is None:
        return c.not_run(tag)
    r = c.run(b.argv(path, "--json", os.path.join(c.work, name + ".json")), t, log, env=b.env())
    text = st.read_text(log)
    if r.rc != 0:
        return c.record(tag, "FAIL", r.seconds, f"{r.text(t)}: {st.first_line(text, (name + ':',))}", log)
    rows = sum(1 for l in text.splitlines() if l.split(" ")[0] in rows_prefixes)
    c.record(tag, "PASS", r.seconds, f"{rows} rows", log)


def find_torch(python):
    """(python, 'version (CUDA x, GPU available: y)') of the first that imports torch."""
    probe = ("import torch; print(f'{torch.__version__} (CUDA {torch.version.cuda}, "
             "GPU available: {torch.cuda.is_available()})')")
    why = ""
    for py in dict.fromkeys([python, "python3", "python", "/usr/bin/python3"]):
        try:
            p = subprocess.run([py, "-c", probe], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            why = f"{py}: {e}"
            continue
        if p.returncode == 0:
            return py, p.stdout.strip()
        why = f"{py}: {(p.stderr.strip().splitlines() or ['?'])[-1]}"
    return None, why


def torch_step(c, b, torch_py, tag, want, workload, extra):
    """torch_reference.py on one workload in PyTorch eager; WORK/torch-<workload>*.json."""
    if not c.selected(tag):
        return
    c.header(f"{tag}: {workload} in PyTorch eager")
    if torch_py[0] is None:
        return c.record(tag, "FAIL", 0, f"no Python with torch: {torch_py[1]}")
    t = c.timeout_for(want)
    if t is None:
        return c.not_run(tag)
    print(f"{torch_py[0]}: torch {torch_py[1]}")
    log = os.path.join(c.work, f"torch-{tag}.log")
    argv = [torch_py[0], os.path.join(SCRIPTS, "peer", "torch_reference.py"),
            "--workloads-json", os.path.join(c.work, "workloads.json"), "--workload", workload,
            "--quiet", *extra]
    r = c.run(argv, t, log)
    text = st.read_text(log)
    print("\n".join(text.splitlines()[-8:]))
    if r.rc != 0:
        return c.record(tag, "FAIL", r.seconds, f"{r.text(t)}: {st.first_line(text)}", log)
    c.record(tag, "PASS", r.seconds, f"torch {torch_py[1]}", log)


def pytorch(c, b, python, selftest, device):
    steps, warmup = plan.STEPS[selftest]
    common = ["--device", device.split(":")[0], "--steps", str(steps), "--warmup", str(warmup)]
    torch_py = (None, "not looked for")
    if c.selected("pytorch") or c.selected("pytorch-resnet50"):
        torch_py = find_torch(python)
    gpt = plan.STAND_IN["gpt2-small"] if selftest else "gpt2-small"
    # gpt2-small at batch 8 in fp32, tf32 and bf16 (autocast), with ddpbench's matmul
    # attention and, where PyTorch has it, scaled_dot_product_attention.
    precisions = "fp32" if selftest else "fp32,tf32,bf16"
    torch_step(c, b, torch_py, "pytorch", 240, gpt,
               common + ["--global-batch", "8", "--precision", precisions, "--attention",
                         "math,flash", "--out", os.path.join(c.work, "torch-gpt2-small-{variant}.json")])
    resnet = plan.STAND_IN["resnet50"] if selftest else "resnet50"
    torch_step(c, b, torch_py, "pytorch-resnet50", 90, resnet,
               common + ["--global-batch", str(plan.RESNET_BATCH[selftest]),
                         "--out", os.path.join(c.work, "torch-resnet50.json")])


def projection(c, b):
    """2 logical ranks on one GPU predicted from the world-size-1 DDP run (the GPU's compute
    shared by both ranks, Gloo fitted here), against the measured 2-rank Gloo run."""
    if not c.selected("projection"):
        return
    c.header("projection (2 logical ranks from 1)")
    runs = os.path.join(c.work, "suite", "runs")
    one, two = (os.path.join(runs, n + ".json") for n in ("ddp-nccl-mlp-small", "ddp-gloo-mlp-small"))
    if not (os.path.exists(one) and os.path.exists(two)):
        return c.record("projection", "WARN", 0, "not run: a DDP run it needs failed or was not selected")
    t = c.timeout_for(30)
    if t is None:
        return c.not_run("projection")
    out, log = os.path.join(c.work, "projection-2.json"), os.path.join(c.work, "projection.log")
    r = c.run(b.argv(b.path("ddpbench"), "project", one, "--devices", "2", "--json", out), t, log,
              env=b.env())
    if r.rc != 0:
        return c.record("projection", "FAIL", r.seconds, st.first_line(st.read_text(log)), log)
    with open(out) as f:
        projection = json.load(f)
    design = projection["designs"][0]["name"]  # the one design of the run record projected
    points = projection["workloads"][0]["points"]
    predicted = next(p for p in points if p["devices"] == 2)["designs"][design]["step_ms"]
    got = run_record.step_ms_median(run_record.load(two))
    c.record("projection", "PASS", r.seconds, f"predicted {predicted:.3f} ms, measured {got:.3f} ms, "
             f"error {100 * (predicted / got - 1):+.1f}%", log)


def collectives(c, b, selftest, device):
    """`ddpbench collectives` over NCCL on the GPU (one rank: NCCL refuses two on one GPU, so
    algbw is the number; busbw's factor is 0 at one rank), every result checked. The selftest
    runs it over Gloo on 2 CPU ranks."""
    if not c.selected("collectives"):
        return
    c.header("collectives (nccl-tests' sweep)")
    t = c.timeout_for(60)
    if t is None:
        return c.not_run("collectives")
    out, log = os.path.join(c.work, "collectives.json"), os.path.join(c.work, "collectives.log")
    where = (["--device", "cpu", "--backend", "gloo", "-g", "2", "-e", "64K"] if selftest else
             ["--device", device.split(":")[0], "--backend", "nccl", "-g", "1", "-e", "64M"])
    r = c.run(b.argv(b.path("ddpbench"), "collectives", "-b", "1K", "-f", "4", "-c", "-n", "10",
                     "-o", "allreduce,allgather,reduce_scatter,broadcast,reduce,alltoall,sendrecv,"
                     "allgather_coalesced,reduce_scatter_coalesced", "-J", out,
                     *where), t, log,
              env=b.env())
    if r.rc != 0 or not os.path.exists(out):
        return c.record("collectives", "FAIL", r.seconds, f"{r.text(t)}: {st.first_line(st.read_text(log))}", log)
    with open(out) as f:
        rec = json.load(f)
    wrong = sum(x.get("wrong", 0) for x in rec["results"])
    best = max(x["algbw_GBps"] for x in rec["results"] if x["op"] == "allreduce")
    c.record("collectives", "FAIL" if wrong else "PASS", r.seconds,
             f"{len(rec['results'])} sizes x ops, {wrong} wrong; allreduce algbw up to {best:.2f} GB/s", log)


def collectives_mpi(c, b, selftest, device):
    """`ddpbench collectives --backend mpi` on the GPU: CUDA tensors as device pointers where
    the MPI is CUDA-aware, else staged through pinned memory (one rank: the GPU's). Needs
    Open MPI's mpirun on the machine: the bundle carries libmpi, not Open MPI's launcher and
    plugins. The selftest runs it on 2 CPU ranks."""
    if not c.selected("collectives-mpi"):
        return
    c.header("collectives over MPI")
    if shutil.which("mpirun") is None:
        return c.record("collectives-mpi", "WARN", 0,
                        "not run: no mpirun on this machine (install Open MPI to check the MPI backend)")
    t = c.timeout_for(60)
    if t is None:
        return c.not_run("collectives-mpi")
    out, log = os.path.join(c.work, "collectives-mpi.json"), os.path.join(c.work, "collectives-mpi.log")
    where = (["--device", "cpu", "-g", "2", "-e", "64K"] if selftest else
             ["--device", device.split(":")[0], "-g", "1", "-e", "64M"])
    r = c.run(b.argv(b.path("ddpbench"), "collectives", "--backend", "mpi", "-b", "1K", "-f", "4",
                     "-c", "-n", "10", "-o", "allreduce,allgather,reduce_scatter,broadcast,reduce,alltoall,sendrecv,"
                     "allgather_coalesced,reduce_scatter_coalesced",
                     "-J", out, *where), t, log, env=b.env())
    if r.rc != 0 or not os.path.exists(out):
        return c.record("collectives-mpi", "FAIL", r.seconds, f"{r.text(t)}: {st.first_line(st.read_text(log))}", log)
    with open(out) as f:
        rec = json.load(f)
    wrong = sum(x.get("wrong", 0) for x in rec["results"])
    c.record("collectives-mpi", "FAIL" if wrong else "PASS", r.seconds,
             f"{len(rec['results'])} sizes x ops, {wrong} wrong", log)


def nccl_vs_pytorch(c, b, python, selftest, device):
    """Issue 28, section 3: ddpbench's NCCL allreduce against PyTorch's own through NCCL, the
    same sizes timed the same way (scripts/peer/torch_allreduce.py), one rank on the GPU.
    Target: >= 0.95 of PyTorch's busbw at every size >= 64 KiB. The selftest compares Gloo on
    one CPU rank."""
    if not c.selected("nccl-vs-pytorch"):
        return
    c.header("collectives: ddpbench vs PyTorch allreduce")
    torch_py = find_torch(python)
    if torch_py[0] is None:
        return c.record("nccl-vs-pytorch", "FAIL", 0, f"no Python with torch: {torch_py[1]}")
    t = c.timeout_for(90)
    if t is None:
        return c.not_run("nccl-vs-pytorch")
    backend, dev, top = ("gloo", "cpu", 1 << 20) if selftest else ("nccl", device.split(":")[0], 1 << 28)
    ours, log = os.path.join(c.work, "allreduce-ours.json"), os.path.join(c.work, "nccl-vs-pytorch.log")
    theirs = os.path.join(c.work, "allreduce-torch.txt")
    r = c.run(b.argv(b.path("ddpbench"), "collectives", "--backend", backend, "--device", dev, "-g", "1",
                     "-b", "64K", "-e", str(top), "-f", "4", "-J", ours), t, log, env=b.env())
    if r.rc != 0 or not os.path.exists(ours):
        return c.record("nccl-vs-pytorch", "FAIL", r.seconds, f"ddpbench: {st.first_line(st.read_text(log))}", log)
    p = c.run([torch_py[0], os.path.join(SCRIPTS, "peer", "torch_allreduce.py"), "--backend", backend,
               "--device", dev, "65536", str(top)], t, log + ".torch", stdout_path=theirs)
    if p.rc != 0:
        return c.record("nccl-vs-pytorch", "FAIL", p.seconds, f"torch: {st.first_line(st.read_text(log + '.torch'))}", log)
    text, met = collectives_vs_raw.table(backend, [(collectives_vs_raw.our_times(ours),
                                                    collectives_vs_raw.raw_times(theirs))],
                                         yardstick="torch")
    print(text)
    c.record("nccl-vs-pytorch", "PASS" if met else "WARN", r.seconds + p.seconds,
             text.splitlines()[-1] + f" (vs torch {torch_py[1]})", log)


def sanitizer_step(c, b, tool, gfilter, sanitizer, options=()):
    if not c.selected(tool):
        return
    c.header(f"compute-sanitizer {tool} (test_cuda_parity, a few ops)")
    parity, log = b.path("test_cuda_parity"), os.path.join(c.work, tool + ".log")
    if not sanitizer:
        return c.record(tool, "INFO", 0, "compute-sanitizer not installed: not run")
    if not parity:
        return c.record(tool, "FAIL", 0, "test_cuda_parity not found")
    if b.loader:
        return c.record(tool, "INFO", 0, "not run: binaries start through the bundled glibc loader")
    t = c.timeout_for(120)
    if t is None:
        return c.not_run(tool)
    print(f"filter: {gfilter}")
    # The sanitizer starts with the bundle's libraries on the path (its own are CUDA's).
    r = c.run([sanitizer, "--tool", tool, "--error-exitcode", "86", *options, parity,
               f"--gtest_filter={gfilter}", "--gtest_color=no"], t, log, env=b.env())
    text = st.read_text(log)
    print("\n".join(text.splitlines()[-5:]))
    summary = next((l.strip() for l in text.splitlines()
                    if "ERROR SUMMARY" in l or "RACECHECK SUMMARY" in l), "")
    low = text.lower()
    if r.timed_out:
        c.record(tool, "WARN", r.seconds, f"timed out after {t} s (bounded)", log)
    elif "device not supported" in low or "error 999" in low or "unsupported device" in low:
        # The sanitizer cannot attach to this GPU or driver: nothing was checked, nothing failed.
        c.record(tool, "INFO", r.seconds, "the sanitizer refuses this device", log)
    elif r.rc == 86 or any(f"SUMMARY: {d}" in summary for d in "123456789"):
        c.record(tool, "FAIL", r.seconds, summary or f"{tool} reported errors", log)
    elif r.rc != 0:
        c.record(tool, "FAIL", r.seconds, f"exit {r.rc} under {tool}", log)
    else:
        c.record(tool, "PASS", r.seconds, summary or "no errors", log)


def sanitizers(c, b):
    sanitizer = shutil.which("compute-sanitizer") or next(
        (p for p in ("/usr/local/cuda/bin/compute-sanitizer",) if os.access(p, os.X_OK)), "")
    # Racecheck instruments only our kernels (their names hold the namespace "ddpb"), not
    # cuBLAS's or cuDNN's: the option's name depends on the sanitizer's version.
    options = []
    if sanitizer:
        try:
            helptext = subprocess.run([sanitizer, "--help"], capture_output=True, text=True,
                                      timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            helptext = ""
        for flag in ("--kernel-name", "--kernel-regex"):
            if flag in helptext:
                options = [flag, "kns=ddpb"]
                break
    sanitizer_step(c, b, "memcheck", MEMCHECK, sanitizer)
    sanitizer_step(c, b, "racecheck", RACECHECK, sanitizer, options)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", required=True)
    ap.add_argument("--budget", type=int, required=True)
    ap.add_argument("--elapsed", type=int, default=0, help="seconds of the budget already spent")
    ap.add_argument("--only", default="")
    ap.add_argument("--selftest", action="store_true")
    ap.add_argument("--gpus", type=int, default=1)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--bin-dir", default="", help="the bundle's bin/")
    ap.add_argument("--build-root", default="", help="or the build tree")
    ap.add_argument("--ld-path", default="")
    ap.add_argument("--loader", default="")
    ap.add_argument("--loader-dirs", default="")
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args(argv)
    if not a.bin_dir and not a.build_root:
        ap.error("give --bin-dir or --build-root")
    return a


def main(argv):
    a = parse_args(argv)
    c = st.Check(a.work, a.budget, a.elapsed, only=a.only)
    c.install_stop_handler()
    b = Binaries(a)
    # The presets torch_reference.py builds, from this very binary (scripts/peer/workload_table.py).
    c.run(b.argv(b.path("ddpbench"), "workloads", "--json"), 30,
          os.path.join(a.work, "workloads.log"), env=b.env(),
          stdout_path=os.path.join(a.work, "workloads.json"))
    try:
        tests(c, b, a.gpus)
        training_suite(c, b, a.selftest)
        bench_step(c, b, "gemm", "cuda_gemm_bench", 150, ("gpt2-small", "mlp-wide"))
        bench_step(c, b, "bn-bench", "cuda_bn_bench", 60, ("nchw", "nhwc"))
        pytorch(c, b, a.python, a.selftest, a.device)
        projection(c, b)
        collectives(c, b, a.selftest, a.device)
        collectives_mpi(c, b, a.selftest, a.device)
        nccl_vs_pytorch(c, b, a.python, a.selftest, a.device)
        sanitizers(c, b)
    except st.Stopped:
        print("gpu_check: stopped by a signal", file=sys.stderr)
        return 1
    return 1 if c.stopping else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
