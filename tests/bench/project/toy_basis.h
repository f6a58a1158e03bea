// The toy workload the projection tests project: one DP run (50 MB of parameters) and one DDP
// run (two 25 MB buckets, ready at 4 and 8 ms of a 4 + 8 ms forward and backward) at 32
// samples a device, in the suite's order (DP, then DDP). Tests change the fields their case is
// about.
#pragma once

#include <optional>
#include <string>
#include <variant>

#include "../../util/design_rows.h"
#include "bench/project/projection.h"
#include "reports/record_fields.h"

namespace ddpb::bench::testing {

// The designs' rows as records carry them (tests/util/design_rows.h).
inline reports::DesignInfo dp_row() {
  return reports::record_from_json<reports::DesignInfo>(ddpb::testing::design_rows().at(1));
}

inline reports::DesignInfo ddp_row() {
  return reports::record_from_json<reports::DesignInfo>(ddpb::testing::design_rows().at(2));
}

// Where the toy's designs are in ProjectionBasis::designs.
inline constexpr size_t kDp = 0, kDdp = 1;

inline ProjectionBasis toy_basis() {
  ProjectionBasis b;
  b.workload = "toy";
  DesignBasis p;
  p.design = dp_row();
  p.run = "toy/dp/w1";
  p.per_device_batch = 32;
  ReduceInputs reduce;
  reduce.replica_ms = 12, reduce.loss_ms = 0, reduce.optimizer_ms = 1;
  reduce.parameter_bytes = 50e6, reduce.input_bytes_per_sample = 1e3;
  reduce.output_bytes_per_sample = 40;
  p.inputs = reduce;
  DesignBasis d;
  d.design = ddp_row();
  d.run = "toy/ddp/w1";
  d.per_device_batch = 32;
  AllReduceInputs allreduce;
  allreduce.forward_ms = 4, allreduce.backward_ms = 8, allreduce.optimizer_ms = 1;
  allreduce.data_ms = 0;
  allreduce.buckets = {{4, 25e6}, {8, 25e6}};
  d.inputs = allreduce;
  b.designs = {p, d};
  b.single_step_ms = 13;
  return b;
}

// The model inputs of the toy's designs.
inline AllReduceInputs& ddp_inputs(ProjectionBasis& b) {
  return std::get<AllReduceInputs>(b.designs[kDdp].inputs);
}
inline ReduceInputs& dp_inputs(ProjectionBasis& b) {
  return std::get<ReduceInputs>(b.designs[kDp].inputs);
}

// The toy's designs at `devices`: DDP always runs, DP may not (beyond the node).
inline DesignPoint ddp_at(const ProjectionBasis& b, const Topology& t, int devices,
                          const ProjectionScale& scale) {
  return project_design(b, b.designs[kDdp], t, devices, scale).value();
}
inline std::optional<DesignPoint> dp_at(const ProjectionBasis& b, const Topology& t, int devices,
                                        const ProjectionScale& scale) {
  return project_design(b, b.designs[kDp], t, devices, scale);
}

}  // namespace ddpb::bench::testing
