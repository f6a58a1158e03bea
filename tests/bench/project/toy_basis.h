// The toy workload the projection tests project: one DDP run (two 25 MB buckets, ready at 4 and
// 8 ms of a 4 + 8 ms forward and backward) and one DP run (50 MB of parameters) at 32 samples a
// device. Tests change the fields their case is about.
#pragma once

#include "bench/project/projection.h"

namespace ddpb::bench::testing {

inline ProjectionBasis toy_basis() {
  ProjectionBasis b;
  b.workload = "toy";
  DdpBasis d;
  d.run = "toy/ddp/w1";
  d.per_device_batch = 32;
  d.forward_ms = 4, d.backward_ms = 8, d.optimizer_ms = 1, d.data_ms = 0;
  d.buckets = {{4, 25e6}, {8, 25e6}};
  b.ddp = d;
  DpBasis p;
  p.run = "toy/dp/w1";
  p.per_device_batch = 32;
  p.replica_ms = 12, p.loss_ms = 0, p.optimizer_ms = 1;
  p.parameter_bytes = 50e6, p.input_bytes_per_sample = 1e3, p.output_bytes_per_sample = 40;
  b.dp = p;
  b.single_step_ms = 13;
  return b;
}

}  // namespace ddpb::bench::testing
