// Helpers shared by the suite report (html_report, suite_view, suite_charts) and compare:
// null-safe reads of records that may be partial or malformed, and the number formats of every
// table. Renderers never throw on a missing or mistyped field: they read it as absent.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddpb::reports {

// The value at `path` below `root` (object keys), or nullptr when a key is missing or a node on
// the way is not an object.
const nlohmann::json* find_at(const nlohmann::json& root, std::initializer_list<const char*> path);
// The finite number at `path`, or nullopt (missing, not a number, NaN/inf).
std::optional<double> number_at(const nlohmann::json& root,
                                std::initializer_list<const char*> path);
// The string at `path`, or `fallback` when missing or not a string.
std::string string_at(const nlohmann::json& root, std::initializer_list<const char*> path,
                      const std::string& fallback = "");

// The runs[] of a suite record that are objects, in record order.
std::vector<const nlohmann::json*> suite_runs(const nlohmann::json& suite);
// status == "ok".
bool run_ok(const nlohmann::json& run);
// The value after `flag` in run.args ("--bucket-cap-mb" -> "25"), or nullopt.
std::optional<std::string> run_arg(const nlohmann::json& run, const std::string& flag);
// Workloads in report order: suite.workloads first, then any other workload seen in runs[].
std::vector<std::string> suite_workloads(const nlohmann::json& suite);
// The run's world_size, or 0 when missing or not an integer.
int run_world_size(const nlohmann::json& run);
// The bucket cap of a DDP run in MB: its --bucket-cap-mb argument, else the number in a
// "bucket-<X>mb" variant, else 25 (ddpbench's default) for a run without a variant.
std::optional<double> run_bucket_cap_mb(const nlohmann::json& run);
// Peak bytes of a run: metrics.peak_memory_bytes, else the largest metrics.memory[].peak_bytes.
std::optional<double> run_peak_memory(const nlohmann::json& run);

// Compact JSON text that never throws (invalid UTF-8 in a string built in memory is replaced).
std::string safe_dump(const nlohmann::json& value);

// Record text made safe for a terminal and for Markdown (issue 25, S2): every control
// character (C0, DEL, and C1 as UTF-8) becomes visible as \xNN or \u00NN, so that a run id
// from an untrusted suite.json cannot clear a screen or move the cursor. Every other byte is
// kept as it is.
std::string printable(std::string_view text);

// Table formats. Every one returns "-" for nullopt so a missing value reads as missing.
// 4 significant digits without exponent for everyday sizes: 5000, 123.4, 1.235, 0.01234.
std::string format_number(std::optional<double> v);
// 0.66 -> "66.0%".
std::string format_percent(std::optional<double> fraction);
// Bytes in binary units: "512 B", "3.2 MiB".
std::string format_bytes(std::optional<double> bytes);
// A relative difference: "3.0e-07".
std::string format_sci(std::optional<double> v);

}  // namespace ddpb::reports
