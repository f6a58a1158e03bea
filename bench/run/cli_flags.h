// ddpbench's numeric command-line flags: CLI11 options whose text is parsed by
// bench/run/flag_values.h (strict, ranged, one-line usage errors) into their target.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "bench/run/flag_values.h"

namespace ddpb::bench {

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
                           const std::string& help, LowerBound lower = LowerBound::Closed) {
  return app.add_option_function<std::string>(
      flag,
      [&target, flag, lo, hi, lower](const std::string& text) {
        target = static_cast<T>(parse_real_flag(flag, text, lo, hi, lower));
      },
      help);
}

// An option whose value is one of E's names, parsed into `target` (an E, or an optional<E>
// that stays empty unless the flag is given). The help text ends with the names.
template <typename T>
struct EnumOf {
  using type = T;
};
template <typename T>
struct EnumOf<std::optional<T>> {
  using type = T;
};
template <typename T>
CLI::Option* add_enum_flag(CLI::App& app, const std::string& flag, T& target,
                           const std::string& help) {
  using E = typename EnumOf<T>::type;
  const std::string name = flag.substr(0, flag.find(','));  // "--precision,--math"
  return app.add_option_function<std::string>(
      flag, [&target, name](const std::string& text) { target = parse_enum_flag<E>(name, text); },
      help + ": " + enum_choices<E>());
}

}  // namespace ddpb::bench
