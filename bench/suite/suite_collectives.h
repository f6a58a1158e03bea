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

// The AllReduce, all-gather and reduce-scatter times of the suite's sweep for `backend` on
// this host, as fit points; empty where it has none (it sweeps the last two only for a suite
// with a design that shards). A sweep across hosts is not this host's link: it gives the links
// of suite_two_level below instead.
SweptPoints suite_swept_points(const reports::SuiteRecord& suite, const std::string& dir,
                               const std::string& backend);

// A suite across hosts (Note [Runs across hosts]): `measured` with the links its sweep across
// hosts measured, between nodes and, when a node has several ranks, within them (Note
// [Inter-node link from a sweep]); `measured` unchanged without such a sweep. Throws when the
// sweep's record cannot be read or fitted.
Topology suite_two_level(Topology measured, const reports::SuiteRecord& suite,
                         const std::string& dir, const std::string& backend);

}  // namespace ddpb::bench
