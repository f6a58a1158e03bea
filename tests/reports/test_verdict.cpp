// The report's Verdict and Projection sections (reports/verdict.h, projection_view.h): the
// tie rule, phases grouped by their recorded kind, every bottleneck rule on hand-built runs,
// best, runner-up and gap among any number of designs, "n/a" where a metric does not apply, and
// both sections at the top of the HTML and Markdown reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "reports/html_report.h"
#include "reports/projection_view.h"
#include "reports/schema_validator.h"
#include "reports/suite_view.h"
#include "reports/verdict.h"
#include "suite_fixture.h"
#include "xml_check.h"

namespace {

using ddpb::reports::BottleneckInputs;
using ddpb::reports::Contender;
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
    phases.push_back(
        {{"phase", name}, {"kind", ddpb::testing::kind_of_phase(name)}, {"median_ms", ms}});
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

// Every paragraph of the verdict's findings, group after group.
std::vector<std::string> all_paragraphs(const ddpb::reports::ReportSection& v) {
  std::vector<std::string> out = v.paragraphs;
  for (const auto& g : v.groups) out.insert(out.end(), g.paragraphs.begin(), g.paragraphs.end());
  return out;
}

// The group of findings headed `workload`, or null.
const ddpb::reports::ParagraphGroup* group_of(const ddpb::reports::ReportSection& v,
                                              const std::string& workload) {
  for (const auto& g : v.groups)
    if (g.heading == workload) return &g;
  return nullptr;
}

TEST(Verdict, TieIsADifferenceInsideTheLargerSpread) {
  EXPECT_TRUE(ddpb::reports::within_noise(10.0, 0.5, 10.4, 0.1));
  EXPECT_TRUE(ddpb::reports::within_noise(10.0, 0.1, 10.5, 0.5));
  EXPECT_FALSE(ddpb::reports::within_noise(10.0, 0.2, 10.5, 0.3));
}

// Phases are grouped by the kind their record gives them (Note [Phase kinds]), never by name.
TEST(Verdict, PhasesGroupByTheKindTheirRecordGives) {
  using ddpb::reports::phase_time_by_kind;
  const auto dp = phase_time_by_kind(run_with("dp", 2,
                                              {{"data", 1},
                                               {"scatter", 2},
                                               {"replicate", 3},
                                               {"forward", 4},
                                               {"gather", 5},
                                               {"loss", 6},
                                               {"backward", 7},
                                               {"reduce", 8},
                                               {"optimizer", 9}}));
  EXPECT_DOUBLE_EQ(dp.at("compute"), 4 + 6 + 7 + 9);
  EXPECT_DOUBLE_EQ(dp.at("communication"), 2 + 3 + 5 + 8);
  EXPECT_DOUBLE_EQ(dp.at("data"), 1);
  EXPECT_EQ(dp.size(), 3u);
  SuiteRun ddp = run_with("ddp", 2,
                          {{"buffer_broadcast", 1},
                           {"forward", 2},
                           {"sync_bn", 3},
                           {"backward_compute", 4},
                           {"comm_exposed", 5}});
  EXPECT_DOUBLE_EQ(phase_time_by_kind(ddp).at("communication"), 1 + 3 + 5);
  EXPECT_DOUBLE_EQ(phase_time_by_kind(ddp).at("compute"), 6);
  // The control: the record's kind decides, whatever the phase is called.
  (*ddp.metrics->phases_median_ms)[1].kind = "wait";
  const auto relabelled = phase_time_by_kind(ddp);
  EXPECT_DOUBLE_EQ(relabelled.at("compute"), 4);
  EXPECT_DOUBLE_EQ(relabelled.at("wait"), 2);
}

// The fixture's design rows, for runs made by hand.
ddpb::reports::DesignInfo design_row(const std::string& name) {
  static const auto record = ddpb::reports::SuiteRecord::from_json(make_suite());
  return record.design_named(name);
}

// The bottleneck of DP's and DDP's runs (either may be null), as "<kind>" or, for a design's
// communication, "communication of <design>".
std::string bottleneck(const SuiteRun* dp, const SuiteRun* ddp, const std::string& device = "cuda",
                       int cores = 0) {
  const BottleneckInputs in{
      {Contender{design_row("dp"), dp}, Contender{design_row("ddp"), ddp}}, 2, device, cores};
  const auto b = ddpb::reports::find_bottleneck(in);
  return b.kind == "communication" ? b.kind + " of " + b.in.design.name : b.kind;
}

TEST(Verdict, BottleneckRulesInOrder) {
  const SuiteRun compute_dp = run_with("dp", 2, {{"forward", 5}, {"backward", 10}, {"reduce", 1}});
  const SuiteRun compute_ddp =
      run_with("ddp", 2, {{"forward", 5}, {"backward_compute", 10}, {"comm_exposed", 1}});
  EXPECT_EQ(bottleneck(&compute_dp, &compute_ddp), "compute");
  // Data: a fifth of the winner's step.
  const SuiteRun slow_data =
      run_with("ddp", 2, {{"data", 4}, {"forward", 5}, {"backward_compute", 10}});
  EXPECT_EQ(bottleneck(nullptr, &slow_data), "data");
  EXPECT_EQ(bottleneck(&compute_dp, &slow_data), "compute")
      << "the rule looks at the faster design";
  EXPECT_EQ(bottleneck(nullptr, nullptr), "");
  // DDP's exposed communication.
  const SuiteRun exposed =
      run_with("ddp", 2, {{"forward", 5}, {"backward_compute", 10}, {"comm_exposed", 6}});
  EXPECT_EQ(bottleneck(nullptr, &exposed), "communication of ddp");
  // DP's device-0 traffic.
  const SuiteRun traffic =
      run_with("dp", 2, {{"replicate", 3}, {"forward", 5}, {"backward", 10}, {"reduce", 3}});
  EXPECT_EQ(bottleneck(&traffic, nullptr), "communication of dp");
  // Both over the share: the faster design's communication is the one named.
  EXPECT_EQ(bottleneck(&traffic, &exposed), "communication of dp");
  // The machine: as many CPU ranks as cores and nobody near linear scaling; not on GPUs,
  // and not when one design scales.
  const SuiteRun poor =
      run_with("ddp", 2, {{"forward", 5}, {"backward_compute", 10}, {"comm_exposed", 6}}, 0.5);
  EXPECT_EQ(bottleneck(nullptr, &poor, "cpu", 2), "machine");
  EXPECT_EQ(bottleneck(nullptr, &poor, "cpu", 8), "communication of ddp");
  EXPECT_EQ(bottleneck(nullptr, &poor, "cuda", 2), "communication of ddp");
}

// The cell of `row` under the column headed `column` in the verdict table.
std::string cell(const ddpb::reports::ReportSection& v, size_t row, const std::string& column) {
  const auto& t = v.tables.at(0).table;
  const auto at = std::find(t.header.begin(), t.header.end(), column);
  if (at == t.header.end()) return "no column " + column;
  return t.rows.at(row).at(static_cast<size_t>(at - t.header.begin()));
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
  EXPECT_EQ(t.rows[0][3], "DP");   // the runner-up
  EXPECT_EQ(cell(v, 3, "DDP step"), "did not run");
  EXPECT_EQ(t.rows[3][2], "-");
  // At w4 the default 25 MB beats the sweep's 1 and 0.25 MB.
  const std::string cap = cell(v, 1, "DDP best bucket cap");
  EXPECT_EQ(cap.rfind("25 MB, the default", 0), 0u) << cap;
  EXPECT_NE(cap.find("; auto chose 2.64 MB (13.0"), std::string::npos) << cap;
  EXPECT_EQ(cell(v, 0, "DDP best bucket cap"), "not swept");
  // Columns by trait: memory for every design, overlap and buckets where they apply.
  EXPECT_EQ(cell(v, 0, "DP memory").rfind("+", 0), 0u) << "device 0's premium";
  EXPECT_NE(cell(v, 0, "DDP memory").find(" per rank"), std::string::npos);
  EXPECT_EQ(std::count(t.header.begin(), t.header.end(), "DP overlap"), 0);
  EXPECT_EQ(std::count(t.header.begin(), t.header.end(), "DP best bucket cap"), 0);
  // Per workload (Note [Verdict findings]): its bottleneck, the bucket blame of its DDP scaling
  // runs that succeeded (Note [Bucket blame]: the fixture's last rank holds each of them back),
  // then the critical path of DP and DDP at their largest world size (gpt-tiny's DDP at 2: its
  // run at 4 failed).
  EXPECT_TRUE(v.paragraphs.empty());
  ASSERT_EQ(v.groups.size(), 2u);
  const auto& mlp = v.groups[0].paragraphs;
  const auto& gpt = v.groups[1].paragraphs;
  ASSERT_EQ(mlp.size(), 5u);
  ASSERT_EQ(gpt.size(), 4u);
  EXPECT_EQ(mlp[3].rfind("Critical path, mlp-small DP at 4 devices: the median step's", 0), 0u)
      << mlp[3];
  EXPECT_NE(mlp[4].find("waiting for rank 3 10.0%"), std::string::npos) << mlp[4];
  EXPECT_EQ(gpt[3].rfind("Critical path, gpt-tiny DDP at 2 ranks", 0), 0u) << gpt[3];
  EXPECT_EQ(mlp[1].rfind("mlp-small/ddp/w2: rank 1 holds back 90% of buckets", 0), 0u) << mlp[1];
  EXPECT_NE(mlp[2].find("its backward_compute is 11.8 ms slower"), std::string::npos) << mlp[2];
  // Every explanation names three phase-kind differences, runner-up minus best, with their ms.
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
    EXPECT_NE(v.tables[0].table.rows[0][4].find("inside the noise"), std::string::npos);
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
  const auto paragraphs = all_paragraphs(verdict_of(suite));
  const auto it = std::find_if(paragraphs.begin(), paragraphs.end(), [](const auto& p) {
    return p.rfind("mlp-small at world size 4: DDP reaches 71", 0) == 0;
  });
  ASSERT_NE(it, paragraphs.end());
  EXPECT_NE(it->find("its largest gap is compute"), std::string::npos) << *it;
  EXPECT_EQ(it->find("; DP reaches"), std::string::npos) << "the DP run has no bound: " << *it;
}

// What a finding of the verdict is, from its text: the order Note [Verdict findings] gives
// them, or -1 for a paragraph that is none of them.
int finding_kind(const std::string& workload, const std::string& p) {
  if (p.rfind("Critical path, " + workload + " ", 0) == 0) return 4;
  if (p.find(" holds back ") != std::string::npos) return 3;
  if (p.find(" is input-bound on rank ") != std::string::npos) return 2;
  if (p.rfind(workload + " at world size ", 0) != 0) return -1;
  return p.find(" of its bound (") != std::string::npos ? 1 : 0;
}

// A speed-of-light bound for mlp-small's DDP run at 4: 71% of it reached, compute the gap.
json ddp_bound_at_71_percent() {
  return {{"bound_ms", 6.2},          {"achieved", 0.71},         {"compute_ms", 5.0},
          {"comm_ms", 1.2},           {"input_ms", 0.0},          {"phases", json::array()},
          {"largest_gap", "compute"}, {"peak_flops_per_s", 1e11}, {"link", "allreduce"}};
}

// Note [Verdict findings]: the prose under a heading per workload, in the suite's workload
// order, and inside each in one order: bottleneck, speed of light, input, blame, critical path.
TEST(Verdict, FindingsAreGroupedUnderEachWorkloadInAFixedOrder) {
  json suite = make_suite();
  // Every kind of finding for mlp-small: a bound for its DDP run at 4, and two input-bound runs.
  run_by_id(suite, "mlp-small/ddp/w4")["metrics"]["speed_of_light"] = ddp_bound_at_71_percent();
  for (const char* id : {"mlp-small/dp/w2", "mlp-small/ddp/w4", "gpt-tiny/dp/w4"}) {
    json& m = run_by_id(suite, id)["metrics"];
    m["per_rank_data_wait_ms"] = {0.1, 0.3 * m["step_time_ms"]["median"].get<double>()};
  }
  // Records list runs in any order: gpt-tiny's first, so record order is not what groups them.
  std::stable_sort(suite["runs"].begin(), suite["runs"].end(), [](const json& a, const json& b) {
    return a["workload"] == "gpt-tiny" && b["workload"] != "gpt-tiny";
  });
  const auto v = verdict_of(suite);
  ASSERT_EQ(v.groups.size(), 2u);
  EXPECT_EQ(v.groups[0].heading, "mlp-small");
  EXPECT_EQ(v.groups[1].heading, "gpt-tiny");
  for (const auto& g : v.groups) {
    std::vector<int> kinds;
    for (const auto& p : g.paragraphs) kinds.push_back(finding_kind(g.heading, p));
    EXPECT_TRUE(std::is_sorted(kinds.begin(), kinds.end())) << testing::PrintToString(kinds);
    EXPECT_EQ(std::count(kinds.begin(), kinds.end(), -1), 0) << testing::PrintToString(kinds);
    for (const auto& p : g.paragraphs)  // every paragraph is about its heading's workload
      EXPECT_EQ(p.find(g.heading == "mlp-small" ? "gpt-tiny" : "mlp-small"), std::string::npos)
          << g.heading << ": " << p;
  }
  const auto& mlp = v.groups[0].paragraphs;
  std::vector<int> kinds;
  for (const auto& p : mlp) kinds.push_back(finding_kind("mlp-small", p));
  EXPECT_EQ(kinds, (std::vector<int>{0, 1, 2, 2, 3, 3, 4, 4}));
  // Input-bound and blame per run in record order.
  EXPECT_EQ(mlp[2].rfind("mlp-small/dp/w2 is input-bound", 0), 0u) << mlp[2];
  EXPECT_EQ(mlp[3].rfind("mlp-small/ddp/w4 is input-bound", 0), 0u) << mlp[3];
  EXPECT_EQ(v.groups[1].paragraphs[1].rfind("gpt-tiny/dp/w4 is input-bound", 0), 0u)
      << v.groups[1].paragraphs[1];
  // The control: the suite's own workload order decides which group comes first.
  json swapped = suite;
  swapped["suite"]["workloads"] = {"gpt-tiny", "mlp-small"};
  const auto w = verdict_of(swapped);
  ASSERT_EQ(w.groups.size(), 2u);
  EXPECT_EQ(w.groups[0].heading, "gpt-tiny");
  EXPECT_EQ(w.groups[1].paragraphs, mlp);
}

// The HTML and the Markdown lay the groups out as headings, each followed by its own findings.
TEST(Verdict, ReportsShowTheFindingsUnderAHeadingPerWorkload) {
  const json suite = make_suite();
  const auto v = verdict_of(suite);
  ASSERT_EQ(v.groups.size(), 2u);
  const std::string html = ddpb::reports::render_html(suite);
  const std::string md = ddpb::reports::render_markdown(suite, "r-").markdown;
  for (const auto& [text, heading] : {std::pair{html, std::string("<div class=\"findings\"><h3>")},
                                      std::pair{md, std::string("### ")}}) {
    size_t at = text.find("Verdict");
    for (const auto& g : v.groups) {
      const size_t h = text.find(heading + g.heading + (heading == "### " ? "\n" : "</h3>"), at);
      ASSERT_NE(h, std::string::npos) << g.heading;
      at = h;
      for (const auto& p : g.paragraphs) {
        // Markdown escapes '_' and '[', HTML the apostrophe: compare the text before them.
        const std::string head = p.substr(0, std::min(p.find_first_of("_[*'"), size_t{40}));
        const size_t found = text.find(head, at);
        ASSERT_NE(found, std::string::npos) << head;
        EXPECT_GT(found, h) << head;
        at = found;
      }
    }
    EXPECT_LT(at, text.find(heading == "### " ? "## Projection" : "<section id=\"projection\">"));
  }
}

// Adds rounds 1 and 2 of DP and DDP for mlp-small at 4 devices (group "rounds") and sets every
// round's median steps: dp_ms[k] and ddp_ms[k] for round k (round 0: the matrix's runs).
void set_rounds(json& suite, const std::vector<double>& dp_ms, const std::vector<double>& ddp_ms) {
  for (const std::string mode : {"dp", "ddp"}) {
    const std::string id = "mlp-small/" + mode + "/w4";
    const auto& ms = mode == "dp" ? dp_ms : ddp_ms;
    run_by_id(suite, id)["metrics"]["step_time_ms"]["median"] = ms[0];
    run_by_id(suite, id)["metrics"]["step_time_ms"]["stddev"] = 0.1;
    for (size_t k = 1; k < ms.size(); ++k) {
      json r = run_by_id(suite, id);
      r["id"] = id + "/round-" + std::to_string(k);
      r["group"] = "rounds";
      r["variant"] = "round-" + std::to_string(k);
      r["repeat"] = k;
      r["metrics"]["step_time_ms"]["median"] = ms[k];
      suite["runs"].push_back(r);
    }
  }
}

// Note [First-screen sentence]: one sentence per workload, on the report's first screen.
TEST(Verdict, TheFirstScreenSaysPerWorkloadWhichDesignWinsHowFarFromItsBoundAndWhoHoldsItBack) {
  json suite = make_suite();
  run_by_id(suite, "mlp-small/ddp/w4")["metrics"]["speed_of_light"] = ddp_bound_at_71_percent();
  const auto sentences =
      ddpb::reports::first_screen_sentences(ddpb::reports::SuiteRecord::from_json(suite));
  // gpt-tiny's DDP run at 4 failed: no sentence at 4, and none made up from world size 2.
  ASSERT_EQ(sentences.size(), 1u);
  const std::string& s = sentences[0];
  EXPECT_EQ(s.rfind("mlp-small: DDP is ", 0), 0u) << s;
  EXPECT_NE(s.find("x faster than DP at 4 devices"), std::string::npos) << s;
  EXPECT_NE(s.find("DDP reaches 71.0% of its bound, the largest gap in compute"), std::string::npos)
      << s;
  // Note [Load is not a design property]: no fault was injected, so the rank is the machine's.
  EXPECT_NE(s.find("; rank 3 holds DDP's buckets back: load on the machine, not DDP (its "),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("with no fault injected)."), std::string::npos) << s;
  // DDP leads here despite the load; where DP leads, the load is part of its lead.
  EXPECT_EQ(s.find("part of DP's lead"), std::string::npos) << s;
  {
    json dp_leads = suite;
    set_rounds(dp_leads, {8.0}, {10.0});
    const auto led =
        ddpb::reports::first_screen_sentences(ddpb::reports::SuiteRecord::from_json(dp_leads));
    ASSERT_EQ(led.size(), 1u);
    EXPECT_NE(led[0].find("DP is 1.25x faster than DDP at 4 devices"), std::string::npos) << led[0];
    EXPECT_NE(led[0].find("with no fault injected), so part of DP's lead is the machine's."),
              std::string::npos)
        << led[0];
  }
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

// Note [Load is not a design property], its control: a rank slowed by an injected fault is
// named, and not blamed on the machine.
TEST(Verdict, AnInjectedFaultIsNotCalledLoadOnTheMachine) {
  json suite = make_suite();
  auto& run = run_by_id(suite, "mlp-small/ddp/w4");
  run["args"].push_back("--inject-fault");
  run["args"].push_back("slow-backward=5:rank=3");
  run["config"]["inject_fault"] = "slow-backward=5:rank=3";
  const auto record = ddpb::reports::SuiteRecord::from_json(suite);
  const auto sentences = ddpb::reports::first_screen_sentences(record);
  ASSERT_EQ(sentences.size(), 1u);
  EXPECT_NE(sentences[0].find("; rank 3 holds DDP's buckets back."), std::string::npos)
      << sentences[0];
  EXPECT_EQ(sentences[0].find("load on the machine"), std::string::npos) << sentences[0];
  const auto v = ddpb::reports::build_verdict(record);
  int blamed = 0;
  for (const auto& p : all_paragraphs(v)) {
    if (p.rfind("mlp-small/ddp/w4: rank 3", 0) != 0) continue;
    ++blamed;
    EXPECT_EQ(p.find("load on the machine"), std::string::npos) << p;
  }
  EXPECT_EQ(blamed, 1);
}

// "best | gap" of the verdict row of (w, n).
std::string verdict_row_by(const ddpb::reports::ReportSection& v, const std::string& w, int n) {
  for (const auto& row : v.tables.at(0).table.rows)
    if (row[0] == w && row[1] == std::to_string(n)) return row[2] + " | " + row[4];
  return "";
}

// Note [Factors from rounds]: the factor is the median over the alternated rounds, with their
// range; rounds that disagree on the winner make a tie.
TEST(Verdict, FactorsComeFromAlternatedRoundsWithTheirSpread) {
  json suite = make_suite();
  set_rounds(suite, {12.0, 11.0, 14.6}, {10.0, 10.0, 10.0});
  auto record = ddpb::reports::SuiteRecord::from_json(suite);
  auto sentences = ddpb::reports::first_screen_sentences(record);
  ASSERT_EQ(sentences.size(), 1u);
  EXPECT_NE(sentences[0].find("DDP is 1.10-1.46x faster than DP at 4 devices (median 1.20x over "
                              "3 alternated rounds)"),
            std::string::npos)
      << sentences[0];
  EXPECT_EQ(verdict_row_by(ddpb::reports::build_verdict(record), "mlp-small", 4),
            "DDP | 1.20x (1.10-1.46x over 3 rounds)");
  // One round that says DP wins turns the rounds into a disagreement: a tie, with the range.
  suite = make_suite();
  set_rounds(suite, {12.0, 11.0, 9.0}, {10.0, 10.0, 10.0});
  record = ddpb::reports::SuiteRecord::from_json(suite);
  sentences = ddpb::reports::first_screen_sentences(record);
  ASSERT_EQ(sentences.size(), 1u);
  EXPECT_NE(sentences[0].find("DP and DDP tie at 4 devices (the rounds disagree: DP's step over "
                              "DDP's 0.90-1.20 over 3 rounds)"),
            std::string::npos)
      << sentences[0];
  // Rounds that agree but sit inside the runs' own noise (1%) are a tie too.
  suite = make_suite();
  set_rounds(suite, {10.05, 10.03, 10.08}, {10.0, 10.0, 10.0});
  run_by_id(suite, "mlp-small/dp/w4")["metrics"]["step_time_ms"]["stddev"] = 0.1;
  record = ddpb::reports::SuiteRecord::from_json(suite);
  EXPECT_EQ(verdict_row_by(ddpb::reports::build_verdict(record), "mlp-small", 4).substr(0, 6),
            "tie | ");
  // Without rounds, the one pair says it has no spread.
  suite = make_suite();
  set_rounds(suite, {12.0}, {10.0});
  sentences = ddpb::reports::first_screen_sentences(ddpb::reports::SuiteRecord::from_json(suite));
  EXPECT_NE(sentences.at(0).find("DDP is 1.20x faster than DP at 4 devices (one round, no spread)"),
            std::string::npos)
      << sentences[0];
}

// Adds a third parallel design to the fixture suite: "toy-ddp", labelled ToyDDP, with DDP's
// traits and phases, and its mlp-small scaling runs at 2 and 4 devices of the given median
// steps (ms). Nothing in reports/ knows its name.
void add_toy_design(json& suite, double w2_ms, double w4_ms) {
  for (const json& d : json(suite["designs"])) {
    if (d["name"] != "ddp") continue;
    json toy = d;
    toy["name"] = "toy-ddp";
    toy["label"] = "ToyDDP";
    suite["designs"].push_back(toy);
  }
  suite["suite"]["modes"].push_back("toy-ddp");
  for (const auto& [n, median] : {std::pair{2, w2_ms}, std::pair{4, w4_ms}}) {
    json r = ddpb::testing::make_run("mlp-small", "toy-ddp", n, "scaling");
    r["metrics"] = ddpb::testing::make_metrics("toy-ddp", n, 32 * n * 1000.0 / median, median,
                                               0.6 * median, 0.2 * median);
    r["scaling"] = {{"baseline", "mlp-small/single/w1"}, {"weak_efficiency", 0.95}};
    suite["runs"].push_back(r);
  }
}

// Round k of the run `id` (group "rounds") with a median step of `median` ms.
void add_round(json& suite, const std::string& id, int k, double median) {
  json r = run_by_id(suite, id);
  r["id"] = id + "/round-" + std::to_string(k);
  r["group"] = "rounds";
  r["variant"] = "round-" + std::to_string(k);
  r["repeat"] = k;
  r["metrics"]["step_time_ms"]["median"] = median;
  suite["runs"].push_back(r);
}

// Note [The verdict's designs]: a design the report has never heard of gets its columns, its
// place among the best, the runner-up and the gap, and its sentences, from its row alone.
TEST(Verdict, AThirdDesignGetsItsColumnAndItsSentences) {
  json suite = make_suite();
  add_toy_design(suite, 30.0, 10.0);  // third at 2 devices, best at 4
  run_by_id(suite, "mlp-small/ddp/w4")["metrics"]["step_time_ms"]["median"] = 12.0;
  // ToyDDP's exposed communication is a quarter of its step at 4: the bottleneck there.
  for (json& p : run_by_id(suite, "mlp-small/toy-ddp/w4")["metrics"]["phases_median_ms"]) {
    if (p["phase"] == "comm_exposed") p["median_ms"] = 2.5;
    if (p["phase"] == "backward_compute") p["median_ms"] = 4.5;
  }
  const auto record = ddpb::reports::SuiteRecord::from_json(suite);
  const auto v = ddpb::reports::build_verdict(record);
  const auto& t = v.tables.at(0).table;
  EXPECT_NE(v.tables[0].caption.find("DP, DDP and ToyDDP"), std::string::npos)
      << v.tables[0].caption;
  // Its columns, by its traits (DDP's: per-rank memory, overlap, buckets).
  for (const char* column : {"ToyDDP step", "ToyDDP samples/s", "ToyDDP memory", "ToyDDP overlap",
                             "ToyDDP best bucket cap"})
    EXPECT_EQ(std::count(t.header.begin(), t.header.end(), column), 1) << column;
  ASSERT_EQ(t.rows.size(), 4u);
  // mlp-small at 2: DDP best, DP the runner-up, ToyDDP third (its step in its column).
  EXPECT_EQ(t.rows[0][2], "DDP");
  EXPECT_EQ(t.rows[0][3], "DP");
  EXPECT_EQ(cell(v, 0, "ToyDDP step").rfind("30", 0), 0u) << cell(v, 0, "ToyDDP step");
  // mlp-small at 4: ToyDDP best, DDP the runner-up, the gap DDP's step over ToyDDP's.
  EXPECT_EQ(t.rows[1][2], "ToyDDP");
  EXPECT_EQ(t.rows[1][3], "DDP");
  EXPECT_EQ(t.rows[1][4], "1.20x (20.0% apart, one round: no spread)");
  EXPECT_NE(cell(v, 1, "ToyDDP memory").find(" per rank"), std::string::npos);
  EXPECT_EQ(cell(v, 1, "ToyDDP best bucket cap"), "not swept") << "DDP's sweep is not ToyDDP's";
  EXPECT_EQ(cell(v, 2, "ToyDDP step"), "did not run");  // gpt-tiny has no ToyDDP run
  // The phase kinds behind the answer, runner-up minus best.
  const auto why = std::find_if(v.notes.begin(), v.notes.end(), [](const std::string& n) {
    return n.rfind("mlp-small at world size 4, ToyDDP faster than DDP: ", 0) == 0;
  });
  ASSERT_NE(why, v.notes.end());
  EXPECT_NE(why->find("(DDP - ToyDDP = "), std::string::npos) << *why;
  // The bottleneck, from its traits and its phases of kind communication.
  const auto* mlp = group_of(v, "mlp-small");
  ASSERT_NE(mlp, nullptr);
  EXPECT_EQ(mlp->paragraphs.at(0).rfind("mlp-small at world size 4: ToyDDP's exposed "
                                        "communication. Its comm_exposed takes 2.5",
                                        0),
            0u)
      << mlp->paragraphs[0];
  // The first screen names the best of three and the runner-up.
  auto sentences = ddpb::reports::first_screen_sentences(record);
  ASSERT_EQ(sentences.size(), 1u);
  EXPECT_EQ(sentences[0].rfind("mlp-small: ToyDDP is the fastest of 3 designs at 4 devices, "
                               "1.20x faster than the runner-up DDP (one round, no spread)",
                               0),
            0u)
      << sentences[0];
  // Over rounds, the factor is the runner-up's step over the best's in each.
  for (const auto& [k, toy, ddp] : {std::tuple{1, 10.0, 13.0}, std::tuple{2, 10.0, 11.0}}) {
    add_round(suite, "mlp-small/toy-ddp/w4", k, toy);
    add_round(suite, "mlp-small/ddp/w4", k, ddp);
    add_round(suite, "mlp-small/dp/w4", k, 30.0);
  }
  EXPECT_EQ(
      verdict_row_by(ddpb::reports::build_verdict(ddpb::reports::SuiteRecord::from_json(suite)),
                     "mlp-small", 4),
      "ToyDDP | 1.20x (1.10-1.30x over 3 rounds)");
  // A round that DDP wins makes the two tie, named in the record's order.
  run_by_id(suite, "mlp-small/ddp/w4/round-2")["metrics"]["step_time_ms"]["median"] = 9.0;
  const auto tied = ddpb::reports::SuiteRecord::from_json(suite);
  EXPECT_EQ(verdict_row_by(ddpb::reports::build_verdict(tied), "mlp-small", 4),
            "tie | DDP and ToyDDP, the rounds disagree: DDP's step over ToyDDP's 0.90-1.30 over 3 "
            "rounds");
  sentences = ddpb::reports::first_screen_sentences(tied);
  ASSERT_EQ(sentences.size(), 1u);
  EXPECT_EQ(sentences[0].rfind("mlp-small: DDP and ToyDDP tie for the best of 3 designs at 4 "
                               "devices (the rounds disagree",
                               0),
            0u)
      << sentences[0];
}

// The first screen of a CPU suite says what the box is before any answer; a GPU suite's does
// not.
TEST(Verdict, ACpuSuiteSaysWhatTheBoxIsFirst) {
  json suite = make_suite();
  const std::string box =
      ddpb::reports::cpu_box_sentence(ddpb::reports::SuiteRecord::from_json(suite));
  EXPECT_EQ(box.rfind("This box: 4 logical devices share 2 CPU cores.", 0), 0u) << box;
  EXPECT_NE(box.find("What carries over to GPUs: "), std::string::npos) << box;
  EXPECT_NE(box.find("What does not: the winner and its factor"), std::string::npos) << box;
  const std::string md = ddpb::reports::render_markdown(suite, "r-").markdown;
  EXPECT_LT(md.find("This box: "), md.find("mlp-small: DDP is ")) << md.substr(0, 1500);
  suite["suite"]["device"] = "cuda";
  EXPECT_EQ(ddpb::reports::cpu_box_sentence(ddpb::reports::SuiteRecord::from_json(suite)), "");
}

// Every answer names its dataset: the verdict opens with what each workload trained on, and
// the runs table has a column for it.
TEST(Verdict, TheVerdictAndTheRunsTableNameTheDataset) {
  json suite = make_suite();
  for (auto& run : suite["runs"]) {
    if (run["workload"] != "gpt-tiny" || !run.contains("metrics")) continue;
    run["metrics"]["loader"] = {
        {"source", "tokens"},
        {"data", "/d/shakespeare"},
        {"files", {{{"path", "/d/shakespeare/train.bin"}, {"tokens", 1003854}, {"samples", 7842}}}},
        {"split", "train"},
        {"workers", 0},
        {"prefetch_factor", 2},
        {"pin_memory", "off"},
        {"samples", 100},
        {"samples_per_s", 1000.0}};
  }
  const auto record = ddpb::reports::SuiteRecord::from_json(suite);
  const auto v = ddpb::reports::build_verdict(record);
  ASSERT_FALSE(v.notes.empty());
  EXPECT_EQ(v.notes[0],
            "Data: mlp-small on synthetic data; gpt-tiny on /d/shakespeare (1003854 tokens in 1 "
            "shard, split train).")
      << v.notes[0];
  // A suite on synthetic data throughout says so in a few words.
  const auto synthetic =
      ddpb::reports::build_verdict(ddpb::reports::SuiteRecord::from_json(make_suite()));
  EXPECT_EQ(synthetic.notes.at(0), "Data: every workload on synthetic data.");
  const auto table = ddpb::reports::summary_table(record);
  const auto column = std::find(table.header.begin(), table.header.end(), "data");
  ASSERT_NE(column, table.header.end());
  for (size_t i = 0; i < table.rows.size(); ++i) {
    const std::string& id = table.rows[i][0];
    const std::string& data = table.rows[i][static_cast<size_t>(column - table.header.begin())];
    if (id.rfind("gpt-tiny/", 0) == 0 && suite["runs"][i].contains("metrics"))
      EXPECT_EQ(data.rfind("/d/shakespeare (", 0), 0u) << id;
    if (id.rfind("mlp-small/", 0) == 0) EXPECT_EQ(data, "synthetic data") << id;
  }
}

TEST(Projection, OneDeviceIsNotUpToOneDevices) {
  json suite = make_suite();
  for (auto& w : suite["projection"]["workloads"]) {
    w["limits"]["ddp"]["max_devices_at_90pct"] = 1;
    w["limits"]["dp"]["max_devices"] = 1;
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
  suite["projection"]["workloads"][0]["points"][0]["designs"]["ddp"].erase("step_ms");
  const auto errors = ddpb::reports::validate_suite_record(suite);
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors[0].path.rfind("/projection/workloads/0/points/0/designs/ddp", 0), 0u)
      << errors[0].str();
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
