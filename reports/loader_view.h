// The input pipeline as a report section: the loader runs (group "loader": the image workload
// on files at each worker count, with and without page-locked memory on CUDA) with their data
// wait and its share of the step, what the loader can give (summary.loader.samples_per_s)
// against what training takes (samples/s), and a chart of both against the worker count: where
// the loader's line falls under the training's, the run is input-bound. Every row and a note
// per workload name the dataset measured, since the suite's own JPEGs and a user's folder read
// alike in a table of numbers. Reads the typed suite record; never throws on its contents.
#pragma once

#include "reports/suite_record.h"
#include "reports/suite_view.h"

namespace ddpb::reports {

ReportSection build_loader_section(const SuiteRecord& suite);

// The dataset a run trained on, in words: "synthetic data", or --data's path with what was read
// ("/d/imgs (240 images in 3 class folders)", "/d/shakespeare (1003854 tokens in 1 shard, split
// train)"), for any section that shows runs.
std::string dataset_name(const LoaderSummary& loader);

// The dataset of `run`: its record's (dataset_name), else its --data argument (a run that did
// not finish), else "synthetic data".
std::string run_dataset(const SuiteRun& run);

}  // namespace ddpb::reports
