#include "reports/suite_view.h"

#include <fmt/core.h>

#include <cmath>
#include <iterator>
#include <map>
#include <string_view>

#include "reports/comm_hooks_view.h"
#include "reports/projection_view.h"
#include "reports/report_util.h"
#include "reports/schema_validator.h"
#include "reports/suite_charts.h"
#include "reports/verdict.h"

namespace ddpb::reports {
namespace {

using nlohmann::json;

std::string plural(size_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

Banner make_banner(const json& suite) {
  Banner b;
  const auto runs = suite_runs(suite);
  std::map<std::string, size_t> by_status;
  std::vector<std::string> wrong;
  size_t checked = 0, skipped = 0;
  for (const json* r : runs) {
    ++by_status[string_at(*r, {"status"}, "(no status)")];
    const json* passed = find_at(*r, {"correctness", "passed"});
    if (passed && passed->is_boolean()) {
      ++checked;
      if (!passed->get<bool>() && find_at(*r, {"correctness", "error"})) {
        // The check itself failed (unreadable parameters): not proven wrong, but not correct.
        wrong.push_back(string_at(*r, {"id"}) + " could not be checked against " +
                        string_at(*r, {"correctness", "reference"}, "(unnamed)") + ": " +
                        string_at(*r, {"correctness", "error"}, "(no reason)"));
      } else if (!passed->get<bool>()) {
        const std::string metric = string_at(*r, {"correctness", "metric"}, "max_rel_diff");
        wrong.push_back(string_at(*r, {"id"}) + " differs from its reference " +
                        string_at(*r, {"correctness", "reference"}, "(unnamed)") + ": " + metric +
                        " " + format_sci(number_at(*r, {"correctness", metric.c_str()})) +
                        " over the threshold " +
                        format_sci(number_at(*r, {"correctness", "threshold"})));
      }
    } else if (find_at(*r, {"correctness", "skipped"})) {
      ++skipped;
    }
  }
  const size_t ok = by_status["ok"];
  const json* complete = find_at(suite, {"complete"});
  const bool is_complete = complete && complete->is_boolean() && complete->get<bool>();
  const auto schema = validate_suite_record(suite);

  std::vector<std::string> headlines;
  if (!wrong.empty()) {
    headlines.push_back("WRONG RESULTS: " + plural(wrong.size(), "run") +
                        " failed the correctness check");
    b.details.insert(b.details.end(), wrong.begin(), wrong.end());
  }
  const size_t not_ok = runs.size() - ok;
  if (not_ok > 0) {
    std::string what;
    for (const auto& [status, n] : by_status) {
      if (status != "ok") what += (what.empty() ? "" : ", ") + std::to_string(n) + " " + status;
    }
    headlines.push_back(plural(not_ok, "run") + " did not succeed (" + what + ")");
  }
  if (!is_complete) {
    headlines.push_back("INCOMPLETE SUITE: still running, interrupted, or runs pending");
  }
  if (runs.empty()) headlines.push_back("no runs recorded");
  if (!schema.empty()) {
    headlines.push_back("suite.json does not match its schema");
    b.details.push_back("schema: " + format_errors(schema));
  }
  b.loud = !headlines.empty();
  if (b.loud) {
    for (const auto& h : headlines) b.headline += (b.headline.empty() ? "" : "; ") + h;
  } else {
    b.headline = "Complete: " + plural(runs.size(), "run") + ", all ok";
  }
  b.details.push_back(std::to_string(ok) + " of " + std::to_string(runs.size()) +
                      " runs ok; correctness: " + std::to_string(checked) + " checked, " +
                      std::to_string(checked - wrong.size()) + " passed, " +
                      std::to_string(skipped) + " skipped");
  return b;
}

std::string correctness_cell(const json& run) {
  const json* c = find_at(run, {"correctness"});
  if (!c) return "-";
  if (const json* s = find_at(*c, {"skipped"})) {
    return "skipped" + (s->is_string() ? ": " + s->get<std::string>() : std::string());
  }
  const json* passed = find_at(*c, {"passed"});
  const std::string verdict =
      passed && passed->is_boolean() ? (passed->get<bool>() ? "PASS" : "FAIL") : "?";
  // The number the verdict was made on (rel_l2_diff for suites; older records: max_rel_diff).
  const std::string metric = string_at(*c, {"metric"}, "max_rel_diff");
  return format_sci(number_at(*c, {metric.c_str()})) + " " + verdict;
}

// Overlap applies to DDP with communication (world size > 1) only: DP reduces after backward
// by design, and one rank has nothing to overlap. "n/a" there, not 0%.
std::string overlap_text(const json& run, std::optional<double> overlap) {
  if (string_at(run, {"mode"}) != "ddp" || run_world_size(run) <= 1) return "n/a";
  return format_percent(overlap);
}

// Scaling efficiency at world size 1 is 100% by definition: "n/a".
std::string scaling_text(const json& run, std::optional<double> efficiency) {
  if (run_world_size(run) <= 1) return "n/a";
  return format_percent(efficiency);
}

bool has_pytorch(const std::vector<const json*>& runs) {
  for (const json* r : runs) {
    if (find_at(*r, {"pytorch"})) return true;
  }
  return false;
}

TextTable make_summary(const json& suite) {
  const auto runs = suite_runs(suite);
  const bool torch = has_pytorch(runs);
  TextTable t;
  t.header = {"run",
              "group",
              "status",
              "samples/s",
              "median ms",
              "p90 ms",
              "overlap",
              "FLOP frac",
              "peak mem",
              "weak eff",
              "correctness (param diff)"};
  if (torch) t.header.insert(t.header.end(), {"PyTorch samples/s", "ours / PyTorch"});
  for (const json* r : runs) {
    const bool ok = run_ok(*r);
    auto metric = [&](std::initializer_list<const char*> path) {
      return ok ? number_at(*r, path) : std::nullopt;
    };
    std::vector<std::string> row = {string_at(*r, {"id"}, "(no id)"),
                                    string_at(*r, {"group"}),
                                    string_at(*r, {"status"}, "(no status)"),
                                    format_number(metric({"metrics", "samples_per_s"})),
                                    format_number(metric({"metrics", "step_time_ms", "median"})),
                                    format_number(metric({"metrics", "step_time_ms", "p90"})),
                                    overlap_text(*r, metric({"metrics", "overlap_ratio"})),
                                    format_percent(metric({"metrics", "flop_fraction"})),
                                    format_bytes(ok ? run_peak_memory(*r) : std::nullopt),
                                    scaling_text(*r, metric({"scaling", "weak_efficiency"})),
                                    correctness_cell(*r)};
    if (torch) {
      const auto theirs = number_at(*r, {"pytorch", "samples_per_s"});
      const auto ours = metric({"metrics", "samples_per_s"});
      const std::string status = string_at(*r, {"pytorch", "status"});
      row.push_back(!find_at(*r, {"pytorch"})          ? "-"
                    : status == "ok" || status.empty() ? format_number(theirs)
                                                       : status);
      row.push_back(ours && theirs && *theirs > 0 ? format_number(*ours / *theirs) : "-");
    }
    const json* passed = find_at(*r, {"correctness", "passed"});
    t.bad.push_back(!ok || (passed && passed->is_boolean() && !passed->get<bool>()));
    t.rows.push_back(std::move(row));
  }
  return t;
}

TextTable make_failed(const json& suite) {
  TextTable t;
  t.header = {"run", "status", "error"};
  for (const json* r : suite_runs(suite)) {
    const std::string id = string_at(*r, {"id"}, "(no id)");
    if (!run_ok(*r)) {
      const std::string status = string_at(*r, {"status"}, "(no status)");
      const std::string none = status == "pending" ? "(not run yet)" : "(no error recorded)";
      t.rows.push_back({id, status, string_at(*r, {"error"}, none)});
      t.bad.push_back(true);
    }
    // A skipped PyTorch run (no such option there) is not a failure; its reason shows in the
    // summary's PyTorch column.
    const std::string torch = string_at(*r, {"pytorch", "status"}, "ok");
    if (torch != "ok" && torch != "skipped") {
      t.rows.push_back({id + " (PyTorch)", torch, string_at(*r, {"pytorch", "error"}, "-")});
      t.bad.push_back(false);  // the PyTorch side is a comparison, not our result
    }
  }
  return t;
}

}  // namespace

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A scalar as a reader wants it: numbers with 4 significant digits, and a unit where the key
// names one (bytes, FLOPs, FLOP/s); integers that are counts stay exact.
std::string scalar_text(const std::string& key, const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_number() || v.is_boolean()) return safe_dump(v);
  const double x = v.get<double>();
  if (ends_with(key, "bytes")) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double scaled = x;
    size_t u = 0;
    while (std::fabs(scaled) >= 1024 && u + 1 < std::size(units)) scaled /= 1024, ++u;
    return u == 0 ? safe_dump(v) : fmt::format("{:.4g} {}", scaled, units[u]);
  }
  if (key.find("flops") != std::string::npos) {
    const bool rate = key.find("per_s") != std::string::npos;
    return fmt::format("{:.4g} {}", x / 1e9, rate ? "GFLOP/s" : "GFLOP");
  }
  if (v.is_number_integer() || v.is_number_unsigned()) return safe_dump(v);
  return fmt::format("{:.4g}", x);
}

}  // namespace

// Arrays of objects are flattened element by element (key[i].field), at most kMaxElements
// of them, so that no cell holds a JSON blob.
void flatten_into(const json& value, const std::string& prefix, TextTable& table) {
  constexpr size_t kMaxElements = 16;
  auto add = [&](const std::string& v) {
    table.rows.push_back({prefix, v});
    table.bad.push_back(false);
  };
  if (value.is_object()) {
    if (value.empty()) add("{}");
    for (const auto& [k, v] : value.items())
      flatten_into(v, prefix.empty() ? k : prefix + "." + k, table);
  } else if (value.is_array()) {
    bool scalars = true;
    for (const auto& v : value) scalars = scalars && !v.is_structured();
    if (!scalars) {
      for (size_t i = 0; i < value.size() && i < kMaxElements; ++i)
        flatten_into(value[i], prefix + "[" + std::to_string(i) + "]", table);
      if (value.size() > kMaxElements)
        add("(" + std::to_string(value.size() - kMaxElements) + " more)");
      return;
    }
    std::string joined;
    for (const auto& v : value) joined += (joined.empty() ? "" : ", ") + scalar_text(prefix, v);
    add(joined.empty() ? "(none)" : joined);
  } else {
    add(scalar_text(prefix, value));
  }
}

SuiteView build_suite_view(const json& suite) {
  SuiteView v;
  v.title = "ddpbench suite: " + string_at(suite, {"suite", "name"}, "(unnamed)");
  v.banner = make_banner(suite);
  v.sections.push_back(build_verdict(suite));
  const json* projection = find_at(suite, {"projection"});
  v.sections.push_back(build_projection_section(projection ? *projection : json()));
  v.sections.push_back(build_comm_hooks_section(suite));
  v.summary = make_summary(suite);
  v.charts = build_suite_charts(suite);
  v.failed = make_failed(suite);
  v.config.header = v.context.header = {"key", "value"};
  if (const json* s = find_at(suite, {"suite"})) flatten_into(*s, "", v.config);
  if (const json* g = find_at(suite, {"gemm_peak"})) flatten_into(*g, "gemm_peak", v.config);
  if (const json* c = find_at(suite, {"context"})) flatten_into(*c, "", v.context);
  return v;
}

}  // namespace ddpb::reports
