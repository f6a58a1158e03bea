// The flag ledger (Note [Flag ledger]): each flag against its own round's default, the noise
// from the spread between rounds and within runs, flags inside the noise said so and never
// ranked, peak memory and bytes as paired differences; one ledger per design, headed by the
// label of its row in the record, with each flag's sentence from the record.
#include <gtest/gtest.h>

#include <string>

#include "reports/flag_ledger.h"
#include "reports/html_report.h"
#include "reports/suite_view.h"

namespace ddpb::reports {
namespace {

// The record's row of a design with flags (reports/ learns the label from it alone).
DesignInfo bucketed_design(const std::string& name, const std::string& label) {
  DesignInfo d;
  d.name = name, d.label = label, d.noun = "rank";
  d.parallel = d.processes_per_rank = d.has_buckets = d.overlaps_backward = true;
  d.gradient_op = "allreduce";
  return d;
}

SuiteRun flag_run(const std::string& flag, int64_t round, double median_ms, double stddev_ms,
                  int64_t peak_bytes, int64_t comm_bytes) {
  SuiteRun r;
  r.id = "mlp-small/ddp/w2/flags-" + flag + "-r" + std::to_string(round);
  r.group = RunGroup::Flags;
  r.workload = "mlp-small";
  r.mode = "ddp";
  r.world_size = 2;
  r.status = RunStatus::Ok;
  r.flag = FlagInfo{flag, "what " + flag + " changes"};
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
  s.designs = {bucketed_design("ddp", "DDP")};
  const double base[] = {40.0, 41.0, 39.5};
  const double unused[] = {0.4, -0.3, 0.1};
  for (int64_t round = 0; round < 3; ++round) {
    const double b = base[round];
    s.runs.push_back(flag_run("default", round, b, 0.5, 1000000, 800000));
    s.runs.push_back(flag_run("static_graph", round, b - 5, 0.5, 1000000, 800000));
    s.runs.push_back(flag_run("one_bucket", round, b + 2, 0.5, 1000000, 800000));
    s.runs.push_back(
        flag_run("find_unused_parameters", round, b + unused[round], 0.5, 1000000, 800000));
    s.runs.push_back(flag_run("fp16_hook", round, b, 0.5, 1100000, 400000));
  }
  return s;
}

TEST(FlagLedger, PricesEachFlagAgainstItsRoundsDefaultAndNeverRanksNoise) {
  const auto ledgers = flag_ledgers(ledger_suite());
  ASSERT_EQ(ledgers.size(), 1u);
  const FlagLedger* ledger = &ledgers[0];
  EXPECT_EQ(ledger->design.label, "DDP");
  EXPECT_EQ(ledger->workload, "mlp-small");
  EXPECT_EQ(ledger->world_size, 2);
  EXPECT_EQ(ledger->rounds, 3);
  EXPECT_DOUBLE_EQ(ledger->default_ms, 40.0);
  ASSERT_EQ(ledger->rows.size(), 4u);
  // Outside the noise first, largest effect first.
  EXPECT_EQ(ledger->rows[0].flag, "static_graph");
  EXPECT_DOUBLE_EQ(ledger->rows[0].delta_ms, -5.0);
  EXPECT_FALSE(ledger->rows[0].inside_noise);
  EXPECT_EQ(ledger->rows[0].pairs, 3);
  EXPECT_NEAR(ledger->rows[0].delta_fraction, -0.125, 1e-12);
  // Equal differences in every round: the noise is the within-run error, 2 sqrt(2 x 0.25/40).
  EXPECT_NEAR(ledger->rows[0].noise_ms, 2 * std::sqrt(0.5 / 40), 1e-12);
  EXPECT_EQ(ledger->rows[1].flag, "one_bucket");
  EXPECT_DOUBLE_EQ(ledger->rows[1].delta_ms, 2.0);
  // Inside the noise, in flag order after the ranked ones.
  EXPECT_EQ(ledger->rows[2].flag, "find_unused_parameters");
  EXPECT_TRUE(ledger->rows[2].inside_noise);
  EXPECT_NEAR(ledger->rows[2].delta_ms, 0.1, 1e-9);
  EXPECT_NEAR(ledger->rows[2].noise_ms, 0.35, 1e-9) << "half the spread 0.4 - (-0.3)";
  const FlagCost& fp16 = ledger->rows[3];
  EXPECT_EQ(fp16.flag, "fp16_hook");
  EXPECT_TRUE(fp16.inside_noise);
  EXPECT_EQ(fp16.delta_comm_bytes, -400000.0);
  EXPECT_EQ(fp16.delta_peak_bytes, 100000.0);
  for (const FlagCost& c : ledger->rows)
    EXPECT_EQ(c.why, "what " + c.flag + " changes") << "the record's sentence";
}

TEST(FlagLedger, ARoundWithoutItsDefaultIsNotPairedAndNoDefaultIsNoLedger) {
  SuiteRecord s = ledger_suite();
  s.runs[0].status = RunStatus::Failed;  // round 0's default
  const auto ledgers = flag_ledgers(s);
  ASSERT_EQ(ledgers.size(), 1u);
  const FlagLedger* ledger = &ledgers[0];
  EXPECT_EQ(ledger->rounds, 2);
  for (const FlagCost& c : ledger->rows) EXPECT_EQ(c.pairs, 2) << c.flag;
  SuiteRecord none;
  for (const SuiteRun& r : s.runs)
    if (!r.flag->is_default()) none.runs.push_back(r);
  EXPECT_TRUE(flag_ledgers(none).empty());
  EXPECT_TRUE(flag_ledgers(SuiteRecord{}).empty());
}

// Pairs on two workloads (sync_bn goes to the one with BatchNorm): a ledger each, each flag
// against its own workload's default.
TEST(FlagLedger, EachWorkloadHasItsOwnLedger) {
  SuiteRecord s = ledger_suite();
  for (int64_t round = 0; round < 2; ++round) {
    for (const auto& [flag, ms] :
         {std::pair<std::string, double>{"default", 200.0}, {"sync_bn", 260.0}}) {
      SuiteRun r = flag_run(flag, round, ms + round, 1.0, 2000000, 900000);
      r.workload = "resnet-tiny";
      r.id = "resnet-tiny/ddp/w2/flags-" + flag + "-r" + std::to_string(round);
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
  EXPECT_EQ(ledgers[1].rows[0].flag, "sync_bn");
  EXPECT_DOUBLE_EQ(ledgers[1].rows[0].delta_ms, 60);
  EXPECT_FALSE(ledgers[1].rows[0].inside_noise);
  const ReportSection section = build_flag_ledger_section(s);
  ASSERT_EQ(section.tables.size(), 2u);
  EXPECT_NE(section.tables[0].id, section.tables[1].id);
}

// Issue 44: a design's flags are keyed by design. A second design with buckets (a toy row in
// the record) prices a flag of the same name against its own defaults, in its own ledger
// headed by its own label, and its runs never pair with DDP's.
TEST(FlagLedger, ASecondDesignsFlagsGetTheirOwnLedgerUnderItsLabel) {
  SuiteRecord s = ledger_suite();
  s.designs.push_back(bucketed_design("toy-ddp", "ToyDDP"));
  for (int64_t round = 0; round < 2; ++round) {
    for (const auto& [flag, ms] :
         {std::pair<std::string, double>{"default", 30.0}, {"static_graph", 20.0}}) {
      SuiteRun r = flag_run(flag, round, ms + round, 0.5, 1000000, 800000);
      r.mode = "toy-ddp";
      r.id = "mlp-small/toy-ddp/w2/flags-" + flag + "-r" + std::to_string(round);
      r.flag->mechanism = "the toy's " + flag;
      s.runs.push_back(r);
    }
  }
  const auto ledgers = flag_ledgers(s);
  ASSERT_EQ(ledgers.size(), 2u);
  EXPECT_EQ(ledgers[0].design.label, "DDP");
  EXPECT_EQ(ledgers[0].rounds, 3);
  EXPECT_DOUBLE_EQ(ledgers[0].default_ms, 40.0) << "the toy's defaults are not DDP's";
  EXPECT_EQ(ledgers[0].rows.size(), 4u);
  EXPECT_EQ(ledgers[1].design.label, "ToyDDP");
  EXPECT_EQ(ledgers[1].workload, "mlp-small");
  EXPECT_EQ(ledgers[1].rounds, 2);
  ASSERT_EQ(ledgers[1].rows.size(), 1u);
  EXPECT_EQ(ledgers[1].rows[0].flag, "static_graph");
  EXPECT_DOUBLE_EQ(ledgers[1].rows[0].delta_ms, -10);
  EXPECT_EQ(ledgers[1].rows[0].why, "the toy's static_graph");
  const ReportSection section = build_flag_ledger_section(s);
  EXPECT_EQ(section.heading, "What each DDP and ToyDDP flag costs");
  ASSERT_EQ(section.tables.size(), 2u);
  EXPECT_EQ(section.tables[0].caption.rfind("DDP: mlp-small at 2 ranks.", 0), 0u)
      << section.tables[0].caption;
  EXPECT_EQ(section.tables[1].caption.rfind("ToyDDP: mlp-small at 2 ranks.", 0), 0u)
      << section.tables[1].caption;
  EXPECT_EQ(section.tables[1].table.rows.at(0).at(4), "the toy's static_graph");
  ASSERT_GE(section.notes.size(), 2u);
  EXPECT_EQ(section.notes[1].rfind("mlp-small with ToyDDP at 2 ranks: each flag against "
                                   "ToyDDP's defaults in 2 alternated rounds",
                                   0),
            0u)
      << section.notes[1];
}

TEST(FlagLedger, TheReportSaysInsideTheNoiseAndSignsTheRest) {
  const ReportSection s = build_flag_ledger_section(ledger_suite());
  EXPECT_EQ(s.heading, "What each DDP flag costs");
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
