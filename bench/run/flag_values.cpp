#include "bench/run/flag_values.h"

#include <fmt/core.h>

#include <charconv>
#include <cmath>
#include <cstdlib>

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

}  // namespace ddpb::bench
