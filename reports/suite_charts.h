// The six charts of the suite report, built from the suite record (docs/suite-format.md, "How the
// report and compare use the fields"). Each chart reads only ok runs and says "no data: why"
// when the record has nothing for it, so a partial or failed suite still renders.
#pragma once

#include <vector>

#include "reports/suite_record.h"
#include "reports/suite_view.h"

namespace ddpb::reports {

// In report order: chart-throughput, chart-scaling, chart-phases, chart-buckets,
// chart-bucket-sweep, chart-overlap, chart-blame.
std::vector<ChartView> build_suite_charts(const SuiteRecord& suite);

}  // namespace ddpb::reports
