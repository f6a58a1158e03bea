// The cuDNN execution plans this process built, one entry per convolution shape: which
// engine was chosen (Note [cuDNN engine choice]), its workspace and how long the plan took.
// The run record carries them as "conv_plans", so that a slow or failing shape on a GPU
// explains itself. Empty on CPU-only runs; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddpb {

struct ConvPlanRecord {
  int device = 0;
  std::string direction;          // "forward", "backward_data", "backward_filter"
  std::array<int64_t, 8> dims{};  // N, C, H, W, K, R, stride, padding
  std::string layout;             // "nchw" or "nhwc"
  bool tensor_cores = false;      // whether the math mode allowed them
  std::string engine;             // describe_engine() of the chosen configuration
  int64_t engine_index = -1;
  int64_t workspace_bytes = 0;
  double build_ms = 0;  // heuristics, notes and plan finalisation
  int candidates = 0;   // configurations offered (mode A + fallback)
  int allowed = 0;      // left after the filter
  int tried = 0;        // finalisations attempted, the chosen one included
};

// Adds `r` unless a plan for the same device, direction, dims, layout and math is recorded;
// returns whether it was added (the caller logs a new shape once).
bool record_conv_plan(const ConvPlanRecord& r);

std::vector<ConvPlanRecord> conv_plan_records();

// The records as the run record's "conv_plans" array (reports/schema/run.schema.json).
nlohmann::json conv_plans_json();

}  // namespace ddpb
