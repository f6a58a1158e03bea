// Helpers shared by the suite report (html_report, suite_view, suite_charts) and compare: what
// a suite run's arguments say, a null-safe read of a record's kind before its type is
// known (compare), and the number formats of every table. Renderers never throw on a
// missing or mistyped field: they read it as absent (Note [One field list per record type]).
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/suite_record.h"

namespace ddpb::reports {

// The value at `path` below `root` (object keys), or nullptr when a key is missing or a node on
// the way is not an object.
const nlohmann::json* find_at(const nlohmann::json& root, std::initializer_list<const char*> path);
// The string at `path`, or `fallback` when missing or not a string.
std::string string_at(const nlohmann::json& root, std::initializer_list<const char*> path,
                      const std::string& fallback = "");

// The bucket cap of a run of a design with buckets, in MB: its configuration's
// (Note [Typed run configuration]; 25, ddpbench's default, for a run that set none), and none
// for a --bucket-cap-mb auto run.
std::optional<double> run_bucket_cap_mb(const SuiteRun& run);
// Peak bytes of a run: metrics.peak_memory_bytes, else the largest metrics.memory[].peak_bytes.
std::optional<double> run_peak_memory(const SuiteRun& run);

// The median of `values` (the mean of the middle two for an even count), nullopt when empty.
std::optional<double> median(std::vector<double> values);

// Compact JSON text that never throws (invalid UTF-8 in a string built in memory is replaced).
std::string safe_dump(const nlohmann::json& value);

// Record text made safe for a terminal and for Markdown (issue 25, S2): base/printable.h's
// ddpb::printable, so that a run id from an untrusted suite.json cannot clear a screen, move
// the cursor or reorder a line.
std::string printable(std::string_view text);

// "rank 3", or "rank 3 on host b" once `hosts` holds more than one (Note [Hosts in records]).
// The host's name passes through printable: it came from another machine.
std::string rank_name(const std::optional<std::vector<HostRecord>>& hosts, int64_t rank);
// The same from the merged ranks[] (their host fields).
std::string rank_name(const std::vector<RankRecord>& ranks, int64_t rank);

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
