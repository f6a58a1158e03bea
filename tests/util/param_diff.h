// The parameter-difference metric of the equivalence tests (docs/metrics.md): per tensor
// max|a - b| / max|b|, maximum over tensors, between two safetensors files with the same
// names and shapes in the same order (bench/run/param_diff.h; a mismatch throws and fails the
// test).
#pragma once

#include <string>

#include "bench/run/param_diff.h"

namespace ddpb::testing {

inline double max_param_rel_diff(const std::string& a_path, const std::string& b_path) {
  return bench::param_diff(a_path, b_path).max_rel;
}

}  // namespace ddpb::testing
