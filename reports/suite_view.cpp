#include "reports/suite_view.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <string_view>

#include "reports/comm_hooks_view.h"
#include "reports/flag_ledger.h"
#include "reports/loader_view.h"
#include "reports/projection_view.h"
#include "reports/report_util.h"
#include "reports/schema_validator.h"
#include "reports/sharding_view.h"
#include "reports/suite_charts.h"
#include "reports/verdict.h"

namespace ddpb::reports {
namespace {

using nlohmann::json;

std::string plural(size_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

std::string status_text(const SuiteRun& run) {
  return run.status ? std::string(enum_name(*run.status)) : "(no status)";
}

std::string or_unnamed(const std::optional<std::string>& s) {
  return s.value_or("(unnamed)");
}

// Why the correctness check of `run` went wrong, or nullopt when it passed or did not run.
std::optional<std::string> wrong_result(const SuiteRun& run) {
  if (!run.correctness || !run.correctness->passed || *run.correctness->passed) return std::nullopt;
  const CorrectnessInfo& c = *run.correctness;
  if (c.error) {
    // The check itself failed (unreadable parameters): not proven wrong, but not correct.
    return run.id + " could not be checked against " + or_unnamed(c.reference) + ": " + *c.error;
  }
  return run.id + " differs from its reference " + or_unnamed(c.reference) + ": " +
         c.metric.value_or("max_rel_diff") + " " + format_sci(c.verdict_difference()) +
         " over the threshold " + format_sci(c.threshold);
}

Banner make_banner(const SuiteRecord& suite, const std::vector<SchemaError>& schema) {
  Banner b;
  std::map<std::string, size_t> by_status;
  std::vector<std::string> wrong;
  size_t checked = 0, skipped = 0;
  for (const SuiteRun& r : suite.runs) {
    ++by_status[status_text(r)];
    if (r.correctness && r.correctness->passed) {
      ++checked;
      if (auto why = wrong_result(r)) wrong.push_back(*why);
    } else if (r.correctness && r.correctness->skipped) {
      ++skipped;
    }
  }
  const size_t ok = by_status["ok"];
  std::vector<std::string> headlines;
  if (!wrong.empty()) {
    headlines.push_back("WRONG RESULTS: " + plural(wrong.size(), "run") +
                        " failed the correctness check");
    b.details.insert(b.details.end(), wrong.begin(), wrong.end());
  }
  const size_t not_ok = suite.runs.size() - ok;
  if (not_ok > 0) {
    std::string what;
    for (const auto& [status, n] : by_status) {
      if (status != "ok") what += (what.empty() ? "" : ", ") + std::to_string(n) + " " + status;
    }
    headlines.push_back(plural(not_ok, "run") + " did not succeed (" + what + ")");
  }
  if (!suite.complete) {
    headlines.push_back("INCOMPLETE SUITE: still running, interrupted, or runs pending");
  }
  if (suite.runs.empty()) headlines.push_back("no runs recorded");
  if (!schema.empty()) {
    headlines.push_back("suite.json does not match its schema");
    b.details.push_back("schema: " + format_errors(schema));
  }
  b.loud = !headlines.empty();
  if (b.loud) {
    for (const auto& h : headlines) b.headline += (b.headline.empty() ? "" : "; ") + h;
  } else {
    b.headline = "Complete: " + plural(suite.runs.size(), "run") + ", all ok";
  }
  b.details.push_back(std::to_string(ok) + " of " + std::to_string(suite.runs.size()) +
                      " runs ok; correctness: " + std::to_string(checked) + " checked, " +
                      std::to_string(checked - wrong.size()) + " passed, " +
                      std::to_string(skipped) + " skipped");
  // On CPU, what the box is comes first: the answers below are about this box.
  if (std::string box = cpu_box_sentence(suite); !box.empty()) b.details.push_back(std::move(box));
  // Note [First-screen sentence]: the answer per workload, before any table.
  for (std::string& sentence : first_screen_sentences(suite))
    b.details.push_back(std::move(sentence));
  return b;
}

std::string correctness_cell(const SuiteRun& run) {
  if (!run.correctness) return "-";
  const CorrectnessInfo& c = *run.correctness;
  if (c.skipped) return "skipped: " + *c.skipped;
  const std::string verdict = c.passed ? (*c.passed ? "PASS" : "FAIL") : "?";
  // The number the verdict was made on (rel_l2_diff for suites; older records: max_rel_diff).
  return format_sci(c.verdict_difference()) + " " + verdict;
}

// Overlap applies to a design whose communication overlaps backward (DDP), with
// communication (world size > 1): DP reduces after backward by design, and one rank has
// nothing to overlap. "n/a" there, not 0%.
std::string overlap_text(const DesignInfo& design, const SuiteRun& run,
                         std::optional<double> overlap) {
  if (!design.overlaps_backward || run.world_size <= 1) return "n/a";
  return format_percent(overlap);
}

// Scaling efficiency at world size 1 is 100% by definition: "n/a".
std::string scaling_text(const SuiteRun& run, std::optional<double> efficiency) {
  if (run.world_size <= 1) return "n/a";
  return format_percent(efficiency);
}

bool has_pytorch(const SuiteRecord& suite) {
  return std::any_of(suite.runs.begin(), suite.runs.end(),
                     [](const SuiteRun& r) { return r.pytorch.has_value(); });
}

// The PyTorch columns of a run's summary row: its samples/s (or why there are none) and ours
// over theirs.
void add_pytorch_cells(const SuiteRun& r, std::optional<double> ours,
                       std::vector<std::string>& row) {
  if (!r.pytorch) {
    row.insert(row.end(), {"-", "-"});
    return;
  }
  const PytorchResult& p = *r.pytorch;
  row.push_back(p.status == "ok" || p.status.empty() ? format_number(p.samples_per_s) : p.status);
  const auto theirs = p.samples_per_s;
  row.push_back(ours && theirs && *theirs > 0 ? format_number(*ours / *theirs) : "-");
}

}  // namespace

TextTable summary_table(const SuiteRecord& suite) {
  const bool torch = has_pytorch(suite);
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
              "correctness (param diff)",
              "data"};
  if (torch) t.header.insert(t.header.end(), {"PyTorch samples/s", "ours / PyTorch"});
  for (const SuiteRun& r : suite.runs) {
    const RunMetrics* m = r.ok() && r.metrics ? &*r.metrics : nullptr;
    const auto value = [&](double v) { return m ? std::optional(v) : std::nullopt; };
    const auto samples = value(m ? m->samples_per_s : 0);
    std::vector<std::string> row = {
        r.id.empty() ? "(no id)" : r.id,
        r.group ? std::string(enum_name(*r.group)) : "",
        status_text(r),
        format_number(samples),
        format_number(value(m ? m->step_time_ms.median : 0)),
        format_number(value(m ? m->step_time_ms.p90 : 0)),
        overlap_text(suite.design_of(r), r, m ? m->overlap_ratio : std::nullopt),
        format_percent(m ? m->flop_fraction : std::nullopt),
        format_bytes(m ? run_peak_memory(r) : std::nullopt),
        scaling_text(r, m && r.scaling ? r.scaling->weak_efficiency : std::nullopt),
        correctness_cell(r),
        printable(run_dataset(r))};
    if (torch) add_pytorch_cells(r, samples, row);
    t.bad.push_back(!r.ok() || (r.correctness && r.correctness->passed == false));
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::string terminal_summary(const TextTable& table, const std::vector<std::string>& columns) {
  std::vector<size_t> index, width;
  for (const auto& name : columns) {
    const auto it = std::find(table.header.begin(), table.header.end(), name);
    if (it == table.header.end()) continue;  // e.g. the PyTorch columns of a suite without
    index.push_back(static_cast<size_t>(it - table.header.begin()));
    width.push_back(name.size());
  }
  for (const auto& row : table.rows)
    for (size_t c = 0; c < index.size(); ++c) width[c] = std::max(width[c], row[index[c]].size());
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < index.size(); ++c) {
      // The run id left-aligned, numbers right-aligned, as a terminal table reads.
      const std::string& cell = cells[index[c]];
      const std::string pad(width[c] - cell.size(), ' ');
      out += c == 0 ? cell + pad : "  " + pad + cell;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(table.header);
  for (const auto& row : table.rows) out += line(row);
  return out;
}

namespace {

TextTable make_failed(const SuiteRecord& suite) {
  TextTable t;
  t.header = {"run", "status", "error"};
  for (const SuiteRun& r : suite.runs) {
    const std::string id = r.id.empty() ? "(no id)" : r.id;
    if (!r.ok()) {
      const std::string none =
          r.status == RunStatus::Pending ? "(not run yet)" : "(no error recorded)";
      t.rows.push_back({id, status_text(r), r.error.value_or(none)});
      t.bad.push_back(true);
    }
    // A skipped PyTorch run (no such option there) is not a failure; its reason shows in the
    // summary's PyTorch column.
    if (r.pytorch && r.pytorch->status != "ok" && r.pytorch->status != "skipped") {
      t.rows.push_back({id + " (PyTorch)", r.pytorch->status, r.pytorch->error.value_or("-")});
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

SuiteView build_suite_view(const json& suite_json) {
  const SuiteRecord suite = SuiteRecord::from_json(suite_json);
  SuiteView v;
  v.title = "ddpbench suite: " + (suite.suite.name.empty() ? "(unnamed)" : suite.suite.name);
  const auto or_else = [](const std::string& s, const char* fallback) {
    return s.empty() ? std::string(fallback) : s;
  };
  v.meta = {or_else(suite.context.date, "(no date)"), or_else(suite.context.host, "(no host)"),
            "ddpbench " + or_else(suite.context.ddpbench_version, "?"),
            "commit " + suite.context.git_commit.value_or("?"),
            "device " + or_else(suite.suite.device, "?")};
  v.banner = make_banner(suite, validate_suite_record(suite_json));
  v.sections.push_back(build_verdict(suite));
  v.sections.push_back(build_projection_section(suite.projection));
  v.sections.push_back(build_comm_hooks_section(suite));
  v.sections.push_back(build_flag_ledger_section(suite));
  v.sections.push_back(build_sharding_section(suite));
  v.sections.push_back(build_loader_section(suite));
  v.summary = summary_table(suite);
  v.charts = build_suite_charts(suite);
  // The step anatomy (DP and DDP side by side, phases stacked, at each world size) goes under
  // the verdict, on the first screen, before the critical path: where the winner's time goes.
  if (const auto at = std::find_if(v.charts.begin(), v.charts.end(),
                                   [](const ChartView& c) { return c.id == "chart-phases"; });
      at != v.charts.end()) {
    auto& charts = v.sections.front().charts;
    charts.insert(charts.begin(), std::move(*at));
    v.charts.erase(at);
  }
  v.failed = make_failed(suite);
  v.config.header = v.context.header = {"key", "value"};
  // The blocks as the file holds them, every key shown.
  const auto block = [&](const char* key) -> const json* {
    if (!suite_json.is_object()) return nullptr;
    const auto it = suite_json.find(key);
    return it == suite_json.end() ? nullptr : &*it;
  };
  if (const json* s = block("suite")) flatten_into(*s, "", v.config);
  if (const json* g = block("gemm_peak")) flatten_into(*g, "gemm_peak", v.config);
  if (const json* c = block("context")) flatten_into(*c, "", v.context);
  return v;
}

}  // namespace ddpb::reports
