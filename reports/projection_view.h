// The projection as a report section (`ddpbench project -o`, and the suite report under the
// verdict): a table per device count with columns per design, a chart of scaling efficiency
// against N per workload (measured points solid, projected dashed), the compute rate each design
// was projected at, the crossover, each design's limits (its largest N at >= 90% efficiency,
// where it stops gaining), and the validation table when the record has one (a design that
// missed a run by more than the tolerance is marked unvalidated for that workload).
// Reads the typed projection record (reports/projection_record.h); never throws on its
// contents. Designs are named by the labels of the record's rows (Note [Designs keyed by
// name]), never by a name written here.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "reports/projection_record.h"
#include "reports/suite_view.h"

namespace ddpb::reports {

ReportSection build_projection_section(const std::optional<ProjectionRecord>& projection);

// The one format of a projected time (the report's table and `ddpbench project`'s): µs below a
// millisecond, ms below a second, else s, with 3 or 4 significant digits and never an exponent
// ("850.0 µs", "13.27 ms", "13.27 s", "4521 s"); "-" for nullopt.
std::string format_duration(std::optional<double> ms);
// A FLOP rate in the unit that keeps it short: "989.4 TFLOP/s", "61.2 GFLOP/s".
std::string format_flops(double flops_per_s);
// The compute rate each design of `w` was projected at, and where it comes from ("compute at
// 412.0 TFLOP/s per device (--device-flops)"); every design in one clause when they agree, else
// a clause per design after its label ("DP compute at ...; DDP compute at ..."). `p` gives the
// designs' rows.
std::string compute_rate_line(const ProjectionRecord& p, const ProjectedWorkload& w);
// The designs whose projection of `w` missed a validation run by more than the validation's
// tolerance ("DP's projection is unvalidated (its validation missed by more than ±15%: 2 devices
// -51.0%)"), or "" when none did.
std::string unvalidated_line(const ProjectionRecord& p, const ProjectedWorkload& w);
// Note [Projected memory] (bench/project/projection.h): each design's projected peak per device
// at the largest device count, and, with --device-memory, the largest model of the workload's
// family it fits there ("... ZeRO-2 fits 2.1G parameters (largest preset: gpt-medium)"); ""
// when the record has neither.
std::string memory_fit_line(const ProjectionRecord& p, const ProjectedWorkload& w);
bool unvalidated(const std::string& workload, const std::string& design,
                 const std::optional<ProjectionValidation>& validation);
// The rows of the designs `p` projects, in its order; a design its workloads name that
// "designs" does not list (a hand-edited record) after them, labelled by its name.
std::vector<DesignInfo> designs_shown(const ProjectionRecord& p);

}  // namespace ddpb::reports
