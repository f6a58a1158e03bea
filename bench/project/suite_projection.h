// Where `ddpbench project` and the suite get a projection's inputs: the measured bases of
// each workload from a results folder (suite.json and its run records) or from one run
// record, the topology by name (a preset, a JSON file, or `measured`), the projection record
// itself (reports/schema/projection.schema.json), and the suite's validation of the model
// against its own runs (docs/metrics.md, "Projection").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/project/comm_fit.h"
#include "bench/project/projection.h"
#include "reports/suite_record.h"

namespace ddpb::bench {

struct ProjectionSource {
  std::string name;                    // the path given
  std::vector<ProjectionBasis> bases;  // one per workload with a run of a projected design
  std::vector<std::vector<reports::MeasuredPoint>>
      measured;                         // per basis: the suite's scaling points
  std::string device = "cpu";           // the runs' device kind
  int cpu_cores = 0, cuda_devices = 0;  // from the records' context
  std::optional<CommFit> fit;           // suite.comm_fit, when the suite measured one
  // The suite's check of the model against its runs, carried into every projection of it so
  // that a design that missed is marked unvalidated there too.
  std::optional<reports::ProjectionValidation> validation;
};

// A results folder, its suite.json, or one run record. Throws UsageError when there is nothing
// to project from (no run of a design with a gradient model, Note [Gradient models]; a record
// without what its model takes, such as bucket timings).
ProjectionSource load_projection_source(const std::string& path);
// The same for a suite record in memory whose run records are under `dir`.
ProjectionSource suite_projection_source(const reports::SuiteRecord& suite, const std::string& dir);

// The bases of one suite workload: one per design of the suite with a gradient model and a
// successful scaling run, in the suite's order. `world_size_1_only`: from the world-size-1 runs
// only (the validation's rule), else from the smallest world size that ran.
ProjectionBasis suite_basis(const reports::SuiteRecord& suite, const std::string& dir,
                            const std::string& workload, bool world_size_1_only);

// "measured" (the source's fit, or one measured now), a preset name, or a topology file.
Topology resolve_topology(const std::string& spec, const ProjectionSource& source);

// The projection record: every basis projected at `devices` on `topo`. Throws UsageError
// when a device count does not fit the topology, or when `topo` names a device class whose
// compute rate cannot be known (Note [Compute rate]: one line naming --device-flops).
reports::ProjectionRecord make_projection(const ProjectionSource& source, const Topology& topo,
                                          const std::vector<int>& devices,
                                          const ProjectionScale& scale);

// Note [Validation tolerance]
// The bucketed AllReduce model predicts DDP's runs of the suite within 15% (median), so 15% is
// the bar: where a design's prediction of one of a workload's runs misses by more, its
// projection of that workload is "unvalidated" in the report and the table (the device-0 reduce
// model leaves out what dominates DP's small CPU runs: reduce_add arithmetic, thread hand-offs;
// docs/metrics.md, "Validation").
inline constexpr double kValidationTolerance = 0.15;

// Predicted against measured step time for every ok scaling run at world size > 1 of a design
// with a gradient model, each predicted from its workload's world-size-1 runs on `measured`,
// with the tolerance; the median absolute error keyed by design name (null: no run to check).
reports::ProjectionValidation validate_projection(const reports::SuiteRecord& suite,
                                                  const std::string& dir, const Topology& measured);

// The compute slots of the measured topology: CPU cores for CPU runs, GPUs for CUDA runs.
int measured_compute_slots(const ProjectionSource& source);

}  // namespace ddpb::bench
