#include "bench/suite/pytorch_peer.h"

#include <fmt/core.h>

#include <cstdlib>
#include <filesystem>

#include "bench/suite/child_process.h"
#include "reports/json_io.h"
#include "workloads/family.h"

#ifndef DDPB_SOURCE_DIR
#define DDPB_SOURCE_DIR ""
#endif

namespace fs = std::filesystem;

namespace ddpb::bench {
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

nlohmann::json run_pytorch(const nlohmann::json& run, const SuiteSpec& spec, const std::string& dir,
                           const std::atomic<bool>* stop) {
  if (run["mode"] == "dp" && spec.device != "cuda") {
    return {{"status", "skipped"}, {"error", "torch.nn.DataParallel needs CUDA devices"}};
  }
  const std::string variant = run["variant"];
  if (variant == "bucket-auto")
    return {{"status", "skipped"}, {"error", "PyTorch has no bucket-cap autotuner"}};
  if (variant.find("hook") != std::string::npos || variant == "no-overlap") {
    return {{"status", "skipped"}, {"error", "torch_reference.py has no " + variant + " option"}};
  }
  const std::string stem = run_file_stem(run["id"]);
  std::vector<std::string> argv = {python_exe(), torch_reference_script(), "--workloads-json",
                                   workload_table_file(dir)};
  for (const auto& a : run["args"]) {
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
  if (r.exit_code != 0 || !fs::exists(fs::path(dir) / out)) {
    return {{"status", "failed"},
            {"error", failure_line(cs.log_path) + fmt::format(" (exit code {})", r.exit_code)}};
  }
  try {
    const auto rec = reports::read_json((fs::path(dir) / out).string());
    const auto& s = rec.at("summary");
    nlohmann::json p = {{"status", "ok"},
                        {"record", out},
                        {"samples_per_s", s.at("samples_per_s")},
                        {"step_time_ms", s.at("step_time_ms")}};
    if (s.contains("overlap_ratio_median")) p["overlap_ratio"] = s["overlap_ratio_median"];
    return p;
  } catch (const std::exception& e) {
    return {{"status", "failed"}, {"error", std::string("unreadable PyTorch record: ") + e.what()}};
  }
}

}  // namespace ddpb::bench
