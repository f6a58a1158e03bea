// The design table's rows as records carry them (bench/run/designs.cpp), for tests that do
// not link bench/: the report fixture and the projection's toy basis. The bench test
// Designs.TheReportFixtureDescribesTheTable checks that they agree with the table.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace ddpb::testing {

using nlohmann::json;

// The kind of a phase of the vocabulary (Note [Phase kinds] in core/step_phase.h); reports/
// tests do not link core/.
inline std::string kind_of_phase(const std::string& name) {
  if (name == "data") return "data";
  for (const char* c : {"forward", "loss", "backward", "backward_compute", "optimizer", "graph"})
    if (name == c) return "compute";
  return "communication";
}

// The rows, in the table's order: single, dp, ddp.
inline json design_rows() {
  const auto phases = [](std::initializer_list<const char*> names) {
    json out = json::array();
    for (const char* n : names) out.push_back({{"phase", n}, {"kind", kind_of_phase(n)}});
    return out;
  };
  const auto row = [](const char* name, const char* label, const char* noun, bool parallel,
                      bool processes, bool buckets, const char* op, json phases) {
    return json{{"name", name},
                {"label", label},
                {"noun", noun},
                {"parallel", parallel},
                {"processes_per_rank", processes},
                {"has_buckets", buckets},
                {"overlaps_backward", buckets},
                {"shards_parameters", false},
                {"shards_gradients", false},
                {"shards_optimizer_state", false},
                {"gradient_op", op},
                {"phases", std::move(phases)}};
  };
  return json::array({row("single", "single", "device", false, false, false, "",
                          phases({"data", "forward", "backward", "optimizer", "graph"})),
                      row("dp", "DP", "device", true, false, false, "reduce",
                          phases({"data", "scatter", "replicate", "forward", "gather", "loss",
                                  "backward", "reduce", "optimizer"})),
                      row("ddp", "DDP", "rank", true, true, true, "allreduce",
                          phases({"data", "buffer_broadcast", "forward", "sync_bn",
                                  "backward_compute", "comm_exposed", "optimizer"}))});
}

}  // namespace ddpb::testing
