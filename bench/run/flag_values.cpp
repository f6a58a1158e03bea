#include "bench/run/flag_values.h"

#include <fmt/core.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "core/check.h"

namespace ddpb::bench {
namespace {

[[noreturn]] void out_of_range(const std::string& flag, const std::string& text,
                               const std::string& range) {
  throw UsageError(flag + " must be " + range + ", got '" + text + "'");
}

}  // namespace

int64_t parse_int_flag(const std::string& flag, const std::string& text, int64_t lo, int64_t hi) {
  const std::string range = fmt::format("an integer from {} to {}", lo, hi);
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < lo || value > hi)
    out_of_range(flag, text, range);
  return value;
}

double parse_real_flag(const std::string& flag, const std::string& text, double lo, double hi,
                       LowerBound lower) {
  const bool open = lower == LowerBound::Open;
  const std::string range = open
                                ? fmt::format("a number greater than {:g} and at most {:g}", lo, hi)
                                : fmt::format("a number from {:g} to {:g}", lo, hi);
  char* end = nullptr;
  const double value = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value) || value < lo ||
      (open && value == lo) || value > hi)
    out_of_range(flag, text, range);
  return value;
}

double as_written(float value) {
  return std::strtod(fmt::format("{}", value).c_str(), nullptr);
}

double parse_memory_size_flag(const std::string& flag, const std::string& text) {
  static const std::pair<const char*, double> kUnits[] = {
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"KB", 1e3},     {"MB", 1e6},        {"GB", 1e9},           {"TB", 1e12},
      {"B", 1.0}};
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  double scale = unit.empty() ? 1.0 : 0.0;
  for (const auto& [name, bytes] : kUnits)
    if (unit == name) scale = bytes;
  DDPB_USAGE_CHECK(used > 0 && scale > 0 && std::isfinite(value) && value > 0 &&
                   value * scale <= 1e18)
      << flag << " " << text << ": give a size such as 80GiB, 141GB or 1073741824 (units B, KB, "
      << "MB, GB, TB, KiB, MiB, GiB, TiB)";
  return value * scale;
}

}  // namespace ddpb::bench
