#include "bench/run/run_flags.h"

#include "bench/run/designs.h"
#include "bench/run/run_fields.h"
#include "core/check.h"
#include "workloads/model.h"

namespace ddpb::bench {

void add_run_options(CLI::App& run, RunConfig& config) {
  for (const RunField& f : run_fields()) {
    if (f.bind) f.bind(run, config, f);
  }
  run.get_option("--workload")->required();
}

namespace {

// Parses `args` (args[0] is "run") into `config`: the flags given replace its fields, the
// others keep theirs. Returns whether --global-batch was given.
bool parse_into(RunConfig& config, const std::vector<std::string>& args, bool workload_required) {
  DDPB_USAGE_CHECK(!args.empty() && args.front() == "run") << "not the arguments of `ddpbench run`";
  CLI::App app{"ddpbench"};
  CLI::App* run = app.add_subcommand("run");
  add_run_options(*run, config);
  run->get_option("--workload")->required(workload_required);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses from the back
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  return run->count("--global-batch") > 0;
}

}  // namespace

void complete_run_flags(RunConfig& config, bool batch_given) {
  resolve_zero_stage(config);
  resolve_sharding_strategy(config);
  if (!batch_given) config.global_batch = default_global_batch(config.workload);
}

RunConfig parse_run_flags(const std::vector<std::string>& args) {
  RunConfig config;
  complete_run_flags(config, parse_into(config, args, true));
  return config;
}

void apply_run_flags(RunConfig& config, const std::vector<std::string>& flags) {
  std::vector<std::string> args = {"run"};
  args.insert(args.end(), flags.begin(), flags.end());
  parse_into(config, args, false);
  complete_run_flags(config, true);
}

RunConfig parse_run_args(const std::vector<std::string>& args) {
  RunConfig config = parse_run_flags(args);
  config.validate();
  return config;
}

}  // namespace ddpb::bench
