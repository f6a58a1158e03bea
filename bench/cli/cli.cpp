#include "bench/cli/cli.h"
#include "base/memory_limits.h"
#include "base/process_guards.h"

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/atomic_file.h"
#include "bench/cli/collectives_command.h"
#include "bench/cli/data_command.h"
#include "bench/cli/env_command.h"
#include "bench/cli/project_command.h"
#include "bench/cli/report_commands.h"
#include "bench/cli/validate_command.h"
#include "bench/run/bucket_tuner.h"
#include "bench/run/cli_flags.h"
#include "bench/run/designs.h"
#include "bench/run/run_config.h"
#include "bench/run/run_flags.h"
#include "bench/run/trainer.h"
#include "bench/suite/run_suite.h"
#include "comm/flight_doctor.h"
#include "comm/flight_recorder.h"
#include "comm/launcher.h"
#include "comm/process_group_mpi.h"
#include "comm/rank_env.h"
#include "core/check.h"
#include "reports/json_io.h"
#include "reports/report_util.h"
#include "workloads/family.h"
#include "workloads/model.h"

namespace ddpb::bench {
namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

// An output file named on the command line, checked before any work is done: a device, FIFO
// or directory there, a missing or unwritable folder or a name too long is a usage error, and
// a symbolic link is followed to its target (base/atomic_file.h, check_output_path), which is
// what the writers then replace.
std::string checked_output(const std::string& flag, const std::string& path) {
  if (path.empty()) return path;
  try {
    return check_output_path(path);
  } catch (const WriteFileError& e) {
    throw UsageError(flag + ": " + e.what());
  }
}

// Two outputs named for one file would leave only the last one written (issue 25, D2): refused
// before any work. Paths are compared made absolute first, then with links followed:
// weakly_canonical leaves a relative path to a file not there yet relative ("x.json"), which
// would never equal "./x.json" made canonical (issue 48, P8).
void refuse_shared_outputs(const std::vector<std::pair<std::string, std::string>>& outputs) {
  std::vector<std::pair<std::string, std::string>> seen;  // (absolute path, flag)
  for (const auto& [flag, path] : outputs) {
    if (path.empty()) continue;
    std::error_code ec;
    const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
    std::string key = std::filesystem::weakly_canonical(absolute, ec).string();
    if (ec) key = absolute.lexically_normal().string();
    for (const auto& [other_key, other_flag] : seen) {
      DDPB_USAGE_CHECK(other_key != key) << other_flag << " and " << flag << " name the same file ("
                                         << path << "): one would overwrite the other";
    }
    seen.emplace_back(key, flag);
  }
}

// What the ranks' flight-recorder dumps say of a failed run: the rank that is behind, not
// the first to fail. A hung, slow or stopped rank makes its peers time out waiting for it,
// so they are the ones that exit first (with code 1); the dumps show who issued fewer
// collectives, or left none.
// Only this job's dumps count (a folder per port outlives its job), and only when a collective
// failed or hung: a rank's own failure (a full disk, a bad input) is said as it is (Note [The
// first failure wins] in comm/launcher.cpp).
void explain_failure(const comm::LaunchResult& r, const std::string& dir) {
  comm::FlightDiagnosis d;
  try {
    if (r.own_failure) throw UsageError("the failed rank said why");
    if (r.interrupted) throw UsageError("an interrupt is no rank's fault");
    d = comm::diagnose_flight_dir(dir, r.job, r.started);
    if (!d.collective_trouble) throw UsageError("no collective failed or hung");
  } catch (const std::exception&) {
    std::cerr << "ddpbench launcher: " << r.failure << "\n";
    return;
  }
  // P28: the verdict and what followed it are one line. Printed apart, "then rank 0 exited ..."
  // stood without its first clause wherever one line is kept (the suite's run error).
  std::cerr << "ddpbench launcher: "
            << (d.culprit_named ? d.verdicts.front() + "; then " : std::string()) << r.failure
            << "\n";
  std::cerr << "ddpbench launcher: flight-recorder dumps in " << dir << ": `ddpbench doctor " << dir
            << "` explains\n";
}

int launch_ranks(const RunConfig& config, int argc, char** argv) {
  comm::LaunchSpec spec;
  spec.world_size = config.world_size;
  spec.args.assign(argv, argv + argc);
  spec.nnodes = config.nnodes;
  spec.node_rank = config.node_rank;
  spec.master_addr = config.master_addr;
  spec.master_port = config.master_port;
  spec.flight_dir = config.flight_dir;
  spec.via_mpirun = config.backend == comm::CommBackend::Mpi;
  spec.timeout = std::chrono::milliseconds(std::llround(config.timeout_s * 1000));
  fmt::print("{}\n", comm::launch_banner(spec));
  std::fflush(stdout);
  comm::LaunchResult r = comm::launch_local(spec);
  if (r.exit_code == 0) return 0;
  const std::string dir = r.flight_dir;
  if (std::filesystem::exists(dir)) {
    explain_failure(r, dir);
  } else {
    std::cerr << "ddpbench launcher: " << r.failure << "\n";
  }
  return r.exit_code;
}

int run_command(RunConfig config, bool batch_given, int argc, char** argv) {
  complete_run_flags(config, batch_given);
  config.validate();
  const std::string out = checked_output("--out", config.out);
  const std::string trace = checked_output("--trace", config.trace);
  config.save_params = checked_output("--save-params", config.save_params);
  refuse_shared_outputs(
      {{"--out", out}, {"--trace", trace}, {"--save-params", config.save_params}});
  // A design whose ranks are processes, not started as a rank: become the launcher and start
  // world_size ranks of ourselves.
  const bool ranked = design_of(config).info.processes_per_rank;
  const std::optional<comm::RankEnv> rank_env = ranked ? comm::detect_rank_env() : std::nullopt;
  if (ranked && !rank_env) return launch_ranks(config, argc, argv);
  DDPB_USAGE_CHECK(!rank_env || config.backend != comm::CommBackend::Mpi ||
                   comm::started_by_mpi_launcher() || rank_env->world_size == 1)
      << "--backend mpi needs its ranks started by one MPI launcher (mpirun or srun), or by "
         "none (ddpbench then starts mpirun itself); this rank was started by "
      << rank_env->source;
  if (config.verbose) fmt::print("config: {}\n", reports::json_text(config.to_json()));
  try {
    run_training(config);
  } catch (const std::exception& e) {
    if (ranked && !dynamic_cast<const UsageError*>(&e)) {
      // A failed rank leaves its last collectives behind for `ddpbench doctor`.
      const std::string path = comm::dump_flight_recorder(e.what());
      if (!path.empty()) std::cerr << "ddpbench: flight recorder dumped to " << path << "\n";
    }
    throw;
  }
  return 0;
}

CLI::App* add_suite_command(CLI::App& app, SuiteOptions& o) {
  auto* suite = app.add_subcommand("suite", "run the benchmark matrix into one results folder");
  suite->add_option("suite_file", o.file, "SUITE.json overriding parts of the default matrix");
  suite->add_option("--out", o.out, "results folder (default ddpbench-results/suite-<time>)");
  suite->add_option("--device", o.device, "cpu or cuda (default: cuda when a GPU is usable)");
  add_int_flag(*suite, "--max-world-size", o.max_world_size, 1, kMaxWorldSize,
               "drop world sizes above N");
  suite->add_flag("--quick", o.quick, "a short smoke version of the suite");
  suite->add_flag("--with-pytorch", o.with_pytorch,
                  "also run each configuration in PyTorch (scripts/peer/torch_reference.py)");
  suite->add_flag("--validate-projection", o.validate_projection,
                  "add world size 3 (CPU; oversubscribed on 2 cores) and report how well the "
                  "projection predicts world sizes 2 and 3 from world size 1");
  suite->add_option("--resume", o.resume, "finish the interrupted suite in this folder");
  suite->add_option("--hosts", o.hosts,
                    "FILE: spread the runs whose ranks are processes over these hosts, a line "
                    "each: NAME [ADDRESS] [slots=K]; the first is this machine");
  suite->add_option("--launch", o.launch,
                    "how --hosts starts a node on a host, {host} its name, given one shell line "
                    "(default: ssh -o BatchMode=yes {host})");
  return suite;
}

struct CompareOptions {
  std::string base, fresh;
  double threshold = 5;
};

CLI::App* add_compare_command(CLI::App& app, CompareOptions& o) {
  auto* compare =
      app.add_subcommand("compare",
                         "per-run deltas between two results; exit 1 on a regression past the "
                         "threshold and the runs' step-time noise");
  compare->add_option("base", o.base, "baseline results folder, suite.json or run record")
      ->required();
  compare->add_option("new", o.fresh, "new results folder, suite.json or run record")->required();
  add_real_flag(*compare, "--threshold", o.threshold, 0, 1e6,
                "regression threshold in percent (default 5)");
  return compare;
}

// The option named `name` in the subcommand that was given, or nullptr.
const CLI::Option* given_option(const CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands()) {
    if (const CLI::Option* o = sub->get_option_no_throw(name)) return o;
    if (const CLI::Option* o = given_option(*sub, name)) return o;
  }
  return app.get_option_no_throw(name);
}

// CLI11's "Could not convert: --quiet = maybe" in ddpbench's words: what is wrong and what the
// flag takes. Every flag with a number parses its own value and says its range (add_int_flag),
// so what reaches CLI11's conversion is a value given to a switch, or a flag of another type.
std::string conversion_error_line(const CLI::App& app, const CLI::ConversionError& e) {
  const std::string what = e.what();
  const std::string head = "Could not convert: ";
  const size_t eq = what.find(" = ");
  if (what.rfind(head, 0) != 0 || eq == std::string::npos) return what + " (see --help)";
  const std::string name = what.substr(head.size(), eq - head.size());
  const std::string value = what.substr(eq + 3);
  const CLI::Option* option = given_option(app, name);
  if (option != nullptr && option->get_expected_max() == 0)
    return name + " is a switch: give it without a value (got " + name + "=" + value + ")";
  return name + ": '" + value + "' is not a value " + name + " takes (see --help)";
}

// Parses the command line; returns the exit code when there is nothing more to do (help, or
// a usage error, reported on one line).
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ConversionError& e) {
    std::cerr << "ddpbench: error: " << reports::printable(conversion_error_line(app, e)) << "\n";
    return kExitUsage;
  } catch (const CLI::ParseError& e) {
    std::cerr << "ddpbench: error: " << reports::printable(e.what()) << " (see --help)\n";
    return kExitUsage;
  } catch (const UsageError& e) {  // a flag's value out of range (bench/run/cli_flags.h)
    std::cerr << "ddpbench: error: " << reports::printable(e.what()) << "\n";
    return kExitUsage;
  }
  return std::nullopt;
}

// The preset table: a line each, or (--json) every field, for the PyTorch peers.
int list_workloads(bool as_json) {
  if (as_json) {
    fmt::print("{}\n", reports::json_text(workload_table_json(), 1));
    return 0;
  }
  for (const auto& w : workload_presets()) {
    fmt::print("{:<12} {:<6} {}\n", w.name, w.family, w.description);
  }
  return 0;
}

}  // namespace

int ddpbench_main(int argc, char** argv) {
  install_process_guards();  // Note [Output that outlives its reader]
  CLI::App app{"ddpbench: DataParallel vs DistributedDataParallel benchmark and profiler"};
  app.require_subcommand(1);
  RunConfig config;
  auto* run = app.add_subcommand("run", "train one configuration and report it");
  add_run_options(*run, config);
  auto* workloads = app.add_subcommand("workloads", "list the workload presets");
  bool workloads_json = false;
  workloads->add_flag("--json", workloads_json,
                      "every preset's fields, default batch, traits and batch shapes as JSON");
  std::vector<std::string> validate_files;
  auto* validate = app.add_subcommand(
      "validate", "check run records and suite.json files against their schemas");
  validate->add_option("files", validate_files, "ddpbench run --out records or suite.json files")
      ->required();
  auto* env =
      app.add_subcommand("env", "show the CPU, BLAS, CUDA, NVTX and backends this binary sees");
  std::string doctor_dir;
  auto* doctor =
      app.add_subcommand("doctor", "explain a hang from the ranks' flight-recorder dumps");
  doctor->add_option("dir", doctor_dir, "directory with rank<r>.json dumps")->required();
  SuiteOptions suite_options;
  auto* suite = add_suite_command(app, suite_options);
  std::string report_in, report_out;
  auto* report = app.add_subcommand("report", "render a suite's results as HTML or Markdown");
  report->add_option("results", report_in, "a results folder of ddpbench suite, or its suite.json")
      ->required();
  report->add_option("-o,--out", report_out, "report.html or report.md")->required();
  ProjectOptions project_options;
  auto* project = add_project_command(app, project_options);
  DataOptions data_options;
  auto* data = add_data_command(app, data_options);
  CompareOptions compare_options;
  auto* compare = add_compare_command(app, compare_options);
  CollectivesCommandOptions collectives_options;
  auto* collectives = add_collectives_command(app, collectives_options);
  if (const auto exit_code = parse_command_line(app, argc, argv)) return *exit_code;
  try {
    if (run->parsed()) {
      // The bucket autotuner searches during the warm-up: unless told, it gets the steps it needs.
      if (config.bucket_cap_auto && run->count("--warmup") == 0)
        config.warmup = std::max<int64_t>(config.warmup, BucketCapTuner::kStepsNeeded);
      // Issue 48, P24: a --world-size given under another launcher must agree with it (its
      // default of 1 gives way to the launcher's world).
      if (run->count("--world-size") > 0) {
        const auto env = comm::detect_rank_env();
        DDPB_USAGE_CHECK(!env || env->world_size == config.world_size)
            << "--world-size " << config.world_size << " but the launcher started "
            << env->world_size << " ranks: under a launcher its rank count is the world";
      }
      return run_command(config, run->count("--global-batch") > 0, argc, argv);
    }
    if (workloads->parsed()) return list_workloads(workloads_json);
    if (suite->parsed()) return run_suite(suite_options);
    if (report->parsed()) return report_command(report_in, checked_output("--out", report_out));
    if (project->parsed()) {
      project_options.report_out = checked_output("--out", project_options.report_out);
      project_options.json_out = checked_output("--json", project_options.json_out);
      refuse_shared_outputs(
          {{"--out", project_options.report_out}, {"--json", project_options.json_out}});
      return project_command(project_options);
    }
    if (compare->parsed())
      return compare_command(compare_options.base, compare_options.fresh,
                             compare_options.threshold);
    if (validate->parsed()) return validate_command(validate_files);
    if (collectives->parsed()) return collectives_command(collectives_options, argc, argv);
    if (env->parsed()) return env_command();
    if (data->parsed()) return data_command(data_options);
    if (doctor->parsed()) {
      fmt::print("{}", comm::diagnose_flight_dumps(doctor_dir));
      return 0;
    }
  } catch (const UsageError& e) {
    // Messages quote files, records and flags: control and bidirectional characters escaped
    // (issue 48, P21), so no input can forge a line or hide one.
    std::cerr << "ddpbench: error: " << reports::printable(e.what()) << "\n";
    return kExitUsage;
  } catch (const std::bad_alloc&) {
    std::cerr << "ddpbench: failed: out of memory (std::bad_alloc): "
              << read_memory_limits().describe() << "\n";
    return kExitRuntime;
  } catch (const std::exception& e) {
    std::cerr << "ddpbench: failed: " << reports::printable(e.what()) << "\n";
    return kExitRuntime;
  }
  return kExitUsage;
}

}  // namespace ddpb::bench
