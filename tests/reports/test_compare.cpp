// compare_reports: planted regressions against the documented rules (docs/suite-format.md),
// added/removed/failed runs, single run records, and the inputs it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "reports/compare.h"
#include "reports/json_io.h"
#include "suite_fixture.h"

namespace {

using ddpb::reports::compare_reports;
using ddpb::reports::ReportError;
using ddpb::testing::make_suite;
using ddpb::testing::run_by_id;
using nlohmann::json;

constexpr const char* kRun = "mlp-small/ddp/w2";

// The suite with one metric of kRun scaled by `factor`.
json with_metric(const std::vector<std::string>& path, double factor) {
  json suite = make_suite();
  json* node = &run_by_id(suite, kRun)["metrics"];
  for (const auto& key : path) node = &(*node)[key];
  *node = node->get<double>() * factor;
  return suite;
}

bool mentions(const std::vector<std::string>& lines, const std::string& needle) {
  for (const auto& l : lines) {
    if (l.find(needle) != std::string::npos) return true;
  }
  return false;
}

TEST(Compare, IdenticalSuitesDoNotRegress) {
  const auto r = compare_reports(make_suite(), make_suite(), 5);
  EXPECT_FALSE(r.regressed) << r.table;
  EXPECT_TRUE(r.regressions.empty());
  EXPECT_NE(r.table.find("| run "), std::string::npos);
  EXPECT_NE(r.table.find("mlp-small/ddp/w2"), std::string::npos);
  EXPECT_NE(r.table.find("(+0.0%)"), std::string::npos) << r.table;
  // gpt-tiny/ddp/w4 failed in both: listed, not a regression.
  EXPECT_NE(r.table.find("not ok in both"), std::string::npos) << r.table;
}

// Issue 25, S2: run ids from an untrusted suite.json reach the terminal through compare; a
// control character shows as text and never runs.
TEST(Compare, ControlCharactersInRecordTextAreShownNotSent) {
  json base = make_suite();
  run_by_id(base, kRun)["id"] = "evil\x1b[2J\x1b]0;title\x07";
  const auto r = compare_reports(base, make_suite(), 5);
  EXPECT_EQ(r.table.find('\x1b'), std::string::npos) << r.table;
  EXPECT_EQ(r.table.find('\x07'), std::string::npos);
  EXPECT_NE(r.table.find("evil\\x1b[2J\\x1b]0;title\\x07"), std::string::npos) << r.table;
  ASSERT_FALSE(r.regressions.empty());
  for (const auto& line : r.regressions) EXPECT_EQ(line.find('\x1b'), std::string::npos) << line;
}

TEST(Compare, ThroughputBeyondTheThresholdRegresses) {
  const auto drop = compare_reports(make_suite(), with_metric({"samples_per_s"}, 0.90), 5);
  EXPECT_TRUE(drop.regressed) << drop.table;
  ASSERT_EQ(drop.regressions.size(), 1u);
  EXPECT_NE(drop.regressions[0].find("mlp-small/ddp/w2: samples/s"), std::string::npos);
  EXPECT_NE(drop.regressions[0].find("-10.0%, threshold 5%"), std::string::npos)
      << drop.regressions[0];
  EXPECT_NE(drop.table.find("REGRESSED"), std::string::npos);
  for (double f : {0.98, 1.02, 1.5}) {
    const auto r = compare_reports(make_suite(), with_metric({"samples_per_s"}, f), 5);
    EXPECT_FALSE(r.regressed) << f << "\n" << r.table;
  }
  // The threshold is the caller's: -10% passes at 15%.
  EXPECT_FALSE(compare_reports(make_suite(), with_metric({"samples_per_s"}, 0.90), 15).regressed);
}

TEST(Compare, StepTimeMemoryAndOverlapRules) {
  EXPECT_TRUE(
      compare_reports(make_suite(), with_metric({"step_time_ms", "median"}, 1.06), 5).regressed);
  EXPECT_FALSE(
      compare_reports(make_suite(), with_metric({"step_time_ms", "median"}, 0.8), 5).regressed);
  const auto mem = compare_reports(make_suite(), with_metric({"peak_memory_bytes"}, 1.1), 5);
  EXPECT_TRUE(mentions(mem.regressions, "peak memory")) << mem.table;

  // Overlap in percentage points: 0.667 -> 0.60 is -6.7 pp.
  json now = make_suite();
  run_by_id(now, kRun)["metrics"]["overlap_ratio"] = 0.60;
  auto r = compare_reports(make_suite(), now, 5);
  EXPECT_TRUE(mentions(r.regressions, "overlap ratio 66.7% -> 60.0% (-6.7 pp")) << r.table;
  run_by_id(now, kRun)["metrics"]["overlap_ratio"] = 0.63;
  EXPECT_FALSE(compare_reports(make_suite(), now, 5).regressed);
}

TEST(Compare, FailedRemovedAndAddedRuns) {
  json now = make_suite();
  run_by_id(now, kRun)["status"] = "failed";
  run_by_id(now, kRun).erase("metrics");
  auto r = compare_reports(make_suite(), now, 5);
  EXPECT_TRUE(mentions(r.regressions, "mlp-small/ddp/w2: was ok, now failed")) << r.table;

  // Fixed: failed in base, ok now.
  r = compare_reports(now, make_suite(), 5);
  EXPECT_FALSE(r.regressed) << r.table;
  EXPECT_NE(r.table.find("fixed"), std::string::npos);

  now = make_suite();
  auto& runs = now["runs"];
  runs.erase(
      std::remove_if(runs.begin(), runs.end(), [](const json& x) { return x["id"] == kRun; }),
      runs.end());
  json added = run_by_id(now, "mlp-small/ddp/w4");
  added["id"] = "mlp-small/ddp/w8";
  runs.push_back(added);
  r = compare_reports(make_suite(), now, 5);
  EXPECT_EQ(r.regressions,
            std::vector<std::string>{"mlp-small/ddp/w2: missing from the new record (was ok)"});
  EXPECT_NE(r.table.find("REMOVED"), std::string::npos);
  EXPECT_NE(r.table.find("mlp-small/ddp/w8"), std::string::npos);
  EXPECT_NE(r.table.find("added"), std::string::npos);
}

// A single DDP run record as `ddpbench run --out` writes it (the fields compare reads).
json run_record(double samples, const std::vector<std::pair<bool, double>>& overlaps) {
  json rec = {
      {"schema_version", 1},
      {"implementation", "ddpbench"},
      {"kind", "run"},
      {"summary",
       {{"samples_per_s", samples}, {"step_time_ms", ddpb::testing::step_stats(64000 / samples)}}},
      {"memory", {{{"device", "cpu:0"}, {"peak_bytes", 1000}, {"reserved_bytes", 2000}}}},
      {"ranks",
       {{{"rank", 1},
         {"memory", {{{"device", "cpu:1"}, {"peak_bytes", 1500}, {"reserved_bytes", 2000}}}}}}},
      {"config",
       {{"mode", "ddp"},
        {"workload", "mlp-small"},
        {"device", "cpu"},
        {"world_size", 2},
        {"global_batch", 64},
        {"precision", "fp32"},
        {"comm_hook", "none"}}},
      {"steps", json::array()}};
  int step = 1;
  for (const auto& [measured, overlap] : overlaps) {
    rec["steps"].push_back(
        {{"step", step++}, {"measured", measured}, {"mode", {{"overlap_ratio", overlap}}}});
  }
  return rec;
}

TEST(Compare, SingleRunRecords) {
  // The warm-up step's overlap (0.0) is not measured; the median of the rest is 0.5.
  const json base = run_record(5000, {{false, 0.0}, {true, 0.4}, {true, 0.5}, {true, 0.6}});
  auto r = compare_reports(base, base, 5);
  EXPECT_FALSE(r.regressed) << r.table;
  EXPECT_NE(r.table.find("| run "), std::string::npos);
  EXPECT_NE(r.table.find("50.0% -> 50.0%"), std::string::npos) << r.table;
  EXPECT_NE(r.table.find("1.5 KiB"), std::string::npos) << "peak over every rank: " << r.table;

  r = compare_reports(base, run_record(4500, {{false, 0.0}, {true, 0.4}, {true, 0.5}, {true, 0.6}}),
                      5);
  EXPECT_TRUE(mentions(r.regressions, "run: samples/s 5000 -> 4500 (-10.0%")) << r.table;

  // Overlap dropped from 0.5 to 0.2 in the measured steps.
  r = compare_reports(base, run_record(5000, {{false, 0.9}, {true, 0.2}, {true, 0.2}}), 5);
  EXPECT_TRUE(mentions(r.regressions, "overlap ratio 50.0% -> 20.0%")) << r.table;

  // A record with summary.comm uses its overlap ratio.
  json with_comm = base;
  with_comm["summary"]["comm"] = {{"overlap_ratio", 0.1}};
  EXPECT_TRUE(compare_reports(base, with_comm, 5).regressed);
}

TEST(Compare, RefusesMixedOrUnknownKindsAndBadThresholds) {
  const json run = run_record(5000, {});
  EXPECT_THROW(compare_reports(make_suite(), run, 5), ReportError);
  EXPECT_THROW(compare_reports(json{{"kind", "trace"}}, json{{"kind", "trace"}}, 5), ReportError);
  EXPECT_THROW(compare_reports(json::array(), json::array(), 5), ReportError);
  EXPECT_THROW(compare_reports(run, run, -1), ReportError);
  EXPECT_THROW(compare_reports(run, run, std::numeric_limits<double>::quiet_NaN()), ReportError);
}

// Issue 25, M6: an mlp-small DDP record against a gpt-tiny single one was "REGRESSED -87.9%".
// Runs are compared only when they ran the same thing; when nothing matches, compare refuses.
TEST(Compare, UnrelatedRecordsAreRefusedAndMismatchedRunsAreNotCompared) {
  const json base = run_record(5000, {});
  json other = run_record(600, {});
  other["config"]["workload"] = "gpt-tiny";
  other["config"]["mode"] = "single";
  other["config"]["world_size"] = 1;
  try {
    compare_reports(base, other, 5);
    ADD_FAILURE() << "compared an mlp-small DDP record with a gpt-tiny single one";
  } catch (const ReportError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("nothing to compare"), std::string::npos) << what;
    EXPECT_NE(what.find("mlp-small ddp on 2 cpu device(s)"), std::string::npos) << what;
    EXPECT_NE(what.find("gpt-tiny single"), std::string::npos) << what;
  }
  // In suites, a run of one id but another global batch is listed, warned about, not judged.
  json now = make_suite();
  run_by_id(now, kRun)["global_batch"] = 128;
  run_by_id(now, kRun)["metrics"]["samples_per_s"] = 1.0;
  const auto r = compare_reports(make_suite(), now, 5);
  EXPECT_FALSE(r.regressed) << r.table;
  EXPECT_NE(r.table.find("NOT COMPARED"), std::string::npos) << r.table;
  EXPECT_TRUE(mentions(r.warnings, std::string(kRun) + ": not compared, the runs differ"))
      << r.table;
}

}  // namespace
