// What a run trains on: the workload's synthetic dataset, or files (`--data`: token shards or
// an image folder, data/), and the loader options of the flags; and the record's account of
// the input pipeline (summary.loader).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench/run/run_config.h"
#include "data/dataloader.h"
#include "data/dataset.h"
#include "reports/run_record.h"
#include "workloads/model.h"

namespace ddpb::bench {

// The dataset of the run: files when --data is given (checked against the model: vocabulary,
// sequence length, image size, classes), else the workload's synthetic one.
std::shared_ptr<const Dataset> make_training_dataset(const RunConfig& config,
                                                     const WorkloadSpec& spec);

// What `run` and `data bench` print at start-up about --data: the path and format, then the
// files read with their token or image counts (data/dataset.h describe_data_files); "" for
// synthetic data.
std::string describe_training_data(const RunConfig& config, const Dataset& dataset);

// summary.loader's files, split, left_out and meta_vocab_size, from the dataset's files.
void add_data_files(const Dataset& dataset, reports::LoaderSummary& summary);

LoaderOptions loader_options(const RunConfig& config);

// summary.loader from the loader's totals and the steps' records.
reports::LoaderSummary loader_summary(const RunConfig& config, const DataLoader& loader,
                                      const Dataset& dataset, const Device& data_device,
                                      const std::vector<reports::StepRecord>& steps,
                                      double median_step_ms);

}  // namespace ddpb::bench
