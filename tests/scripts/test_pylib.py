"""scripts/pylib/: the tables the benchmark scripts print, computed from synthetic inputs
whose answers are known, the one definition of the performance targets, and the rule that
keeps Python out of bash (no heredoc over 15 lines in scripts/).

    python3 -m unittest discover -s tests/scripts -p 'test_*.py'
"""
import contextlib
import io
import json
import os
import pathlib
import re
import sys
import tempfile
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "pylib"))
sys.path.insert(0, str(ROOT / "scripts" / "peer"))

import collectives_vs_raw  # noqa: E402
import compare_table  # noqa: E402
import gemm_ratio  # noqa: E402
import gloo_ratio  # noqa: E402
import loader_ratio  # noqa: E402
import perf_targets  # noqa: E402
import real_vs_synthetic  # noqa: E402
import run_record  # noqa: E402
import soak  # noqa: E402
import sweep_tables  # noqa: E402
import workload_table  # noqa: E402  (scripts/peer/, free of torch)


def run_main(module, argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = module.main(argv)
    return rc, out.getvalue()


def write_json(path, doc):
    pathlib.Path(path).write_text(json.dumps(doc))
    return str(path)


def record(step_ms, **extra):
    r = {"summary": {"step_time_ms": {"median": step_ms}}, "steps": [{"loss": 1.0}]}
    r.update(extra)
    return r


class Soak(unittest.TestCase):
    def quiet_bounds(self, *args):
        with contextlib.redirect_stdout(io.StringIO()):
            return soak.bounds(*args)

    def test_growth_within_the_step_records_holds_and_past_it_breaks(self):
        start = {"1": {"rss_kib": 100_000, "fds": 9}}
        # 10% (10,000 KiB) plus 2 KiB a step over 1,000 steps: 12,000 KiB may be added.
        self.assertTrue(self.quiet_bounds(start, {"1": {"rss_kib": 112_000, "fds": 11}}, 1, 1, 1000))
        self.assertFalse(self.quiet_bounds(start, {"1": {"rss_kib": 112_001, "fds": 9}}, 1, 1, 1000))
        self.assertFalse(self.quiet_bounds(start, {"1": {"rss_kib": 100_000, "fds": 12}}, 1, 1, 1000))
        self.assertFalse(self.quiet_bounds(start, start, 1, soak.DUMP_BYTES + 1, 1000))
        with_threads = {"1": {"rss_kib": 100_000, "fds": 9, "threads": 6}}
        self.assertTrue(self.quiet_bounds(with_threads, {"1": dict(with_threads["1"], threads=8)},
                                          1, 1, 1000))
        self.assertFalse(self.quiet_bounds(with_threads, {"1": dict(with_threads["1"], threads=9)},
                                           1, 1, 1000))

    def test_sample_reads_this_process(self):
        got = soak.sample([str(os.getpid()), "999999999"])
        self.assertEqual(list(got), [str(os.getpid())], "a process that is gone is left out")
        self.assertGreater(got[str(os.getpid())]["rss_kib"], 1000)
        self.assertGreater(got[str(os.getpid())]["fds"], 2)
        self.assertGreaterEqual(got[str(os.getpid())]["threads"], 1)


class Targets(unittest.TestCase):
    def test_goals_read_as_the_docs_state_them(self):
        self.assertEqual(perf_targets.target("cpu.ddp_w2_vs_pytorch").goal, "<= 0.70")
        self.assertEqual(perf_targets.target("cpu.ddp_w1_overhead").goal, "<= 3%")
        self.assertEqual(perf_targets.target("gpu.ddp_w2_overlap").goal, "> 0.50")
        self.assertEqual(perf_targets.target("gpu.mfu").goal, "report")

    def test_status_at_and_around_each_threshold(self):
        self.assertEqual(perf_targets.status("cpu.gloo_pg_vs_raw", 1.05), "met")
        self.assertEqual(perf_targets.status("cpu.gloo_pg_vs_raw", 1.0501), "not met")
        self.assertEqual(perf_targets.status("cpu.powersgd_vs_fp32", 1.0), "not met")
        self.assertEqual(perf_targets.status("gpu.ddp_w2_overlap", 0.5), "not met")
        self.assertEqual(perf_targets.status("gpu.mfu", 0.3), "reported")
        self.assertEqual(perf_targets.status("gpu.gemm_vs_cublas", None), "not measured")
        self.assertEqual(perf_targets.status("cpu.span_overlap_vs_pytorch", 0.1, met=True), "met")

    def test_every_key_a_script_names_is_defined(self):
        used = set()
        for path in list((ROOT / "scripts").rglob("*.py")) + list((ROOT / "scripts").rglob("*.sh")):
            used |= set(re.findall(r'"((?:cpu|gpu)\.[a-z0-9_]+)"', path.read_text()))
        self.assertTrue(used, "no script names a target")
        self.assertEqual(sorted(used - set(perf_targets.TARGETS)), [])


class GemmRatio(unittest.TestCase):
    def test_the_overall_ratio_weights_shapes_by_calls_per_step(self):
        def row(impl, shape, cpu_ms, calls, flops):
            return {"name": f"gemm/{impl}/{shape}", "run_name": f"gemm/{impl}/{shape}",
                    "run_type": "iteration", "cpu_time": cpu_ms, "time_unit": "ms",
                    "calls_per_step": calls, "M": 64, "N": 64, "K": 64, "FLOPS": flops}
        doc = {"context": {"host_name": "h", "num_cpus": 2},
               "benchmarks": [row("ddpbench", "a", 2.0, 1, 1e9), row("openblas", "a", 1.0, 1, 2e9),
                              row("ddpbench", "b", 1.0, 3, 1e9), row("openblas", "b", 1.0, 3, 1e9)]}
        with tempfile.TemporaryDirectory() as d:
            rc, text = run_main(gemm_ratio, ["", write_json(f"{d}/g.json", doc)])
        self.assertEqual(rc, 0)
        # ddpbench 2 + 3 * 1 = 5 ms, openblas 1 + 3 * 1 = 4 ms: ratio 4 / 5
        self.assertIn("ddpbench 5.000 ms, openblas 4.000 ms, ratio 0.800", text)
        self.assertRegex(text, r"\na +64 +64 +64 +1 +1\.0 +2\.0 +0\.500\n")

    def test_each_library_in_the_run_gets_its_columns_and_overall_line(self):
        def row(impl, shape, cpu_ms, flops):
            return {"name": f"gemm/{impl}/{shape}", "run_name": f"gemm/{impl}/{shape}",
                    "run_type": "iteration", "cpu_time": cpu_ms, "time_unit": "ms",
                    "calls_per_step": 2, "M": 8, "N": 16, "K": 32, "FLOPS": flops}
        doc = {"context": {"host_name": "h", "num_cpus": 2},
               "benchmarks": [row("ddpbench", "a", 1.0, 4e9), row("openblas", "a", 2.0, 2e9),
                              row("onednn", "a", 1.0, 4e9)]}
        with tempfile.TemporaryDirectory() as d:
            rc, text = run_main(gemm_ratio, ["", write_json(f"{d}/g.json", doc)])
        self.assertEqual(rc, 0)
        # oneDNN first (what ddpbench calls), then OpenBLAS (what PyTorch calls)
        self.assertRegex(text, r"\na +8 +16 +32 +2 +4\.0 +4\.0 +1\.000 +2\.0 +2\.000\n")
        self.assertIn("ddpbench 2.000 ms, onednn 2.000 ms, ratio 1.000", text)
        self.assertIn("ddpbench 2.000 ms, openblas 4.000 ms, ratio 2.000", text)


class GlooRatio(unittest.TestCase):
    def doc(self, raw_ms, pg_ms):
        rows = [{"name": f"gloo_allreduce/{side}", "run_name": f"gloo_allreduce/{side}/x",
                 "run_type": "iteration", "real_time": t, "time_unit": "ms",
                 "bytes": 64 << 20, "ranks": 2}
                for side, times in (("raw", raw_ms), ("pg", pg_ms)) for t in times]
        return {"context": {"host_name": "h", "num_cpus": 2, "load_avg": [0.5]}, "benchmarks": rows}

    def test_ratio_of_medians_and_strict_exit(self):
        with tempfile.TemporaryDirectory() as d:
            ok = write_json(f"{d}/ok.json", self.doc([10, 11, 12], [10.5, 11.5, 12.5]))
            slow = write_json(f"{d}/slow.json", self.doc([10, 10, 10], [12, 12, 12]))
            rc, text = run_main(gloo_ratio, ["", ok])
            self.assertEqual(rc, 0)
            self.assertIn("ratio PG/raw (median time): 1.045", text)
            self.assertIn("within target: <= 1.05", text)
            os.environ["STRICT"] = "1"
            try:
                rc, text = run_main(gloo_ratio, ["", slow])
            finally:
                del os.environ["STRICT"]
            self.assertEqual(rc, 3)
            self.assertIn("ABOVE target", text)


class LoaderRatio(unittest.TestCase):
    def test_pairs_in_order_median_ratio_and_strict_exit(self):
        lines = ["ddpbench 1 300", "pytorch 1 100", "ddpbench 2 500", "pytorch 2 400",
                 "ddpbench 1 200", "pytorch 1 100", "ddpbench 2 600", "pytorch 2 400",
                 "ddpbench 1 400", "pytorch 1 100", "ddpbench 2 520", "pytorch 2 400", "junk"]
        by_workers = loader_ratio.pairs(lines)
        self.assertEqual(by_workers[1], [(300, 100), (200, 100), (400, 100)])
        text, ok = loader_ratio.table(by_workers)
        self.assertFalse(ok)  # 2 workers: ratios 1.25, 1.5, 1.3 -> median 1.3 < 1.5
        self.assertRegex(text, r"\n +1 +300\.0 +100\.0 +3\.00 +3 met")
        self.assertRegex(text, r"\n +2 +520\.0 +400\.0 +1\.30 +3 NOT met")


class RealVsSynthetic(unittest.TestCase):
    def test_ratio_of_pairs_data_wait_and_strict_exit(self):
        def run(ms, wait=None):
            r = record(ms, workload={"name": "resnet-tiny"})
            if wait is not None:
                r["summary"]["loader"] = {"data_wait_ms_median": wait}
            return r
        with tempfile.TemporaryDirectory() as d:
            paths = [write_json(f"{d}/{i}.json", r) for i, r in enumerate(
                [run(100), run(103, 0.5), run(90), run(99, 0.7), run(110), run(111, 0.2)])]
            rc, text = run_main(real_vs_synthetic, paths)
            self.assertEqual(rc, 0)
            self.assertIn("synthetic step 100.00 ms, on files 103.00 ms (data wait 0.50 ms), "
                          "ratio 1.030 over 3 pairs: met (<= 1.05)", text)
            os.environ["STRICT"] = "1"
            try:
                rc, text = run_main(real_vs_synthetic, paths[2:4])
            finally:
                del os.environ["STRICT"]
            self.assertEqual(rc, 3)
            self.assertIn("ratio 1.100 over 1 pairs: NOT met", text)
            self.assertEqual(run_main(real_vs_synthetic, paths[:3])[0], 2)


class CompareTable(unittest.TestCase):
    def test_ratios_and_cpu_targets(self):
        ddp_mode = {"overlap_ratio": 0.6, "comm_ms": 4.0, "comm_exposed_ms": 1.0,
                    "span_overlap_ratio": 0.7}
        step_ms = {("ddpbench", "single"): 10, ("pytorch", "single"): 12,
                   ("ddpbench", "ddp-w2"): 14, ("pytorch", "ddp-w2"): 20,
                   ("ddpbench", "ddp-w1"): 10.2, ("pytorch", "ddp-w1"): 13,
                   ("ddpbench", "zero1"): 15, ("pytorch", "zero1"): 20,
                   ("ddpbench", "ddp-w2-noovl"): 16, ("ddpbench", "single-b256"): 40,
                   ("ddpbench", "dp-w2-b256"): 25}
        with tempfile.TemporaryDirectory() as d:
            for (side, cfg), ms in step_ms.items():
                mode = dict(ddp_mode, comm_exposed_ms=4.0 if cfg == "ddp-w2-noovl" else 1.0)
                steps = ([{"measured": True, "mode": mode, "loss": 1.0}]
                         if "ddp" in cfg or cfg == "zero1" else [])
                paths = [write_json(f"{d}/{side}.{cfg}.{i}.json", dict(record(ms + i), steps=steps))
                         for i in (-1, 0, 1)]
                pathlib.Path(f"{d}/records.{side}.{cfg}").write_text("\n".join(paths) + "\n")
            t = compare_table.build(d, 3, 30, 5, "mlp-small", True, 1.02)
        self.assertAlmostEqual(t["configs"]["ddp-w2"]["ratio"], 14 / 20)
        status = {r["target"]: r["status"] for r in t["targets"]}
        self.assertEqual(status["DDP 2 ranks step / PyTorch DDP"], "met")  # 0.70
        self.assertEqual(status["DDP world size 1 overhead over single"], "met")  # 2%
        self.assertEqual(status["DP 2 devices speed-up over single, batch 256"], "met")
        self.assertEqual(status["exposed comm with overlap / --no-overlap"], "met")  # 0.25
        self.assertEqual(status["Gloo allreduce through the group / raw Gloo, 64 MiB"], "met")
        self.assertAlmostEqual(t["configs"]["zero1"]["ratio"], 15 / 20)
        zero1 = [r for r in t["targets"] if r["target"].startswith("ZeRO-1 step")]
        self.assertEqual([(r["goal"], r["status"]) for r in zero1], [("<= 0.80", "met")])  # 0.75

    def test_only_the_configurations_that_ran(self):  # compare_pytorch.sh --configs ddp-w2-mpi
        mode = {"overlap_ratio": 0.9, "comm_ms": 9.0, "comm_exposed_ms": 1.0}
        with tempfile.TemporaryDirectory() as d:
            for side, ms in (("ddpbench", 30), ("pytorch", 50)):
                paths = [write_json(f"{d}/{side}.{i}.json",
                                    dict(record(ms + i), steps=[{"measured": True, "mode": mode,
                                                                  "loss": 1.0}]))
                         for i in (-1, 0, 1)]
                pathlib.Path(f"{d}/records.{side}.ddp-w2-mpi").write_text("\n".join(paths) + "\n")
            t = compare_table.build(d, 3, 30, 5, "mlp-small", False, None)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                compare_table.print_table(t)
        self.assertEqual(list(t["configs"]), ["ddp-w2-mpi"])
        self.assertAlmostEqual(t["configs"]["ddp-w2-mpi"]["ratio"], 30 / 50)
        self.assertNotIn("ddp_w1_over_single", t)
        self.assertIn("ddp-w2-mpi", out.getvalue())


class SweepTables(unittest.TestCase):
    def test_best_cap_autotune_and_hooks(self):
        with tempfile.TemporaryDirectory() as d:
            for r in range(3):
                for cap, ms in (("1", 12.0), ("25", 10.0), ("100", 11.0)):
                    write_json(f"{d}/w-sweep-{cap}-{r}.json", record(ms + r))
            for p in range(2):
                write_json(f"{d}/w-best-{p}.json", record(10.0))
                write_json(f"{d}/w-auto-{p}.json", record(10.4, mode={"details": {
                    "bucket_autotune": {"chosen_mb": 25}}}))
            self.assertEqual(sweep_tables.best_cap(d, "w", 3, ["1", "25", "100"]), "25")
            rc, text = run_main(sweep_tables, ["", "autotune", d, "w", "3", "2", "25", "1", "25", "100"])
            self.assertEqual(rc, 0)
            self.assertIn("ratio auto / best fixed = 1.040 (target <= 1.05): MET", text)
            for h, ms, nbytes in (("none", 10.0, 4 << 20), ("powersgd", 9.0, 1 << 20)):
                for r in range(2):
                    write_json(f"{d}/{h}-{r}.json",
                               record(ms, summary={"step_time_ms": {"median": ms},
                                                   "comm": {"bytes_per_step": nbytes}}))
            rc, text = run_main(sweep_tables, ["", "hooks", d, "w", "2", "4", "none", "powersgd"])
            self.assertEqual(rc, 0)
            self.assertIn("ratio powersgd / fp32 = 0.900 (target < 1.00): MET", text)
            self.assertIn("(x4.0 fewer)", text)


class WorkloadTable(unittest.TestCase):
    def test_a_table_file_is_read_and_anything_else_is_named(self):
        with tempfile.TemporaryDirectory() as d:
            good = write_json(f"{d}/w.json", [{"name": "mlp-small", "family": "mlp",
                                               "in_features": 8, "hidden": [4], "classes": 2}])
            table = workload_table.load(good)
            self.assertEqual(workload_table.widths(table["mlp-small"]), [8, 4, 2])
            bad = write_json(f"{d}/bad.json", {"not": "a table"})
            with self.assertRaisesRegex(workload_table.TableError, "not ddpbench's workload table"):
                workload_table.load(bad)
            with self.assertRaisesRegex(workload_table.TableError, "cannot read"):
                workload_table.load(f"{d}/missing.json")
            with self.assertRaisesRegex(workload_table.TableError, "--workloads-json FILE"):
                workload_table.load(None, f"{d}/no-such-ddpbench")


class CollectivesVsRaw(unittest.TestCase):
    def test_ratio_is_the_libraries_time_over_ours_judged_from_64_kib(self):
        pairs = [({4096: 10.0, 65536: 100.0, 1 << 20: 1000.0}, {4096: 1.0, 65536: 96.0, 1 << 20: 990.0}),
                 ({4096: 10.0, 65536: 100.0, 1 << 20: 1000.0}, {4096: 1.0, 65536: 98.0, 1 << 20: 940.0})]
        text, met = collectives_vs_raw.table("mpi", pairs)
        self.assertIn("0.970", text)  # median of 0.96 and 0.98 at 64 KiB
        self.assertIn("(not judged)", text)  # 4 KiB, 0.1, below the judged sizes
        self.assertTrue(met)  # 1 MiB: median of 0.99 and 0.94 is 0.965
        _, met = collectives_vs_raw.table("mpi", [({65536: 100.0}, {65536: 90.0})])
        self.assertFalse(met)

    def test_files_are_read(self):
        with tempfile.TemporaryDirectory() as tmp:
            ours, raw = os.path.join(tmp, "o.json"), os.path.join(tmp, "r.txt")
            with open(ours, "w") as f:
                json.dump({"results": [{"op": "allreduce", "size_bytes": 65536, "time_us": 5.0},
                                       {"op": "broadcast", "size_bytes": 65536, "time_us": 9.0}]}, f)
            with open(raw, "w") as f:
                f.write("65536 4.5\nnoise\n")
            self.assertEqual(collectives_vs_raw.our_times(ours), {65536: 5.0})
            self.assertEqual(collectives_vs_raw.raw_times(raw), {65536: 4.5})


class RunRecordFields(unittest.TestCase):
    """run_record.py names the fields as reports/schema/run.schema.json does."""

    SCHEMA = json.loads((ROOT / "reports" / "schema" / "run.schema.json").read_text())

    def resolve(self, node):
        while "$ref" in node:
            node = self.SCHEMA["$defs"][node["$ref"].split("/")[-1]]
        return node

    def test_every_path_is_in_the_schema(self):
        for name, path in run_record.PATHS.items():
            node = self.SCHEMA
            for key in path:
                node = self.resolve(node)
                props = node.get("properties", {})
                if key in props:
                    node = props[key]
                    continue
                # Past the named keys only where the schema leaves the object open.
                self.assertFalse(node.get("additionalProperties") is False or props,
                                 f"{name}: '{key}' of {path} is not in the run schema")
                break

    def test_step_statistics_are_the_schemas_and_the_peers(self):
        required = self.SCHEMA["$defs"]["step_time_stats"]["required"]
        self.assertEqual(list(run_record.STEP_TIME_STATS), required)
        # scripts/peer/measure.py (it imports torch, so read rather than import it).
        import ast
        tree = ast.parse((ROOT / "scripts" / "peer" / "measure.py").read_text())
        summarize = next(n for n in ast.walk(tree)
                         if isinstance(n, ast.FunctionDef) and n.name == "summarize")
        for d in (n for n in ast.walk(summarize) if isinstance(n, ast.Dict)):
            self.assertEqual([k.value for k in d.keys], required)
        step = self.SCHEMA["$defs"]["step"]["properties"]
        for key in run_record.STEP_KEYS:
            self.assertIn(key, step)
        for key in run_record.STEP_MODE_KEYS:
            self.assertIn(key, self.SCHEMA["$defs"]["step_mode"]["properties"])

    def test_readers_on_a_record(self):
        rec = {"summary": {"step_time_ms": {"median": 10.0},
                           "phases_median_ms": [{"phase": "data", "median_ms": 1.0}]},
               "memory": [{"peak_bytes": 5}],
               "ranks": [{"memory": [{"peak_bytes": 9}]}, {"memory": []}],
               "steps": [{"measured": False, "time_ms": 99.0, "phases_ms": {}},
                         {"measured": True, "time_ms": 12.0, "phases_ms": {"data": 2.0},
                          "mode": {"overlap_ratio": 0.5}},
                         {"measured": True, "time_ms": 14.0, "phases_ms": {"data": 2.0}}]}
        self.assertEqual(run_record.step_ms_median(rec), 10.0)
        self.assertEqual(run_record.get(rec, "overlap_ratio", "none"), "none")
        self.assertEqual(run_record.phase_medians(rec), {"data": 1.0})
        self.assertEqual(run_record.compute_ms(rec), 11.0)  # median of 10 and 12
        self.assertEqual(run_record.peak_bytes(rec), 9)
        self.assertEqual(run_record.step_comm(rec), [{"overlap_ratio": 0.5}])


class NoBuriedPython(unittest.TestCase):
    def test_no_heredoc_in_scripts_is_over_15_lines(self):
        long = []
        for path in sorted((ROOT / "scripts").rglob("*.sh")):
            lines = path.read_text().split("\n")
            i = 0
            while i < len(lines):
                m = re.search(r"<<-?\s*['\"]?([A-Za-z_]+)['\"]?", lines[i])
                if m and "<<<" not in lines[i]:
                    end = next((j for j in range(i + 1, len(lines))
                                if lines[j].strip() == m.group(1)), len(lines))
                    if end - i - 1 > 15:
                        long.append(f"{path.relative_to(ROOT)}:{i + 1}: {end - i - 1} lines")
                    i = end
                i += 1
        self.assertEqual(long, [])

    def test_no_inline_program_in_scripts_is_over_15_lines(self):
        # `python3 -c '...'` spread over lines is a heredoc by another name.
        long = []
        for path in sorted((ROOT / "scripts").rglob("*.sh")):
            lines = path.read_text().split("\n")
            for i, line in enumerate(lines):
                m = re.search(r"-c (['\"])(.*)$", line)
                if not m or m.group(1) in m.group(2):
                    continue
                end = next((j for j in range(i + 1, len(lines)) if m.group(1) in lines[j]),
                           len(lines))
                if end - i > 15:
                    long.append(f"{path.relative_to(ROOT)}:{i + 1}: {end - i} lines")
        self.assertEqual(long, [])


if __name__ == "__main__":
    unittest.main()
