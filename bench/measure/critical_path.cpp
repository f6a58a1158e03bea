#include "bench/measure/critical_path.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/step_phase.h"

namespace ddpb::bench {
namespace {

using reports::CriticalPath;
using reports::PathSpan;
using reports::RunRecord;
using reports::StepRecord;

const char* kind_of(StepPhase p) {
  return phase_kind_name(phase_kind(p));
}

// The measured step whose time is nearest the median: (its index in record.steps, its index
// among the measured steps).
std::optional<std::pair<size_t, size_t>> median_step(const RunRecord& record) {
  std::optional<std::pair<size_t, size_t>> best;
  double best_gap = 0;
  size_t measured = 0;
  for (size_t i = 0; i < record.steps.size(); ++i) {
    if (!record.steps[i].measured) continue;
    const double gap = std::abs(record.steps[i].time_ms - record.summary.step_time_ms.median);
    if (!best || gap < best_gap) best = {i, measured}, best_gap = gap;
    ++measured;
  }
  return best;
}

// Each rank's last bucket ready time in the step, and the slowest rank's lead over rank 0.
std::pair<double, std::optional<int64_t>> ddp_wait(
    const std::vector<std::vector<std::vector<double>>>& ready, size_t measured_index,
    size_t measured_steps) {
  if (ready.size() < 2 || ready[0].size() > measured_steps) return {0, std::nullopt};
  const size_t skipped = measured_steps - ready[0].size();  // the log keeps the latest steps
  if (measured_index < skipped) return {0, std::nullopt};
  const size_t s = measured_index - skipped;
  const auto last = [&](size_t r) {
    const auto& buckets = ready[r][s];
    return buckets.empty() ? 0.0 : *std::max_element(buckets.begin(), buckets.end());
  };
  double wait = 0;
  std::optional<int64_t> rank;
  for (size_t r = 1; r < ready.size(); ++r) {
    if (ready[r].size() != ready[0].size()) return {0, std::nullopt};
    if (const double lead = last(r) - last(0); lead > wait) wait = lead, rank = int64_t(r);
  }
  return {wait, rank};
}

// DP: the forward and backward time beyond device 0's own replica's work, and the device with
// the most work.
std::pair<double, std::optional<int64_t>> dp_wait(const StepRecord& step, double parallel_ms) {
  if (!step.mode || !step.mode->devices || step.mode->devices->size() < 2) return {0, std::nullopt};
  const auto& devices = *step.mode->devices;
  const auto slowest =
      std::max_element(devices.begin(), devices.end(),
                       [](const auto& a, const auto& b) { return a.busy_ms < b.busy_ms; });
  const double wait = std::max(0.0, parallel_ms - devices[0].busy_ms);
  if (wait <= 0 || slowest == devices.begin()) return {wait, std::nullopt};
  return {wait, int64_t(slowest - devices.begin())};
}

void add(CriticalPath& c, std::string_view k, double ms) {
  (k == "data"            ? c.data_ms
   : k == "compute"       ? c.compute_ms
   : k == "communication" ? c.communication_ms
   : k == "wait"          ? c.wait_ms
                          : c.host_ms) += ms;
}

// Where a step waits for another rank or device, and whether the wait comes first in it.
struct WaitPlace {
  std::optional<StepPhase> phase;
  bool first = false;
};

// Ranks that are processes wait at the start of the last communication phase of their
// design before its optimizer step that the step has (DDP's comm_exposed: rank 0 waits for the
// late rank, then the last gradient collective runs; ZeRO's all-gather after the optimizer
// only follows it); one process's devices at the end of backward (DP's join).
WaitPlace wait_place(const reports::DesignInfo& design, const StepRecord& step) {
  if (!design.processes_per_rank) return {StepPhase::Backward, false};
  const auto has_optimizer = std::any_of(design.phases.begin(), design.phases.end(), [](auto& p) {
    return step_phase_named(p.phase) == StepPhase::Optimizer;
  });
  bool before_optimizer = !has_optimizer;
  for (auto it = design.phases.rbegin(); it != design.phases.rend(); ++it) {
    if (step_phase_named(it->phase) == StepPhase::Optimizer) before_optimizer = true;
    if (before_optimizer && it->kind == phase_kind_name(PhaseKind::Communication) &&
        reports::named_value(step.phases_ms, it->phase, -1.0) >= 0)
      return {step_phase_named(it->phase), true};
  }
  return {};
}

// Lays one step's phases end to end on rank 0's lane and along the path; `split` is the phase
// that holds a wait of `wait_ms`. Each span's kind is the design row's for its phase.
void lay_out_step(const StepRecord& step, const reports::DesignInfo& design, WaitPlace split,
                  double wait_ms, const std::string& waited, CriticalPath& c) {
  const bool wait_first = split.first;
  double t = 0;
  for (size_t p = 0; p < kNumStepPhases; ++p) {
    const auto phase = static_cast<StepPhase>(p);
    const double ms = reports::named_value(step.phases_ms, step_phase_name(phase), -1.0);
    if (ms < 0) continue;
    const std::string kind = design.phase_kind(step_phase_name(phase)).value_or(kind_of(phase));
    c.lanes.push_back({0, kind, step_phase_name(phase), t, t + ms});
    const double wait = phase == split.phase ? std::min(wait_ms, ms) : 0.0;
    const double work_start = wait_first ? t + wait : t,
                 wait_start = wait_first ? t : t + ms - wait;
    if (wait > 0 && wait_first)
      c.path.push_back({0, "wait", waited, wait_start, wait_start + wait});
    if (ms - wait > 0)
      c.path.push_back({0, kind, step_phase_name(phase), work_start, work_start + ms - wait});
    if (wait > 0 && !wait_first)
      c.path.push_back({0, "wait", waited, wait_start, wait_start + wait});
    add(c, kind, ms - wait);
    add(c, "wait", wait);
    t += ms;
  }
  c.host_ms = std::max(0.0, step.time_ms - t);
  if (c.host_ms > 0) c.path.push_back({0, "host", "outside the phases", t, step.time_ms});
}

// Every other DDP rank's phase medians end to end; rank 0's bucket collectives.
void ddp_lanes(const RunRecord& record, const StepRecord& step, CriticalPath& c) {
  if (step.mode && step.mode->buckets) {
    for (const auto& b : *step.mode->buckets)
      c.lanes.push_back({0, "communication", fmt::format("bucket {}", b.bucket),
                         b.start_ms.value_or(b.launch_ms), b.complete_ms});
  }
  if (!record.ranks) return;
  for (const auto& rank : *record.ranks) {
    if (rank.rank == 0) continue;
    double t = 0;
    for (size_t p = 0; p < kNumStepPhases; ++p) {
      const auto phase = static_cast<StepPhase>(p);
      for (const auto& m : rank.phases_median_ms) {
        if (m.phase != step_phase_name(phase)) continue;
        c.lanes.push_back({rank.rank, kind_of(phase), m.phase, t, t + m.median_ms});
        t += m.median_ms;
      }
    }
  }
}

// Each DP replica's work, split between forward and backward in device 0's proportion.
void dp_lanes(const StepRecord& step, CriticalPath& c) {
  if (!step.mode || !step.mode->devices) return;
  const auto at = [&](const char* phase) {
    for (const PathSpan& s : c.lanes)
      if (s.rank == 0 && s.label == phase) return std::optional(s);
    return std::optional<PathSpan>();
  };
  const auto forward = at("forward"), backward = at("backward");
  if (!forward || !backward) return;
  const double f = forward->end_ms - forward->start_ms, b = backward->end_ms - backward->start_ms;
  const double share = f + b > 0 ? f / (f + b) : 0.5;
  const auto& devices = *step.mode->devices;
  for (size_t d = 1; d < devices.size(); ++d) {
    const double busy = devices[d].busy_ms;
    c.lanes.push_back(
        {int64_t(d), "compute", "forward", forward->start_ms, forward->start_ms + busy * share});
    c.lanes.push_back({int64_t(d), "compute", "backward", backward->start_ms,
                       backward->start_ms + busy * (1 - share)});
  }
}

}  // namespace

std::optional<CriticalPath> critical_path(
    const RunRecord& record, const std::vector<std::vector<std::vector<double>>>& ready_ms) {
  const auto median = median_step(record);
  if (!median) return std::nullopt;
  const StepRecord& step = record.steps[median->first];
  CriticalPath c;
  c.step = step.step;
  c.step_ms = step.time_ms;
  size_t measured_steps = 0;
  for (const auto& s : record.steps) measured_steps += s.measured;
  // Ranks that are processes each time their own step (ranks[] and the buckets' ready times
  // say who waited for whom); one process's devices share one step (DP: the replicas' busy
  // times say it).
  const bool ddp = record.design.processes_per_rank;
  const auto phase_ms = [&](StepPhase p) {
    return std::max(0.0, reports::named_value(step.phases_ms, step_phase_name(p), 0.0));
  };
  const auto [wait, waited_for] =
      ddp ? ddp_wait(ready_ms, median->second, measured_steps)
          : dp_wait(step, phase_ms(StepPhase::Forward) + phase_ms(StepPhase::Backward));
  c.waited_for = waited_for;
  const std::string waited = waited_for
                                 ? fmt::format("waits for {} {}", record.design.noun, *waited_for)
                                 : std::string("waits");
  const WaitPlace place = wait_place(record.design, step);
  // A wait with no phase to hold it (a ranked design without a communication phase) is not
  // drawn, and no rank is named as waited for.
  if (!place.phase) c.waited_for.reset();
  lay_out_step(step, record.design, place, c.waited_for ? wait : 0.0, waited, c);
  if (ddp) {
    ddp_lanes(record, step, c);
  } else {
    dp_lanes(step, c);
  }
  return c;
}

}  // namespace ddpb::bench
