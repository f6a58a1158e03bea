// The correctness metrics of every suite report (docs/metrics.md, "Parameter differences"),
// between two safetensors files of the same model, each a maximum over parameter tensors:
//   max_rel  max|a - b| / max|b|       element-wise, relative to the tensor's scale
//   rel_l2   ||a - b||_2 / ||b||_2     the verdict: one ReLU unit that switched on one side of
//                                      zero from rounding moves one row, which max_rel sees
//                                      at full size; a wrong gradient scale moves them all.
// Integer tensors (BatchNorm's num_batches_tracked) are equal or not: a difference counts as
// infinite.
#pragma once

#include <string>

namespace ddpb::bench {

struct ParamDiff {
  double max_rel = 0;
  double rel_l2 = 0;
  std::string worst_tensor;  // the tensor with the largest rel_l2
};

// Throws ddpb::Error when the files do not hold the same names and shapes in the same order.
// A NaN or Inf anywhere gives infinite differences.
ParamDiff param_diff(const std::string& path, const std::string& reference_path);

}  // namespace ddpb::bench
