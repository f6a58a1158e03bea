// The input pipeline as a report section: the loader runs (group "loader": the image workload
// on files at each worker count, with and without page-locked memory on CUDA) with their data
// wait and its share of the step, what the loader can give (summary.loader.samples_per_s)
// against what training takes (samples/s), and a chart of both against the worker count: where
// the loader's line falls under the training's, the run is input-bound. Reads the typed suite
// record; never throws on its contents.
#pragma once

#include "reports/suite_record.h"
#include "reports/suite_view.h"

namespace ddpb::reports {

ReportSection build_loader_section(const SuiteRecord& suite);

}  // namespace ddpb::reports
