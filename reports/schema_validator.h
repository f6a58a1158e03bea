// A small JSON Schema validator for the subset our report schemas use, and the checks that a
// record matches the run-record schema (reports/schema/run.schema.json) or the suite schema
// (reports/schema/suite.schema.json, docs/suite-format.md). Both are embedded into this library
// at build time so installed binaries need no source tree.
//
// Supported keywords (draft 2020-12 meaning): type (a name or an array of names, "integer"
// included), required, properties, additionalProperties (bool or a schema), items (one schema
// for every element), enum, const, minimum, minItems, and $ref to "#/$defs/NAME". Annotations
// ($schema, $id, $comment, title, description, default, $defs) are ignored. Any other keyword
// is a schema bug and throws ReportError: a validator that skipped an unknown keyword would
// quietly accept documents the schema author meant to reject.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddpb::reports {

// One problem: a JSON pointer into the document ("" is the root) and what is wrong there.
struct SchemaError {
  std::string path;
  std::string message;
  // "/summary/step_time_ms/median: expected number, got string"
  std::string str() const;
};

// Checks `doc` against `schema` (the root schema, which holds $defs). Returns every problem in
// document order; empty means valid. Below a node whose type is wrong nothing more is checked,
// so one mistake gives one error. Throws ReportError for an unsupported or malformed schema.
std::vector<SchemaError> validate_schema(const nlohmann::json& schema, const nlohmann::json& doc);

// The run-record schema (`ddpbench run --out`), parsed once from the embedded copy.
const nlohmann::json& run_record_schema();
// validate_schema(run_record_schema(), record).
std::vector<SchemaError> validate_run_record(const nlohmann::json& record);

// The suite-record schema (`ddpbench suite`: DIR/suite.json), parsed once from the embedded copy.
const nlohmann::json& suite_record_schema();
// validate_schema(suite_record_schema(), record).
std::vector<SchemaError> validate_suite_record(const nlohmann::json& record);

// The projection schema (`ddpbench project --json`, suite.json's "projection").
const nlohmann::json& projection_record_schema();
std::vector<SchemaError> validate_projection_record(const nlohmann::json& record);

// The collectives schema (`ddpbench collectives -J FILE`).
const nlohmann::json& collectives_record_schema();
std::vector<SchemaError> validate_collectives_record(const nlohmann::json& record);

// "N problems: first; second; ..." with at most `max_listed` problems spelled out.
std::string format_errors(const std::vector<SchemaError>& errors, size_t max_listed = 5);

// Reads `path` with read_json (size limit `max_bytes`) and validates it as a run record. Throws
// ReportError naming the file: unreadable, not JSON, or (with the first problems) invalid.
void validate_report_file(const std::string& path, size_t max_bytes = size_t{1} << 30);
// As validate_report_file(), on report text held in memory; errors name `name`. Returns the
// parsed record.
nlohmann::json validate_report_text(const std::string& text, const std::string& name);

// Refuses a record of another schema version (docs/records.md "Versions"): throws ReportError
// naming `name` and both versions. A record without an integer schema_version passes (the schema
// validator then says what is wrong).
void check_schema_version(const nlohmann::json& doc, const std::string& name);

// Reads `path` and validates it against the schema its "kind" names: "run" or "suite". Throws
// ReportError naming the file: unreadable, not JSON (truncated included), an unknown kind, or
// (with the first problems) invalid. Returns the parsed record. For the report and compare
// commands, which take either kind.
nlohmann::json read_record_file(const std::string& path, size_t max_bytes = size_t{1} << 30);

}  // namespace ddpb::reports
