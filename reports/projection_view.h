// The projection as a report section (`ddpbench project -o`, and the suite report under the
// verdict): a table per device count, a chart of scaling efficiency against N per workload
// (measured points solid, projected dashed), the crossover, DDP's largest N at >= 90%
// efficiency, where DP stops gaining, and the validation table when the record has one.
// Reads the typed projection record (reports/projection_record.h); never throws on its
// contents.
#pragma once

#include <optional>

#include "reports/projection_record.h"
#include "reports/suite_view.h"

namespace ddpb::reports {

ReportSection build_projection_section(const std::optional<ProjectionRecord>& projection);

}  // namespace ddpb::reports
