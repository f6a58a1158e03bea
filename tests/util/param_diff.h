// The parameter-difference metric of the equivalence tests (docs/metrics.md): per tensor
// max|a - b| / max|b|, maximum over tensors, between two safetensors files with the same
// names in the same order.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "workloads/safetensors.h"

namespace ddpb::testing {

inline double max_param_rel_diff(const std::string& a_path, const std::string& b_path) {
  auto a = load_safetensors(a_path), b = load_safetensors(b_path);
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    auto av = a[i].tensor.to_floats(), bv = b[i].tensor.to_floats();
    double scale = 1e-12, diff = 0;
    for (size_t k = 0; k < av.size(); ++k) {
      scale = std::max(scale, std::fabs(double(bv[k])));
      diff = std::max(diff, std::fabs(double(av[k]) - bv[k]));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

}  // namespace ddpb::testing
