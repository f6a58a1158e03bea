"""scripts/gpu_check/: the plan of training runs and the check's order, the step framework
(budget, timeouts that kill a whole process group, steps.tsv), what the tools' output says
(tools.py, libdirs.py) and the summary (failures, the follow-up call, the refresh into OUT),
on synthetic inputs whose answers are known. tests/scripts/gpu_check_selftest.sh runs the
whole check end to end.

    python3 -m unittest discover -s tests/scripts -p 'test_*.py'
"""
import contextlib
import errno
import io
import json
import os
import pathlib
import signal
import sys
import tempfile
import time
import unittest
from unittest import mock

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "gpu_check"))
sys.path.insert(0, str(ROOT / "scripts" / "pylib"))

import check  # noqa: E402
import libdirs  # noqa: E402
import plan  # noqa: E402
import steps  # noqa: E402
import summary  # noqa: E402
import tools  # noqa: E402


def all_runs(selftest, patterns=()):
    """The named runs of every part's suite file, in the check's order."""
    return [r for part, _ in plan.PARTS for r in plan.suite_file(selftest, patterns, part)["runs"]]


class Plan(unittest.TestCase):
    def test_the_gpu_plan_names_every_run_the_summary_reads(self):
        suite = plan.suite_file(False, [])
        names = [r["name"] for r in all_runs(False)]
        self.assertEqual(len(names), len(set(names)))
        self.assertEqual(sorted(set(summary.TRAINING) - set(names)), [])
        for name in ("ddp-nccl-mlp-small", "ddp-gloo-mlp-small"):
            self.assertIn(name, names, "the projection step reads it")
        runs = {r["name"]: r for r in all_runs(False)}
        self.assertEqual(runs["single-gpt2-small"]["workload"], "gpt2-small")
        self.assertEqual(runs["single-resnet50"]["global_batch"], 64)
        self.assertEqual(runs["dp-mlp-small"]["devices"], "cuda:0,cuda:0")
        self.assertEqual(runs["ddp-gloo-mlp-small"]["backend"], "gloo",
                         "NCCL refuses two ranks on one GPU")
        self.assertTrue(runs["single-gpt2-small-graph"]["cuda_graph"])
        self.assertEqual(suite["workloads"], ["mlp-small", "gpt-tiny"])
        self.assertEqual((suite["steps"], suite["warmup"]), (10, 3))

    def test_the_selftest_plan_runs_stand_ins_on_the_cpu(self):
        runs = {r["name"]: r for r in all_runs(True)}
        used = {r["workload"] for r in runs.values()}
        self.assertFalse(used & set(plan.STAND_IN), used)
        self.assertEqual(runs["dp-mlp-small"]["devices"], "cpu:0,cpu:1")
        self.assertEqual(runs["ddp-gloo-mlp-small"]["devices"], "cuda:0,cuda:0",
                         "the runs that need a GPU by their nature still ask for one")
        self.assertEqual(runs["single-resnet50"]["global_batch"], 8)

    def test_only_selects_runs_and_the_matrix_by_their_tags(self):
        ddp = plan.suite_file(False, ["ddp-*"])
        self.assertTrue(ddp["runs"])
        self.assertTrue(all(r["name"].startswith("ddp-") for r in ddp["runs"]))
        self.assertEqual(ddp["workloads"], [])
        matrix = plan.suite_file(False, ["suite"])
        self.assertEqual(matrix["runs"], [])
        self.assertTrue(matrix["workloads"])
        for part, _ in plan.PARTS:
            self.assertTrue(plan.is_empty(plan.suite_file(False, ["gemm"], part)))

    def test_the_parts_run_the_headline_figures_first_and_every_run_once(self):
        parts = {part: [r["name"] for r in plan.suite_file(False, [], part)["runs"]]
                 for part, _ in plan.PARTS}
        self.assertEqual([p for p, _ in plan.PARTS], ["ddp-dp", "vs-pytorch", "rest"])
        names = [n for runs in parts.values() for n in runs]
        self.assertEqual(sorted(names), sorted(n for n, _ in plan.training_runs(False)))
        self.assertEqual(len(names), len(set(names)))
        self.assertIn("ddp-nccl-mlp-small", parts["ddp-dp"])
        self.assertIn("dp-mlp-small", parts["ddp-dp"])
        # Every ddpbench run of the vs-PyTorch rows and the resnet50 target, and the MFU's.
        wanted = {tag for _, tag, _ in summary.VS_TORCH} | {"single-resnet50"}
        self.assertEqual(sorted(wanted - set(parts["vs-pytorch"])), [])
        for part in ("ddp-dp", "vs-pytorch"):
            self.assertEqual(plan.suite_file(False, [], part)["workloads"], [], "the matrix is last")
        self.assertTrue(plan.suite_file(False, [], "rest")["workloads"])

    def test_the_tags_in_the_order_of_the_check(self):
        tags = plan.all_tags()
        self.assertEqual(len(tags), len(set(tags)))
        self.assertEqual(tags[:4], list(plan.TEST_TAGS))
        at = tags.index
        self.assertLess(at("ddp-nccl-mlp-small"), at("single-gpt2-small"))
        self.assertLess(at("single-resnet50"), at("pytorch"))
        self.assertLess(at("pytorch-resnet50"), at("gemm"))
        self.assertLess(at("gemm"), at("single-gpt2-small-graph"))
        self.assertEqual(tags[-2:], ["memcheck", "racecheck"])
        self.assertIn(plan.MATRIX_TAG, tags)

    def test_run_path_finds_a_record_in_whichever_part_ran_it(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(plan.run_path(d, "dp-mlp-small"), "")
            runs = pathlib.Path(d, "suite", "ddp-dp", "runs")
            runs.mkdir(parents=True)
            (runs / "dp-mlp-small.json").write_text("{}")
            self.assertEqual(plan.run_path(d, "dp-mlp-small"), str(runs / "dp-mlp-small.json"))


class Steps(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.work = self.dir.name

    def tearDown(self):
        self.dir.cleanup()

    def test_budget_caps_each_step_and_leaves_out_what_does_not_fit(self):
        c = steps.Check(self.work, budget_s=100, elapsed_s=50, reserve_s=20)
        self.assertEqual(c.timeout_for(10), 10)
        self.assertEqual(c.timeout_for(300), 30)
        late = steps.Check(self.work, budget_s=100, elapsed_s=75, reserve_s=20)
        self.assertIsNone(late.timeout_for(300), "5 s left: under the minimum")

    def test_only_globs(self):
        c = steps.Check(self.work, 100, only="ddp-*,gemm")
        self.assertTrue(c.selected("ddp-gloo-mlp-small"))
        self.assertTrue(c.selected("gemm"))
        self.assertFalse(c.selected("single-mlp-small"))
        self.assertTrue(steps.Check(self.work, 100).selected("anything"))

    def test_record_writes_one_tab_separated_line(self):
        c = steps.Check(self.work, 100)
        with contextlib.redirect_stdout(io.StringIO()):
            c.record("a step", "FAIL", 3.7, "two\tfields\nand lines", "/x.log")
        line = pathlib.Path(self.work, "steps.tsv").read_text()
        self.assertEqual(line, "a step\tFAIL\t3\ttwo fields and lines\t/x.log\n")
        self.assertEqual(summary.read_steps(summary.Work(self.work))[0]["detail"],
                         "two fields and lines")

    def test_on_record_follows_each_line_unless_held_back(self):
        c = steps.Check(self.work, 100)
        calls = []
        c.on_record = lambda: calls.append(len(summary.read_steps(summary.Work(self.work))))
        with contextlib.redirect_stdout(io.StringIO()):
            c.record("run-a", "PASS", 1, publish=False)
            c.record("run-b", "PASS", 1, publish=False)
            c.record("suite:x", "PASS", 2)
            c.not_run("gemm")
        self.assertEqual(calls, [3, 4], "once after the suite's runs, once after gemm's line")

    def test_a_timeout_kills_the_whole_process_group(self):
        c = steps.Check(self.work, 100)
        pid_file = os.path.join(self.work, "grandchild.pid")
        log = os.path.join(self.work, "log")
        old = steps.GRACE_S
        steps.GRACE_S = 1
        try:
            # The grandchild ignores SIGTERM: only the group's SIGKILL ends it.
            r = c.run(["sh", "-c", f"(trap '' TERM; sleep 60) & echo $! > {pid_file}; wait"],
                      1, log)
        finally:
            steps.GRACE_S = old
        self.assertTrue(r.timed_out)
        self.assertEqual(r.text(1), "timed out after 1 s")
        pid = int(pathlib.Path(pid_file).read_text())
        for _ in range(50):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            self.fail("the grandchild outlived the step")

    def test_gtest_names_and_counts(self):
        log = ("[ RUN      ] A.B\n[  SKIPPED ] A.B (0 ms)\n[  FAILED  ] C.D, where GetParam() = 1 (2 ms)\n"
               "[  PASSED  ] 7 tests.\n[  SKIPPED ] 1 test, listed below:\n[  SKIPPED ] A.B\n"
               "[  FAILED  ] 1 test, listed below:\n")
        self.assertEqual(steps.gtest_names(log, "SKIPPED"), ["A.B"])
        self.assertEqual(steps.gtest_names(log, "FAILED"), ["C.D"])
        self.assertEqual(steps.gtest_passed(log), 7)


def run_record_of(step_ms, compute_ms, losses, **extra):
    data = step_ms - compute_ms
    rec = {"summary": {"step_time_ms": {"median": step_ms}, "samples_per_s": 10.0,
                       "tokens_per_s": 10.0, "achieved_flops_per_s": 1e12,
                       "first_loss": losses[0], "last_loss": losses[-1]},
           "config": {"steps": len(losses), "warmup": 0},
           "steps": [{"step": i + 1, "measured": True, "loss": l, "time_ms": step_ms,
                      "phases_ms": {"data": data}} for i, l in enumerate(losses)]}
    rec.update(extra)
    return rec


class Summary(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.work = pathlib.Path(self.dir.name)
        for part, _ in plan.PARTS:
            (self.work / "suite" / part / "runs").mkdir(parents=True)

    def tearDown(self):
        self.dir.cleanup()

    def put(self, name, doc):
        (self.work / name).write_text(json.dumps(doc))

    def build(self, only="", again="scripts/gpu_check.sh --prebuilt b.tar.gz"):
        return summary.build(summary.Work(self.work), {"mode": "test"}, only, again)

    def test_ratios_targets_failures_and_the_last_screen(self):
        log = self.work / "gemm.log"
        log.write_text("line 1\ncuda_gemm_bench: error: no device\n")
        (self.work / "steps.tsv").write_text(
            "device\tPASS\t1\t1 GPU(s)\t\ngemm\tFAIL\t2\texit 1\t" + str(log) + "\n")
        self.put("suite/vs-pytorch/runs/single-gpt2-small.json", run_record_of(12.0, 10.0, [5.0, 4.0]))
        self.put("suite/rest/runs/single-gpt-tiny.json", run_record_of(2.0, 2.0, [3.0, 2.0]))
        self.put("suite/rest/runs/single-gpt-tiny-graph.json", run_record_of(1.0, 1.0, [3.0, 2.5]))
        self.put("torch-gpt2-small-fp32-math.json", run_record_of(21.0, 20.0, [5.0, 4.0]))
        self.put("torch-gpt2-small-fp32-flash.json", run_record_of(9.0, 8.0, [5.0, 4.0]))
        record, lines, failures, screen = self.build()
        fp32 = next(r for r in record["vs_pytorch"]["rows"] if r["math"] == "fp32")
        self.assertAlmostEqual(fp32["ratio_vs_matmul"], 0.5, msg="compute 10 over 20")
        self.assertAlmostEqual(fp32["ratio_vs_sdpa"], 1.25)
        target = next(t for t in record["targets"] if t["target"].startswith("gpt2-small step"))
        self.assertEqual(target["status"], "met")
        graph = record["cuda_graph"][0]
        self.assertFalse(graph["losses_match"], "2.5 against 2.0")
        self.assertEqual(sorted(record["failed"]), ["cuda-graph losses", "gemm"])
        self.assertFalse(record["ok"])
        self.assertIn("== gemm: exit 1", failures)
        self.assertIn("cuda_gemm_bench: error: no device", failures)
        text = "\n".join(screen)
        for want in ("performance targets (GPU)", "== steps", "== failures", "== gemm: exit 1"):
            self.assertIn(want, text)
        self.assertTrue(any("training (2 measured steps" in l for l in lines), lines)

    def test_an_early_stop_has_only_its_steps(self):
        (self.work / "steps.tsv").write_text("libraries\tFAIL\t0\tnot a bundle\t\n")
        record, _, failures, _ = self.build()
        self.assertEqual(record["steps"], [{"step": "libraries", "status": "FAIL", "seconds": 0,
                                            "detail": "not a bundle"}])
        self.assertEqual(record["training"], [])
        self.assertIn("(no log)", failures)
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = summary.main([str(self.work)])
        self.assertEqual(rc, 1)
        for name in ("gpu_check.json", "summary.txt", "failures.txt"):
            self.assertTrue((self.work / name).exists(), name)


GTEST_LOG = """Note: Google Test filter = *
[ RUN      ] CudaParity.FillAndZero
[       OK ] CudaParity.FillAndZero (1 ms)
[ RUN      ] CudaParity.Softmax
/src/tests/core/test_cuda_parity.cpp:141: Skipped
no CUDA device: cudaGetDeviceCount failed with cudaErrorNoDevice (no CUDA-capable device is detected)
[  SKIPPED ] CudaParity.Softmax (0 ms)
[ RUN      ] CudaParity.LayerNorm
W! CuDNN (v90100) function cudnnBackendFinalize() called: CUDNN_STATUS_NOT_SUPPORTED
/src/tests/core/test_cuda_parity.cpp:300: Failure
Expected equality of these values:
  got
    1.5
ddpbench: CUDA error cudaErrorIllegalAddress (an illegal memory access was encountered)
[  FAILED  ] CudaParity.LayerNorm (3 ms)
[ RUN      ] CudaParity.Attention
[  FAILED  ] CudaParity.Attention (1 ms)
[  PASSED  ] 1 test.
[  FAILED  ] 2 tests, listed below:
[  FAILED  ] CudaParity.LayerNorm
"""


class Failures(unittest.TestCase):
    def test_the_first_failed_test_before_a_skipped_one(self):
        how, block = summary.first_failing_test(GTEST_LOG.splitlines())
        self.assertEqual(how, "FAILED")
        self.assertEqual(block[0], "[ RUN      ] CudaParity.LayerNorm")
        self.assertEqual(block[-1], "[  FAILED  ] CudaParity.LayerNorm (3 ms)")
        self.assertIn("Expected equality of these values:", block)

    def test_a_crash_then_a_skip_and_the_bound(self):
        crash = ["[ RUN      ] A.Ok", "[       OK ] A.Ok (1 ms)", "[ RUN      ] A.Crash", "boom"]
        self.assertEqual(summary.first_failing_test(crash), ("never ended", crash[2:]))
        skip = GTEST_LOG.split("[ RUN      ] CudaParity.LayerNorm")[0].splitlines()
        how, block = summary.first_failing_test(skip)
        self.assertEqual((how, block[0]), ("SKIPPED", "[ RUN      ] CudaParity.Softmax"))
        long = ["[ RUN      ] A.Long"] + [f"line {i}" for i in range(100)] + ["[  FAILED  ] A.Long (9 ms)"]
        how, block = summary.first_failing_test(long, limit=60)
        self.assertEqual(len(block), 60)
        self.assertEqual(block[-1], "[  FAILED  ] A.Long (9 ms)")
        self.assertEqual(block[-2], "... (43 lines left out)")
        self.assertIsNone(summary.first_failing_test(["[  PASSED  ] 3 tests."]))

    def test_the_first_gpu_error_is_case_aware_and_skips_cudnn_notes(self):
        self.assertEqual(summary.first_gpu_error(GTEST_LOG.splitlines()),
                         "no CUDA device: cudaGetDeviceCount failed with cudaErrorNoDevice "
                         "(no CUDA-capable device is detected)")
        lines = ["running test_cuda_parity on cuda:0", "W! CUDNN_STATUS_NOT_SUPPORTED",
                 "cublas status CUBLAS_STATUS_SUCCESS", "host 1: NCCL WARN Call to connect failed",
                 "ddpbench: cuBLAS error CUBLAS_STATUS_EXECUTION_FAILED (...)"]
        self.assertEqual(summary.first_gpu_error(lines), "host 1: NCCL WARN Call to connect failed")
        for line in ("CUDA_ERROR_OUT_OF_MEMORY", "x failed: CUDNN_STATUS_BAD_PARAM (3)",
                     "ncclUnhandledCudaError: Call to CUDA function failed",
                     "cuDNN has no engine for the convolution"):
            self.assertEqual(summary.first_gpu_error(["ok", line]), line)
        self.assertEqual(summary.first_gpu_error(["cuda:0 usable", "CUDA_VISIBLE_DEVICES=0"]), "")

    def test_failures_txt_keeps_the_error_the_test_and_the_tail(self):
        with tempfile.TemporaryDirectory() as d:
            log = pathlib.Path(d, "t.log")
            log.write_text(GTEST_LOG + "".join(f"tail {i}\n" for i in range(50)))
            out = summary.failures([{"step": "t", "status": "FAIL", "detail": "exit 1", "log": str(log)},
                                    {"step": "u", "status": "PASS", "detail": "", "log": str(log)}])
        self.assertEqual(out[0], "== t: exit 1")
        self.assertTrue(out[1].startswith(summary.ERROR_LABEL + "no CUDA device"))
        self.assertEqual(out[2:4], ["-- first failing test (FAILED):", "[ RUN      ] CudaParity.LayerNorm"])
        tail = out[out.index(f"-- last 40 lines of {log}:") + 1:-1]
        self.assertEqual(len(tail), 40)
        self.assertEqual(tail[-1], "tail 49")
        heads = summary.failure_heads(out)
        self.assertEqual(heads.count("cudaErrorNoDevice"), 1, heads)

    def test_every_failure_keeps_its_header_when_many_fail(self):
        lines = []
        for i in range(30):
            lines += [f"== step-{i}: exit 1", summary.ERROR_LABEL + "no CUDA device " + "x" * 100,
                      "ddpbench: error: cuda:0 requested " + "y" * 100]
        heads = summary.failure_heads(lines, limit=4000)
        self.assertLessEqual(len(heads), 4000)
        for i in range(30):
            self.assertIn(f"== step-{i}: exit 1", heads)  # the last as visible as the first
        few = summary.failure_heads(lines[:6], limit=4000)
        self.assertIn("ddpbench: error: cuda:0 requested", few)  # room: the telling lines stay


def step(name, status, detail=""):
    return {"step": name, "status": status, "seconds": 0, "detail": detail, "log": ""}


class FollowUp(unittest.TestCase):
    def test_failed_not_run_and_never_reached_in_the_check_order(self):
        steps_so_far = [step("libraries", "PASS"), step("device", "FAIL"),
                        step("test_cuda_parity", "FAIL"), step("test_dp_cuda", "PASS"),
                        step("test_dataloader_cuda", "PASS"), step("test_process_group_nccl", "INFO"),
                        step("single-mlp-small", "PASS"), step("dp-mlp-small", "WARN", "not run (pending): a stop"),
                        step("ddp-nccl-mlp-small", "FAIL"), step("suite:ddp-dp", "PASS")]
        tags = summary.follow_up_tags(steps_so_far)
        self.assertEqual(tags[:3], ["test_cuda_parity", "dp-mlp-small", "ddp-nccl-mlp-small"])
        self.assertEqual(tags[3:], plan.all_tags()[7:], "the rest was never reached")
        self.assertNotIn("device", tags)

    def test_a_full_run_names_only_what_failed_and_the_matrix_by_its_tag(self):
        full = [step(t, "PASS") for t in plan.all_tags() if t != plan.MATRIX_TAG]
        full += [step("mlp-small/single/w1", "PASS"), step("gpt-tiny/ddp/w1", "FAIL"),
                 step("nccl-vs-pytorch", "WARN", "target >= 0.95: missed"),
                 step("collectives-mpi", "WARN", "not run: no mpirun on PATH"),
                 step("cuda-graph losses", "FAIL")]
        full[plan.all_tags().index("gemm")]["status"] = "FAIL"
        self.assertEqual(summary.follow_up_tags(full), ["gemm", plan.MATRIX_TAG, "collectives-mpi"])
        self.assertEqual(summary.follow_up_tags(full, ["ddp-*", "gemm"]), ["gemm"])

    def test_the_command(self):
        again = "scripts/gpu_check.sh --prebuilt b.tar.gz"
        self.assertEqual(summary.follow_up([step("gemm", "FAIL")], ["gemm"], again),
                         (["gemm"], again + " --only gemm"))
        self.assertEqual(summary.follow_up([], [], again), (plan.all_tags(), again),
                         "nothing ran: the whole check again")
        self.assertEqual(summary.follow_up([step("gemm", "PASS")], ["gemm"], again), ([], ""))
        self.assertIn(again + " --only test_cuda_parity,", summary.follow_up([step("gemm", "PASS")], [], again)[1])


class Refresh(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.work = pathlib.Path(self.dir.name, "work")
        self.out = pathlib.Path(self.dir.name, "out")
        self.work.mkdir()
        self.out.mkdir()
        (self.work / "steps.tsv").write_text("libraries\tPASS\t0\tok\t\n"
                                             "test_cuda_parity\tPASS\t9\t40 passed\t\n")

    def tearDown(self):
        self.dir.cleanup()

    def test_the_steps_so_far_land_in_out_and_nothing_else(self):
        summary.refresh(self.work, self.out, {"mode": "test"}, "", "gc.sh")
        self.assertEqual(sorted(p.name for p in self.out.iterdir()),
                         ["failures.txt", "gpu_check.json", "summary.txt"])
        record = json.loads((self.out / "gpu_check.json").read_text())
        self.assertEqual([s["step"] for s in record["steps"]], ["libraries", "test_cuda_parity"])
        self.assertTrue(record["follow_up"].startswith("gc.sh --only test_dp_cuda,"), record["follow_up"])
        self.assertIn("== follow-up", (self.out / "summary.txt").read_text())
        self.assertEqual([p.name for p in self.work.iterdir()], ["steps.tsv"], "no temp file left")

    def test_across_filesystems_a_dotfile_in_out_is_renamed(self):
        real, seen = os.replace, []

        def replace(src, dst):
            seen.append((pathlib.Path(src).parent, pathlib.Path(dst).name))
            if pathlib.Path(src).parent == self.work:
                raise OSError(errno.EXDEV, "Invalid cross-device link")
            real(src, dst)
        with mock.patch.object(summary.os, "replace", replace):
            summary.publish(self.work, self.out, "summary.txt", "text\n")
        self.assertEqual((self.out / "summary.txt").read_text(), "text\n")
        self.assertIn((self.out, "summary.txt"), seen)
        self.assertEqual(sorted(p.name for p in self.out.iterdir()), ["summary.txt"])


class Tools(unittest.TestCase):
    def test_open_mpi_versions(self):
        self.assertEqual(tools.ompi_version("Open MPI v4.1.4\n\nhttp://www.open-mpi.org/community/help/\n"), "4.1.4")
        self.assertEqual(tools.ompi_version("ompi:version:full:5.0.3\nompi:version:repo:v5.0.3\n"), "5.0.3")
        self.assertIsNone(tools.ompi_version("mpirun (Open MPI) 4.1.4"))
        manifest = "binaries:  ddpbench\nopen mpi:  4.1.4 (lib/libmpi.so.40)\nlib: x\n"
        self.assertEqual(tools.bundle_mpi_version(manifest), "4.1.4")
        self.assertEqual(tools.bundle_mpi_version("open mpi:  none (no libmpi bundled)"), "none")
        self.assertIsNone(tools.bundle_mpi_version("binaries:  ddpbench\n"))

    def test_mpi_runs_only_under_an_mpirun_of_the_bundles_version(self):
        refusal = tools.mpi_refusal
        self.assertEqual(refusal("/usr/bin/mpirun", "/usr/bin/ompi_info", "4.1.4", "4.1.4", True), "")
        self.assertEqual(refusal("/usr/bin/mpirun", None, None, None, False), "", "a local build")
        self.assertIn("no mpirun", refusal(None, "/usr/bin/ompi_info", "4.1.4", "4.1.4", True))
        self.assertIn("no ompi_info", refusal("/usr/bin/mpirun", None, None, "4.1.4", True))
        self.assertEqual(refusal("/usr/bin/mpirun", "/usr/bin/ompi_info", "4.1.2", "4.1.4", True),
                         "mpirun's Open MPI is 4.1.2, the bundle's libmpi is 4.1.4")
        self.assertIn("does not record", refusal("/usr/bin/mpirun", "/usr/bin/ompi_info", "4.1.4", None, True))
        self.assertIn("no libmpi", refusal("/usr/bin/mpirun", "/usr/bin/ompi_info", "4.1.4", "none", True))

    def test_the_bundles_lib_is_kept_off_mpiruns_path(self):
        self.assertEqual(tools.without_dirs("/b/lib:/b/lib/compat:/usr/lib:/b/libx", "/b/lib"), "/usr/lib:/b/libx")
        self.assertEqual(tools.without_dirs("", "/b/lib"), "")

    def test_sanitizer_options_from_their_text(self):
        self.assertEqual(tools.racecheck_filter("  --kernel-name arg   Filter kernels: kns=..."),
                         ["--kernel-name", "kns=ddpb"])
        self.assertEqual(tools.racecheck_filter("  --kernel-regex arg\n  --kernel-name-exclude arg"),
                         ["--kernel-regex", "kns=ddpb"])
        self.assertEqual(tools.racecheck_filter("  --kernel-name-exclude arg"), [])
        self.assertEqual(tools.racecheck_filter(""), [])
        for text in ("========= Error: Unrecognized option '--report-api-errors'",
                     "unknown option: --report-api-errors", "the option '--kernel-name' is unknown"):
            self.assertEqual(tools.rejected_option("COMPUTE-SANITIZER\n" + text + "\n"), text)
        self.assertEqual(tools.rejected_option("========= ERROR SUMMARY: 0 errors"), "")

    def test_every_checked_sweep_stops_at_64_mib(self):
        self.assertEqual(tools.size_bytes("64M"), 64 << 20)
        self.assertEqual(tools.size_bytes("1k"), 1024)
        for selftest in (False, True):
            for backend in ("nccl", "mpi", "gloo"):
                argv = check.checked_sweep(selftest, "cuda:0", backend)
                self.assertEqual(argv[argv.index("-c") + 1], "1")
                self.assertLessEqual(tools.size_bytes(argv[argv.index("-e") + 1]), 64 << 20)

    def test_a_rejected_sanitizer_option_is_info(self):
        r = steps.Result(1, False, False, 1.0)
        self.assertEqual(check.sanitizer_verdict(r, 60, "Unrecognized option '--report-api-errors'", "memcheck")[0],
                         "INFO")
        self.assertEqual(check.sanitizer_verdict(r, 60, "========= ERROR SUMMARY: 3 errors", "memcheck"),
                         ("FAIL", "========= ERROR SUMMARY: 3 errors"))
        ok = steps.Result(0, False, False, 1.0)
        self.assertEqual(check.sanitizer_verdict(ok, 60, "========= ERROR SUMMARY: 0 errors", "memcheck")[0], "PASS")


class LibDirs(unittest.TestCase):
    def test_the_nvidia_packages_lib_folders_without_importing_them(self):
        with tempfile.TemporaryDirectory() as d:
            for sub in ("nccl/lib", "cudnn/lib", "cu13/lib", "nolib", "bare/lib"):
                pathlib.Path(d, "nvidia", sub).mkdir(parents=True)
            for pkg in ("nccl", "cudnn", "cu13", "nolib"):  # "bare": a namespace subpackage
                pathlib.Path(d, "nvidia", pkg, "__init__.py").write_text("raise RuntimeError('imported')\n")
            sys.path.insert(0, d)
            try:
                found = libdirs.package_lib_dirs()
            finally:
                sys.path.remove(d)
                sys.modules.pop("nvidia", None)
        mine = [os.path.relpath(p, d) for p in found if p.startswith(d)]
        self.assertEqual(mine, ["nvidia/bare/lib", "nvidia/cu13/lib", "nvidia/cudnn/lib", "nvidia/nccl/lib"])


if __name__ == "__main__":
    unittest.main()
