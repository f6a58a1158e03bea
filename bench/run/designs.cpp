#include "bench/run/designs.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include "base/text.h"

#include "bench/run/trainer.h"
#include "core/check.h"
#include "core/step_phase.h"

namespace ddpb::bench {
namespace {

std::vector<reports::DesignPhase> phases(std::initializer_list<StepPhase> list) {
  std::vector<reports::DesignPhase> out;
  for (const StepPhase p : list)
    out.push_back({step_phase_name(p), phase_kind_name(phase_kind(p))});
  return out;
}

Design single_row() {
  Design d;
  d.info = {.name = "single", .label = "single", .noun = "device"};
  d.info.phases = phases({StepPhase::Data, StepPhase::Forward, StepPhase::Backward,
                          StepPhase::Optimizer, StepPhase::Graph});
  d.make_runner = make_single_runner;
  d.pytorch_peer = "one torch.nn.Module";
  return d;
}

Design dp_row() {
  Design d;
  d.info = {.name = "dp", .label = "DP", .noun = "device", .parallel = true};
  d.info.gradient_op = "reduce";
  // reduce_add: every other device's gradients to device 0, over its link.
  d.expected_gradient_bus_bytes = [](double gradient_bytes, int world) {
    return gradient_bytes * (world - 1);
  };
  d.info.phases = phases({StepPhase::Data, StepPhase::Scatter, StepPhase::Replicate,
                          StepPhase::Forward, StepPhase::Gather, StepPhase::Loss,
                          StepPhase::Backward, StepPhase::Reduce, StepPhase::Optimizer});
  d.make_runner = make_dp_runner;
  d.pytorch_peer = "torch.nn.DataParallel";
  d.pytorch_peer_needs_cuda = true;
  return d;
}

Design ddp_row() {
  Design d;
  d.info = {.name = "ddp",
            .label = "DDP",
            .noun = "rank",
            .parallel = true,
            .processes_per_rank = true,
            .has_buckets = true,
            .overlaps_backward = true};
  d.info.gradient_op = "allreduce";
  // Every bucket AllReduced once: 2(n-1)/n of the gradients (the ZeRO paper's 2Ψ).
  d.expected_gradient_bus_bytes = [](double gradient_bytes, int world) {
    return gradient_bytes * 2.0 * (world - 1) / world;
  };
  d.info.phases =
      phases({StepPhase::Data, StepPhase::BufferBroadcast, StepPhase::Forward, StepPhase::SyncBn,
              StepPhase::BackwardCompute, StepPhase::CommExposed, StepPhase::Optimizer});
  d.make_runner = make_ddp_runner;
  d.pytorch_peer = "torch.nn.parallel.DistributedDataParallel";
  // A rank is a whole process: its communicator, store and threads (measured on CPU ranks).
  d.process_overhead_bytes = int64_t{150} << 20;
  return d;
}

std::deque<Design>& table() {
  static std::deque<Design> rows = {single_row(), dp_row(), ddp_row()};
  return rows;
}

}  // namespace

const std::deque<Design>& designs() {
  return table();
}

const Design& design_named(std::string_view name) {
  for (const Design& d : table())
    if (d.info.name == name) return d;
  throw UsageError("--mode must be " + design_names() + ", got '" + std::string(name) + "'");
}

std::string design_names(bool reports::DesignInfo::*trait) {
  std::vector<std::string> names;
  for (const Design& d : table())
    if (!trait || d.info.*trait) names.push_back(d.info.name);
  return join_list(names, "or");
}

std::vector<std::string> design_names_in_order() {
  std::vector<std::string> out;
  for (const Design& d : table()) out.push_back(d.info.name);
  return out;
}

void register_design(Design design) {
  // The name goes into run ids and file stems ("<workload>/<mode>/w<N>").
  const std::string& name = design.info.name;
  DDPB_USAGE_CHECK(!name.empty() && name.size() <= 32 &&
                   std::all_of(name.begin(), name.end(),
                               [](char c) {
                                 return std::isalnum(static_cast<unsigned char>(c)) || c == '.' ||
                                        c == '_' || c == '-';
                               }))
      << "a design's name is 1 to 32 letters, digits, '.', '_' or '-', not '" << name << "'";
  for (const Design& d : table())
    DDPB_USAGE_CHECK(d.info.name != design.info.name)
        << "a design named '" << design.info.name << "' exists already";
  table().push_back(std::move(design));
}

}  // namespace ddpb::bench
