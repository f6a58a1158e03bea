#include "reports/report_util.h"

#include "base/printable.h"
#include "reports/json_io.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

namespace ddpb::reports {

using nlohmann::json;

const json* find_at(const json& root, std::initializer_list<const char*> path) {
  const json* node = &root;
  for (const char* key : path) {
    if (!node->is_object()) return nullptr;
    auto it = node->find(key);
    if (it == node->end()) return nullptr;
    node = &*it;
  }
  return node;
}

std::string string_at(const json& root, std::initializer_list<const char*> path,
                      const std::string& fallback) {
  const json* v = find_at(root, path);
  return v && v->is_string() ? v->get<std::string>() : fallback;
}

std::optional<double> run_bucket_cap_mb(const SuiteRun& run) {
  // Note [Typed run configuration]: the cap the run was given; none for the autotuned run,
  // whose cap the warm-up chose (metrics.bucket_autotune says which).
  const RunConfigInfo& c = run.run_config();
  if (c.bucket_cap_auto || c.bucket_cap_mb <= 0) return std::nullopt;
  return c.bucket_cap_mb;
}

std::optional<double> run_peak_memory(const SuiteRun& run) {
  if (!run.metrics) return std::nullopt;
  if (run.metrics->peak_memory_bytes) return static_cast<double>(*run.metrics->peak_memory_bytes);
  if (!run.metrics->memory || run.metrics->memory->empty()) return std::nullopt;
  return static_cast<double>(peak_memory_bytes(*run.metrics->memory));
}

std::optional<double> median(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::string safe_dump(const json& value) {
  return json_text(value);
}

std::string format_number(std::optional<double> v) {
  if (!v) return "-";
  const double a = std::fabs(*v);
  if (a >= 1e7) return fmt::format("{:.3e}", *v);
  if (a >= 1000) return fmt::format("{:.0f}", *v);
  if (a >= 100) return fmt::format("{:.1f}", *v);
  if (a >= 10) return fmt::format("{:.2f}", *v);
  if (a >= 1) return fmt::format("{:.3f}", *v);
  return fmt::format("{:.4g}", *v);
}

std::string format_percent(std::optional<double> fraction) {
  if (!fraction) return "-";
  return fmt::format("{:.1f}%", *fraction * 100);
}

std::string format_bytes(std::optional<double> bytes) {
  if (!bytes) return "-";
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = *bytes;
  size_t unit = 0;
  while (std::fabs(v) >= 1024 && unit + 1 < std::size(kUnits)) {
    v /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f} B", v) : fmt::format("{:.1f} {}", v, kUnits[unit]);
}

std::string format_sci(std::optional<double> v) {
  if (!v) return "-";
  return fmt::format("{:.1e}", *v);
}

std::string printable(std::string_view text) {
  return ddpb::printable(text);
}

std::string rank_name(const std::optional<std::vector<HostRecord>>& hosts, int64_t rank) {
  std::string name = "rank " + std::to_string(rank);
  if (!hosts || hosts->size() < 2) return name;
  for (const HostRecord& h : *hosts) {
    if (std::find(h.ranks.begin(), h.ranks.end(), rank) != h.ranks.end()) {
      return name + " on host " + printable(h.name);
    }
  }
  return name;
}

std::string rank_name(const std::vector<RankRecord>& ranks, int64_t rank) {
  std::string name = "rank " + std::to_string(rank);
  const auto differs = [&](const RankRecord& r) { return r.host != ranks.front().host; };
  const auto it =
      std::find_if(ranks.begin(), ranks.end(), [&](const RankRecord& r) { return r.rank == rank; });
  if (ranks.empty() || it == ranks.end() || !it->host ||
      std::none_of(ranks.begin(), ranks.end(), differs)) {
    return name;
  }
  return name + " on host " + printable(*it->host);
}

}  // namespace ddpb::reports
