// Numeric flag values, parsed strictly and checked against their range.
//
// CLI11's own conversion clamps a value that overflows the type to the type's limit (so
// `--steps 9223372036854775807` became a run of no steps and `--seed -1` a huge seed) and
// accepts what the parse stopped short of. Every numeric value ddpbench reads from a flag or a
// flag's sub-field (--inject-fault rank=R) goes through these instead: the whole text must be
// a number, finite, inside [lo, hi], or it is a usage error (exit 2) that names the flag, the
// text and the range. The CLI11 side is bench/run/cli_flags.h.
#pragma once

#include <cstdint>
#include <string>

#include "base/named_enum.h"
#include "core/check.h"

namespace ddpb::bench {

// Parses `text` as an integer in [lo, hi]; throws UsageError naming `flag` otherwise.
int64_t parse_int_flag(const std::string& flag, const std::string& text, int64_t lo, int64_t hi);
// Parses `text` as a finite number in [lo, hi]; throws UsageError naming `flag` otherwise.
// Bounds are closed unless `lower` says Open (lo itself refused, as --lr's 0): the message
// states the interval exactly as it is checked (issue 25, T1).
enum class LowerBound { Closed, Open };
// A memory size (--device-memory): a positive number with an optional unit, B, KB, MB, GB, TB
// (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024); bytes without one.
double parse_memory_size_flag(const std::string& flag, const std::string& text);

double parse_real_flag(const std::string& flag, const std::string& text, double lo, double hi,
                       LowerBound lower = LowerBound::Closed);

// Parses `text` as one of E's names (base/named_enum.h); throws UsageError naming `flag`
// and listing the names otherwise.
template <typename E>
E parse_enum_flag(const std::string& flag, const std::string& text) {
  const auto value = enum_from_name<E>(text);
  if (!value) throw UsageError(flag + " must be " + enum_choices<E>() + ", got '" + text + "'");
  return *value;
}

// A float as the user wrote it, as a double: 0.05f is 0.05 in output and JSON, not
// 0.05000000074505806 (the shortest text that gives back the same float).
double as_written(float value);

}  // namespace ddpb::bench
