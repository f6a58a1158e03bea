#include "bench/suite/speed_of_light.h"

#include <fmt/core.h>

#include <algorithm>
#include <tuple>

#include "bench/project/comm_fit.h"
#include "core/step_phase.h"

namespace ddpb::bench {

namespace {

// The bound a phase is measured against: its kind as the record gives it (Note [Phase kinds]
// in core/step_phase.h), except for the phases no bound models: the compute bound counts the
// forward and backward arithmetic, not the optimizer's; the communication bound the
// gradients' collective, not DDP's buffer broadcast or SyncBatchNorm's statistics.
std::string phase_group(const reports::PhaseMedian& p) {
  const std::optional<StepPhase> phase = step_phase_named(p.phase);
  if (phase == StepPhase::Optimizer || phase == StepPhase::BufferBroadcast ||
      phase == StepPhase::SyncBn)
    return "other";
  if (p.kind == phase_kind_name(PhaseKind::Data)) return "input";
  if (p.kind == phase_kind_name(PhaseKind::Compute)) return "compute";
  if (p.kind == phase_kind_name(PhaseKind::Communication)) return "communication";
  return "other";
}

// The bytes of the bucket that became ready last in the median step.
double last_bucket_bytes(const reports::RunMetrics& m) {
  if (!m.buckets || m.buckets->empty()) return 0;
  const auto last =
      std::max_element(m.buckets->begin(), m.buckets->end(),
                       [](const auto& a, const auto& b) { return a.ready_ms < b.ready_ms; });
  return static_cast<double>(last->bytes.value_or(0));
}

std::string link_text(const char* name, const Link& l) {
  return fmt::format("{} (alpha {:.3g} us, beta {:.3g} GB/s)", name, l.alpha_us, l.bandwidth_GBps);
}

// The communication bound and the link it was read from.
// The design's gradient collective says which: a ring AllReduce of the last bucket (what is
// left after backward when the rest overlaps it), or device 0's copies and reduce_add.
std::pair<double, std::string> comm_bound(const reports::SuiteRun& run,
                                          const reports::DesignInfo& design,
                                          const BoundInputs& in) {
  const reports::RunMetrics& m = *run.metrics;
  const int n = static_cast<int>(run.world_size);
  if (n <= 1 || design.gradient_op.empty()) return {0.0, "none (one device)"};
  if (design.gradient_op == "allreduce" && in.allreduce) {
    const double bytes = last_bucket_bytes(m), p = n;
    const double ms = 2 * (p - 1) / p * bytes / (in.allreduce->bandwidth_GBps * 1e6);
    return {ms, link_text("allreduce", *in.allreduce)};
  }
  if (design.gradient_op == "reduce" && in.copy && in.reduce_add && m.comm_bytes_per_step) {
    const double bytes = static_cast<double>(*m.comm_bytes_per_step);  // params x (n - 1)
    const double ms =
        bytes / (in.copy->bandwidth_GBps * 1e6) + bytes / (in.reduce_add->bandwidth_GBps * 1e6);
    return {ms, link_text("copy", *in.copy) + " + " + link_text("reduce_add", *in.reduce_add)};
  }
  return {0.0, "none (no fitted link)"};
}

double input_bound(const reports::RunMetrics& m, bool cuda) {
  if (!cuda || !m.loader || !m.loader->h2d_ms_median) return 0;
  return m.loader->h2d_overlap_ratio.value_or(0) >= 1 ? 0 : *m.loader->h2d_ms_median;
}

}  // namespace

std::optional<reports::SpeedOfLight> speed_of_light(const reports::SuiteRun& run,
                                                    const reports::DesignInfo& design,
                                                    const BoundInputs& in) {
  if (!run.ok() || !run.metrics || !run.metrics->flop_fraction) return std::nullopt;
  const reports::RunMetrics& m = *run.metrics;
  const double step = m.step_time_ms.median;
  if (step <= 0 || in.peak_flops_per_s <= 0) return std::nullopt;
  reports::SpeedOfLight s;
  s.peak_flops_per_s = in.peak_flops_per_s;
  s.compute_ms = *m.flop_fraction * step;
  std::tie(s.comm_ms, s.link) = comm_bound(run, design, in);
  s.input_ms = input_bound(m, in.cuda);
  s.bound_ms = s.compute_ms + s.comm_ms + s.input_ms;
  s.achieved = s.bound_ms / step;
  for (const char* g : {"compute", "communication", "input", "other"}) {
    reports::BoundPhase p{g, 0, 0};
    for (const auto& ph : m.phases_median_ms.value_or(std::vector<reports::PhaseMedian>{})) {
      if (phase_group(ph) == g) p.measured_ms += ph.median_ms;
    }
    p.bound_ms = p.group == "compute"         ? s.compute_ms
                 : p.group == "communication" ? s.comm_ms
                 : p.group == "input"         ? s.input_ms
                                              : 0.0;
    s.phases.push_back(p);
  }
  const auto gap =
      std::max_element(s.phases.begin(), s.phases.end(), [](const auto& a, const auto& b) {
        return a.measured_ms - a.bound_ms < b.measured_ms - b.bound_ms;
      });
  s.largest_gap = gap->group;
  return s;
}

void add_speed_of_light(reports::SuiteRecord& suite) {
  if (!suite.gemm_peak || suite.gemm_peak->flops_per_s <= 0) return;
  BoundInputs in;
  in.peak_flops_per_s = suite.gemm_peak->flops_per_s;
  in.cuda = suite.suite.device == "cuda";
  if (suite.comm_fit) {
    const CommFit fit = CommFit::from_json(*suite.comm_fit, "suite.json's comm_fit");
    in.allreduce = fit.allreduce;
    if (fit.copy.bandwidth_GBps > 0) in.copy = fit.copy;
    if (fit.reduce_add.bandwidth_GBps > 0) in.reduce_add = fit.reduce_add;
  }
  for (reports::SuiteRun& run : suite.runs) {
    if (auto s = speed_of_light(run, suite.design_of(run), in))
      run.metrics->speed_of_light = std::move(*s);
  }
}

}  // namespace ddpb::bench
