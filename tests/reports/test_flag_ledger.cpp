// The flag ledger (Note [Flag ledger]): each flag against its own round's default, the noise
// from the spread between rounds and within runs, flags inside the noise said so and never
// ranked, peak memory and bytes as paired differences.
#include <gtest/gtest.h>

#include <string>

#include "reports/flag_ledger.h"
#include "reports/html_report.h"
#include "reports/suite_view.h"

namespace ddpb::reports {
namespace {

SuiteRun flag_run(DdpFlag flag, int64_t round, double median_ms, double stddev_ms,
                  int64_t peak_bytes, int64_t comm_bytes) {
  SuiteRun r;
  r.id = "mlp-small/ddp/w2/flags-" + std::to_string(int(flag)) + "-r" + std::to_string(round);
  r.group = RunGroup::Flags;
  r.workload = "mlp-small";
  r.mode = "ddp";
  r.world_size = 2;
  r.status = RunStatus::Ok;
  r.flag = flag;
  r.repeat = round;
  RunMetrics m;
  m.step_time_ms.median = median_ms;
  m.step_time_ms.stddev = stddev_ms;
  m.step_time_ms.count = 40;
  m.peak_memory_bytes = peak_bytes;
  m.comm_bytes_per_step = comm_bytes;
  r.metrics = m;
  return r;
}

// Three rounds: static_graph is 5 ms faster in each (well outside the noise), one_bucket 2 ms
// slower in each, find_unused_parameters +0.4, -0.3, +0.1 ms (inside), and fp16 halves the
// bytes at no time cost.
SuiteRecord ledger_suite() {
  SuiteRecord s;
  const double base[] = {40.0, 41.0, 39.5};
  const double unused[] = {0.4, -0.3, 0.1};
  for (int64_t round = 0; round < 3; ++round) {
    const double b = base[round];
    s.runs.push_back(flag_run(DdpFlag::Default, round, b, 0.5, 1000000, 800000));
    s.runs.push_back(flag_run(DdpFlag::StaticGraph, round, b - 5, 0.5, 1000000, 800000));
    s.runs.push_back(flag_run(DdpFlag::OneBucket, round, b + 2, 0.5, 1000000, 800000));
    s.runs.push_back(
        flag_run(DdpFlag::FindUnusedParameters, round, b + unused[round], 0.5, 1000000, 800000));
    s.runs.push_back(flag_run(DdpFlag::Fp16Hook, round, b, 0.5, 1100000, 400000));
  }
  return s;
}

TEST(FlagLedger, PricesEachFlagAgainstItsRoundsDefaultAndNeverRanksNoise) {
  const auto ledgers = flag_ledgers(ledger_suite());
  ASSERT_EQ(ledgers.size(), 1u);
  const FlagLedger* ledger = &ledgers[0];
  EXPECT_EQ(ledger->workload, "mlp-small");
  EXPECT_EQ(ledger->world_size, 2);
  EXPECT_EQ(ledger->rounds, 3);
  EXPECT_DOUBLE_EQ(ledger->default_ms, 40.0);
  ASSERT_EQ(ledger->rows.size(), 4u);
  // Outside the noise first, largest effect first.
  EXPECT_EQ(ledger->rows[0].flag, DdpFlag::StaticGraph);
  EXPECT_DOUBLE_EQ(ledger->rows[0].delta_ms, -5.0);
  EXPECT_FALSE(ledger->rows[0].inside_noise);
  EXPECT_EQ(ledger->rows[0].pairs, 3);
  EXPECT_NEAR(ledger->rows[0].delta_fraction, -0.125, 1e-12);
  // Equal differences in every round: the noise is the within-run error, 2 sqrt(2 x 0.25/40).
  EXPECT_NEAR(ledger->rows[0].noise_ms, 2 * std::sqrt(0.5 / 40), 1e-12);
  EXPECT_EQ(ledger->rows[1].flag, DdpFlag::OneBucket);
  EXPECT_DOUBLE_EQ(ledger->rows[1].delta_ms, 2.0);
  // Inside the noise, in flag order after the ranked ones.
  EXPECT_EQ(ledger->rows[2].flag, DdpFlag::FindUnusedParameters);
  EXPECT_TRUE(ledger->rows[2].inside_noise);
  EXPECT_NEAR(ledger->rows[2].delta_ms, 0.1, 1e-9);
  EXPECT_NEAR(ledger->rows[2].noise_ms, 0.35, 1e-9) << "half the spread 0.4 - (-0.3)";
  const FlagCost& fp16 = ledger->rows[3];
  EXPECT_EQ(fp16.flag, DdpFlag::Fp16Hook);
  EXPECT_TRUE(fp16.inside_noise);
  EXPECT_EQ(fp16.delta_comm_bytes, -400000.0);
  EXPECT_EQ(fp16.delta_peak_bytes, 100000.0);
  for (const FlagCost& c : ledger->rows) EXPECT_FALSE(c.why.empty()) << enum_name(c.flag);
}

TEST(FlagLedger, ARoundWithoutItsDefaultIsNotPairedAndNoDefaultIsNoLedger) {
  SuiteRecord s = ledger_suite();
  s.runs[0].status = RunStatus::Failed;  // round 0's default
  const auto ledgers = flag_ledgers(s);
  ASSERT_EQ(ledgers.size(), 1u);
  const FlagLedger* ledger = &ledgers[0];
  EXPECT_EQ(ledger->rounds, 2);
  for (const FlagCost& c : ledger->rows) EXPECT_EQ(c.pairs, 2) << enum_name(c.flag);
  SuiteRecord none;
  for (const SuiteRun& r : s.runs)
    if (r.flag != DdpFlag::Default) none.runs.push_back(r);
  EXPECT_TRUE(flag_ledgers(none).empty());
  EXPECT_TRUE(flag_ledgers(SuiteRecord{}).empty());
}

// Pairs on two workloads (sync_bn goes to the one with BatchNorm): a ledger each, each flag
// against its own workload's default.
TEST(FlagLedger, EachWorkloadHasItsOwnLedger) {
  SuiteRecord s = ledger_suite();
  for (int64_t round = 0; round < 2; ++round) {
    for (const auto& [flag, ms] :
         {std::pair{DdpFlag::Default, 200.0}, {DdpFlag::SyncBatchNorm, 260.0}}) {
      SuiteRun r = flag_run(flag, round, ms + round, 1.0, 2000000, 900000);
      r.workload = "resnet-tiny";
      r.id = "resnet-tiny/ddp/w2/flags-" + std::to_string(int(flag)) + "-r" + std::to_string(round);
      s.runs.push_back(r);
    }
  }
  const auto ledgers = flag_ledgers(s);
  ASSERT_EQ(ledgers.size(), 2u);
  EXPECT_EQ(ledgers[0].workload, "mlp-small");
  EXPECT_EQ(ledgers[0].rows.size(), 4u);
  EXPECT_EQ(ledgers[1].workload, "resnet-tiny");
  EXPECT_EQ(ledgers[1].rounds, 2);
  ASSERT_EQ(ledgers[1].rows.size(), 1u);
  EXPECT_EQ(ledgers[1].rows[0].flag, DdpFlag::SyncBatchNorm);
  EXPECT_DOUBLE_EQ(ledgers[1].rows[0].delta_ms, 60);
  EXPECT_FALSE(ledgers[1].rows[0].inside_noise);
  const ReportSection section = build_flag_ledger_section(s);
  ASSERT_EQ(section.tables.size(), 2u);
  EXPECT_NE(section.tables[0].id, section.tables[1].id);
}

TEST(FlagLedger, TheReportSaysInsideTheNoiseAndSignsTheRest) {
  const ReportSection s = build_flag_ledger_section(ledger_suite());
  ASSERT_EQ(s.tables.size(), 1u);
  const TextTable& t = s.tables[0].table;
  ASSERT_EQ(t.rows.size(), 4u);
  EXPECT_EQ(t.rows[0][0], "static_graph");
  EXPECT_EQ(t.rows[0][1].rfind("-5.000 ± ", 0), 0u) << t.rows[0][1];
  EXPECT_NE(t.rows[0][1].find("-12.5%"), std::string::npos) << t.rows[0][1];
  EXPECT_EQ(t.rows[1][1].rfind("+2.000 ± ", 0), 0u) << t.rows[1][1];
  EXPECT_EQ(t.rows[2][1], "inside the noise (±0.35 ms)");
  EXPECT_EQ(t.rows[3][3], "-390.6 KiB");
  // In the suite report, after the comm hooks.
  nlohmann::json suite = ledger_suite().to_json();
  const SuiteView v = build_suite_view(suite);
  bool found = false;
  for (const auto& section : v.sections)
    found |= section.id == "flag-ledger" && !section.tables.empty();
  EXPECT_TRUE(found);
  EXPECT_TRUE(build_flag_ledger_section(SuiteRecord{}).tables.empty());
}

}  // namespace
}  // namespace ddpb::reports
