// The suite's collective sweep: `ddpbench collectives` once per backend its DDP runs use (the
// device's default, and any an explicit run names),
// before the runs, at the largest DDP world size and up to the largest bucket. Its record goes
// to DIR/collectives/<backend>.json and suite.json's collectives[]; the projection fits its
// AllReduce link on those times (bench/project/comm_fit.h).
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "bench/project/comm_fit.h"
#include "bench/suite/suite_spec.h"
#include "reports/suite_record.h"

namespace ddpb::bench {

// The backends of the suite's DDP runs: the device's default (nccl on CUDA, gloo on CPU) for
// the matrix, then any other that an explicit DDP run of two or more ranks names (e.g. mpi).
std::vector<std::string> suite_ddp_backends(const SuiteSpec& spec);

// Runs the sweep unless suite.collectives already holds it (a resumed suite) or the suite has
// no DDP run at world size > 1. A failed sweep is recorded and never fails the suite.
void run_suite_collectives(reports::SuiteRecord& suite, const SuiteSpec& spec,
                           const std::string& dir, const std::atomic<bool>* stop);

// The AllReduce times of the suite's sweep for `backend`, as fit points; empty when there are
// none.
std::vector<FitPoint> suite_allreduce_points(const reports::SuiteRecord& suite,
                                             const std::string& dir, const std::string& backend);

}  // namespace ddpb::bench
