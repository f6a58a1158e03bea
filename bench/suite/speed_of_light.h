// How far each run's step is from what this machine allows (docs/metrics.md, "Speed of light").
//
// Note [Speed of light]
// A lower bound on a run's median step, from peaks measured on this machine, never datasheet
// figures:
//   compute  the step's training-GEMM FLOPs per device over the GEMM peak the suite measured
//            before its runs (gemm_peak): flop_fraction x the median step;
//   comm     DDP at world size n: the AllReduce of the bucket that became ready last, which
//            nothing is left to overlap, at the fitted bus bandwidth: 2(n-1)/n · bytes/β on the
//            AllReduce link the suite fitted (comm_fit); DP: device 0's replicate and
//            reduce_add, which run outside compute by design: the parameters x (n-1) over each
//            fitted link's β. No latency term: α fitted on a noisy machine can exceed a small
//            message's real cost, and a bound must not;
//   input    on CUDA the median host-to-device copy when not every copy was overlapped; on the
//            CPU there is no copy.
// bound = compute + comm + input; achieved = bound / median step. Per phase group, the
// measured phase medians against the bound: compute (forward, loss, backward,
// backward_compute), communication (comm_exposed; DP's scatter, replicate, gather, reduce),
// input (data) and other (the rest: the optimizer, the buffer broadcast, SyncBN; bound 0). The
// largest gap is the group whose measured time most exceeds its bound.
#pragma once

#include <optional>

#include "bench/project/cost_model.h"
#include "reports/suite_record.h"

namespace ddpb::bench {

struct BoundInputs {
  double peak_flops_per_s = 0;                      // the suite's GEMM peak per device
  std::optional<Link> allreduce, copy, reduce_add;  // the suite's fitted links
  bool cuda = false;
};

// The run's bound, or nothing when it has no FLOP fraction (no peak) or no median step.
std::optional<reports::SpeedOfLight> speed_of_light(const reports::SuiteRun& run,
                                                    const reports::DesignInfo& design,
                                                    const BoundInputs& in);

// Sets runs[].metrics.speed_of_light of every successful run from suite.gemm_peak and
// suite.comm_fit (after the projection measured it); leaves the runs as they are without them.
void add_speed_of_light(reports::SuiteRecord& suite);

}  // namespace ddpb::bench
