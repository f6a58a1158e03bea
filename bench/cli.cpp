#include "bench/cli.h"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <iostream>

#include "bench/run_config.h"
#include "bench/trainer.h"
#include "core/check.h"
#include "reports/json_io.h"
#include "workloads/model.h"

namespace ddpb::bench {
namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

void add_run_options(CLI::App& run, RunConfig& c) {
  run.add_option("--mode", c.mode, "single or dp (ddp: see the README)")
      ->check(CLI::IsMember({"single", "dp", "ddp"}));
  run.add_option("--workload", c.workload, "workload preset (see `ddpbench workloads`)")->required();
  run.add_option("--device", c.device, "cpu, cpu:N, cuda or cuda:N");
  run.add_option("--world-size", c.world_size, "dp: number of devices");
  run.add_option("--devices", c.devices, "dp: explicit device list, e.g. cuda:0,cuda:0");
  run.add_option("--dp-broadcast-mb", c.dp_broadcast_mb, "dp: coalescing cap in MiB (default 10)");
  run.add_option("--global-batch", c.global_batch, "samples per step over all devices");
  run.add_option("--steps", c.steps, "measured steps");
  run.add_option("--warmup", c.warmup, "warm-up steps before the measured ones");
  run.add_option("--seed", c.seed, "seed for initialisation, data and shuffling");
  run.add_option("--optimizer", c.optimizer.name, "sgd or adamw");
  run.add_option("--lr", c.optimizer.lr, "learning rate");
  run.add_option("--momentum", c.optimizer.momentum, "SGD momentum");
  run.add_option("--weight-decay", c.optimizer.weight_decay, "weight decay");
  run.add_option("--math", c.math, "fp32 or tf32 (CUDA GEMM math mode)");
  run.add_option("--out", c.out, "write the JSON record here");
  run.add_option("--dump", c.dump, "write init/final parameters, batches and meta.json here");
  run.add_option("--init-from", c.init_from, "start from these parameters (safetensors)");
  run.add_flag("--quiet", c.quiet, "no per-step lines");
}

int run_command(RunConfig config, bool batch_given) {
  if (!batch_given) config.global_batch = default_global_batch(config.workload);
  config.validate();
  fmt::print("config: {}\n", config.to_json().dump());
  auto record = run_training(config);
  if (!config.out.empty()) {
    reports::write_json_atomic(config.out, record);
    fmt::print("wrote {}\n", config.out);
  }
  return 0;
}

int list_workloads() {
  for (const auto& w : workload_presets()) {
    fmt::print("{:<12} {:<6} {}\n", w.name, family_name(w.family), w.description);
  }
  return 0;
}

}  // namespace

int ddpbench_main(int argc, char** argv) {
  CLI::App app{"ddpbench: DataParallel vs DistributedDataParallel benchmark and profiler"};
  app.require_subcommand(1);
  RunConfig config;
  auto* run = app.add_subcommand("run", "train one configuration and report it");
  add_run_options(*run, config);
  auto* workloads = app.add_subcommand("workloads", "list the workload presets");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "ddpbench: " << e.what() << " (see --help)\n";
    return kExitUsage;
  }
  try {
    if (run->parsed()) return run_command(config, run->count("--global-batch") > 0);
    if (workloads->parsed()) return list_workloads();
  } catch (const UsageError& e) {
    std::cerr << "ddpbench: error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "ddpbench: failed: " << e.what() << "\n";
    return kExitRuntime;
  }
  return kExitUsage;
}

}  // namespace ddpb::bench
