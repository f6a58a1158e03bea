// The GEMMs of one training step of a preset, as fn::linear and LinearBackward issue them
// (core/functional.cpp): a Linear layer y = act(x W^T + b), x [M, in], W [out, in], runs
//   fwd  y  = x W^T (+ bias, + fused ReLU)   M=rows, N=out, K=in     (B transposed)
//   dx   dx = dz W                           M=rows, N=in,  K=out    (none for the first
//                                                                     layer of an MLP)
//   dw   dW = dz^T x                         M=out,  N=in,  K=rows   (A transposed)
// Layers of the same shape are merged, with `calls` counting them. Attention's batched
// GEMMs and mlp-skip's conditional branch are not included. One list for the GEMM
// benchmarks (bench/micro) and the suite's GEMM peak (bench/measure/gemm_peak.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ops.h"
#include "workloads/model.h"

namespace ddpb {

struct TrainingGemm {
  std::string workload;
  std::string layer;  // "hidden", "head", "c_fc", "lm_head", ...
  std::string pass;   // "fwd", "dx" or "dw"
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  bool bias = false;
  ops::Activation act = ops::Activation::None;
  int calls = 1;  // in one training step
  std::string name() const { return pass + "_" + layer; }
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
};

// `batch` samples per device (sequences for gpt): the spec's family's list
// (workloads/families.cpp).
std::vector<TrainingGemm> training_gemms(const WorkloadSpec& spec, int64_t batch);

// The fwd, dx (when needs_dx) and dw GEMMs of one Linear layer of `calls` identical ones,
// [rows, in] -> [rows, features], merged into an earlier identical entry when there is one:
// what a family's training_gemms is made of.
void add_linear_gemms(std::vector<TrainingGemm>& out, const std::string& workload,
                      const std::string& layer, int64_t rows, int64_t in, int64_t features,
                      bool bias, ops::Activation act, int calls, bool needs_dx);

}  // namespace ddpb
