// The report's sharding section (reports/sharding_view.h): DDP against its ZeRO stages, medians
// over the sharding rounds, and one sentence per stage.
#include <gtest/gtest.h>

#include <string>

#include "reports/html_report.h"
#include "reports/schema_validator.h"
#include "reports/sharding_view.h"
#include "suite_fixture.h"
#include "xml_check.h"

namespace {

using ddpb::testing::make_metrics;
using ddpb::testing::make_run;
using ddpb::testing::make_suite;
using nlohmann::json;

// Two rounds of DDP, ZeRO-1 and ZeRO-2 on mlp-small at 4 ranks: ZeRO-2 a little slower and
// lighter, ZeRO-1 between them; the stages' rows beside DDP's in the record's designs.
json suite_with_sharding() {
  json suite = make_suite();
  for (const auto& [name, label] : {std::pair{"zero1", "ZeRO-1"}, std::pair{"zero2", "ZeRO-2"}}) {
    json row;
    for (const json& d : suite["designs"])
      if (d["name"] == "ddp") row = d;
    row["name"] = name, row["label"] = label, row["gradient_op"] = "reduce_scatter";
    row["shards_optimizer_state"] = true;
    row["shards_gradients"] = name == std::string("zero2");
    suite["designs"].push_back(row);
  }
  const struct {
    const char* mode;
    double step_ms, exposed_ms, bus, peak;
  } designs[] = {{"ddp", 10.0, 1.0, 12.6e6, 100e6},
                 {"zero1", 10.5, 2.0, 12.6e6, 70e6},
                 {"zero2", 10.8, 1.5, 12.6e6, 60e6}};
  for (int round = 0; round < 2; ++round) {
    for (const auto& d : designs) {
      json r = make_run("mlp-small", d.mode, 4, "sharding", "sharding-r" + std::to_string(round));
      r["repeat"] = round;
      r["metrics"] = make_metrics("ddp", 4, 1000, d.step_ms + 0.2 * round, 3.0, d.exposed_ms);
      r["metrics"]["gradient_bus_bytes_per_step"] = d.bus;
      r["metrics"]["rank_peak_memory_bytes"] = {d.peak, d.peak - 1e6, d.peak - 2e6, d.peak - 3e6};
      // Rank 0's peak by category: the stages hold a quarter of DDP's optimizer state. What
      // the formulas promise at 4 ranks for Ψ = 1e6 (Note [Model-state memory]).
      const int64_t state = d.mode == std::string("ddp") ? 24 << 20 : 6 << 20;
      const int64_t promised_gradients = d.mode == std::string("zero2") ? 1000000 : 4000000;
      const int64_t promised_state = d.mode == std::string("ddp") ? 8000000 : 2000000;
      r["metrics"]["memory"] = {
          {{"device", "cpu:0"},
           {"peak_bytes", int64_t(d.peak)},
           {"by_category", {{"gradients", 12 << 20}, {"optimizer_state", state}}},
           {"expected_by_category",
            {{"parameters", 4000000},
             {"gradients", promised_gradients},
             {"optimizer_state", promised_state}}},
           {"ratio_by_category", {{"model_state", 1.25}}}}};
      suite["runs"].push_back(r);
    }
  }
  return suite;
}

TEST(ShardingView, EachStageBesideDdpWithItsTimeMemoryAndBytes) {
  const json suite = suite_with_sharding();
  EXPECT_TRUE(ddpb::reports::validate_suite_record(suite).empty());
  const auto s =
      ddpb::reports::build_sharding_section(ddpb::reports::SuiteRecord::from_json(suite));
  ASSERT_EQ(s.tables.size(), 1u);
  const auto& rows = s.tables[0].table.rows;
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0][1], "DDP");
  EXPECT_EQ(rows[0][3], "1.000x");
  EXPECT_EQ(rows[2][1], "ZeRO-2");
  EXPECT_EQ(rows[2][2], "10.90") << "the median of 10.8 and 11.0";
  EXPECT_EQ(rows[0][9], "24.0 MiB");
  EXPECT_EQ(rows[2][8], "12.0 MiB");
  EXPECT_EQ(rows[2][9], "6.0 MiB");
  EXPECT_EQ(rows[2][10], "1.250x");
  EXPECT_EQ(rows[2][11], "2");
  ASSERT_EQ(s.paragraphs.size(), 2u);
  // At 8 ranks DDP's peak stays (nothing sharded); ZeRO-2's loses 1.5e6 of model state
  // (gradients 1e6 -> 0.5e6, optimizer state 2e6 -> 1e6): 58.5e6 against 100e6.
  EXPECT_NE(s.paragraphs[1].find("ZeRO-2 saves 40.0% of memory per rank at 1.08x DDP's step; "
                                 "at 8 ranks it would save 41.5%."),
            std::string::npos)
      << s.paragraphs[1];
  ASSERT_EQ(s.charts.size(), 1u);
  EXPECT_EQ(s.charts[0].svgs.size(), 1u);
}

TEST(ShardingView, TheVerdictSaysWhatEachStageSavesPerWorkload) {
  const auto suite = ddpb::reports::SuiteRecord::from_json(suite_with_sharding());
  const auto sentences = ddpb::reports::sharding_sentences(suite, "mlp-small");
  ASSERT_EQ(sentences.size(), 2u);
  EXPECT_NE(sentences[0].find("ZeRO-1 saves 30.0% of memory per rank at 1.05x DDP's step; at 8 "
                              "ranks it would save 31.0%."),
            std::string::npos)
      << sentences[0];
  const std::string html = ddpb::reports::render_html(suite_with_sharding());
  const size_t verdict = html.find("<section id=\"verdict\">");
  const size_t sharding = html.find("<section id=\"sharding\">");
  ASSERT_NE(verdict, std::string::npos);
  const size_t said = html.find("ZeRO-2 saves 40.0% of memory per rank", verdict);
  EXPECT_LT(said, sharding) << "the verdict says it before the sharding section";
  EXPECT_TRUE(ddpb::reports::sharding_sentences(suite, "gpt-tiny").empty());
}

TEST(ShardingView, InTheReportAndEmptyWithoutShardingRuns) {
  const std::string html = ddpb::reports::render_html(suite_with_sharding());
  EXPECT_EQ(ddpb::testing::xml_problem(html), "");
  EXPECT_NE(html.find("<section id=\"sharding\">"), std::string::npos);
  const auto s =
      ddpb::reports::build_sharding_section(ddpb::reports::SuiteRecord::from_json(make_suite()));
  EXPECT_TRUE(s.tables.empty());
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_NE(s.notes[0].find("No sharding runs"), std::string::npos);
}

}  // namespace
