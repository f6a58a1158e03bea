// The device's measured GEMM peak, the denominator of the FLOP fraction in suite reports:
// ddpbench's own GEMM path timed at the largest forward GEMM shapes of the suite's
// workloads (a subset of what bench/micro/gemm_bench times), taking the fastest. Measured, not a
// datasheet figure, so the fraction says how close training gets to what this machine's GEMMs
// reach.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device.h"

namespace ddpb::bench {

struct GemmShape {
  std::string workload;
  int64_t m = 0, n = 0, k = 0;
};

// The largest forward GEMMs of each workload at its per-device batch.
std::vector<GemmShape> workload_gemm_shapes(const std::map<std::string, int64_t>& per_device_batch);

// {"device", "flops_per_s" (the best shape), "min_time_s", "shapes": [{..., "flops_per_s"}]}.
nlohmann::json measure_gemm_peak(const Device& device, const std::vector<GemmShape>& shapes,
                                 double min_time_s);

}  // namespace ddpb::bench
