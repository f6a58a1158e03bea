// The FSDP thread-rank tests' data and reference: reproducible global batches, a rank's slice
// of one, and the single-device training the FSDP runs must equal.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "../core/test_util.h"
#include "core/autograd.h"
#include "core/device.h"
#include "core/functional.h"
#include "core/micro_steps.h"
#include "core/nn.h"
#include "core/optim.h"
#include "core/tensor.h"

namespace ddpb::testing {

// Step `step`'s global batch: `rows` rows of `features` normal inputs (seeded by seed + step)
// and the labels (i * label_stride + step) % classes.
struct SyntheticBatches {
  int64_t rows = 0, features = 0, classes = 0;
  uint64_t seed = 0;
  int64_t label_stride = 1;

  Tensor x(int step, const Device& device) const {
    return random_tensor({rows, features}, seed + static_cast<uint64_t>(step), 1.0f, device);
  }
  std::vector<int32_t> y(int step) const {
    std::vector<int32_t> labels;
    for (int64_t i = 0; i < rows; ++i)
      labels.push_back(static_cast<int32_t>((i * label_stride + step) % classes));
    return labels;
  }
};

// Rows [first, first + rows) of a batch's inputs and their labels, on `device` (a rank's
// share, or one of its micro-batches).
inline MicroBatch batch_rows(const Tensor& x, const std::vector<int32_t>& y, int64_t first,
                             int64_t rows, const Device& device) {
  const auto begin = y.begin() + first;
  return {x.narrow(first, rows),
          Tensor::from_ints(std::vector<int32_t>(begin, begin + rows), {rows}, device)};
}

// Parameter values by name after `steps` of SGD (lr 0.1, momentum 0.9) on one CPU device over
// whole batches: what every FSDP strategy's training must give.
template <typename Model>
std::map<std::string, std::vector<float>> train_single_device(Model& model,
                                                              const SyntheticBatches& batches,
                                                              int steps) {
  optim::SGD sgd(model.parameters(), 0.1f, 0.9f, 0.0f);
  for (int step = 0; step < steps; ++step) {
    fn::cross_entropy(model.forward(autograd::Var(batches.x(step, Device::cpu()))),
                      Tensor::from_ints(batches.y(step), {batches.rows}))
        .backward();
    sgd.step();
    sgd.zero_grad();
  }
  std::map<std::string, std::vector<float>> out;
  for (const nn::NamedParameter& p : model.named_parameters())
    out[p.name] = p.var.data().to_floats();
  return out;
}

}  // namespace ddpb::testing
