// A design is a row of one table (Note [The design table] in bench/run/designs.h) and the
// records describe it (Note [Designs in records] in reports/design_info.h): the report tests'
// rows are the table's, a name is taken once, and a toy design registered from a test (the
// ddpbench_toy binary, tests/bench/designs/toy_design_main.cpp) reaches every report with no
// edit to reports/ or the suite.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/run/designs.h"
#include "core/check.h"
#include "suite_fixture.h"
#include "tests/util/run_cli.h"

namespace ddpb::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The Markdown report's section that starts at `heading` ("## Verdict"), up to the next one.
std::string section(const std::string& md, const std::string& heading) {
  const size_t at = md.find(heading);
  if (at == std::string::npos) return "";
  const size_t next = md.find("\n## ", at + heading.size());
  return md.substr(at, next == std::string::npos ? std::string::npos : next - at);
}

// The fixture's rows are the table's first ones (ZeRO's stages follow, with no fixture run).
TEST(Designs, TheReportFixtureDescribesTheTable) {
  json table = json::array();
  for (const bench::Design& d : bench::designs()) {
    if (table.size() == design_rows().size()) break;
    table.push_back(reports::record_to_json(d.info));
  }
  EXPECT_EQ(table, design_rows());
}

TEST(Designs, ANameIsTakenOnceAndFitsARunId) {
  bench::Design again = bench::design_named("ddp");
  EXPECT_THROW(bench::register_design(again), UsageError);
  EXPECT_THROW(bench::design_named("toy-ddp"), UsageError);  // registered only in its binary
  for (const char* bad : {"", "a/b", "two words", "ddp\n"}) {
    again.info.name = bad;
    EXPECT_THROW(bench::register_design(again), UsageError) << bad;
  }
  // single, dp, ddp, zero1, zero2, zero1-pytorch, and FSDP's four strategies
  EXPECT_EQ(bench::designs().size(), 10u);
}

// docs/records.md "Versions": a version-1 results folder is refused by every command that
// reads one, in one line naming both versions, with the usage exit code.
TEST(Designs, ARecordOfTheFormerVersionIsRefusedInOneLine) {
  TempDir dir("former_version");
  json suite = {{"schema_version", 1}, {"implementation", "ddpbench"}, {"kind", "suite"},
                {"complete", true},    {"suite", {{"name", "old"}}},   {"runs", json::array()}};
  std::ofstream(dir / "suite.json") << suite.dump();
  const json run = {{"schema_version", 1}, {"implementation", "ddpbench"}, {"kind", "run"}};
  std::ofstream(dir / "run.json") << run.dump();
  const std::string folder = dir.path().string(), record = dir / "run.json";
  for (const std::string& command :
       {"report " + folder + " -o " + (dir / "r.md"), "compare " + folder + " " + folder,
        "project " + folder + " --devices 2,4", "suite --resume " + folder,
        "compare " + record + " " + record, "project " + record + " --devices 2"}) {
    const CliResult r = run_cli(command);
    EXPECT_EQ(r.code, 2) << command << ": " << r.output;
    EXPECT_NE(r.output.find("a record of schema version 1, and this ddpbench reads version 2"),
              std::string::npos)
        << command << ": " << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
  // validate says the same line of each file, and exits 1 (an invalid file, not a bad flag).
  const CliResult r = run_cli("validate " + (dir / "suite.json") + " " + record);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 2) << r.output;
  EXPECT_NE(r.output.find(record + ": a record of schema version 1"), std::string::npos)
      << r.output;
}

// The toy design ("toy-ddp", label "ToyDDP": DDP reducing after backward) beside single, DP and
// DDP in a quick suite of one workload: its runs train right, and it has its column in the
// verdict, its bars in the phase chart, its points in the projection and its rows in compare.
TEST(Designs, AToyDesignRegisteredInATestReachesEveryReport) {
  TempDir dir("toy_design");
  const std::string file = dir / "toy.json", out = dir / "results";
  std::ofstream(file) << json{
      {"name", "toy"},
      {"quick", true},
      {"device", "cpu"},
      {"workloads", {"mlp-small"}},
      {"modes", {"single", "dp", "ddp", "toy-ddp"}},
      {"world_sizes", {2}},
      {"bucket_sweep_mb", json::array()},
      {"overlap_off", false},
      {"bucket_autotune", false},
      {"comm_hooks", json::array()},
      {"loader_workers",
       json::array()}}.dump();
  CliResult r = run_cli("suite " + file + " --out " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  const json suite = json::parse(read_text(fs::path(out) / "suite.json"));
  const auto& designs = suite.at("designs");
  const auto toy = std::find_if(designs.begin(), designs.end(),
                                [](const json& d) { return d.at("name") == "toy-ddp"; });
  ASSERT_NE(toy, designs.end()) << designs.dump();
  EXPECT_EQ(toy->at("label"), "ToyDDP");
  EXPECT_FALSE(toy->at("overlaps_backward").get<bool>());
  bool trained = false;
  for (const json& run : suite.at("runs")) {
    if (run.at("id") != "mlp-small/toy-ddp/w2") continue;
    ASSERT_EQ(run.at("status"), "ok") << run.dump();
    EXPECT_TRUE(run.at("correctness").at("passed").get<bool>()) << run.at("correctness").dump();
    trained = true;
  }
  EXPECT_TRUE(trained) << "the matrix runs the toy design at world size 2";

  const std::string md = read_text(fs::path(out) / "report.md");
  EXPECT_NE(section(md, "## Verdict").find("ToyDDP"), std::string::npos) << md;
  std::string phase_charts;
  for (const auto& f : fs::directory_iterator(out))
    if (f.path().filename().string().find("phases.svg") != std::string::npos)
      phase_charts += read_text(f.path());
  EXPECT_NE(phase_charts.find("toy-ddp"), std::string::npos) << "a bar of the phase chart";
  EXPECT_NE(section(md, "## Projection").find("ToyDDP"), std::string::npos) << md;
  bool projected = false;
  for (const json& w : suite.at("projection").at("workloads"))
    for (const json& p : w.at("points"))
      projected = projected || p.value("designs", json::object()).contains("toy-ddp");
  EXPECT_TRUE(projected) << suite.at("projection").dump();

  r = run_cli("compare " + out + "/suite.json " + out + "/suite.json");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("mlp-small/toy-ddp/w2"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ddpb::testing
