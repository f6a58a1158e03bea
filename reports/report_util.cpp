#include "reports/report_util.h"

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

namespace {

// The code point of a bidirectional control at text[i] (U+200E, U+200F, U+202A..U+202E,
// U+2066..U+2069, three bytes in UTF-8), else 0.
int bidi_control(std::string_view text, size_t i) {
  if (i + 2 >= text.size() || static_cast<unsigned char>(text[i]) != 0xe2) return 0;
  const auto b1 = static_cast<unsigned char>(text[i + 1]);
  const auto b2 = static_cast<unsigned char>(text[i + 2]);
  const int cp = 0x2000 | ((b1 & 0x3f) << 6) | (b2 & 0x3f);
  const bool bidi = cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
                    (cp >= 0x2066 && cp <= 0x2069);
  return (b1 & 0xc0) == 0x80 && (b2 & 0xc0) == 0x80 && bidi ? cp : 0;
}

}  // namespace

std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else if (c == 0xc2 && i + 1 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      const auto c1 = static_cast<unsigned char>(text[++i]);
      out += "\\u00";
      out += kHex[c1 >> 4];
      out += kHex[c1 & 15];
    } else if (const int bidi = bidi_control(text, i); bidi != 0) {
      // Issue 48, P21: U+202E and its kin reorder what follows on the terminal.
      out += fmt::format("\\u{:04x}", bidi);
      i += 2;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
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
