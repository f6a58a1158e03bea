// The suite's PyTorch side by side (--with-pytorch): the same configuration run by
// scripts/peer/torch_reference.py, as a child process with its own log and record.
#pragma once

#include <atomic>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/suite/suite_spec.h"

namespace ddpb::bench {

// PyTorch's run of the suite entry `run` in the results folder `dir`: {"status": "ok",
// "record", "samples_per_s", "step_time_ms", ["overlap_ratio"]}, or "skipped" / "failed" with
// an "error" line. `stop` (set on Ctrl-C) ends the child early.
nlohmann::json run_pytorch(const nlohmann::json& run, const SuiteSpec& spec, const std::string& dir,
                           const std::atomic<bool>* stop);

}  // namespace ddpb::bench
