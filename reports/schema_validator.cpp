#include "reports/schema_validator.h"

#include <cmath>
#include <set>

#include "reports/collectives_schema_text.h"  // generated: kCollectivesSchemaText
#include "reports/json_io.h"
#include "reports/projection_schema_text.h"  // generated: kProjectionSchemaText
#include "reports/run_schema_text.h"         // generated: kRunSchemaText
#include "reports/suite_schema_text.h"       // generated: kSuiteSchemaText

namespace ddpb::reports {
namespace {

using nlohmann::json;

// "~" and "/" inside a key are escaped as in RFC 6901.
std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

// The JSON Schema name of a value's type; integral numbers are "integer".
std::string type_of(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "integer";
    case json::value_t::number_float:
      return "number";
    case json::value_t::string:
      return "string";
    case json::value_t::array:
      return "array";
    case json::value_t::object:
      return "object";
    default:
      return "unsupported";
  }
}

bool has_type(const json& v, const std::string& name) {
  if (name == "number") return v.is_number();
  // Draft 2020-12: a number with a zero fractional part is an integer (1.0 included).
  if (name == "integer") {
    return v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                     v.get<double>() == std::floor(v.get<double>()));
  }
  return type_of(v) == name;
}

std::string short_dump(const json& v) {
  // replace: a string holding invalid UTF-8 (possible in a document built in memory) must not
  // turn a validation message into a type_error.
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

class Validator {
 public:
  explicit Validator(const json& root) : root_(root) {}

  void check(const json& schema, const json& doc, const std::string& path, int depth) {
    if (depth > 64) throw ReportError("schema: $ref nesting deeper than 64 at " + path);
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) add(path, "not allowed here");
      return;
    }
    if (!schema.is_object())
      throw ReportError("schema: expected an object at document path " + path);
    for (auto& [key, value] : schema.items()) check_keyword(key, value);
    if (auto it = schema.find("$ref"); it != schema.end())
      check(resolve(*it), doc, path, depth + 1);
    if (auto it = schema.find("type"); it != schema.end() && !type_matches(*it, doc)) {
      add(path, "expected " + type_names(*it) + ", got " + type_of(doc));
      return;  // the remaining keywords would only repeat the same mistake
    }
    if (auto it = schema.find("const"); it != schema.end() && !equal(*it, doc)) {
      add(path, "expected " + short_dump(*it) + ", got " + short_dump(doc));
    }
    if (auto it = schema.find("enum"); it != schema.end()) {
      bool found = false;
      for (const auto& e : *it) found = found || equal(e, doc);
      if (!found) add(path, short_dump(doc) + " is not one of " + short_dump(*it));
    }
    if (auto it = schema.find("minimum");
        it != schema.end() && doc.is_number() && doc.get<double>() < it->get<double>()) {
      add(path, short_dump(doc) + " is below the minimum " + short_dump(*it));
    }
    if (doc.is_object()) check_object(schema, doc, path, depth);
    if (doc.is_array()) check_array(schema, doc, path, depth);
  }

  std::vector<SchemaError> take() { return std::move(errors_); }

 private:
  void check_object(const json& schema, const json& doc, const std::string& path, int depth) {
    if (auto it = schema.find("required"); it != schema.end()) {
      for (const auto& key : *it) {
        if (!doc.contains(key.get<std::string>()))
          add(path, "missing required key '" + key.get<std::string>() + "'");
      }
    }
    const json* props = schema.contains("properties") ? &schema["properties"] : nullptr;
    const json* extra =
        schema.contains("additionalProperties") ? &schema["additionalProperties"] : nullptr;
    for (auto& [key, value] : doc.items()) {
      const std::string child = path + "/" + pointer_token(key);
      if (props && props->contains(key)) {
        check((*props)[key], value, child, depth);
      } else if (extra && extra->is_boolean()) {
        if (!extra->get<bool>()) add(child, "unexpected key");
      } else if (extra) {
        check(*extra, value, child, depth);
      }
    }
  }

  void check_array(const json& schema, const json& doc, const std::string& path, int depth) {
    if (auto it = schema.find("minItems"); it != schema.end() && doc.size() < it->get<size_t>()) {
      add(path, "expected at least " + std::to_string(it->get<size_t>()) + " items, got " +
                    std::to_string(doc.size()));
    }
    if (auto it = schema.find("items"); it != schema.end()) {
      for (size_t i = 0; i < doc.size(); ++i)
        check(*it, doc[i], path + "/" + std::to_string(i), depth);
    }
  }

  // Rejects unknown keywords and values of the wrong shape ("required": "a" would otherwise
  // iterate as a one-element array and look fine).
  static void check_keyword(const std::string& key, const json& value) {
    auto bad = [&](const char* want) {
      throw ReportError("schema: '" + key + "' must be " + want + ", got " + short_dump(value));
    };
    if (!kKnown.count(key)) throw ReportError("schema: unsupported keyword '" + key + "'");
    if (key == "type") {
      static const std::set<std::string> kTypes = {"null",   "boolean", "integer", "number",
                                                   "string", "array",   "object"};
      auto is_type = [&](const json& t) {
        return t.is_string() && kTypes.count(t.get<std::string>());
      };
      if (is_type(value)) return;
      if (!value.is_array() || value.empty()) bad("a type name or a non-empty array of them");
      for (const auto& t : value) {
        if (!is_type(t)) bad("a type name or a non-empty array of them");
      }
    } else if (key == "required") {
      if (!value.is_array()) bad("an array of strings");
      for (const auto& k : value) {
        if (!k.is_string()) bad("an array of strings");
      }
    } else if (key == "properties" || key == "$defs") {
      if (!value.is_object()) bad("an object");
    } else if (key == "additionalProperties" || key == "items") {
      if (!value.is_object() && !value.is_boolean()) bad("a schema or a boolean");
    } else if (key == "enum") {
      if (!value.is_array()) bad("an array");
    } else if (key == "minimum") {
      if (!value.is_number()) bad("a number");
    } else if (key == "minItems") {
      if (!value.is_number_unsigned() &&
          !(value.is_number_integer() && value.get<int64_t>() >= 0)) {
        bad("a non-negative integer");
      }
    }
  }

  const json& resolve(const json& ref) const {
    const std::string prefix = "#/$defs/";
    if (!ref.is_string() || ref.get<std::string>().rfind(prefix, 0) != 0) {
      throw ReportError("schema: unsupported $ref " + short_dump(ref) + " (only #/$defs/NAME)");
    }
    const std::string name = ref.get<std::string>().substr(prefix.size());
    if (!root_.contains("$defs") || !root_["$defs"].contains(name)) {
      throw ReportError("schema: $ref to undefined " + ref.get<std::string>());
    }
    return root_["$defs"][name];
  }

  static bool type_matches(const json& type, const json& doc) {
    if (type.is_string()) return has_type(doc, type.get<std::string>());
    for (const auto& t : type) {
      if (has_type(doc, t.get<std::string>())) return true;
    }
    return false;
  }

  static std::string type_names(const json& type) {
    if (type.is_string()) return type.get<std::string>();
    std::string out;
    for (const auto& t : type) out += (out.empty() ? "" : " or ") + t.get<std::string>();
    return out;
  }

  // JSON Schema equality: 1 and 1.0 are the same number.
  static bool equal(const json& a, const json& b) {
    if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
    return a == b;
  }

  void add(const std::string& path, std::string message) {
    errors_.push_back({path, std::move(message)});
  }

  inline static const std::set<std::string> kKnown = {
      "$schema", "$id",  "$comment", "title",    "description", "default",
      "$defs",   "$ref", "type",     "required", "properties",  "additionalProperties",
      "items",   "enum", "const",    "minimum",  "minItems"};

  const json& root_;
  std::vector<SchemaError> errors_;
};

}  // namespace

std::string SchemaError::str() const {
  return (path.empty() ? "(root)" : path) + ": " + message;
}

std::vector<SchemaError> validate_schema(const nlohmann::json& schema, const nlohmann::json& doc) {
  Validator v(schema);
  try {
    v.check(schema, doc, "", 0);
  } catch (const json::exception& e) {
    // A keyword with the wrong shape (e.g. "required": "x"): the schema is broken, not the doc.
    throw ReportError(std::string("schema: malformed keyword value: ") + e.what());
  }
  return v.take();
}

const nlohmann::json& run_record_schema() {
  static const nlohmann::json schema = nlohmann::json::parse(kRunSchemaText);
  return schema;
}

namespace {

// Note [Designs in records]: what a schema cannot say, that a run names its design's row. A
// run record's config.mode is its design's name; a suite's runs each name a row of its
// designs (a mode outside them would read as a design with no traits, and its runs would fall
// out of the verdict and the charts without a word).
void check_design_names(const nlohmann::json& record, std::vector<SchemaError>& errors) {
  if (!record.is_object() || !record.contains("designs") || !record["designs"].is_array() ||
      !record.contains("runs") || !record["runs"].is_array())
    return;
  std::set<std::string> names;
  for (const auto& d : record["designs"])
    if (d.is_object() && d.contains("name") && d["name"].is_string())
      names.insert(d["name"].get<std::string>());
  for (size_t i = 0; i < record["runs"].size(); ++i) {
    const nlohmann::json& run = record["runs"][i];
    if (!run.is_object() || !run.contains("mode") || !run["mode"].is_string()) continue;
    const std::string mode = run["mode"].get<std::string>();
    if (!names.count(mode))
      errors.push_back(
          {"/runs/" + std::to_string(i) + "/mode", "\"" + mode + "\" names no row of \"designs\""});
  }
}

void check_run_design(const nlohmann::json& record, std::vector<SchemaError>& errors) {
  if (!record.is_object() || !record.contains("config") || !record.contains("design")) return;
  const nlohmann::json &config = record["config"], &design = record["design"];
  if (!config.is_object() || !design.is_object() || !config.contains("mode") ||
      !design.contains("name"))
    return;
  if (config["mode"] != design["name"])
    errors.push_back({"/design/name", design["name"].dump() + " is not the design config.mode " +
                                          "names (" + config["mode"].dump() + ")"});
}

}  // namespace

std::vector<SchemaError> validate_run_record(const nlohmann::json& record) {
  auto errors = validate_schema(run_record_schema(), record);
  check_run_design(record, errors);
  return errors;
}

const nlohmann::json& suite_record_schema() {
  static const nlohmann::json schema = nlohmann::json::parse(kSuiteSchemaText);
  return schema;
}

std::vector<SchemaError> validate_suite_record(const nlohmann::json& record) {
  auto errors = validate_schema(suite_record_schema(), record);
  check_design_names(record, errors);
  if (record.is_object() && record.contains("projection") && record["projection"].is_object()) {
    for (auto e : validate_schema(projection_record_schema(), record["projection"])) {
      e.path = "/projection" + e.path;
      errors.push_back(std::move(e));
    }
  }
  return errors;
}

const nlohmann::json& projection_record_schema() {
  static const nlohmann::json schema = nlohmann::json::parse(kProjectionSchemaText);
  return schema;
}

std::vector<SchemaError> validate_projection_record(const nlohmann::json& record) {
  return validate_schema(projection_record_schema(), record);
}

const nlohmann::json& collectives_record_schema() {
  static const nlohmann::json schema = nlohmann::json::parse(kCollectivesSchemaText);
  return schema;
}

std::vector<SchemaError> validate_collectives_record(const nlohmann::json& record) {
  return validate_schema(collectives_record_schema(), record);
}

std::string format_errors(const std::vector<SchemaError>& errors, size_t max_listed) {
  std::string out =
      std::to_string(errors.size()) + (errors.size() == 1 ? " problem: " : " problems: ");
  for (size_t i = 0; i < errors.size() && i < max_listed; ++i)
    out += (i ? "; " : "") + errors[i].str();
  if (errors.size() > max_listed) out += "; ...";
  return out;
}

namespace {
void check_run_record(const nlohmann::json& doc, const std::string& name) {
  check_schema_version(doc, name);
  const auto errors = validate_run_record(doc);
  if (!errors.empty())
    throw ReportError(name + " does not match the run-record schema: " + format_errors(errors));
}
}  // namespace

void validate_report_file(const std::string& path, size_t max_bytes) {
  check_run_record(read_json(path, max_bytes), path);
}

nlohmann::json validate_report_text(const std::string& text, const std::string& name) {
  nlohmann::json doc = parse_report_text(text, name);
  check_run_record(doc, name);
  return doc;
}

void check_schema_version(const nlohmann::json& doc, const std::string& name) {
  if (!doc.is_object() || !doc.contains("schema_version")) return;  // the schema says more
  const nlohmann::json& v = doc["schema_version"];
  if (!v.is_number_integer() || v.get<int64_t>() == kSchemaVersion) return;
  throw ReportError(name + ": a record of schema version " + std::to_string(v.get<int64_t>()) +
                    ", and this ddpbench reads version " + std::to_string(kSchemaVersion) +
                    " only (docs/records.md \"Versions\": run it again, or use the ddpbench "
                    "that wrote it)");
}

nlohmann::json read_record_file(const std::string& path, size_t max_bytes) {
  nlohmann::json doc = read_json(path, max_bytes);
  const nlohmann::json* kind = doc.is_object() && doc.contains("kind") ? &doc["kind"] : nullptr;
  if (kind && *kind == "run") {
    check_run_record(doc, path);
  } else if (kind && *kind == "suite") {
    check_schema_version(doc, path);
    const auto errors = validate_suite_record(doc);
    if (!errors.empty()) {
      throw ReportError(path + " does not match the suite-record schema: " + format_errors(errors));
    }
  } else {
    throw ReportError(path + " is neither a run nor a suite record (\"kind\" is " +
                      (kind ? short_dump(*kind) : std::string("missing")) + ")");
  }
  return doc;
}

}  // namespace ddpb::reports
