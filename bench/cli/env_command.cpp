#include "bench/cli/env_command.h"

#include <fmt/core.h>

#include <string>
#include <thread>

#include "bench/measure/context.h"
#include "comm/process_group_gloo.h"
#include "core/cpu/cpu_backend.h"
#include "core/device.h"
#include "core/nvtx.h"
#include "core/system_info.h"

// OpenBLAS exports this (openblas_config.h); declared here so we need not find that header.
extern "C" char* openblas_get_config(void);

#ifndef DDPB_VERSION
#define DDPB_VERSION "0.0.0"
#endif

namespace ddpb::bench {
namespace {

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
  const SystemInfo info = system_info();
  const int gpus = static_cast<int>(info.gpus.size());
  auto or_none = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
  fmt::print("ddpbench {} ({} build, {})\n", DDPB_VERSION, build_type(), __VERSION__);
  fmt::print("cpu:      {}, {} logical cores\n", info.cpu_model, info.cpu_cores);
  fmt::print("onednn:   {} (GEMMs and convolutions)\n", cpu::onednn_summary());
  fmt::print("openblas: {} (matrix-vector products)\n", blas ? blas : "unknown");
  fmt::print("cuda:     compiled in: {}, runtime {}, driver {}, devices: {}\n", yes_no(cuda),
             or_none(info.cuda_runtime_version), or_none(info.cuda_driver_version), gpus);
  for (const auto& g : info.gpus) {
    fmt::print("          cuda:{} {} ({:.1f} GiB, compute capability {}, PCI {})\n", g.index,
               g.name, g.total_memory_bytes / 1073741824.0, g.compute_capability, g.pci_bus_id);
  }
  if (gpus > 1) {
    fmt::print("peer access (row can read column's memory):\n      ");
    for (int j = 0; j < gpus; ++j) fmt::print(" {:>3}", j);
    fmt::print("\n");
    for (int i = 0; i < gpus; ++i) {
      fmt::print("  {:>3} ", i);
      for (int j = 0; j < gpus; ++j) fmt::print(" {:>3}", info.peer_access[i][j] ? "Y" : ".");
      fmt::print("\n");
    }
  }
  fmt::print("nvtx:     compiled in: {}\n", yes_no(nvtx::compiled_in()));
  fmt::print("gloo:     compiled in: yes, version {}\n", comm::gloo_version());
  fmt::print("nccl:     compiled in: {}, version {}\n", yes_no(kNcclCompiled),
             or_none(info.nccl_version));
  fmt::print("cudnn:    {}\n",
             info.cudnn_version.empty()
                 ? std::string("libcudnn.so.9 not found (convolutions on CUDA need it)")
                 : "version " + info.cudnn_version + " (opened at the first convolution)");
  fmt::print("\nAvailable devices and backends:\n");
  fmt::print("    {} CPU (oneDNN, OpenBLAS)\n", mark(true));
  fmt::print("    {} Gloo\n", mark(true));
  fmt::print("    {} CUDA{}\n", mark(cuda && gpus > 0),
             cuda ? fmt::format(" (compiled in; {} devices usable)", gpus) : " (not compiled in)");
  fmt::print("    {} NCCL{}\n", mark(kNcclCompiled && gpus > 0),
             kNcclCompiled ? "" : " (not compiled in)");
  fmt::print("    {} NVTX\n", mark(nvtx::compiled_in()));
  return 0;
}

}  // namespace ddpb::bench
