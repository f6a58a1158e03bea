#include "bench/cli_flags.h"

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

template <typename T>
CLI::Option* add_int(CLI::App& app, const std::string& flag, T& target, int64_t lo, int64_t hi,
                     const std::string& help) {
  return app.add_option_function<std::string>(
      flag,
      [&target, flag, lo, hi](const std::string& text) {
        target = static_cast<T>(parse_int_flag(flag, text, lo, hi));
      },
      help);
}

template <typename T>
CLI::Option* add_real(CLI::App& app, const std::string& flag, T& target, double lo, double hi,
                      const std::string& help) {
  return app.add_option_function<std::string>(
      flag,
      [&target, flag, lo, hi](const std::string& text) {
        target = static_cast<T>(parse_real_flag(flag, text, lo, hi));
      },
      help);
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

double parse_real_flag(const std::string& flag, const std::string& text, double lo, double hi) {
  const std::string range = fmt::format("a number from {:g} to {:g}", lo, hi);
  char* end = nullptr;
  const double value = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value) || value < lo ||
      value > hi)
    out_of_range(flag, text, range);
  return value;
}

CLI::Option* add_int_flag(CLI::App& app, const std::string& flag, int64_t& target, int64_t lo,
                          int64_t hi, const std::string& help) {
  return add_int(app, flag, target, lo, hi, help);
}
CLI::Option* add_int_flag(CLI::App& app, const std::string& flag, int& target, int64_t lo,
                          int64_t hi, const std::string& help) {
  return add_int(app, flag, target, lo, hi, help);
}
CLI::Option* add_int_flag(CLI::App& app, const std::string& flag, uint64_t& target, int64_t lo,
                          int64_t hi, const std::string& help) {
  return add_int(app, flag, target, lo, hi, help);
}
CLI::Option* add_real_flag(CLI::App& app, const std::string& flag, double& target, double lo,
                           double hi, const std::string& help) {
  return add_real(app, flag, target, lo, hi, help);
}
CLI::Option* add_real_flag(CLI::App& app, const std::string& flag, float& target, double lo,
                           double hi, const std::string& help) {
  return add_real(app, flag, target, lo, hi, help);
}

double as_written(float value) {
  return std::strtod(fmt::format("{}", value).c_str(), nullptr);
}

}  // namespace ddpb::bench
