// Which rank holds each DDP bucket back, and why (docs/metrics.md, "Bucket blame").
//
// Note [Bucket blame]
// A bucket's AllReduce cannot finish before every rank has launched it, so the rank whose copy
// of the bucket becomes ready last holds it back. Each rank times its buckets from the start of
// its own step (when it asks for its first batch), not on a shared clock: the ranks start a
// step at slightly different moments because the previous step's last collective completes on
// them one after the other (a ring delivers its last chunk to one rank after another), and that
// skew belongs to the collective, not to a rank. For each measured step and bucket:
//   last rank L      the rank whose bucket became ready last, from its step's start;
//   delay            ready(L) - ready(the second last): how long L alone held the bucket back
//                    (had L been as quick as the next slowest rank, the collective could have
//                    started that much sooner). With every rank on time the delay is jitter.
//   noise            max(kBlameNoiseFloorMs, kBlameNoiseShare x the median step): a delay
//                    below it is held back by no one.
// A rank holds the step back when it held at least kHolderShare of every (step, bucket) pair
// beyond the noise and kHolderDominance times as many as any other rank (ranks that are late by
// chance take turns: on two ranks each is last about half the time), by a median of at least the
// holder threshold: max(kHolderMinDelayMs, kHolderStepShare x the median step, the step time's
// standard deviation); a lead shorter than the steps' own jitter cannot be told from it; and no
// rank is named from fewer than kHolderMinSteps measured steps (a quick suite's 4 steps name ranks
// by chance). Its phase is the one (waits excluded: comm_exposed) whose median on that rank most
// exceeds the median of the other ranks' medians, when the excess is beyond the noise. The ready
// times are taken before the collective, so a slowdown inside backward, which every rank's step
// time evens out after the AllReduce, is still seen: the late rank is late at every bucket.
#pragma once

#include <string>
#include <vector>

#include "reports/run_record.h"

namespace ddpb::bench {

inline constexpr double kBlameNoiseFloorMs = 0.25;
inline constexpr double kBlameNoiseShare = 0.02;
inline constexpr double kHolderShare = 0.5;
inline constexpr double kHolderDominance = 2.0;
inline constexpr double kHolderMinDelayMs = 1.0;
inline constexpr double kHolderStepShare = 0.05;
inline constexpr int64_t kHolderMinSteps = 8;

// ready_ms[rank][step][bucket]: when each rank's bucket became ready, in ms from the start of
// that rank's step, for the measured steps; `ranks` are the ranks' own records (their phase
// medians), indexed by rank; `step` the run's step time statistics. A step whose bucket count
// differs between ranks is left out. Throws Error when fewer than two ranks or the ranks' step
// counts differ. `groups` names what became ready in the finding: DDP's "buckets", FSDP's
// "units" (a unit is ready when its gradients are, and its reduce-scatter then waits for every
// rank's, as a bucket's AllReduce does).
reports::BucketBlame bucket_blame(const std::vector<std::vector<std::vector<double>>>& ready_ms,
                                  const std::vector<reports::RankRecord>& ranks,
                                  const reports::StepTimeStats& step,
                                  const std::string& groups = "buckets");

}  // namespace ddpb::bench
