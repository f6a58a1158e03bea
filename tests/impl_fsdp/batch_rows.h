// The FSDP thread-rank tests' slice of a global batch: rows [first, first + rows) of its
// inputs and their labels, on `device` (a rank's share, or one of its micro-batches).
#pragma once

#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/micro_steps.h"
#include "core/tensor.h"

namespace ddpb::testing {

inline MicroBatch batch_rows(const Tensor& x, const std::vector<int32_t>& y, int64_t first,
                             int64_t rows, const Device& device) {
  const auto begin = y.begin() + first;
  return {x.narrow(first, rows),
          Tensor::from_ints(std::vector<int32_t>(begin, begin + rows), {rows}, device)};
}

}  // namespace ddpb::testing
