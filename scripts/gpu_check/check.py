#!/usr/bin/env python3
"""The GPU check's steps after the device probe (scripts/gpu_check.sh runs this; see there).

In the order of their value (Note [GPU check order] in plan.py): the CUDA tests (a skip
fails them); DDP and DP against single (a first `ddpbench suite`); gpt2-small and resnet50
in ddpbench (a second) and in PyTorch; GEMM against cuBLAS; then the rest of the training
runs (a third), batch norm, the projection, the collectives and compute-sanitizer with what
is left. Every step appends its line to WORK/steps.tsv (steps.py), after which the evidence
in OUT is refreshed (summary.refresh: what a hard kill leaves); summary.py turns the folder
into the final evidence afterwards. Exit: 0 when every step ran (failed steps are in
steps.tsv), 1 when stopped by a signal, 2 on bad arguments.
"""
import argparse
import json
import os
import secrets
import shlex
import shutil
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plan  # noqa: E402
import steps as st  # noqa: E402
import summary  # noqa: E402
import tools  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SCRIPTS, "pylib"))
import collectives_vs_raw  # noqa: E402
import run_record  # noqa: E402

# cuDNN says why an engine or plan fails (Note [cuDNN engine choice]).
CUDNN_LOG = {"CUDNN_LOGLEVEL_DBG": "2", "CUDNN_LOGDEST_DBG": "stderr"}
MEMCHECK = ("CudaParity.Arithmetic:CudaParity.Activations:CudaParity.Softmax:CudaParity.LayerNorm:"
            "CudaParity.Embedding:CudaParity.Attention:CudaParity.CrossEntropy:CudaParity.SgdStep:"
            "CudaParity.GemmUnalignedViewsUseTheFallbackCorrectly:"
            # bf16 autocast's kernels and GEMM staging (Note [Autocast]): new, never run yet.
            "CudaParity.Bf16ElementwiseOpsAtEveryAlignmentAndLength:"
            "CudaParity.GemmBf16EpiloguePassAtEveryAlignment:CudaParity.GemmBf16EmptyInnerDimension")
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
    """A step line per run of suite.json: ok PASS, failed FAIL (its log), else WARN. The
    evidence is refreshed once, by the suite's own line after them."""
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
                     detail, log, publish=False)
        elif status == "failed":
            c.record(run["id"], "FAIL", run.get("duration_s", 0), run.get("error", ""), log,
                     publish=False)
        else:
            c.record(run["id"], "WARN", 0, f"not run ({status}): time budget or a stop",
                     publish=False)
    return suite


def training_part(c, b, selftest, part, want):
    """One part of the training runs (plan.PARTS) as a `ddpbench suite` into WORK/suite/PART:
    a line per run, then the suite's own ("suite:PART"). Runs it never ran get a line each
    too, so that the follow-up call names them."""
    spec = plan.suite_file(selftest, c.patterns, part)
    if plan.is_empty(spec):
        return
    names = [r["name"] for r in spec["runs"]] + ([plan.MATRIX_TAG] if spec["workloads"] else [])
    c.header(f"training {part}: ddpbench suite ({len(spec['runs'])} named runs"
             f"{' and the world-size-1 matrix' if spec['workloads'] else ''})")
    t = c.timeout_for(want)
    if t is None:
        for i, name in enumerate(names):
            c.not_run(name, publish=i == len(names) - 1)
        return
    tag, out = f"suite:{part}", os.path.join(c.work, "suite", part)
    path, log = os.path.join(c.work, f"suite-{part}.json"), os.path.join(c.work, f"suite-{part}.log")
    with open(path, "w") as f:
        json.dump(spec, f, indent=1)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    device = "cpu" if selftest else "cuda"
    r = c.run(b.argv(b.path("ddpbench"), "suite", path, "--device", device, "--out", out), t, log,
              env=b.env(CUDNN_LOG))
    suite = suite_rows(c, out)
    if suite is None:
        for name in names:
            c.record(name, "WARN", 0, f"not run: the suite failed ({tag})", publish=False)
        c.record(tag, "WARN" if r.stopped else "FAIL", r.seconds,  # a stop is no failure
                 f"{r.text(t)}, no suite.json: {st.first_line(st.read_text(log))}", log)
    elif r.timed_out or r.stopped or not suite.get("complete"):
        c.record(tag, "WARN", r.seconds, f"{r.text(t)}: runs left out; suite.json kept", log)
    elif r.rc not in (0, 1):  # 1: a run failed, which its own line says
        c.record(tag, "FAIL", r.seconds, f"{r.text(t)}: {st.first_line(st.read_text(log))}", log)
    else:
        ok = sum(run.get("status") == "ok" for run in suite["runs"])
        c.record(tag, "PASS", r.seconds,
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
    one, two = (plan.run_path(c.work, n) for n in ("ddp-nccl-mlp-small", "ddp-gloo-mlp-small"))
    if not (one and two):
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


CHECKED_OPS = ("allreduce,allgather,reduce_scatter,broadcast,reduce,alltoall,sendrecv,"
               "allgather_coalesced,reduce_scatter_coalesced")


def checked_sweep(selftest, device, backend):
    """`ddpbench collectives` arguments of a sweep whose every result is checked (-c 1): on the
    GPU one rank (NCCL refuses two on one GPU) up to tools.CHECKED_TOP; the selftest, 2 CPU
    ranks up to 64 KiB."""
    where = (["--device", "cpu", "-g", "2", "-e", "64K"] if selftest else
             ["--device", device.split(":")[0], "-g", "1", "-e", tools.CHECKED_TOP])
    return ["collectives", "--backend", backend, "-b", "1K", "-f", "4", "-c", "1", "-n", "10",
            "-o", CHECKED_OPS, *where]


def sweep_result(c, tag, r, t, out, log, with_bandwidth):
    if r.rc != 0 or not os.path.exists(out):
        return c.record(tag, "FAIL", r.seconds, f"{r.text(t)}: {st.first_line(st.read_text(log))}", log)
    with open(out) as f:
        rec = json.load(f)
    wrong = sum(x.get("wrong", 0) for x in rec["results"])
    detail = f"{len(rec['results'])} sizes x ops, {wrong} wrong"
    if with_bandwidth:
        best = max(x["algbw_GBps"] for x in rec["results"] if x["op"] == "allreduce")
        detail += f"; allreduce algbw up to {best:.2f} GB/s"
    c.record(tag, "FAIL" if wrong else "PASS", r.seconds, detail, log)


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
    argv = checked_sweep(selftest, device, "gloo" if selftest else "nccl") + ["-J", out]
    r = c.run(b.argv(b.path("ddpbench"), *argv), t, log, env=b.env())
    sweep_result(c, "collectives", r, t, out, log, with_bandwidth=True)


def mpi_refusal(b):
    """tools.mpi_refusal on this machine: its mpirun and ompi_info, the bundle's MANIFEST.txt."""
    mpirun, ompi_info = shutil.which("mpirun"), shutil.which("ompi_info")
    system = None
    if ompi_info:
        try:
            system = tools.ompi_version(subprocess.run(
                [ompi_info, "--version"], capture_output=True, text=True, timeout=30).stdout)
        except (OSError, subprocess.TimeoutExpired):
            pass
    bundle = None
    if b.bin_dir:
        bundle = tools.bundle_mpi_version(st.read_text(os.path.join(b.bin_dir, "..", "MANIFEST.txt")))
    print(f"mpirun: {mpirun or '-'}; ompi_info: {ompi_info or '-'} (Open MPI {system or '?'}); "
          f"the bundle's Open MPI: {bundle if b.bin_dir else 'none: a local build'}")
    return mpirun, tools.mpi_refusal(mpirun, ompi_info, system, bundle, bool(b.bin_dir))


def mpirun_env(b):
    """mpirun's own environment: this one without the bundle's lib/ (Open MPI's launcher must
    load its own libraries), with the rendezvous our ranks take from their launcher (as
    comm/mpirun_launch.cpp sets it when ddpbench starts mpirun itself)."""
    env = dict(os.environ)
    if b.bin_dir:
        env["LD_LIBRARY_PATH"] = tools.without_dirs(env.get("LD_LIBRARY_PATH", ""),
                                                    os.path.join(os.path.dirname(b.bin_dir), "lib"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), DDPBENCH_STORE_TOKEN=secrets.token_hex(16))
    if os.geteuid() == 0:  # Open MPI refuses root unless told twice (a container's usual user)
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def collectives_mpi(c, b, selftest, device):
    """`ddpbench collectives --backend mpi` on the GPU: CUDA tensors as device pointers where
    the MPI is CUDA-aware, else staged through pinned memory (one rank: the GPU's). The bundle
    carries libmpi, not Open MPI's launcher and plugins: the machine's mpirun starts the ranks,
    only where its Open MPI is the bundle's (tools.mpi_refusal), and only the ranks get the
    bundle's libraries (through `env`, or the bundled loader). The selftest: 2 CPU ranks."""
    if not c.selected("collectives-mpi"):
        return
    c.header("collectives over MPI")
    mpirun, refusal = mpi_refusal(b)
    if refusal:
        return c.record("collectives-mpi", "WARN", 0, f"not run: {refusal}")
    t = c.timeout_for(60)
    if t is None:
        return c.not_run("collectives-mpi")
    out, log = os.path.join(c.work, "collectives-mpi.json"), os.path.join(c.work, "collectives-mpi.log")
    sweep = checked_sweep(selftest, device, "mpi") + ["-J", out]
    ranks = sweep[sweep.index("-g") + 1]
    program = b.argv(b.path("ddpbench"), *sweep)
    if b.ld_path and not b.loader:
        program = ["env", f"LD_LIBRARY_PATH={b.ld_path}", *program]
    argv = [mpirun, "-np", ranks, "--oversubscribe", "--tag-output", "-x", "MASTER_ADDR",
            "-x", "MASTER_PORT", "-x", "DDPBENCH_STORE_TOKEN", "-x", "NCCL_DEBUG", *program]
    print("command: " + shlex.join(argv))
    r = c.run(argv, t, log, env=mpirun_env(b))
    sweep_result(c, "collectives-mpi", r, t, out, log, with_bandwidth=False)


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


def sanitizer_verdict(r, t, text, tool):
    """(status, detail) of a compute-sanitizer run."""
    summary_line = next((l.strip() for l in text.splitlines()
                         if "ERROR SUMMARY" in l or "RACECHECK SUMMARY" in l), "")
    low, rejected = text.lower(), tools.rejected_option(text)
    if r.timed_out:
        return "WARN", f"timed out after {t} s (bounded)"
    if rejected and r.rc not in (0, 86):  # an option it does not have: nothing checked or failed
        return "INFO", f"this compute-sanitizer rejects an option: {rejected}"
    if "device not supported" in low or "error 999" in low or "unsupported device" in low:
        # The sanitizer cannot attach to this GPU or driver: nothing was checked, nothing failed.
        return "INFO", "the sanitizer refuses this device"
    if r.rc == 86 or any(f"SUMMARY: {d}" in summary_line for d in "123456789"):
        return "FAIL", summary_line or f"{tool} reported errors"
    if r.rc != 0:
        return "FAIL", f"exit {r.rc} under {tool}"
    return "PASS", summary_line or "no errors"


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
    # The sanitizer starts with the bundle's libraries on the path (its own are CUDA's).
    argv = [sanitizer, "--tool", tool, "--error-exitcode", "86", *options, parity,
            f"--gtest_filter={gfilter}", "--gtest_color=no"]
    print("command: " + (f"LD_LIBRARY_PATH={shlex.quote(b.ld_path)} " if b.ld_path else "") +
          shlex.join(argv), flush=True)
    r = c.run(argv, t, log, env=b.env())
    text = st.read_text(log)
    print("\n".join(text.splitlines()[-5:]))
    status, detail = sanitizer_verdict(r, t, text, tool)
    c.record(tool, status, r.seconds, detail, log)


def sanitizers(c, b):
    sanitizer = shutil.which("compute-sanitizer") or next(
        (p for p in ("/usr/local/cuda/bin/compute-sanitizer",) if os.access(p, os.X_OK)), "")
    helptext = ""
    if sanitizer and c.selected("racecheck"):
        try:
            helptext = subprocess.run([sanitizer, "--help"], capture_output=True, text=True,
                                      timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            pass
    sanitizer_step(c, b, "memcheck", MEMCHECK, sanitizer, tools.MEMCHECK_OPTIONS)
    sanitizer_step(c, b, "racecheck", RACECHECK, sanitizer, tools.racecheck_filter(helptext))


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
    ap.add_argument("--out", default="", help="refresh the evidence here after every step")
    ap.add_argument("--mode", default="", help="for the evidence: how the binaries came")
    ap.add_argument("--again", default="scripts/gpu_check.sh", help="the follow-up command's start")
    a = ap.parse_args(argv)
    if not a.bin_dir and not a.build_root:
        ap.error("give --bin-dir or --build-root")
    return a


def evidence_refresher(a, c):
    """Check.on_record: the evidence of the steps so far into OUT (Note [GPU check evidence] in
    gpu_check.sh). A refresh that fails is said once and not retried: deliver's summary
    still runs at the end."""
    broken = []

    def refresh():
        if broken:
            return
        try:
            summary.refresh(a.work, a.out, {"mode": a.mode, "budget_s": a.budget,
                                            "elapsed_s": c.elapsed()}, a.only, a.again)
        except Exception as e:  # noqa: BLE001  (any bug here must not end the steps)
            broken.append(e)
            print(f"gpu_check: refreshing the evidence in {a.out} failed: {e!r}", file=sys.stderr)
    return refresh


def main(argv):
    a = parse_args(argv)
    c = st.Check(a.work, a.budget, a.elapsed, only=a.only)
    c.install_stop_handler()
    if a.out:
        c.on_record = evidence_refresher(a, c)
    b = Binaries(a)
    # The presets torch_reference.py builds, from this very binary (scripts/peer/workload_table.py).
    c.run(b.argv(b.path("ddpbench"), "workloads", "--json"), 30,
          os.path.join(a.work, "workloads.log"), env=b.env(),
          stdout_path=os.path.join(a.work, "workloads.json"))
    try:
        # Note [GPU check order] (plan.py): the headline figures first.
        tests(c, b, a.gpus)
        training_part(c, b, a.selftest, "ddp-dp", 120)
        training_part(c, b, a.selftest, "vs-pytorch", 240)
        pytorch(c, b, a.python, a.selftest, a.device)
        bench_step(c, b, "gemm", "cuda_gemm_bench", 150, ("gpt2-small", "mlp-wide"))
        training_part(c, b, a.selftest, "rest", 420)
        bench_step(c, b, "bn-bench", "cuda_bn_bench", 60, ("nchw", "nhwc"))
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
