#include "bench/suite/pytorch_peer.h"

#include <fmt/core.h>

#include <cstdlib>
#include <filesystem>

#include "bench/run/designs.h"
#include "bench/suite/child_process.h"
#include "reports/json_io.h"
#include "workloads/family.h"

#ifndef DDPB_SOURCE_DIR
#define DDPB_SOURCE_DIR ""
#endif

namespace fs = std::filesystem;

namespace ddpb::bench {

// The exit status with which scripts/peer/torch_reference.py says this PyTorch has no such design.
constexpr int kPeerSkipped = 3;
namespace {

std::string torch_reference_script() {
  if (const char* p = std::getenv("DDPBENCH_TORCH_REFERENCE")) return p;
  return std::string(DDPB_SOURCE_DIR) + "/scripts/peer/torch_reference.py";
}

std::string python_exe() {
  if (const char* p = std::getenv("DDPBENCH_PYTHON")) return p;
  return fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
}

// The preset table torch_reference.py builds its models from (`ddpbench workloads --json`),
// written into the results folder once: the PyTorch side keeps no copy of the presets.
std::string workload_table_file(const std::string& dir) {
  const fs::path path = fs::path(dir) / "pytorch" / "workloads.json";
  if (!fs::exists(path)) {
    fs::create_directories(path.parent_path());
    reports::write_json_atomic(path.string(), workload_table_json());
  }
  return "pytorch/workloads.json";  // relative: the child runs in `dir`
}

}  // namespace

reports::PytorchResult run_pytorch(const SuiteRun& run, const SuiteSpec& spec,
                                   const std::string& dir, const std::atomic<bool>* stop) {
  const auto outcome = [](std::string status, std::string error) {
    reports::PytorchResult p;
    p.status = std::move(status);
    p.error = std::move(error);
    return p;
  };
  const auto skipped = [&](std::string why) { return outcome("skipped", std::move(why)); };
  const Design& design = design_named(run.mode);
  if (!*design.pytorch_peer) return skipped("PyTorch has no " + design.info.label + " to compare");
  if (design.pytorch_peer_needs_cuda && spec.device != DeviceType::CUDA)
    return skipped(std::string(design.pytorch_peer) + " needs CUDA devices");
  const reports::RunConfigInfo& config = run.run_config();
  if (config.bucket_cap_auto) return skipped("PyTorch has no bucket-cap autotuner");
  if (config.comm_hook != "none") return skipped("torch_reference.py has no --comm-hook option");
  if (config.no_overlap) return skipped("torch_reference.py has no --no-overlap option");
  const std::string stem = run_file_stem(run.id);
  std::vector<std::string> argv = {python_exe(), torch_reference_script(), "--workloads-json",
                                   workload_table_file(dir)};
  for (const std::string& a : run.args) {
    if (a != "run" && a != "--quiet") argv.push_back(a);
  }
  const std::string out = "runs/" + stem + ".pytorch.json";
  argv.insert(argv.end(), {"--quiet", "--out", out});
  ChildSpec cs{argv,
               dir,
               (fs::path(dir) / "logs" / (stem + ".pytorch.log")).string(),
               2 * spec.timeout_s + 60,
               stop,
               {}};
  const ChildResult r = run_child(cs);
  // torch_reference.py's "skipped" status (3): this PyTorch lacks the design (FSDP2 before
  // PyTorch 2), which it says in one line.
  if (r.exit_code == kPeerSkipped) return skipped(failure_line(cs.log_path));
  if (r.exit_code != 0 || !fs::exists(fs::path(dir) / out))
    return outcome("failed",
                   failure_line(cs.log_path) + fmt::format(" (exit code {})", r.exit_code));
  reports::PytorchResult p;
  try {
    // torch_reference.py's record: its summary names its numbers as ours does.
    const auto rec = reports::read_json((fs::path(dir) / out).string());
    const auto& s = rec.at("summary");
    p.status = "ok";
    p.record = out;
    p.samples_per_s = s.at("samples_per_s").get<double>();
    p.step_time_ms = reports::record_from_json<reports::StepTimeStats>(s.at("step_time_ms"));
    if (s.contains("overlap_ratio_median") && s["overlap_ratio_median"].is_number())
      p.overlap_ratio = s["overlap_ratio_median"].get<double>();
  } catch (const std::exception& e) {
    p = outcome("failed", std::string("unreadable PyTorch record: ") + e.what());
  }
  return p;
}

}  // namespace ddpb::bench
