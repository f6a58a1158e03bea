// The fields of `ddpbench run`'s configuration, listed once (Note [One run field list]).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/run/run_config.h"

namespace ddpb::bench {

// Note [One run field list]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Every field of RunConfig that a flag sets or the record shows is one row of run_fields():
// its flag, its place in the record's "config" (a JSON pointer), its help, and how its value
// is bound to CLI11, read as JSON, set from JSON and written back as flag text. From the rows
// come, and only from them:
//  - the `run` command's options (add_run_options, in bench/run/run_flags.h);
//  - RunConfig::to_json and RunConfig::from_json;
//  - run_argv: the arguments of `ddpbench run` that give a configuration back, the only way
//    the suite writes its children's command lines.
// So a new flag is one row, and parse_run_flags(run_argv(c)) == c holds for every field a flag
// sets (tests/bench/run/test_run_fields.cpp checks every row). A row without a flag is record-only
// (an optimizer constant); a row without a key is command-line-only (--quiet, the launcher's
// node flags, which differ between the nodes of one job).
struct RunField {
  std::string flag;  // "--bucket-cap-mb"; "--precision,--math" with an alias; "" record-only
  std::string key;   // "/optimizer/lr"; "" command-line-only
  std::string help;
  std::function<CLI::Option*(CLI::App&, RunConfig&, const RunField&)> bind;
  std::function<nlohmann::json(const RunConfig&)> get;
  std::function<void(RunConfig&, const nlohmann::json&)> set;
  // The arguments that give this field's value to `ddpbench run`: none when it is the default,
  // unless `pinned` (a switch at its default has none either way).
  std::function<std::vector<std::string>(const RunConfig&, const RunField&, bool pinned)> argv;

  // The flag's first name: "--precision" of "--precision,--math".
  std::string name() const { return flag.substr(0, flag.find(',')); }
};

std::span<const RunField> run_fields();

// `ddpbench run` followed by the flags that give `config` back, in the rows' order; defaults
// are left out, but --mode, --workload and the flags named in `always` are always given (the
// suite's own choices, so that a child, or the PyTorch peer that takes the same arguments,
// never relies on a default of its own).
std::vector<std::string> run_argv(const RunConfig& config,
                                  std::span<const std::string> always = {});

}  // namespace ddpb::bench
