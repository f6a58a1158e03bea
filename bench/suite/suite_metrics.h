// The derived numbers of a suite report (docs/suite-format.md): each run's metrics taken
// from its own record, then scaling against the single-device baselines and correctness
// against the single-device references, with the formulas of bench/measure/metrics.h.
#pragma once

#include <string>

#include "reports/run_record.h"
#include "reports/suite_record.h"

namespace ddpb::bench {

// runs[].metrics from a `ddpbench run` record. `peak_flops_per_s`: the suite's GEMM peak
// per device (0: no flop_fraction).
reports::RunMetrics run_metrics(const reports::RunRecord& record, double peak_flops_per_s);

// Fills runs[].scaling of every ok run of group "scaling" from the suite's other runs.
void derive_scaling(reports::SuiteRecord& suite);

// Whether `run` must save its final parameters (--save-params): a parallel run whose
// correctness is compared, or the single-device run it is compared with. The others save
// none (gpt2-small's are 0.5 GB a run).
bool needs_parameters(const reports::SuiteRecord& suite, const reports::SuiteRun& run);

// Fills runs[].correctness of every ok dp/ddp run whose reference finished, comparing the
// final parameters under `dir`/params. Runs that already have a verdict are left alone.
void derive_correctness(reports::SuiteRecord& suite, const std::string& dir);

}  // namespace ddpb::bench
