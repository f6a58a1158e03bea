// The report's Verdict and Projection sections (reports/verdict.h, projection_view.h): the
// tie rule, the phase groups, every bottleneck rule on hand-built runs, "n/a" where a metric
// does not apply, and both sections at the top of the HTML and Markdown reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "reports/html_report.h"
#include "reports/projection_view.h"
#include "reports/schema_validator.h"
#include "reports/verdict.h"
#include "suite_fixture.h"
#include "xml_check.h"

namespace {

using ddpb::reports::BottleneckInputs;
using ddpb::reports::SuiteRun;
using ddpb::testing::make_projection;
using ddpb::testing::make_suite;
using ddpb::testing::run_by_id;
using nlohmann::json;

// A run with the given phase medians (ms); its step is their sum.
SuiteRun run_with(const std::string& mode, int n,
                  const std::vector<std::pair<std::string, double>>& ph, double efficiency = 0.9,
                  double stddev = 0.1) {
  json phases = json::array();
  double step = 0;
  for (const auto& [name, ms] : ph) {
    phases.push_back({{"phase", name}, {"median_ms", ms}});
    step += ms;
  }
  return ddpb::reports::record_from_json<SuiteRun>(
      json{{"mode", mode},
           {"world_size", n},
           {"status", "ok"},
           {"metrics",
            {{"step_time_ms", {{"median", step}, {"stddev", stddev}}},
             {"phases_median_ms", phases},
             {"samples_per_s", 1000.0 / step}}},
           {"scaling", {{"weak_efficiency", efficiency}}}});
}

// The verdict of a suite given as JSON.
ddpb::reports::ReportSection verdict_of(const json& suite) {
  return ddpb::reports::build_verdict(ddpb::reports::SuiteRecord::from_json(suite));
}

TEST(Verdict, TieIsADifferenceInsideTheLargerSpread) {
  EXPECT_TRUE(ddpb::reports::within_noise(10.0, 0.5, 10.4, 0.1));
  EXPECT_TRUE(ddpb::reports::within_noise(10.0, 0.1, 10.5, 0.5));
  EXPECT_FALSE(ddpb::reports::within_noise(10.0, 0.2, 10.5, 0.3));
}

TEST(Verdict, PhaseGroups) {
  const auto dp = ddpb::reports::group_phases(run_with("dp", 2,
                                                       {{"data", 1},
                                                        {"scatter", 2},
                                                        {"replicate", 3},
                                                        {"forward", 4},
                                                        {"gather", 5},
                                                        {"loss", 6},
                                                        {"backward", 7},
                                                        {"reduce", 8},
                                                        {"optimizer", 9}}));
  EXPECT_DOUBLE_EQ(dp.compute_ms, 4 + 6 + 7);
  EXPECT_DOUBLE_EQ(dp.traffic_ms, 2 + 3 + 5);
  EXPECT_DOUBLE_EQ(dp.reduce_ms, 8);
  EXPECT_DOUBLE_EQ(dp.data_ms, 1);
  EXPECT_DOUBLE_EQ(dp.optimizer_ms, 9);
  const auto ddp = ddpb::reports::group_phases(run_with("ddp", 2,
                                                        {{"buffer_broadcast", 1},
                                                         {"forward", 2},
                                                         {"sync_bn", 3},
                                                         {"backward_compute", 4},
                                                         {"comm_exposed", 5}}));
  EXPECT_DOUBLE_EQ(ddp.sync_ms, 4);
  EXPECT_DOUBLE_EQ(ddp.compute_ms, 6);
  EXPECT_DOUBLE_EQ(ddp.reduce_ms, 5);
}

TEST(Verdict, BottleneckRulesInOrder) {
  using ddpb::reports::bottleneck_kind;
  const SuiteRun compute_dp = run_with("dp", 2, {{"forward", 5}, {"backward", 10}, {"reduce", 1}});
  const SuiteRun compute_ddp =
      run_with("ddp", 2, {{"forward", 5}, {"backward_compute", 10}, {"comm_exposed", 1}});
  BottleneckInputs in{&compute_dp, &compute_ddp, 2, "cuda", 0};
  EXPECT_EQ(bottleneck_kind(in), "compute");
  // Data: a fifth of the winner's step.
  const SuiteRun slow_data =
      run_with("ddp", 2, {{"data", 4}, {"forward", 5}, {"backward_compute", 10}});
  EXPECT_EQ(bottleneck_kind({nullptr, &slow_data, 2, "cuda", 0}), "data");
  EXPECT_EQ(bottleneck_kind({&compute_dp, &slow_data, 2, "cuda", 0}), "compute")
      << "the rule looks at the faster design";
  EXPECT_EQ(bottleneck_kind({nullptr, nullptr, 2, "cuda", 0}), "");
  // DDP's exposed communication.
  const SuiteRun exposed =
      run_with("ddp", 2, {{"forward", 5}, {"backward_compute", 10}, {"comm_exposed", 6}});
  EXPECT_EQ(bottleneck_kind({nullptr, &exposed, 2, "cuda", 0}), "ddp-exposed-comm");
  // DP's device-0 traffic.
  const SuiteRun traffic =
      run_with("dp", 2, {{"replicate", 3}, {"forward", 5}, {"backward", 10}, {"reduce", 3}});
  EXPECT_EQ(bottleneck_kind({&traffic, nullptr, 2, "cuda", 0}), "dp-device0-traffic");
  // The machine: as many CPU ranks as cores and nobody near linear scaling; not on GPUs,
  // and not when one design scales.
  const SuiteRun poor =
      run_with("ddp", 2, {{"forward", 5}, {"backward_compute", 10}, {"comm_exposed", 6}}, 0.5);
  EXPECT_EQ(bottleneck_kind({nullptr, &poor, 2, "cpu", 2}), "machine");
  EXPECT_EQ(bottleneck_kind({nullptr, &poor, 2, "cpu", 8}), "ddp-exposed-comm");
  EXPECT_EQ(bottleneck_kind({nullptr, &poor, 2, "cuda", 2}), "ddp-exposed-comm");
}

TEST(Verdict, TableNamesTheFasterDesignPerWorldSize) {
  json suite = make_suite();
  const auto v = verdict_of(suite);
  ASSERT_EQ(v.tables.size(), 1u);
  const auto& t = v.tables[0].table;
  // mlp-small at 2 and 4, gpt-tiny at 2 and 4 (its DDP run at 4 failed).
  ASSERT_EQ(t.rows.size(), 4u);
  EXPECT_EQ(t.rows[0][0], "mlp-small");
  EXPECT_EQ(t.rows[0][1], "2");
  EXPECT_EQ(t.rows[0][2], "DDP");  // the fixture's DDP scales at 0.91, DP at 0.5
  EXPECT_EQ(t.rows[3][5], "did not run");
  EXPECT_EQ(t.rows[3][2], "-");
  // At w4 the default 25 MB beats the sweep's 1 and 0.25 MB.
  EXPECT_EQ(t.rows[1][11].rfind("25 MB, the default", 0), 0u) << t.rows[1][11];
  EXPECT_NE(t.rows[1][11].find("; auto chose 2.64 MB (13.0"), std::string::npos) << t.rows[1][11];
  EXPECT_EQ(t.rows[0][11], "not swept");
  // One bottleneck paragraph per workload, then the bucket blame of the three DDP scaling runs
  // that succeeded (Note [Bucket blame]): the fixture's last rank holds each of them back.
  // Then per workload the critical path of DP and DDP at their largest world size (gpt-tiny's
  // DDP at 2: its run at 4 failed).
  ASSERT_EQ(v.paragraphs.size(), 9u);
  EXPECT_EQ(v.paragraphs[5].rfind("Critical path, mlp-small DP at 4 devices: the median step's", 0),
            0u)
      << v.paragraphs[5];
  EXPECT_NE(v.paragraphs[6].find("waiting for rank 3 10.0%"), std::string::npos) << v.paragraphs[6];
  EXPECT_EQ(v.paragraphs[8].rfind("Critical path, gpt-tiny DDP at 2 ranks", 0), 0u)
      << v.paragraphs[8];
  EXPECT_EQ(v.paragraphs[2].rfind("mlp-small/ddp/w2: rank 1 holds back 90% of buckets", 0), 0u)
      << v.paragraphs[2];
  EXPECT_NE(v.paragraphs[3].find("its backward_compute is 11.8 ms slower"), std::string::npos)
      << v.paragraphs[3];
  // Every explanation names three phase-group differences with their ms.
  size_t explained = 0;
  for (const auto& n : v.notes) explained += n.find("(DP - DDP = ") != std::string::npos;
  EXPECT_EQ(explained, 3u);
  // A tie when the medians are inside the spread.
  for (const char* id : {"mlp-small/dp/w2", "mlp-small/ddp/w2"}) {
    run_by_id(suite, id)["metrics"]["step_time_ms"]["median"] = 10.0;
    run_by_id(suite, id)["metrics"]["step_time_ms"]["stddev"] = 0.5;
  }
  run_by_id(suite, "mlp-small/ddp/w2")["metrics"]["step_time_ms"]["median"] = 10.3;
  EXPECT_EQ(verdict_of(suite).tables[0].table.rows[0][2], "tie");
}

TEST(Verdict, QuickSuitesSayPlainlyThatTheyCannotRankInsideTheNoise) {
  json suite = make_suite();
  auto has_quick_note = [](const json& s) {
    for (const auto& n : verdict_of(s).notes)
      if (n.find("too few to rank") != std::string::npos) return true;
    return false;
  };
  EXPECT_FALSE(has_quick_note(suite));
  // Inside the noise: a tie in a full suite, "cannot rank" in a quick one (or one of 4 steps).
  for (const char* id : {"mlp-small/dp/w2", "mlp-small/ddp/w2"}) {
    run_by_id(suite, id)["metrics"]["step_time_ms"]["median"] = 10.0;
    run_by_id(suite, id)["metrics"]["step_time_ms"]["stddev"] = 0.5;
  }
  EXPECT_EQ(verdict_of(suite).tables[0].table.rows[0][2], "tie");
  for (const auto& [key, value] : {std::pair{"quick", json(true)}, std::pair{"steps", json(4)}}) {
    json quick = suite;
    quick["suite"][key] = value;
    const auto v = verdict_of(quick);
    EXPECT_TRUE(has_quick_note(quick)) << key;
    EXPECT_EQ(v.tables[0].table.rows[0][2], "cannot rank") << key;
    EXPECT_NE(v.tables[0].table.rows[0][3].find("inside the noise"), std::string::npos);
    // A difference beyond the noise still ranks.
    EXPECT_EQ(v.tables[0].table.rows[1][2], "DDP") << key;
  }
}

TEST(Verdict, SpeedOfLightNamesEachDesignsShareOfItsBoundAndItsLargestGap) {
  json suite = make_suite();
  run_by_id(suite, "mlp-small/ddp/w4")["metrics"]["speed_of_light"] = {
      {"bound_ms", 6.2},
      {"achieved", 0.71},
      {"compute_ms", 5.0},
      {"comm_ms", 1.2},
      {"input_ms", 0.0},
      {"phases",
       {{{"group", "compute"}, {"measured_ms", 7.5}, {"bound_ms", 5.0}},
        {{"group", "communication"}, {"measured_ms", 1.3}, {"bound_ms", 1.2}}}},
      {"largest_gap", "compute"},
      {"peak_flops_per_s", 1e11},
      {"link", "allreduce (alpha 100 us, beta 1 GB/s)"}};
  const auto v = verdict_of(suite);
  const auto it = std::find_if(v.paragraphs.begin(), v.paragraphs.end(), [](const auto& p) {
    return p.rfind("mlp-small at world size 4: DDP reaches 71", 0) == 0;
  });
  ASSERT_NE(it, v.paragraphs.end());
  EXPECT_NE(it->find("its largest gap is compute"), std::string::npos) << *it;
  EXPECT_EQ(it->find("; DP reaches"), std::string::npos) << "the DP run has no bound: " << *it;
}

// Note [First-screen sentence]: one sentence per workload, on the report's first screen.
TEST(Verdict, TheFirstScreenSaysPerWorkloadWhichDesignWinsHowFarFromItsBoundAndWhoHoldsItBack) {
  json suite = make_suite();
  run_by_id(suite, "mlp-small/ddp/w4")["metrics"]["speed_of_light"] = {
      {"bound_ms", 6.2},          {"achieved", 0.71},         {"compute_ms", 5.0},
      {"comm_ms", 1.2},           {"input_ms", 0.0},          {"phases", json::array()},
      {"largest_gap", "compute"}, {"peak_flops_per_s", 1e11}, {"link", "allreduce"}};
  const auto sentences =
      ddpb::reports::first_screen_sentences(ddpb::reports::SuiteRecord::from_json(suite));
  // gpt-tiny's DDP run at 4 failed: no sentence at 4, and none made up from world size 2.
  ASSERT_EQ(sentences.size(), 1u);
  const std::string& s = sentences[0];
  EXPECT_EQ(s.rfind("mlp-small: DDP is ", 0), 0u) << s;
  EXPECT_NE(s.find("x faster than DP at 4 devices"), std::string::npos) << s;
  EXPECT_NE(s.find("DDP reaches 71.0% of its bound, the largest gap in compute"), std::string::npos)
      << s;
  EXPECT_NE(s.find("; rank 3 holds DDP's buckets back."), std::string::npos) << s;
  // The Markdown report's first screen holds it, above the verdict.
  const std::string md = ddpb::reports::render_markdown(suite, "r-").markdown;
  EXPECT_LT(md.find("mlp-small: DDP is "), md.find("## Verdict")) << md.substr(0, 800);
  // A quick suite says it cannot rank a difference inside the noise.
  for (const char* id : {"mlp-small/dp/w4", "mlp-small/ddp/w4"}) {
    run_by_id(suite, id)["metrics"]["step_time_ms"]["median"] = 10.0;
    run_by_id(suite, id)["metrics"]["step_time_ms"]["stddev"] = 0.5;
  }
  suite["suite"]["quick"] = true;
  const auto quick =
      ddpb::reports::first_screen_sentences(ddpb::reports::SuiteRecord::from_json(suite));
  ASSERT_EQ(quick.size(), 1u);
  EXPECT_NE(quick[0].find("DP and DDP cannot be ranked at 4 devices"), std::string::npos)
      << quick[0];
}

TEST(Projection, OneDeviceIsNotUpToOneDevices) {
  json suite = make_suite();
  for (auto& w : suite["projection"]["workloads"]) {
    w["ddp_max_devices_at_90pct"] = 1;
    w["dp_max_devices"] = 1;
  }
  const std::string html = ddpb::reports::render_html(suite);
  EXPECT_EQ(html.find("up to 1 devices"), std::string::npos);
  EXPECT_NE(html.find("DDP falls below 90% efficiency from its second device"), std::string::npos);
  EXPECT_NE(html.find("DP runs on one device only here"), std::string::npos);
}

TEST(Verdict, InapplicableMetricsReadNotApplicable) {
  const std::string html = ddpb::reports::render_html(make_suite());
  const size_t start = html.find("<table id=\"summary\"");
  const std::string table = html.substr(start, html.find("</table>", start) - start);
  auto row = [&](const std::string& id) {
    const size_t p = table.find("<td>" + id + "</td>");
    return table.substr(p, table.find("</tr>", p) - p);
  };
  // Overlap: n/a for single, DP and world size 1; scaling: n/a at world size 1.
  EXPECT_NE(row("mlp-small/dp/w2").find("<td>n/a</td>"), std::string::npos);
  EXPECT_NE(row("mlp-small/single/w1").find("<td>n/a</td><td class=\"num\">"), std::string::npos);
  EXPECT_EQ(row("mlp-small/ddp/w2").find("n/a"), std::string::npos) << row("mlp-small/ddp/w2");
}

TEST(Verdict, VerdictThenProjectionOpenTheReport) {
  const std::string html = ddpb::reports::render_html(make_suite());
  EXPECT_EQ(ddpb::testing::xml_problem(html), "");
  const size_t verdict = html.find("<section id=\"verdict\">");
  const size_t projection = html.find("<section id=\"projection\">");
  const size_t summary = html.find("<h2>Summary</h2>");
  ASSERT_NE(verdict, std::string::npos);
  EXPECT_LT(html.find("id=\"banner\""), verdict);
  EXPECT_LT(verdict, projection);
  EXPECT_LT(projection, summary);
  const std::string p = html.substr(projection, summary - projection);
  EXPECT_NE(p.find("id=\"chart-projection\""), std::string::npos);
  EXPECT_NE(p.find("stroke-dasharray"), std::string::npos) << "projected series are dashed";
  EXPECT_NE(p.find("DDP becomes the faster design at 4 devices"), std::string::npos);
  EXPECT_NE(p.find("DDP keeps &gt;= 90% efficiency up to 20 devices"), std::string::npos);
  EXPECT_NE(p.find("id=\"projection-validation\""), std::string::npos);
  EXPECT_NE(p.find("-8.2%"), std::string::npos);
  const auto md = ddpb::reports::render_markdown(make_suite(), "r-");
  EXPECT_LT(md.markdown.find("## Verdict"), md.markdown.find("## Projection"));
  EXPECT_LT(md.markdown.find("## Projection"), md.markdown.find("## Summary"));
  EXPECT_NE(md.markdown.find("![projection](r-projection.svg)"), std::string::npos);
}

TEST(Projection, FixtureMatchesTheSchemaAndMistakesDoNot) {
  EXPECT_TRUE(ddpb::reports::validate_projection_record(make_projection()).empty());
  EXPECT_TRUE(ddpb::reports::validate_suite_record(make_suite()).empty());
  json bad = make_projection();
  bad["topology"].erase("intra");
  EXPECT_FALSE(ddpb::reports::validate_projection_record(bad).empty());
  json suite = make_suite();
  suite["projection"]["workloads"][0]["points"][0]["ddp"].erase("step_ms");
  const auto errors = ddpb::reports::validate_suite_record(suite);
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors[0].path.rfind("/projection/workloads/0/points/0/ddp", 0), 0u) << errors[0].str();
}

TEST(Projection, MissingProjectionSaysSo) {
  json suite = make_suite();
  suite.erase("projection");
  const auto s = ddpb::reports::build_projection_section(std::nullopt);
  EXPECT_EQ(s.notes.size(), 1u);
  EXPECT_NE(ddpb::reports::render_html(suite).find("No projection in this record."),
            std::string::npos);
}

}  // namespace
