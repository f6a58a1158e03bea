// The verdict that opens a suite report: for each workload and world size, the best of the
// parallel designs the suite ran, the runner-up and the gap between them (a tie inside the
// step-time noise), the phase differences behind the gap, memory, overlap and the best bucket
// cap measured; then per workload the findings that explain it, its bottleneck first. Its
// columns come from the designs present and its sentences name designs by their labels, so a
// design the report has never heard of reads like the others (Note [Designs in records]).
// Everything is computed from the suite record with the rules of docs/metrics.md ("Verdict");
// nothing here is written by hand or throws on record contents.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "reports/suite_record.h"
#include "reports/suite_view.h"

namespace ddpb::reports {

// A run's phase medians summed per kind, as its record gives each phase's kind (Note [Phase
// kinds] in core/step_phase.h): "data", "compute", "communication", and "wait" or "host" where
// a record has them. The verdict's one grouping of phases; no phase name decides a group.
std::map<std::string, double> phase_time_by_kind(const SuiteRun& run);

// A tie when the medians differ by no more than the larger of the two runs' step-time
// standard deviations.
bool within_noise(double median_a, double stddev_a, double median_b, double stddev_b);

// One parallel design at one workload and world size, and its scaling run there (null: it did
// not run or failed).
struct Contender {
  DesignInfo design = {};
  const SuiteRun* run = nullptr;
};

// The bottleneck rule (docs/metrics.md, "Verdict"): what limits a workload at world size n.
struct BottleneckInputs {
  std::vector<Contender> designs = {};  // the parallel designs present, in the record's order
  int world_size = 1;
  std::string device = {};  // suite.device
  int cpu_cores = 0;        // context.cpu_cores
};
struct Bottleneck {
  // "data", "machine", "communication" or "compute"; empty when no design's run succeeded.
  std::string kind = {};
  // The run the rule found it in: the fastest for data and compute, the design whose phases
  // of kind communication take the step's share for communication; none for the machine.
  Contender in = {};
};
Bottleneck find_bottleneck(const BottleneckInputs& in);

// The Verdict section: notes (a quick suite is noisy), the table, the phase differences per
// row, the step anatomy and critical-path charts, and the findings as paragraphs grouped per
// workload (Note [Verdict findings]): bottleneck, speed of light, input-bound runs, bucket
// blame, critical path.
ReportSection build_verdict(const SuiteRecord& suite);

// Note [First-screen sentence]
// One sentence per workload, for the report's first screen, at the workload's largest world
// size where two or more parallel designs were measured: which design is best and by what
// factor over the runner-up (or that the two tie, or that a quick suite cannot rank them), how
// much of its bound (Note [Speed of light]) the best design reaches (the one with the shorter
// median step on a tie) and where its largest gap is, and the rank that holds either one's
// buckets back when one does (Note [Bucket blame]). Only what the records hold is said.
std::vector<std::string> first_screen_sentences(const SuiteRecord& suite);

// For a suite on CPU devices, the first screen's first sentence: how many logical devices
// share how many cores, what the suite measures, what carries over to GPUs and what does not
// (docs/metrics.md, "What a CPU run tells about GPUs", which justifies each part). Empty for a
// suite on GPUs.
std::string cpu_box_sentence(const SuiteRecord& suite);

}  // namespace ddpb::reports
