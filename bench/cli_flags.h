// Numeric command-line flags, parsed strictly and checked against their range.
//
// CLI11's own conversion clamps a value that overflows the type to the type's limit (so
// `--steps 9223372036854775807` became a run of no steps and `--seed -1` a huge seed) and
// accepts what the parse stopped short of. Every numeric flag of ddpbench goes through these
// instead: the whole text must be a number, finite, inside [lo, hi], or it is a usage error
// (exit 2) that names the flag, the text and the range.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace ddpb::bench {

// Parses `text` as an integer in [lo, hi]; throws UsageError naming `flag` otherwise.
int64_t parse_int_flag(const std::string& flag, const std::string& text, int64_t lo, int64_t hi);
// Parses `text` as a finite number in [lo, hi]; throws UsageError naming `flag` otherwise.
double parse_real_flag(const std::string& flag, const std::string& text, double lo, double hi);

// Options of `app` whose values are parsed by the functions above into `target` (any
// integer or floating-point type).
template <typename T>
CLI::Option* add_int_flag(CLI::App& app, const std::string& flag, T& target, int64_t lo, int64_t hi,
                          const std::string& help) {
  return app.add_option_function<std::string>(
      flag,
      [&target, flag, lo, hi](const std::string& text) {
        target = static_cast<T>(parse_int_flag(flag, text, lo, hi));
      },
      help);
}
template <typename T>
CLI::Option* add_real_flag(CLI::App& app, const std::string& flag, T& target, double lo, double hi,
                           const std::string& help) {
  return app.add_option_function<std::string>(
      flag,
      [&target, flag, lo, hi](const std::string& text) {
        target = static_cast<T>(parse_real_flag(flag, text, lo, hi));
      },
      help);
}

// A float as the user wrote it, as a double: 0.05f is 0.05 in output and JSON, not
// 0.05000000074505806 (the shortest text that gives back the same float).
double as_written(float value);

}  // namespace ddpb::bench
