// The schema validator on hand-made documents (exact error paths), real records from the
// ddpbench binary (single, dp), rejected files, and the `validate` and `env` subcommands.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "../util/run_cli.h"
#include "reports/json_io.h"
#include "reports/run_record.h"
#include "reports/schema_validator.h"

namespace {

using ddpb::reports::ReportError;
using ddpb::reports::validate_schema;
using ddpb::testing::run_cli;
using ddpb::testing::TempDir;
using nlohmann::json;

// Every error as "path: message", for one-line comparisons.
std::vector<std::string> errors_of(const json& schema, const json& doc) {
  std::vector<std::string> out;
  for (const auto& e : validate_schema(schema, doc)) out.push_back(e.str());
  return out;
}

using Strings = std::vector<std::string>;

TEST(SchemaValidator, WrongTypeNamesThePathAndBothTypes) {
  json schema = json::parse(R"({"type": "object", "properties": {
      "summary": {"type": "object", "properties": {"step_time_ms": {"type": "object",
          "properties": {"median": {"type": "number"}}}}}}})");
  json doc = json::parse(R"({"summary": {"step_time_ms": {"median": "fast"}}})");
  EXPECT_EQ(errors_of(schema, doc),
            Strings{"/summary/step_time_ms/median: expected number, got string"});
  EXPECT_TRUE(
      errors_of(schema, json::parse(R"({"summary": {"step_time_ms": {"median": 1.5}}})")).empty());
}

TEST(SchemaValidator, TypeArraysAndIntegers) {
  json schema = json::parse(R"({"type": ["integer", "null"]})");
  EXPECT_TRUE(errors_of(schema, 3).empty());
  EXPECT_TRUE(errors_of(schema, 3.0).empty()) << "2020-12: 3.0 is an integer";
  EXPECT_TRUE(errors_of(schema, nullptr).empty());
  EXPECT_EQ(errors_of(schema, 3.5), Strings{"(root): expected integer or null, got number"});
  EXPECT_EQ(errors_of(schema, "x"), Strings{"(root): expected integer or null, got string"});
  EXPECT_EQ(errors_of(json{{"type", "number"}}, true),
            Strings{"(root): expected number, got boolean"});
}

TEST(SchemaValidator, RequiredAndAdditionalProperties) {
  json schema =
      json::parse(R"({"type": "object", "required": ["a", "b"], "additionalProperties": false,
      "properties": {"a": {}, "b": {}, "c": {}}})");
  EXPECT_EQ(errors_of(schema, json::parse(R"({"a": 1})")),
            Strings{"(root): missing required key 'b'"});
  EXPECT_EQ(errors_of(schema, json::parse(R"({"a": 1, "b": 2, "zz": 3})")),
            Strings{"/zz: unexpected key"});
  // additionalProperties as a schema checks every key not in properties.
  json numbers = json::parse(R"({"type": "object", "additionalProperties": {"type": "number"}})");
  EXPECT_EQ(errors_of(numbers, json::parse(R"({"fwd": 1.0, "bwd": "x"})")),
            Strings{"/bwd: expected number, got string"});
}

TEST(SchemaValidator, EnumConstMinimumMinItems) {
  json schema = json::parse(R"({"type": "object", "properties": {
      "mode": {"enum": ["single", "dp", "ddp"]}, "v": {"const": 1},
      "n": {"type": "integer", "minimum": 1}, "xs": {"type": "array", "minItems": 2}}})");
  EXPECT_EQ(errors_of(schema, json::parse(R"({"mode": "tpu"})")),
            Strings{R"(/mode: "tpu" is not one of ["single","dp","ddp"])"});
  EXPECT_EQ(errors_of(schema, json::parse(R"({"v": 2})")), Strings{"/v: expected 1, got 2"});
  EXPECT_TRUE(errors_of(schema, json::parse(R"({"v": 1.0})")).empty()) << "1 and 1.0 are equal";
  EXPECT_EQ(errors_of(schema, json::parse(R"({"n": 0})")), Strings{"/n: 0 is below the minimum 1"});
  EXPECT_EQ(errors_of(schema, json::parse(R"({"xs": [1]})")),
            Strings{"/xs: expected at least 2 items, got 1"});
}

TEST(SchemaValidator, RefAndNestedArrayItems) {
  json schema = json::parse(R"({
      "type": "object",
      "properties": {"steps": {"type": "array", "items": {"$ref": "#/$defs/step"}}},
      "$defs": {
        "ms": {"type": "number", "minimum": 0},
        "step": {"type": "object", "required": ["step"], "properties": {
            "step": {"type": "integer"},
            "phases_ms": {"type": "object", "additionalProperties": {"$ref": "#/$defs/ms"}}}}}})");
  json doc = json::parse(R"({"steps": [
      {"step": 1, "phases_ms": {"data": 0.5}},
      {"step": 2, "phases_ms": {"data": 0.5, "forward": "slow"}},
      {"phases_ms": {"data": -1}}]})");
  EXPECT_EQ(errors_of(schema, doc),
            (Strings{"/steps/1/phases_ms/forward: expected number, got string",
                     "/steps/2: missing required key 'step'",
                     "/steps/2/phases_ms/data: -1 is below the minimum 0"}));
}

TEST(SchemaValidator, PointerEscapingAndOneErrorPerWrongType) {
  json schema = json::parse(R"({"type": "object", "additionalProperties": {"type": "object",
      "required": ["x"], "properties": {"x": {"type": "string"}}}})");
  EXPECT_EQ(errors_of(schema, json::parse(R"({"a/b~c": 5})")),
            Strings{"/a~1b~0c: expected object, got integer"});
}

TEST(SchemaValidator, SchemaBugsThrow) {
  EXPECT_THROW(validate_schema(json::parse(R"({"maximum": 3})"), 1), ReportError);
  EXPECT_THROW(validate_schema(json::parse(R"({"$ref": "#/$defs/missing"})"), 1), ReportError);
  EXPECT_THROW(validate_schema(json::parse(R"({"$ref": "other.json#/x"})"), 1), ReportError);
  EXPECT_THROW(
      validate_schema(json::parse(R"({"type": "object", "required": "a"})"), json::object()),
      ReportError);
  EXPECT_THROW(validate_schema(json::parse(R"({"type": "float"})"), 1.0), ReportError)
      << "an unknown type name is a schema bug";
  EXPECT_THROW(validate_schema(json::parse(R"({"minItems": -1})"), json::array()), ReportError);
}

TEST(RunSchema, EmbeddedCopyParses) {
  const json& s = ddpb::reports::run_record_schema();
  EXPECT_EQ(s["properties"]["schema_version"]["const"], ddpb::reports::kSchemaVersion);
  EXPECT_TRUE(s.contains("$defs"));
  // An empty object is rejected for its missing top-level keys, not with a schema error.
  EXPECT_EQ(ddpb::reports::validate_run_record(json::object()).size(), 11u);
}

// Runs `ddpbench run` into `out` and returns the parsed record.
json make_record(const std::string& mode_args, const std::string& out) {
  auto r = run_cli("run --workload mlp-small --steps 2 --warmup 1 --global-batch 8 --quiet " +
                   mode_args + " --out " + out);
  EXPECT_EQ(r.code, 0) << r.output;
  return ddpb::reports::read_json(out);
}

class RealRecords : public ::testing::Test {
 protected:
  TempDir dir_{"schema_" +
               std::string(::testing::UnitTest::GetInstance()->current_test_info()->name())};
};

TEST_F(RealRecords, SingleAndDpValidate) {
  for (std::string args : {"--mode single", "--mode dp --world-size 2"}) {
    const std::string out = dir_ / "run.json";
    json rec = make_record(args, out);
    EXPECT_NO_THROW(ddpb::reports::validate_report_file(out)) << args;
    EXPECT_TRUE(ddpb::reports::validate_run_record(rec).empty()) << args;
    EXPECT_EQ(rec["steps"].size(), 3u);
    // The typed record names or keeps every field the writer wrote.
    EXPECT_EQ(ddpb::reports::RunRecord::from_json(rec).to_json(), rec) << args;
  }
}

TEST_F(RealRecords, TheDesignRowIsTheOneTheConfigurationNames) {
  json rec = make_record("--mode dp --world-size 2", dir_ / "run.json");
  EXPECT_EQ(rec["design"]["name"], "dp");
  EXPECT_EQ(rec["design"]["label"], "DP");
  rec["design"]["name"] = "ddp";
  Strings got;
  for (const auto& e : ddpb::reports::validate_run_record(rec)) got.push_back(e.str());
  EXPECT_EQ(got, Strings{R"(/design/name: "ddp" is not the design config.mode names ("dp"))"});
}

TEST_F(RealRecords, MutationsAreCaughtAtTheirPath) {
  json rec = make_record("--mode dp --world-size 2", dir_ / "run.json");
  json bad = rec;
  bad["summary"]["step_time_ms"]["median"] = "fast";
  bad["steps"][0].erase("loss");
  bad["steps"][1]["mode"]["devices"][1]["rows"] = -1;
  bad["memory"][0]["peak_bytes"] = 1.5;
  bad["design"]["phases"][0]["kind"] = "thinking";
  bad["surprise"] = true;
  Strings got;
  for (const auto& e : ddpb::reports::validate_run_record(bad)) got.push_back(e.str());
  EXPECT_EQ(
      got,
      (Strings{
          R"(/design/phases/0/kind: "thinking" is not one of ["data","compute","communication","wait","host"])",
          "/memory/0/peak_bytes: expected integer, got number",
          "/steps/0: missing required key 'loss'",
          "/steps/1/mode/devices/1/rows: -1 is below the minimum 0",
          "/summary/step_time_ms/median: expected number, got string",
          "/surprise: unexpected key"}));
}

TEST_F(RealRecords, TruncatedMalformedAndInvalidFilesNameTheFile) {
  const std::string good = dir_ / "run.json";
  json rec = make_record("--mode single", good);
  const std::string text = rec.dump(2);
  struct Case {
    std::string name, content, needle;
  };
  for (const Case& c :
       {Case{"truncated.json", text.substr(0, text.size() / 2), "not valid JSON"},
        Case{"malformed.json", "{\"schema_version\": 1,, }", "not valid JSON"},
        Case{"empty.json", "", "not valid JSON"},
        // Found by fuzz/fuzz_report: nlohmann throws out_of_range (not parse_error) for a
        // number beyond double's range, which escaped read_json as a foreign exception.
        Case{"huge_number.json", R"({"schema_version": 9.99999993922529e309})", "not valid JSON"},
        Case{"wrong.json", R"({"schema_version": 2})", "missing required key 'implementation'"}}) {
    const std::string path = dir_ / c.name;
    std::ofstream(path) << c.content;
    try {
      ddpb::reports::validate_report_file(path);
      ADD_FAILURE() << c.name << " was accepted";
    } catch (const ReportError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      EXPECT_NE(msg.find(c.needle), std::string::npos) << msg;
      // The in-memory reader (used by fuzz/fuzz_report) fails the same way.
      try {
        ddpb::reports::validate_report_text(c.content, path);
        ADD_FAILURE() << c.name << " was accepted from memory";
      } catch (const ReportError& m) {
        EXPECT_EQ(std::string(m.what()), msg);
      }
    }
  }
  EXPECT_EQ(ddpb::reports::validate_report_text(text, "mem"), rec);
  EXPECT_THROW(ddpb::reports::validate_report_file(dir_ / "missing.json"), ReportError);
  EXPECT_THROW(ddpb::reports::validate_report_file(good, /*max_bytes=*/16), ReportError);
}

TEST_F(RealRecords, ValidateCommandExitCodes) {
  const std::string good = dir_ / "good.json";
  json rec = make_record("--mode single", good);
  rec["summary"].erase("samples_per_s");
  rec["steps"][1]["time_ms"] = "x";
  const std::string bad = dir_ / "bad.json";
  std::ofstream(bad) << rec.dump();

  auto ok = run_cli("validate " + good);
  EXPECT_EQ(ok.code, 0) << ok.output;
  EXPECT_NE(ok.output.find(good + ": valid"), std::string::npos) << ok.output;

  auto invalid = run_cli("validate " + good + " " + bad);
  EXPECT_EQ(invalid.code, 1) << invalid.output;
  EXPECT_NE(invalid.output.find(bad + ": /steps/1/time_ms: expected number, got string\n"),
            std::string::npos)
      << invalid.output;
  EXPECT_NE(invalid.output.find(bad + ": /summary: missing required key 'samples_per_s'\n"),
            std::string::npos)
      << invalid.output;

  auto missing = run_cli("validate " + (dir_ / "nope.json"));
  EXPECT_EQ(missing.code, 1) << missing.output;
  EXPECT_NE(missing.output.find("nope.json"), std::string::npos) << missing.output;

  auto usage = run_cli("validate");
  EXPECT_EQ(usage.code, 2) << usage.output;
}

// Issue 25, M9: validate reads the record's kind first and checks it against its own schema;
// a projection record used to get a dozen bogus run-schema errors.
TEST_F(RealRecords, ValidateChecksEachKindAgainstItsOwnSchema) {
  const std::string ddp = dir_ / "ddp.json", proj = dir_ / "projection.json";
  make_record("--mode ddp --world-size 2", ddp);
  auto projected = run_cli("project " + ddp + " --devices 4 --json " + proj);
  ASSERT_EQ(projected.code, 0) << projected.output;
  auto ok = run_cli("validate " + proj);
  EXPECT_EQ(ok.code, 0) << ok.output;
  EXPECT_NE(ok.output.find(proj + ": valid"), std::string::npos) << ok.output;
  const std::string other = dir_ / "other.json";
  std::ofstream(other) << R"({"kind": "gpu_check", "steps": []})";
  auto foreign = run_cli("validate " + other);
  EXPECT_EQ(foreign.code, 1) << foreign.output;
  EXPECT_NE(foreign.output.find(other + ": not a ddpbench record: its \"kind\" is 'gpu_check'"),
            std::string::npos)
      << foreign.output;
  EXPECT_EQ(std::count(foreign.output.begin(), foreign.output.end(), '\n'), 1) << foreign.output;
}

TEST(EnvCommand, PrintsTheChecklist) {
  auto r = run_cli("env");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* needle : {"[X] CPU (oneDNN, OpenBLAS)", "[X] Gloo", "] CUDA", "] NCCL", "] NVTX",
                             "onednn:   oneDNN ", "openblas: ", "cpu: "}) {
    EXPECT_NE(r.output.find(needle), std::string::npos) << "missing '" << needle << "' in:\n"
                                                        << r.output;
  }
  auto bad = run_cli("env --bogus");
  EXPECT_EQ(bad.code, 2) << bad.output;
}

}  // namespace
