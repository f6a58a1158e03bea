#include "bench/suite/run_suite.h"

#include <signal.h>
#include <unistd.h>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "base/input_file.h"
#include "base/subprocess.h"
#include "bench/measure/context.h"
#include "bench/measure/gemm_peak.h"
#include "bench/project/suite_projection.h"
#include "bench/run/designs.h"
#include "bench/run/run_config.h"
#include "bench/run/run_fields.h"
#include "bench/run/run_flags.h"
#include "bench/suite/child_process.h"
#include "bench/suite/progress.h"
#include "bench/suite/pytorch_peer.h"
#include "bench/suite/results_lock.h"
#include "bench/suite/speed_of_light.h"
#include "bench/suite/suite_checks.h"
#include "bench/suite/suite_collectives.h"
#include "bench/suite/suite_hosts.h"
#include "bench/suite/suite_metrics.h"
#include "bench/suite/suite_spec.h"
#include "core/check.h"
#include "core/device.h"
#include "core/ops.h"
#include "data/make_data.h"
#include "reports/html_report.h"
#include "reports/json_io.h"
#include "reports/report_util.h"
#include "reports/schema_validator.h"
#include "reports/suite_view.h"
#include "workloads/model.h"

namespace fs = std::filesystem;

namespace ddpb::bench {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_stop_signal{0};

extern "C" void on_stop_signal(int sig) {
  g_stop_signal = sig;
  g_stop = true;
}

using reports::RunStatus;
using reports::SuiteRecord;

std::string status_name(const SuiteRun& run) {
  return run.status ? std::string(enum_name(*run.status)) : "(no status)";
}

std::string timestamp() {
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", std::localtime(&now));
  return buf;
}

// The suite file, bounded as a suite file is (Note [User-named inputs]).
std::string read_text(const std::string& path) {
  try {
    return read_input_file(path, kMaxSuiteFileBytes);
  } catch (const InputFileError& e) {
    DDPB_USAGE_FAIL() << "cannot read suite file " << e.what();
  }
  return {};
}

// Every run whose ranks are processes fits the hosts (Note [Runs across hosts]).
// Designs without a process per rank (DP) stay on this host, with its GPUs; MPI's launcher
// starts one host's ranks only.
void check_placements(const SuiteSpec& spec, int gpus) {
  if (spec.hosts.empty()) return;
  for (const SuiteRun& run : expand_suite(spec)) {
    const int world = static_cast<int>(run.world_size);
    if (!design_named(run.mode).info.processes_per_rank) {
      DDPB_USAGE_CHECK(spec.device != DeviceType::CUDA || world <= gpus)
          << run.id << " runs on this host alone (its ranks are not processes): it needs " << world
          << " GPUs, this host has " << gpus;
      continue;
    }
    DDPB_USAGE_CHECK(spec.hosts.nodes_for(world) == 1 || run.run_config().backend != "mpi")
        << run.id << ": --backend mpi runs on one host (its launcher is mpirun on this host); "
        << "across hosts use scripts/cluster/mpirun_ddp.sh";
  }
}

// The GPUs a suite's world sizes may use: this host's, or with --hosts all hosts' slots.
int suite_gpus(const SuiteSpec& spec, int gpus) {
  if (spec.hosts.empty()) return gpus;
  return std::max(gpus, spec.hosts.hosts.front().slots * static_cast<int>(spec.hosts.hosts.size()));
}

SuiteSpec resolve_spec(const SuiteOptions& o, int gpus) {
  DeviceType device = gpus > 0 ? DeviceType::CUDA : DeviceType::CPU;
  if (!o.device.empty()) {
    const auto named = enum_from_name<DeviceType>(o.device);
    DDPB_USAGE_CHECK(named) << "--device must be cpu or cuda, got " << o.device;
    device = *named;
  }
  SuiteSpec spec = o.file.empty()
                       ? default_suite(device, gpus, o.quick)
                       : suite_from_text(device, gpus, o.quick, read_text(o.file), o.file);
  if (o.with_pytorch) spec.with_pytorch = true;
  if (o.validate_projection) spec.validate_projection = true;
  if (spec.validate_projection &&
      std::find(spec.world_sizes.begin(), spec.world_sizes.end(), 3) == spec.world_sizes.end() &&
      spec.device == DeviceType::CPU) {
    spec.world_sizes.push_back(3);
    std::sort(spec.world_sizes.begin(), spec.world_sizes.end());
  }
  if (o.max_world_size != -1) {
    DDPB_USAGE_CHECK(o.max_world_size >= 1)
        << "--max-world-size must be positive, got " << o.max_world_size;
    std::erase_if(spec.world_sizes, [&](int n) { return n > o.max_world_size; });
  }
  DDPB_USAGE_CHECK(!o.hosts.empty() || o.launch.empty()) << "--launch needs --hosts FILE";
  if (!o.hosts.empty()) spec.hosts = read_suite_hosts(o.hosts, o.launch);
  validate_suite(spec, suite_gpus(spec, gpus));
  check_suite_runs(spec);
  check_placements(spec, gpus);
  return spec;
}

// Forgets what an earlier attempt at `run` left: its outcome is decided again.
void reset_outcome(SuiteRun& run) {
  run.error.reset();
  run.metrics.reset();
  run.correctness.reset();
  run.scaling.reset();
}

// The outcome of a child that exited 0: its record, checked against the schema, or failed.
void read_run_record(SuiteRun& run, const std::string& dir, const std::string& record,
                     const std::string& trace, const std::string& params, double peak) {
  try {
    const auto rec = reports::read_json((fs::path(dir) / record).string());
    const auto problems = reports::validate_run_record(rec);
    DDPB_CHECK(problems.empty()) << record << " does not match its schema: "
                                 << reports::format_errors(problems);
    run.status = RunStatus::Ok;
    run.record = record;
    if (fs::exists(fs::path(dir) / params)) run.params = params;  // needs_parameters
    if (fs::exists(fs::path(dir) / trace)) run.trace = trace;
    run.metrics = run_metrics(reports::RunRecord::from_json(rec), peak);
  } catch (const std::exception& e) {
    run.status = RunStatus::Failed;
    run.error = std::string("bad record: ") + e.what();
  }
}

// `save_params`: whether a correctness check compares its final parameters (needs_parameters).
void run_one(SuiteRun& run, const SuiteSpec& spec, const std::string& dir, double peak,
             bool save_params, Progress& progress) {
  const std::string stem = run_file_stem(run.id);
  const std::string record = "runs/" + stem + ".json", trace = "traces/" + stem + ".json",
                    params = "params/" + stem + ".safetensors";
  // Started as the suite was, through the bundled loader too (gpu_check.sh).
  std::vector<std::string> argv = self_command();
  argv.insert(argv.end(), run.args.begin(), run.args.end());
  argv.insert(argv.end(), {"--out", record, "--trace", trace});
  if (save_params) argv.insert(argv.end(), {"--save-params", params});
  ChildSpec cs{argv,
               dir,
               (fs::path(dir) / "logs" / (stem + ".log")).string(),
               2 * spec.timeout_s + 60,
               &g_stop,
               [&] { progress.tick(); }};
  // A stale result from an interrupted attempt must not pass for this one.
  fs::remove(fs::path(dir) / record);
  const int nodes = design_named(run.mode).info.processes_per_rank
                        ? spec.hosts.nodes_for(static_cast<int>(run.world_size))
                        : 1;
  std::vector<NodeOutcome> others;
  const ChildResult r =
      nodes > 1 ? run_across_hosts(cs, spec.hosts, nodes, spec.timeout_s, &others) : run_child(cs);
  run.duration_s = r.seconds;
  run.exit_code = r.exit_code;
  run.log = "logs/" + stem + ".log";
  reset_outcome(run);
  if (r.stopped) {
    run.status = RunStatus::Interrupted;
    run.error = "interrupted by a signal before it finished";
    return;
  }
  if (r.exit_code == 0 && fs::exists(fs::path(dir) / record)) {
    read_run_record(run, dir, record, trace, params, peak);
  } else {
    run.status = RunStatus::Failed;
    run.error = r.timed_out
                    ? fmt::format("timed out after {:.0f} s and was killed; last output: {}",
                                  r.seconds, failure_line(cs.log_path))
                    : failure_line(cs.log_path) + fmt::format(" (exit code {})", r.exit_code);
  }
  // A node on another host that failed says why too (its log is next to node 0's).
  for (size_t k = 0; k < others.size(); ++k) {
    if (others[k].exit_code == 0) continue;
    const std::string said =
        fmt::format("node {} on host {}: {} (exit code {})", k + 1, others[k].host,
                    failure_line(others[k].log), others[k].exit_code);
    if (run.ok()) {
      run.status = RunStatus::Failed;
      run.error = said;
    } else {
      run.error = run.error.value_or("") + "; " + said;
    }
  }
  if (spec.with_pytorch && run.ok()) run.pytorch = run_pytorch(run, spec, dir, &g_stop);
}

std::string outcome_line(const SuiteRun& run) {
  if (!run.measured()) {
    return fmt::format("{} {}: {}", run.id, status_name(run), run.error.value_or(""));
  }
  const reports::RunMetrics& m = *run.metrics;
  std::string line = fmt::format("{} ok: median {:.2f} ms, {:.1f} samples/s", run.id,
                                 m.step_time_ms.median, m.samples_per_s);
  if (m.overlap_ratio) line += fmt::format(", overlap {:.2f}", *m.overlap_ratio);
  line += fmt::format(" ({:.1f} s)", run.duration_s.value_or(0));
  return line;
}

// Every suite.json written matches reports/schema/suite.schema.json: a mismatch is our bug.
void write_suite(const SuiteRecord& record, const std::string& dir) {
  const nlohmann::json suite = record.to_json();
  const auto problems = reports::validate_suite_record(suite);
  DDPB_CHECK(problems.empty()) << "the suite record does not match its schema, not writing it: "
                               << reports::format_errors(problems);
  reports::write_json_atomic((fs::path(dir) / "suite.json").string(), suite);
}

// The last screen: the report's own cells (reports::summary_table), so a column the report
// calls "n/a" (overlap of a run with nothing to overlap, scaling at world size 1) says so here.
void print_summary(const SuiteRecord& suite) {
  fmt::print("\n{}",
             reports::terminal_summary(reports::summary_table(suite),
                                       {"run", "status", "median ms", "samples/s", "overlap",
                                        "weak eff", "correctness (param diff)"}));
}

// Note [A results folder is data]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// suite.json stores each run's arguments and the paths of its files, but --resume never takes
// them as instructions: an edited or planted suite.json could otherwise make the suite run
// flags of its choosing (an injected --dump that overwrote a file elsewhere), or read any file
// of the machine as a run's record and echo it. So --resume rebuilds every run from the matrix
// (the suite block), refuses a suite.json whose runs or stored arguments differ from what the
// matrix gives, naming the run, and accepts only the paths the suite itself would have written,
// inside the folder (issue 25, D1, S3).
// Whether a resumed file's arguments give the run its matrix gives: the same text, or (written by
// an earlier ddpbench, in another order or with defaults spelled out) the same configuration,
// the command-line-only flags included.
bool gives_the_same_run(const std::vector<std::string>& held,
                        const std::vector<std::string>& want) {
  if (held == want) return true;
  try {
    const RunConfig a = parse_run_flags(held), b = parse_run_flags(want);
    return a.to_json() == b.to_json() && run_argv(a) == run_argv(b);
  } catch (const UsageError&) {
    return false;
  }
}

void check_resumed_runs(SuiteRecord& record, const SuiteSpec& spec, const std::string& path) {
  const std::vector<SuiteRun> expected = expand_suite(spec);
  const auto find = [](const std::vector<SuiteRun>& runs, const std::string& id) {
    const auto it =
        std::find_if(runs.begin(), runs.end(), [&](const SuiteRun& r) { return r.id == id; });
    return it == runs.end() ? nullptr : &*it;
  };
  for (const SuiteRun& e : expected) {
    DDPB_USAGE_CHECK(find(record.runs, e.id))
        << path << ": run " << e.id
        << " of its matrix is missing: not a suite.json this suite wrote";
  }
  for (SuiteRun& r : record.runs) {
    const SuiteRun* e = find(expected, r.id);
    DDPB_USAGE_CHECK(e) << path << ": run " << reports::printable(r.id)
                        << " is not one of its matrix's runs: not a suite.json this suite wrote";
    DDPB_USAGE_CHECK(gives_the_same_run(r.args, e->args))
        << path << ": run " << r.id << " holds arguments its matrix does not give ("
        << reports::printable(fmt::format("{}", fmt::join(r.args, " "))) << "; the matrix gives "
        << fmt::format("{}", fmt::join(e->args, " "))
        << "): a results folder is data, not a program (Note [A results folder is data])";
    r.args = e->args;  // what runs is the matrix's text
    // The typed configuration the reports read is the one its arguments give (Note [Typed run
    // configuration]), not whatever the file says.
    const auto config_json = [](const SuiteRun& run) {
      return run.config ? reports::record_to_json(*run.config) : nlohmann::json();
    };
    DDPB_USAGE_CHECK(config_json(r) == config_json(*e))
        << path << ": run " << r.id << "'s config is not what its arguments give"
        << " (Note [A results folder is data])";
    const std::string stem = run_file_stem(r.id);
    for (const auto& [field, value, want] :
         {std::tuple{"record", r.record, "runs/" + stem + ".json"},
          std::tuple{"log", r.log, "logs/" + stem + ".log"},
          std::tuple{"params", r.params, "params/" + stem + ".safetensors"},
          std::tuple{"trace", r.trace, "traces/" + stem + ".json"}}) {
      DDPB_USAGE_CHECK(!value || *value == want)
          << path << ": run " << r.id << "'s " << field << " is "
          << reports::printable(value->substr(0, 200)) << ", not this folder's " << want
          << " (Note [A results folder is data])";
    }
  }
}

// A folder written by another build or machine is resumed, with a word: its runs so far and
// the ones run now may not compare (issue 25, M7).
void warn_if_written_elsewhere(const reports::RunContext& then, const std::string& dir) {
  const nlohmann::json now = build_context();
  const std::string version = now.value("ddpbench_version", ""), host = now.value("host", "");
  const std::string commit = now.value("git_commit", "");
  std::string differs;
  if (then.ddpbench_version != version)
    differs += " version " + then.ddpbench_version + " (this is " + version + ")";
  if (then.git_commit.value_or(commit) != commit)
    differs += " commit " + *then.git_commit + " (this is " + commit + ")";
  if (then.host != host) differs += " host " + then.host + " (this is " + host + ")";
  if (differs.empty()) return;
  fmt::print(stderr,
             "ddpbench suite: warning: {} was written by another build or machine:{}; its finished "
             "runs and the runs made now may not compare\n",
             dir, reports::printable(differs));
}

// The rows of the designs the runs use, in the table's order (Note [Designs in records]).
std::vector<reports::DesignInfo> designs_of(const std::vector<SuiteRun>& runs) {
  std::vector<reports::DesignInfo> out;
  for (const Design& d : designs()) {
    if (std::any_of(runs.begin(), runs.end(),
                    [&](const SuiteRun& r) { return r.mode == d.info.name; }))
      out.push_back(d.info);
  }
  return out;
}

// The suite record of --resume DIR, with its matrix checked against this machine.
SuiteRecord resume_suite(const SuiteOptions& o, int gpus, SuiteSpec& spec) {
  DDPB_USAGE_CHECK(o.file.empty() && o.out.empty() && o.device.empty() && o.max_world_size == -1 &&
                   !o.quick && !o.validate_projection && o.hosts.empty() && o.launch.empty())
      << "--resume takes the matrix from " << o.resume
      << "/suite.json: drop SUITE.json, --out, --device, --max-world-size, --quick, "
         "--validate-projection, --hosts and --launch";
  const std::string path = (fs::path(o.resume) / "suite.json").string();
  DDPB_USAGE_CHECK(fs::exists(path)) << "--resume " << o.resume << ": no suite.json there";
  nlohmann::json suite;
  try {
    suite = reports::read_json(path);
    reports::check_schema_version(suite, path);  // another version's layout is not resumed
  } catch (const reports::ReportError& e) {
    throw UsageError(e.what());
  }
  DDPB_USAGE_CHECK(suite.is_object() && suite.value("kind", "") == "suite" &&
                   suite.contains("suite") && suite.contains("runs") && suite["runs"].is_array())
      << path << " is not a ddpbench suite record";
  spec = SuiteSpec::from_json(suite["suite"]);
  if (o.with_pytorch) spec.with_pytorch = true;
  SuiteRecord record = SuiteRecord::from_json(suite);
  if (record.hosts) spec.hosts = hosts_from_record(*record.hosts, record.launch.value_or(""), path);
  validate_suite(spec, suite_gpus(spec, gpus));
  check_suite_runs(spec);
  check_placements(spec, gpus);
  check_resumed_runs(record, spec, path);
  warn_if_written_elsewhere(record.context, o.resume);
  const auto failed = std::count_if(record.runs.begin(), record.runs.end(), [](const SuiteRun& r) {
    return r.status == RunStatus::Failed;
  });
  if (failed > 0) fmt::print("ddpbench suite: --resume retries {} failed run(s)\n", failed);
  record.suite = spec.to_matrix();
  record.designs = designs_of(record.runs);
  nlohmann::json& resumed = record.context.extra.value["resumed"];
  if (!resumed.is_array()) resumed = nlohmann::json::array();
  resumed.push_back(build_context()["date"]);
  return record;
}

// The results folder of a new suite: --out, whose parent must exist, or a fresh one.
std::string new_results_dir(const SuiteOptions& o) {
  const std::string dir = o.out.empty() ? "ddpbench-results/suite-" + timestamp() : o.out;
  DDPB_USAGE_CHECK(!fs::exists(fs::path(dir) / "suite.json"))
      << dir << " already holds a suite: use --resume " << dir << " or another --out";
  // Only the results folder itself is created: a mistyped --out is not turned into a tree.
  const fs::path parent = fs::absolute(dir).parent_path();
  DDPB_USAGE_CHECK(o.out.empty() || fs::is_directory(parent))
      << "--out " << dir << ": the folder " << parent.string()
      << " does not exist (ddpbench creates the results folder, not its parents)";
  return dir;
}

// A new suite record: every run pending, and the GEMM peak the runs are measured against.
SuiteRecord new_suite(const SuiteSpec& spec, const std::string& dir) {
  SuiteRecord suite;
  suite.runs = expand_suite(spec);
  fmt::print("ddpbench suite: {} ({} runs on {}) -> {}\n", spec.name, suite.runs.size(),
             enum_name(spec.device), dir);
  std::fflush(stdout);
  const Device device = spec.device == DeviceType::CUDA ? Device::cuda(0) : Device::cpu();
  // The peak in the precision the runs use: a bf16 run's FLOP fraction is against bf16 GEMMs.
  ops::set_math_mode(spec.precision);
  const nlohmann::json peak = measure_gemm_peak(
      device, workload_gemm_shapes(spec.batches_per_device()), spec.quick ? 0.05 : 0.25);
  fmt::print("ddpbench suite: GEMM peak on {}: {:.1f} GFLOP/s\n", device.str(),
             peak["flops_per_s"].get<double>() / 1e9);
  suite.context = reports::record_from_json<reports::RunContext>(build_context());
  suite.suite = spec.to_matrix();
  suite.designs = designs_of(suite.runs);
  suite.gemm_peak = reports::record_from_json<reports::GemmPeakInfo>(peak);
  if (!spec.hosts.empty()) {
    suite.hosts = host_infos(spec.hosts);
    suite.launch = spec.hosts.launch;
  }
  return suite;
}

// What a suite (and --resume) runs: every run without a result, failed ones included (issue 25,
// M7: after a full disk, --resume used to keep the failures and call the suite complete).
// The image folder of the loader group (kSuiteImageFolder), made once in the results folder
// before the first run that reads it: ImageNet-like JPEGs, as many classes as the model has
// (at most 10), 16 images each.
void make_suite_data(const SuiteRecord& suite, const SuiteSpec& spec, const std::string& dir) {
  const auto user = std::find_if(suite.runs.begin(), suite.runs.end(), [](const SuiteRun& r) {
    return r.run_config().data == kSuiteImageFolder;
  });
  const fs::path folder = fs::path(dir) / kSuiteImageFolder;
  if (user == suite.runs.end() || fs::exists(folder)) return;
  fs::create_directories(folder.parent_path());
  ImageDataSpec images;
  images.out = folder.string();
  // Every run that reads the folder trains an ImageFolder workload (validated): the first
  // one's classes bound the labels.
  images.classes = static_cast<int>(std::min<int64_t>(10, find_workload(user->workload).classes));
  images.images_per_class = 16;
  images.seed = spec.seed;
  fmt::print("ddpbench suite: {}\n", make_image_data(images));
  std::fflush(stdout);
}

bool to_run(const SuiteRun& run) {
  return run.status == RunStatus::Pending || run.status == RunStatus::Interrupted ||
         run.status == RunStatus::Failed;
}

// Runs what is pending or was interrupted, saving the record after each run; Ctrl-C stops
// after the run in progress.
void run_pending(SuiteRecord& suite, const SuiteSpec& spec, const std::string& dir) {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  const double peak = suite.gemm_peak ? suite.gemm_peak->flops_per_s : 0.0;
  const size_t todo = std::count_if(suite.runs.begin(), suite.runs.end(), to_run);
  Progress progress(suite.runs.size(), suite.runs.size() - todo);
  for (SuiteRun& run : suite.runs) {
    if (g_stop) break;
    if (!to_run(run)) continue;
    progress.start(run.id);
    run_one(run, spec, dir, peak, needs_parameters(suite, run), progress);
    derive_scaling(suite);
    derive_correctness(suite, dir);
    write_suite(suite, dir);
    progress.finish(outcome_line(run));
  }
  progress.end();
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
}

struct SuiteVerdict {
  bool complete = true, any_failed = false, any_wrong = false;
};

// Marks the suite complete or not and settles the correctness of runs whose reference failed.
SuiteVerdict settle(SuiteRecord& suite) {
  SuiteVerdict v;
  for (const SuiteRun& run : suite.runs) {
    v.complete = v.complete && (run.ok() || run.status == RunStatus::Failed);
    v.any_failed = v.any_failed || run.status == RunStatus::Failed;
  }
  for (SuiteRun& run : suite.runs) {
    if (v.complete && run.ok() && suite.design_of(run).parallel && !run.correctness)
      run.correctness =
          reports::CorrectnessInfo::skipped_because("its single-device reference run failed");
    if (run.correctness && run.correctness->passed)
      v.any_wrong = v.any_wrong || !*run.correctness->passed;
  }
  suite.complete = v.complete;
  return v;
}

// comm_fit.two_level: the links of a suite across hosts, as the projection uses them.
nlohmann::json two_level_json(const Topology& t) {
  const auto link = [](const Link& l) {
    return nlohmann::json{{"alpha_us", l.alpha_us}, {"bandwidth_GBps", l.bandwidth_GBps}};
  };
  return {{"node_size", t.node_size},
          {"within_node", link(t.intra)},
          {"between_nodes", link(*t.inter)},
          {"source", t.source}};
}

// The suite's projection of its own results, with the validation against its runs
// (docs/metrics.md, "Projection"). A projection that cannot be made (no DP or DDP run
// succeeded) is reported and left out; it never fails the suite.
void add_projection(SuiteRecord& suite, const SuiteSpec& spec, const std::string& dir) {
  if (spec.workloads.empty()) return;  // explicit runs only: nothing to project from
  try {
    const bool nccl = spec.device == DeviceType::CUDA && cuda_device_count() >= 2;
    ProjectionSource source = suite_projection_source(suite, dir);  // reads the records once
    const int slots = measured_compute_slots(source);
    const std::string backend = nccl ? "nccl" : "gloo";
    const CommFit fit = measure_comm_fit(backend, std::string(enum_name(spec.device)),
                                         nccl ? std::vector<int>{2} : std::vector<int>{2, 3}, slots,
                                         suite_swept_points(suite, dir, backend));
    suite.comm_fit = fit.to_json();
    source.fit = fit;
    // Across hosts, two links: within a node and between nodes (Note [Runs across hosts]).
    const Topology measured = suite_two_level(measured_topology(fit, slots), suite, dir, backend);
    if (measured.inter) (*suite.comm_fit)["two_level"] = two_level_json(measured);
    reports::ProjectionRecord p = make_projection(
        source,
        spec.projection_topology == "measured" ? measured
                                               : resolve_topology(spec.projection_topology, source),
        spec.projection_devices, {});
    p.validation = validate_projection(suite, dir, measured);
    if (spec.device == DeviceType::CPU && source.cpu_cores > 0 &&
        *std::max_element(spec.world_sizes.begin(), spec.world_sizes.end()) > source.cpu_cores)
      p.validation->oversubscribed = fmt::format(
          "World sizes above {} oversubscribe this machine's {} cores: their ranks take turns "
          "on the cores{}.",
          source.cpu_cores, source.cpu_cores,
          spec.validate_projection ? " (world size 3 added by --validate-projection)" : "");
    suite.projection = std::move(p);
    fmt::print("ddpbench suite: projection on {} at {} devices\n", spec.projection_topology,
               fmt::join(spec.projection_devices, ","));
  } catch (const std::exception& e) {
    fmt::print("ddpbench suite: no projection: {}\n", e.what());
  }
}

}  // namespace

int run_suite(const SuiteOptions& o) {
  const int gpus = cuda_device_count();
  SuiteSpec spec;
  SuiteRecord suite;
  std::string dir;
  if (!o.resume.empty()) {
    dir = o.resume;
    suite = resume_suite(o, gpus, spec);
  } else {
    spec = resolve_spec(o, gpus);
    dir = new_results_dir(o);
  }
  for (const char* sub : {"runs", "traces", "logs", "params"}) {
    std::error_code ec;
    fs::create_directories(fs::path(dir) / sub, ec);
    DDPB_USAGE_CHECK(!ec) << "cannot create the results folder " << dir << ": " << ec.message();
  }
  const ResultsLock lock(dir);  // Note [Results folder lock]: held until the suite returns
  if (std::string_view(build_type()) == "Debug") {
    std::fprintf(
        stderr,
        "ddpbench suite: WARNING: this is a Debug build; its timings are not representative\n");
  }
  if (o.resume.empty()) suite = new_suite(spec, dir);
  write_suite(suite, dir);
  make_suite_data(suite, spec, dir);
  run_suite_collectives(suite, spec, dir, &g_stop);
  write_suite(suite, dir);
  run_pending(suite, spec, dir);

  const SuiteVerdict v = settle(suite);
  if (v.complete) add_projection(suite, spec, dir);
  add_speed_of_light(suite);  // reads the comm fit the projection measured
  write_suite(suite, dir);
  print_summary(suite);
  const std::string html = (fs::path(dir) / "report.html").string();
  const nlohmann::json record = suite.to_json();
  reports::write_suite_report(record, html);
  reports::write_suite_report(record, (fs::path(dir) / "report.md").string());
  if (!v.complete) {
    fmt::print(
        "\nddpbench suite: INCOMPLETE ({}): finished runs are kept; continue with\n"
        "  ddpbench suite --resume {}\n",
        g_stop ? "interrupted" : "runs missing", dir);
  }
  if (v.any_wrong)
    fmt::print(
        "\nddpbench suite: a correctness check FAILED: see the param diff column (relative L2)\n");
  fmt::print("\nresults: {}/suite.json\nreport:  {} ({} KiB), {}/report.md\n", dir, html,
             fs::file_size(html) / 1024, dir);
  std::fflush(stdout);
  if (g_stop) return 128 + (g_stop_signal ? g_stop_signal.load() : SIGINT);
  return v.any_failed || v.any_wrong ? 1 : 0;
}

}  // namespace ddpb::bench
