// The flags of `ddpbench run`, once: the CLI adds them to its `run` command, and the suite
// parses each run it will start through them (parse_run_args), so that a run the suite would
// fail is refused before the first one starts, with the limits `ddpbench run` applies.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "bench/run/run_config.h"

namespace ddpb::bench {

// Adds every `ddpbench run` flag to `run`, each parsed into `config`.
void add_run_options(CLI::App& run, RunConfig& config);

// What follows the parse, wherever `run`'s flags are parsed: --mode, --zero-stage and
// --sharding-strategy agree (resolve_zero_stage, resolve_sharding_strategy), and the workload's
// default global batch where none was given.
void complete_run_flags(RunConfig& config, bool batch_given);

// The configuration of `ddpbench run ARGS` (args[0] is "run"), with the workload's default
// global batch where none is given: parsed, not validated (the suite's typed record of each
// run, Note [Typed run configuration]). Throws UsageError with the flag's one-line reason.
RunConfig parse_run_flags(const std::vector<std::string>& args);

// `flags` (without "run") parsed over `config`: the flags given replace its fields, the others
// keep theirs (a suite variant's flags over the suite's run). Throws UsageError.
void apply_run_flags(RunConfig& config, const std::vector<std::string>& flags);

// parse_run_flags, validated as `ddpbench run` validates it (RunConfig::validate). Throws
// UsageError with the flag's or the check's one-line reason.
RunConfig parse_run_args(const std::vector<std::string>& args);

}  // namespace ddpb::bench
