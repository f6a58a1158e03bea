// The critical path in the report (Note [Critical path] in bench/measure/critical_path.h): per
// workload, DP's and DDP's median step at the largest world size, as a sentence of shares and
// as a Gantt chart per design with the critical path drawn under the lanes, its spans in the
// phase colours of every chart (Note [Phase colours], reports/phase_style.h). Reads the suite
// record's metrics.critical_path; never throws on its contents.
#pragma once

#include <string>
#include <vector>

#include "reports/suite_record.h"
#include "reports/suite_view.h"

namespace ddpb::reports {

// Per design (DP, then DDP) of `workload`: "Critical path, mlp-small DDP at 2 ranks: the
// median step's 25.1 ms are compute 61%, communication 20%, data 2%, waiting for rank 1 15%,
// host 2%."
std::vector<std::string> critical_path_paragraphs(const SuiteRecord& suite,
                                                  const std::string& workload);

// chart-critical-path: one Gantt chart per workload and design.
ChartView build_critical_path_chart(const SuiteRecord& suite);

}  // namespace ddpb::reports
