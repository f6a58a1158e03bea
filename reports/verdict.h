// The verdict that opens a suite report: for each workload and world size, which of DP and DDP
// is faster and by how much (a tie inside the step-time noise), the phase differences behind
// the gap, memory, overlap and the best bucket cap measured; then per workload the findings
// that explain it, its bottleneck first. Everything is computed from the suite record with the
// rules of docs/metrics.md ("Verdict"); nothing here is written by hand or throws on record
// contents.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "reports/suite_record.h"
#include "reports/suite_view.h"

namespace ddpb::reports {

// Step-time medians of one run's phases grouped the way the verdict compares DP and DDP.
struct PhaseGroups {
  double compute_ms = 0;    // forward, loss, backward, backward_compute
  double traffic_ms = 0;    // DP's device-0 traffic: scatter, replicate, gather
  double reduce_ms = 0;     // DP's reduce; DDP's comm_exposed (AllReduce left after backward)
  double sync_ms = 0;       // buffer_broadcast, sync_bn
  double data_ms = 0;       // data
  double optimizer_ms = 0;  // optimizer
};
PhaseGroups group_phases(const SuiteRun& run);

// A tie when the medians differ by no more than the larger of the two runs' step-time
// standard deviations.
bool within_noise(double median_a, double stddev_a, double median_b, double stddev_b);

// The bottleneck rule (docs/metrics.md): which of "data", "machine", "ddp-exposed-comm",
// "dp-device0-traffic", "compute" names the bottleneck of a workload at world size n. Either
// run may be null (that design did not run or failed).
struct BottleneckInputs {
  const SuiteRun* dp = nullptr;
  const SuiteRun* ddp = nullptr;
  int world_size = 1;
  std::string device;  // suite.device
  int cpu_cores = 0;   // context.cpu_cores
};
std::string bottleneck_kind(const BottleneckInputs& in);

// The Verdict section: notes (a quick suite is noisy), the table, the phase differences per
// row, the step anatomy and critical-path charts, and the findings as paragraphs grouped per
// workload (Note [Verdict findings]): bottleneck, speed of light, input-bound runs, bucket
// blame, critical path.
ReportSection build_verdict(const SuiteRecord& suite);

// Note [First-screen sentence]
// One sentence per workload, for the report's first screen, at the workload's largest world
// size with both designs: which design is faster and by what factor (or that they tie, or
// that a quick suite cannot rank them), how much of its bound (Note [Speed of light]) the
// faster design reaches (DDP's on a tie) and where its largest gap is, and the rank that holds
// DDP's buckets back when one does (Note [Bucket blame]). Only what the records hold is said.
std::vector<std::string> first_screen_sentences(const SuiteRecord& suite);

// For a suite on CPU devices, the first screen's first sentence: how many logical devices
// share how many cores, what the suite measures, what carries over to GPUs and what does not
// (docs/metrics.md, "What a CPU run tells about GPUs", which justifies each part). Empty for a
// suite on GPUs.
std::string cpu_box_sentence(const SuiteRecord& suite);

}  // namespace ddpb::reports
