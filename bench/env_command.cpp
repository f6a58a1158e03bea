#include "bench/env_command.h"

#include <fmt/core.h>

#include <fstream>
#include <string>
#include <thread>

#include "bench/context.h"
#include "core/device.h"
#include "core/nvtx.h"

// OpenBLAS exports this (openblas_config.h); declared here so we need not find that header.
extern "C" char* openblas_get_config(void);

#ifndef DDPB_VERSION
#define DDPB_VERSION "0.0.0"
#endif

namespace ddpb::bench {
namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) break;
    auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "unknown" : line.substr(start);
  }
  return "unknown";
}

#ifdef DDPB_HAVE_NCCL
constexpr bool kNcclCompiled = true;
#else
constexpr bool kNcclCompiled = false;
#endif

const char* mark(bool on) {
  return on ? "[X]" : "[ ]";
}
const char* yes_no(bool on) {
  return on ? "yes" : "no";
}

}  // namespace

int env_command() {
  const char* blas = openblas_get_config();
  const bool cuda = cuda_compiled_in();
  const int gpus = cuda_device_count();
  fmt::print("ddpbench {} ({} build, {})\n", DDPB_VERSION, build_type(), __VERSION__);
  fmt::print("cpu:      {}, {} logical cores\n", cpu_model(), std::thread::hardware_concurrency());
  fmt::print("openblas: {}\n", blas ? blas : "unknown");
  fmt::print("cuda:     compiled in: {}, devices: {}\n", yes_no(cuda), gpus);
  fmt::print("nvtx:     compiled in: {}\n", yes_no(nvtx::compiled_in()));
  fmt::print("gloo:     compiled in: yes\n");
  fmt::print("nccl:     compiled in: {}\n", yes_no(kNcclCompiled));
  fmt::print("\nAvailable devices and backends:\n");
  fmt::print("    {} CPU (OpenBLAS)\n", mark(true));
  fmt::print("    {} Gloo\n", mark(true));
  fmt::print("    {} CUDA{}\n", mark(cuda), cuda ? fmt::format(" ({} devices visible)", gpus) : "");
  fmt::print("    {} NCCL\n", mark(kNcclCompiled));
  fmt::print("    {} NVTX\n", mark(nvtx::compiled_in()));
  return 0;
}

}  // namespace ddpb::bench
