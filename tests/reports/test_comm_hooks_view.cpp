// The report's comm hooks section (reports/comm_hooks_view.h): each hook against the fp32 DDP
// run at its world size, and the loss curves side by side.
#include <gtest/gtest.h>

#include <string>

#include "reports/comm_hooks_view.h"
#include "reports/html_report.h"
#include "reports/schema_validator.h"
#include "suite_fixture.h"
#include "xml_check.h"

namespace {

using ddpb::testing::make_run;
using ddpb::testing::make_suite;
using ddpb::testing::run_by_id;
using nlohmann::json;

// The fixture's mlp-small at world size 4: fp32 (the scaling run), its fp16 hook run, and a
// PowerSGD run, with bytes per step and loss curves.
json suite_with_hooks() {
  json suite = make_suite();
  json& fp32 = run_by_id(suite, "mlp-small/ddp/w4");
  fp32["metrics"]["comm_bytes_per_step"] = 12636200;
  fp32["metrics"]["loss_per_step"] = {2.30, 2.20, 2.10};
  json& fp16 = run_by_id(suite, "mlp-small/ddp/w4/fp16-hook");
  fp16["metrics"]["comm_bytes_per_step"] = 6318100;
  fp16["metrics"]["loss_per_step"] = {2.30, 2.20, 2.11};
  json powersgd = make_run("mlp-small", "ddp", 4, "comm_hook", "powersgd-hook");
  powersgd["args"].insert(powersgd["args"].end(), {"--comm-hook", "powersgd"});
  powersgd["config"]["comm_hook"] = "powersgd";
  powersgd["metrics"] = fp16["metrics"];
  powersgd["metrics"]["comm_bytes_per_step"] = 41040;
  powersgd["metrics"]["loss_per_step"] = {2.30, 2.25, 2.19};
  powersgd["correctness"] = {{"skipped", "PowerSGD approximates every gradient by design"}};
  suite["runs"].push_back(powersgd);
  return suite;
}

TEST(CommHooksView, EachHookAgainstFp32WithItsSavingAndLoss) {
  const json suite = suite_with_hooks();
  EXPECT_TRUE(ddpb::reports::validate_suite_record(suite).empty());
  const auto s =
      ddpb::reports::build_comm_hooks_section(ddpb::reports::SuiteRecord::from_json(suite));
  ASSERT_EQ(s.tables.size(), 1u);
  const auto& rows = s.tables[0].table.rows;
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0][2], "fp32");
  EXPECT_EQ(rows[0][4], "baseline");
  EXPECT_EQ(rows[1][2], "fp16");
  EXPECT_EQ(rows[1][4], "2.000x less (-50.0%)");
  EXPECT_EQ(rows[2][2], "powersgd");
  EXPECT_EQ(rows[2][4], "307.9x less (-99.7%)");
  EXPECT_EQ(rows[2][7], "2.190");
  ASSERT_EQ(s.charts.size(), 1u);
  ASSERT_EQ(s.charts[0].svgs.size(), 1u);
  for (const char* series : {"fp32", "fp16", "powersgd"})
    EXPECT_NE(s.charts[0].svgs[0].text.find(series), std::string::npos) << series;
}

TEST(CommHooksView, InTheReportAfterTheProjection) {
  const std::string html = ddpb::reports::render_html(suite_with_hooks());
  EXPECT_EQ(ddpb::testing::xml_problem(html), "");
  const size_t projection = html.find("<section id=\"projection\">");
  const size_t hooks = html.find("<section id=\"comm-hooks\">");
  ASSERT_NE(hooks, std::string::npos);
  EXPECT_LT(projection, hooks);
  EXPECT_NE(html.find("id=\"chart-comm-hook-loss\""), std::string::npos);
}

TEST(CommHooksView, WithoutHookRunsItSaysSo) {
  json suite = make_suite();
  json runs = json::array();
  for (const auto& r : suite["runs"])
    if (r["group"] != "comm_hook") runs.push_back(r);
  suite["runs"] = runs;
  const auto s =
      ddpb::reports::build_comm_hooks_section(ddpb::reports::SuiteRecord::from_json(suite));
  EXPECT_TRUE(s.tables.empty());
  ASSERT_FALSE(s.notes.empty());
  EXPECT_NE(s.notes[0].find("No comm hook runs"), std::string::npos);
}

}  // namespace
