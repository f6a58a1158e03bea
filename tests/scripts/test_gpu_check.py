"""scripts/gpu_check/: the plan of training runs, the step framework (budget, timeouts that
kill a whole process group, steps.tsv) and the summary, on synthetic inputs whose answers
are known. tests/scripts/gpu_check_selftest.sh runs the whole check end to end.

    python3 -m unittest discover -s tests/scripts -p 'test_*.py'
"""
import contextlib
import io
import json
import os
import pathlib
import signal
import sys
import tempfile
import time
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "gpu_check"))
sys.path.insert(0, str(ROOT / "scripts" / "pylib"))

import plan  # noqa: E402
import steps  # noqa: E402
import summary  # noqa: E402


class Plan(unittest.TestCase):
    def test_the_gpu_plan_names_every_run_the_summary_reads(self):
        suite = plan.suite_file(False, [])
        names = [r["name"] for r in suite["runs"]]
        self.assertEqual(len(names), len(set(names)))
        self.assertEqual(sorted(set(summary.TRAINING) - set(names)), [])
        for name in ("ddp-nccl-mlp-small", "ddp-gloo-mlp-small"):
            self.assertIn(name, names, "the projection step reads it")
        runs = {r["name"]: r for r in suite["runs"]}
        self.assertEqual(runs["single-gpt2-small"]["workload"], "gpt2-small")
        self.assertEqual(runs["single-resnet50"]["global_batch"], 64)
        self.assertEqual(runs["dp-mlp-small"]["devices"], "cuda:0,cuda:0")
        self.assertEqual(runs["ddp-gloo-mlp-small"]["backend"], "gloo",
                         "NCCL refuses two ranks on one GPU")
        self.assertTrue(runs["single-gpt2-small-graph"]["cuda_graph"])
        self.assertEqual(suite["workloads"], ["mlp-small", "gpt-tiny"])
        self.assertEqual((suite["steps"], suite["warmup"]), (10, 3))

    def test_the_selftest_plan_runs_stand_ins_on_the_cpu(self):
        suite = plan.suite_file(True, [])
        runs = {r["name"]: r for r in suite["runs"]}
        used = {r["workload"] for r in suite["runs"]}
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
        self.assertTrue(plan.is_empty(plan.suite_file(False, ["gemm"])))


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
        (self.work / "suite" / "runs").mkdir(parents=True)

    def tearDown(self):
        self.dir.cleanup()

    def put(self, name, doc):
        (self.work / name).write_text(json.dumps(doc))

    def build(self):
        return summary.build(summary.Work(self.work), {"mode": "test"})

    def test_ratios_targets_failures_and_the_last_screen(self):
        log = self.work / "gemm.log"
        log.write_text("line 1\ncuda_gemm_bench: error: no device\n")
        (self.work / "steps.tsv").write_text(
            "device\tPASS\t1\t1 GPU(s)\t\ngemm\tFAIL\t2\texit 1\t" + str(log) + "\n")
        self.put("suite/runs/single-gpt2-small.json", run_record_of(12.0, 10.0, [5.0, 4.0]))
        self.put("suite/runs/single-gpt-tiny.json", run_record_of(2.0, 2.0, [3.0, 2.0]))
        self.put("suite/runs/single-gpt-tiny-graph.json", run_record_of(1.0, 1.0, [3.0, 2.5]))
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


if __name__ == "__main__":
    unittest.main()
