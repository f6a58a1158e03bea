// The suite's PyTorch side by side (--with-pytorch): the same configuration run by
// scripts/peer/torch_reference.py, as a child process with its own log and record.
#pragma once

#include <atomic>
#include <string>

#include "bench/suite/suite_spec.h"

namespace ddpb::bench {

// PyTorch's run of the suite entry `run` in the results folder `dir`: status "ok" with its
// record, samples/s, step times and overlap, or "skipped" / "failed" with an error line.
// `stop` (set on Ctrl-C) ends the child early.
reports::PytorchResult run_pytorch(const SuiteRun& run, const SuiteSpec& spec,
                                   const std::string& dir, const std::atomic<bool>* stop);

}  // namespace ddpb::bench
