// ddpbench runs for the DDP process tests: train with a dump and a record, read the record.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "../util/param_diff.h"
#include "../util/run_cli.h"

namespace ddpb::testing::ddp_runs {

inline const char* kTrain = "--lr 0.05 --momentum 0.9 --weight-decay 0.01 --quiet";

// `ddpbench run ARGS` with the common training flags; dumps to dir/name and records to
// dir/name.json. Returns the final parameters' file.
inline std::string train(const TempDir& dir, const std::string& name, const std::string& args,
                         int seed = 3, int steps = 5, int warmup = 0) {
  std::string dump = dir / name;
  CliResult r = run_cli("run " + args + " " + kTrain + " --steps " + std::to_string(steps) +
                        " --warmup " + std::to_string(warmup) + " --seed " + std::to_string(seed) +
                        " --dump " + dump + " --out " + dump + ".json");
  EXPECT_EQ(r.code, 0) << args << "\n" << r.output;
  return dump + "/final.safetensors";
}

inline nlohmann::json record(const TempDir& dir, const std::string& name) {
  std::ifstream in(dir / (name + ".json"));
  return nlohmann::json::parse(in);
}

}  // namespace ddpb::testing::ddp_runs
