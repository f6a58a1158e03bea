// compare_reports: planted regressions against the documented rules (docs/suite-format.md),
// added/removed/failed runs, single run records, and the inputs it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "reports/compare.h"
#include "reports/json_io.h"
#include "reports/step_noise.h"
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
  // Paired with kRun by its configuration (Note [Runs matched by configuration]), and slower.
  const auto r = compare_reports(base, with_metric({"samples_per_s"}, 0.5), 5);
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

// Step-time statistics of `count` steps spread as a normal distribution of standard deviation
// `sd` around `median` (p90 1.2816 sd above it, the fastest step 1.5 sd below).
json normal_steps(double median, double sd, int64_t count) {
  return {{"median", median},
          {"mean", median},
          {"p90", median + 1.2816 * sd},
          {"p99", median + 2.326 * sd},
          {"min", median - 1.5 * sd},
          {"max", median + 2.5 * sd},
          {"stddev", sd},
          {"count", count}};
}

// make_suite() with kRun's median step scaled by `factor` (samples/s by 1 / factor, as the
// global batch over the median step) and its steps spread by `sd_fraction` of its median over
// `count` steps.
json with_step(double factor, double sd_fraction, int64_t count = 20) {
  json suite = make_suite();
  json& m = run_by_id(suite, kRun)["metrics"];
  m["samples_per_s"] = m["samples_per_s"].get<double>() / factor;
  const double median = m["step_time_ms"]["median"].get<double>() * factor;
  m["step_time_ms"] = normal_steps(median, median * sd_fraction, count);
  return suite;
}

// The table row of `id`.
std::string row_of(const std::string& table, const std::string& id) {
  const size_t at = table.find("| " + id + " ");
  return at == std::string::npos ? "" : table.substr(at, table.find('\n', at) - at);
}

bool row_says(const ddpb::reports::CompareResult& r, const std::string& verdict) {
  return row_of(r.table, kRun).find("| " + verdict + " ") != std::string::npos;
}

TEST(Compare, StepTimeMemoryAndOverlapRules) {
  // The fixture's steps spread 3% over 20 steps: a band of 2.131 * sqrt(2) * 3% = 9.0%.
  auto r = compare_reports(make_suite(), with_metric({"step_time_ms", "median"}, 1.15), 5);
  EXPECT_TRUE(mentions(r.regressions, "median step time (ms)")) << r.table;
  EXPECT_TRUE(mentions(r.regressions, "+15.0%, threshold 5%, beyond the noise ±")) << r.table;
  r = compare_reports(make_suite(), with_metric({"step_time_ms", "median"}, 0.8), 5);
  EXPECT_FALSE(r.regressed) << r.table;
  EXPECT_TRUE(row_says(r, "improved")) << r.table;
  // Memory is deterministic: past the threshold is a regression, however noisy the steps.
  json bigger = with_step(1, 0.5);
  json& peak = run_by_id(bigger, kRun)["metrics"]["peak_memory_bytes"];
  peak = peak.get<double>() * 1.1;
  const auto mem = compare_reports(with_step(1, 0.5), bigger, 5);
  EXPECT_TRUE(mentions(mem.regressions, "peak memory")) << mem.table;

  // Overlap in percentage points, judged by the exposed communication it adds: 0.667 -> 0.60
  // with the exposed time that implies (+0.16 ms against a band of 1.06 ms) is noise.
  json now = make_suite();
  json& m = run_by_id(now, kRun)["metrics"];
  const double comm = m["comm_ms"].get<double>();
  m["overlap_ratio"] = 0.60;
  m["comm_exposed_ms"] = 0.40 * comm;
  r = compare_reports(make_suite(), now, 5);
  EXPECT_FALSE(r.regressed) << r.table;
  EXPECT_TRUE(mentions(r.within_noise,
                       "overlap ratio 66.7% -> 60.0% (-6.7 pp, threshold 5 pp): "
                       "+0.156 ms a step, inside the noise ±1.060 ms"))
      << r.table;
  // No overlap at all leaves every millisecond of communication on the step: past the noise.
  m["overlap_ratio"] = 0.0;
  m["comm_exposed_ms"] = comm;
  r = compare_reports(make_suite(), now, 5);
  EXPECT_TRUE(mentions(r.regressions, "overlap ratio 66.7% -> 0.0% (-66.7 pp")) << r.table;
  m["overlap_ratio"] = 0.63;
  m["comm_exposed_ms"] = 0.37 * comm;
  EXPECT_FALSE(compare_reports(make_suite(), now, 5).regressed);
}

// Issue 43: two runs of one suite minutes apart moved inside their own noise and compare
// called 6 of 12 configurations REGRESSED. Same medians give or take the noise are no
// regression; the row says "within noise" and prints the band.
TEST(Compare, ChangesInsideTheNoiseAreWithinNoise) {
  for (double f : {0.97, 1.0, 1.03}) {
    const auto r = compare_reports(make_suite(), with_step(f, 0.03), 5);
    EXPECT_FALSE(r.regressed) << f << "\n" << r.table;
    EXPECT_TRUE(row_says(r, "ok")) << f << "\n" << r.table;
  }
  // +7%: past the 5% threshold, inside the 9.0% band.
  const auto r = compare_reports(make_suite(), with_step(1.07, 0.03), 5);
  EXPECT_FALSE(r.regressed) << r.table;
  EXPECT_TRUE(r.regressions.empty());
  EXPECT_TRUE(row_says(r, "within noise")) << r.table;
  EXPECT_NE(r.table.find("| step noise "), std::string::npos) << r.table;
  // The band over the base's median: the new run's 3% spread is of its 7% longer median.
  EXPECT_NE(row_of(r.table, kRun).find("| ±1.097 ms (9.4%) "), std::string::npos) << r.table;
  // "±" is one column: every line of the table is as wide as the header.
  std::vector<size_t> widths;
  for (size_t at = 0, nl; (nl = r.table.find('\n', at)) != std::string::npos; at = nl + 1) {
    const std::string line = r.table.substr(at, nl - at);
    widths.push_back(static_cast<size_t>(
        std::count_if(line.begin(), line.end(), [](char c) { return (c & 0xC0) != 0x80; })));
  }
  EXPECT_EQ(std::count(widths.begin(), widths.end(), widths.front()),
            static_cast<long>(widths.size()))
      << r.table;
  EXPECT_TRUE(mentions(r.within_noise, std::string(kRun) + ": median step time (ms)")) << r.table;
  EXPECT_TRUE(
      mentions(r.within_noise, "(+7.0%, threshold 5%): +0.821 ms a step, inside the noise ±"))
      << r.table;
  EXPECT_TRUE(mentions(r.within_noise, std::string(kRun) + ": samples/s")) << r.table;
}

TEST(Compare, ASlowdownBeyondTheNoiseRegresses) {
  const auto r = compare_reports(make_suite(), with_step(1.5, 0.03), 5);
  EXPECT_TRUE(r.regressed) << r.table;
  EXPECT_TRUE(row_says(r, "REGRESSED")) << r.table;
  EXPECT_TRUE(mentions(r.regressions, std::string(kRun) + ": samples/s")) << r.table;
  EXPECT_TRUE(mentions(r.regressions, "(+50.0%, threshold 5%, beyond the noise ±")) << r.table;
  EXPECT_TRUE(r.within_noise.empty());
  // Every other run is unchanged.
  EXPECT_EQ(r.regressions.size(), 2u) << r.table;
}

// The same +30% is noise in runs whose steps spread 40% and a regression in runs that spread 3%.
TEST(Compare, AChangeOverTheThresholdInAVeryNoisyRunIsWithinNoise) {
  const auto noisy = compare_reports(with_step(1, 0.4), with_step(1.3, 0.4), 5);
  EXPECT_FALSE(noisy.regressed) << noisy.table;
  EXPECT_TRUE(row_says(noisy, "within noise")) << noisy.table;
  const auto quiet = compare_reports(with_step(1, 0.03), with_step(1.3, 0.03), 5);
  EXPECT_TRUE(quiet.regressed) << quiet.table;
  // The threshold still rules a quiet run: +3% beyond a 0.1% band is no regression at 5%.
  EXPECT_FALSE(compare_reports(with_step(1, 0.0003), with_step(1.03, 0.0003), 5).regressed);
  EXPECT_TRUE(compare_reports(with_step(1, 0.0003), with_step(1.03, 0.0003), 2).regressed);
}

// A spread estimated from few steps is uncertain: the band widens as Student's t does.
TEST(Compare, FewStepsWidenTheBand) {
  // +12% with a 3% spread: beyond 2.042 * sqrt(2) * 3% = 8.7% at 40 steps, inside
  // 3.182 * sqrt(2) * 3% = 13.5% at 4.
  EXPECT_TRUE(compare_reports(with_step(1, 0.03, 40), with_step(1.12, 0.03, 40), 5).regressed);
  const auto quick = compare_reports(with_step(1, 0.03, 4), with_step(1.12, 0.03, 4), 5);
  EXPECT_FALSE(quick.regressed) << quick.table;
  EXPECT_TRUE(row_says(quick, "within noise")) << quick.table;
  // A record without a spread (one step, or stddev 0) is judged by the threshold alone.
  const auto bare = compare_reports(with_step(1, 0, 1), with_step(1.07, 0, 1), 5);
  EXPECT_TRUE(bare.regressed) << bare.table;
  EXPECT_NE(row_of(bare.table, kRun).find("none recorded"), std::string::npos) << bare.table;
}

TEST(Compare, ImprovementsBeyondTheNoiseAreImproved) {
  const auto faster = compare_reports(make_suite(), with_step(0.7, 0.03), 5);
  EXPECT_FALSE(faster.regressed) << faster.table;
  EXPECT_TRUE(row_says(faster, "improved")) << faster.table;
  EXPECT_TRUE(faster.within_noise.empty()) << "only moves the wrong way are listed";
  // -7%: past the threshold, inside the noise.
  const auto noise = compare_reports(make_suite(), with_step(0.93, 0.03), 5);
  EXPECT_FALSE(noise.regressed);
  EXPECT_TRUE(row_says(noise, "within noise")) << noise.table;
  EXPECT_TRUE(noise.within_noise.empty());
  // Backwards, the improvement is a regression: the rule is symmetric.
  EXPECT_TRUE(compare_reports(with_step(0.7, 0.03), make_suite(), 5).regressed);
}

// Note [Step-time noise]: the spread is the stddev unless outlier steps inflate it past the
// body of the steps (p90 and the fastest step around the median).
TEST(StepNoise, OutlierStepsDoNotWidenTheSpreadButTwoLevelsDo) {
  using ddpb::reports::step_spread_ms;
  using ddpb::reports::StepTimeStats;
  StepTimeStats stall = ddpb::reports::record_from_json<StepTimeStats>(normal_steps(8, 0.4, 20));
  stall.stddev = 55;  // one step of a second among 8 ms ones
  stall.max = 1000;
  EXPECT_NEAR(step_spread_ms(stall), 0.6 / 1.2816, 1e-9) << "the body: median - min = 1.5 * 0.4";
  // Steps at 7 and 10 ms, the median on the upper level: the fastest step shows the lower one.
  StepTimeStats two = ddpb::reports::record_from_json<StepTimeStats>(normal_steps(10, 0.1, 20));
  two.min = 7;
  two.stddev = 1.4;
  EXPECT_EQ(step_spread_ms(two), 1.4);
  StepTimeStats one = two;
  one.count = 1;
  EXPECT_EQ(step_spread_ms(one), 0);
  two.stddev = std::numeric_limits<double>::infinity();
  EXPECT_EQ(step_spread_ms(two), 0);
}

// Under load a stalled step made the stddev of 8 ms steps 55 ms: a +780% slowdown read as
// noise. The body of the steps shows it.
TEST(Compare, AnOutlierStepDoesNotHideASlowdown) {
  auto stalled = [](double median, double body_sd) {
    json suite = make_suite();
    json& st = run_by_id(suite, kRun)["metrics"]["step_time_ms"];
    st = normal_steps(median, body_sd, 20);
    st["stddev"] = 55.0;
    st["max"] = 1000.0;
    return suite;
  };
  const auto r = compare_reports(stalled(8, 0.4), stalled(72, 1.6), 5);
  EXPECT_TRUE(mentions(r.regressions, std::string(kRun) + ": median step time (ms) 8.000 -> 72.00"))
      << r.table;
  // Negative control: when the body spreads as wide as the stddev, it is noise.
  const auto wide = compare_reports(stalled(8, 55), stalled(72, 55), 5);
  EXPECT_FALSE(wide.regressed) << wide.table;
}

TEST(StepNoise, BandIsStudentsTTimesTheSpreadOfTheDifference) {
  using ddpb::reports::step_noise_ms;
  using ddpb::reports::StepTimeStats;
  using ddpb::reports::student_t95;
  auto stats = [](double sd, int64_t count) {
    return ddpb::reports::record_from_json<StepTimeStats>(normal_steps(10, sd, count));
  };
  EXPECT_NEAR(step_noise_ms(stats(3, 40), stats(4, 40)), 2.042 * 5, 1e-9);
  EXPECT_NEAR(step_noise_ms(stats(3, 4), stats(4, 40)), 3.182 * 5, 1e-9) << "the fewer steps";
  EXPECT_NEAR(step_noise_ms(stats(0, 1), stats(4, 20)), 2.131 * 4, 1e-9) << "one side's spread";
  EXPECT_EQ(step_noise_ms(stats(0, 1), stats(0, 1)), 0);
  EXPECT_EQ(step_noise_ms(stats(std::numeric_limits<double>::quiet_NaN(), 20), stats(0, 20)), 0);
  EXPECT_EQ(student_t95(1), 12.706);
  EXPECT_EQ(student_t95(3), 3.182);
  EXPECT_EQ(student_t95(19), 2.131) << "the largest tabulated df below: never narrower";
  EXPECT_EQ(student_t95(1'000'000), 1.962);
  for (int64_t df = 1; df < 2000; ++df) EXPECT_GE(student_t95(df), student_t95(df + 1)) << df;
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
      {"schema_version", ddpb::reports::kSchemaVersion},
      {"design", ddpb::testing::design_rows()[2]},
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

// A run record without summary.comm: its exposed communication is the median over its
// measured steps. An overlap drop that leaves the exposed time inside the noise (the steps'
// 3% spread of 12.8 ms: a band of 1.16 ms) is within noise; one that adds 2 ms regressed.
TEST(Compare, RunRecordsJudgeOverlapByTheExposedTimeOfTheirSteps) {
  auto exposed = [](json rec, double ms) {
    for (auto& step : rec["steps"]) step["mode"]["comm_exposed_ms"] = ms;
    return rec;
  };
  const json base = exposed(run_record(5000, {{true, 0.5}, {true, 0.5}}), 1.0);
  auto r = compare_reports(base, exposed(run_record(5000, {{true, 0.3}, {true, 0.3}}), 1.2), 5);
  EXPECT_FALSE(r.regressed) << r.table;
  EXPECT_TRUE(mentions(r.within_noise, "run: overlap ratio 50.0% -> 30.0% (-20.0 pp")) << r.table;
  r = compare_reports(base, exposed(run_record(5000, {{true, 0.3}, {true, 0.3}}), 3.0), 5);
  EXPECT_TRUE(mentions(r.regressions,
                       "run: overlap ratio 50.0% -> 30.0% (-20.0 pp, threshold 5 "
                       "pp, beyond the noise ±1.157 ms)"))
      << r.table;
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
  run_by_id(now, kRun)["config"]["global_batch"] = 128;
  run_by_id(now, kRun)["metrics"]["samples_per_s"] = 1.0;
  const auto r = compare_reports(make_suite(), now, 5);
  EXPECT_FALSE(r.regressed) << r.table;
  EXPECT_NE(r.table.find("NOT COMPARED"), std::string::npos) << r.table;
  EXPECT_TRUE(mentions(r.warnings, std::string(kRun) + ": not compared, the runs differ"))
      << r.table;
}

// The suite with kRun's id changed to `id`.
json renamed(const std::string& id, json suite = make_suite()) {
  run_by_id(suite, kRun)["id"] = id;
  return suite;
}

// P22: compare matched runs by id only, so a suite that named a run differently lost it
// (REMOVED, and the same experiment "added"), and one id given to another experiment was
// judged as if it were the same run. Runs are paired by their typed configuration.
TEST(Compare, RunsArePairedByConfigurationWhateverTheirIds) {
  json now = renamed("mlp-small/ddp/w2/renamed", with_metric({"samples_per_s"}, 0.5));
  auto r = compare_reports(make_suite(), now, 5);
  EXPECT_EQ(r.table.find("REMOVED"), std::string::npos) << r.table;
  EXPECT_EQ(r.table.find("added"), std::string::npos) << r.table;
  EXPECT_NE(row_of(r.table, std::string(kRun) + " -> mlp-small/ddp/w2/renamed").find("REGRESSED"),
            std::string::npos)
      << r.table;
  EXPECT_TRUE(
      mentions(r.regressions, std::string(kRun) + " -> mlp-small/ddp/w2/renamed: samples/s"))
      << r.table;
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();

  // Two runs whose ids are swapped: each is compared with the run of its configuration, and
  // the warning says that the id names another configuration in the new record.
  now = make_suite();
  run_by_id(now, "mlp-small/ddp/w4")["id"] = "swap";
  run_by_id(now, kRun)["id"] = "mlp-small/ddp/w4";
  run_by_id(now, "swap")["id"] = kRun;
  r = compare_reports(make_suite(), now, 5);
  EXPECT_FALSE(r.regressed) << r.table;
  EXPECT_NE(row_of(r.table, std::string(kRun) + " -> mlp-small/ddp/w4").find("| ok "),
            std::string::npos)
      << r.table;
  EXPECT_NE(row_of(r.table, "mlp-small/ddp/w4 -> " + std::string(kRun)).find("| ok "),
            std::string::npos)
      << r.table;
  EXPECT_TRUE(mentions(r.warnings, std::string(kRun) +
                                       ": the new record gives this id to another configuration "
                                       "(global_batch 64 against 128, world_size 2 against 4); "
                                       "compared with mlp-small/ddp/w4, which has this one"))
      << (r.warnings.empty() ? "" : r.warnings.front());
}

TEST(Compare, OneIdHoldingAnotherConfigurationIsNotCompared) {
  // The suite's top-level fields agree; only the typed configuration says what ran.
  json now = with_metric({"samples_per_s"}, 0.5);
  run_by_id(now, kRun)["config"]["bucket_cap_mb"] = 50.0;
  run_by_id(now, kRun)["config"]["optimizer"]["lr"] = 0.1;
  const auto r = compare_reports(make_suite(), now, 5);
  EXPECT_FALSE(r.regressed) << r.table;
  EXPECT_NE(row_of(r.table, kRun).find("NOT COMPARED"), std::string::npos) << r.table;
  EXPECT_EQ(r.warnings,
            std::vector<std::string>{std::string(kRun) +
                                     ": not compared, the runs differ: bucket_cap_mb "
                                     "25.0 against 50.0, optimizer/lr 0.01 against 0.1"});
}

// Where a run writes and how it is supervised do not make another experiment; a field only one
// record holds (written by a later ddpbench) is passed over.
TEST(Compare, OutputPathsAndFieldsOneRecordLacksDoNotSeparateRuns) {
  json now = with_metric({"samples_per_s"}, 0.5);
  json& config = run_by_id(now, kRun)["config"];
  config["out"] = "/elsewhere/r.json";
  config["trace"] = "/elsewhere/t.json";
  config["save_params"] = "/elsewhere/p.safetensors";
  config["dump"] = "/elsewhere/dump";
  config["flight_dir"] = "/elsewhere/flight";
  config["timeout_s"] = 60;
  config["a_field_of_a_later_version"] = true;
  const auto r = compare_reports(make_suite(), now, 5);
  EXPECT_TRUE(mentions(r.regressions, std::string(kRun) + ": samples/s")) << r.table;
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
}

// Records older than the typed configuration are matched by id, as before, and said once.
TEST(Compare, RecordsWithoutATypedConfigurationAreMatchedById) {
  auto bare = [](json suite) {
    for (json& run : suite["runs"]) run.erase("config");
    return suite;
  };
  auto r = compare_reports(bare(make_suite()), bare(with_metric({"samples_per_s"}, 0.5)), 5);
  EXPECT_TRUE(mentions(r.regressions, std::string(kRun) + ": samples/s")) << r.table;
  ASSERT_EQ(r.warnings.size(), 1u) << r.table;
  EXPECT_NE(r.warnings[0].find("run(s) matched by id alone"), std::string::npos) << r.warnings[0];
  // Renamed in an old record: nothing says it is the same experiment.
  r = compare_reports(bare(make_suite()), bare(renamed("mlp-small/ddp/w2/renamed")), 5);
  EXPECT_NE(row_of(r.table, kRun).find("REMOVED"), std::string::npos) << r.table;
  // One side typed, the other not: by id, checked by workload, mode, world size and batch.
  r = compare_reports(make_suite(), bare(with_metric({"samples_per_s"}, 0.5)), 5);
  EXPECT_TRUE(mentions(r.regressions, std::string(kRun) + ": samples/s")) << r.table;
  EXPECT_EQ(r.warnings.size(), 1u) << r.table;
}

}  // namespace
