// Shared by the process-group tests: ranks as threads of one process, and inputs whose sums
// over ranks are exact.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/group_team.h"
#include "comm/process_group.h"
#include "core/device.h"
#include "core/tensor.h"

namespace ddpb::comm::testing {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs body(rank, group) on `size` thread-ranks (comm/group_team.h); rank r's group is made
// with options_of(r). A rank's exception is reported as a test failure naming the rank.
inline void run_thread_ranks(int size, const std::function<ProcessGroupOptions(int)>& options_of,
                             const std::function<void(int, ProcessGroup&)>& body,
                             std::chrono::milliseconds timeout) {
  try {
    GroupTeam team(size, options_of, timeout);
    team.run(body);
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
}

inline int64_t triangle(int n) {
  return int64_t{n} * (n + 1) / 2;
}

// value[i] = (rank + 1) * (1 + (i + shift) % 7): integers, so every sum is exact.
inline std::vector<float> ramp(int rank, int64_t numel, int64_t shift = 0) {
  std::vector<float> v(static_cast<size_t>(numel));
  for (int64_t i = 0; i < numel; ++i) v[size_t(i)] = float((rank + 1) * (1 + (i + shift) % 7));
  return v;
}

// The sum of ramp(rank, numel, shift) over `size` ranks.
inline std::vector<float> ramp_sum(int size, int64_t numel, int64_t shift = 0) {
  std::vector<float> v(static_cast<size_t>(numel));
  for (int64_t i = 0; i < numel; ++i) v[size_t(i)] = float(triangle(size) * (1 + (i + shift) % 7));
  return v;
}

// The values of a CPU tensor as floats. (Tensor::to_floats casts 16-bit tensors through
// cpu:0, which refuses tensors on another logical CPU device.)
inline std::vector<float> floats_of(const Tensor& t) {
  if (t.dtype() == DType::F32) return t.to_floats();
  std::vector<float> v(static_cast<size_t>(t.numel()));
  const auto* p = t.data<uint16_t>();
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = t.dtype() == DType::BF16 ? bf16_to_float(p[i]) : f16_to_float(p[i]);
  }
  return v;
}

// A bf16/f16 copy of an f32 CPU tensor (f32 is returned as is).
inline Tensor cast_to(const Tensor& f32, DType dtype, const Device& device) {
  if (dtype == DType::F32) return f32;
  Tensor out = Tensor::empty(f32.shape(), dtype, device);
  std::vector<float> v = floats_of(f32);
  auto* p = out.data<uint16_t>();
  for (size_t i = 0; i < v.size(); ++i) {
    p[i] = dtype == DType::BF16 ? float_to_bf16(v[i]) : float_to_f16(v[i]);
  }
  return out;
}

}  // namespace ddpb::comm::testing
