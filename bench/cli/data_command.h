// `ddpbench data make tokens|imagefolder --out DIR ...`: a realistic dataset on disk
// (data/make_data.h); `ddpbench data bench --data DIR --workload W ...`: the loader alone,
// without training, so that its capacity can be set against what training asks of it.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "bench/run/run_config.h"
#include "data/make_data.h"

namespace ddpb::bench {

struct DataOptions {
  TokenDataSpec tokens;
  ImageDataSpec images;
  std::string token_format = "llmc";
  RunConfig bench;       // --data, --workload, the loader flags, --global-batch, --device
  int64_t batches = 20;  // data bench: batches timed after one warm-up batch
  CLI::App* make_tokens = nullptr;
  CLI::App* make_images = nullptr;
  CLI::App* bench_cmd = nullptr;
};

CLI::App* add_data_command(CLI::App& app, DataOptions& o);
// Runs whichever subcommand was parsed; returns the exit code (throws UsageError for bad input).
int data_command(DataOptions& o);

}  // namespace ddpb::bench
