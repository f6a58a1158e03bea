#include "bench/measure/context.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <string_view>
#include <thread>

#include "comm/process_group_gloo.h"
#include "core/device.h"
#include "core/nvtx.h"
#include "core/system_info.h"

extern char** environ;

#ifndef DDPB_BUILD_TYPE
#define DDPB_BUILD_TYPE "unknown"
#endif
#include "bench/git_commit.h"
#ifndef DDPB_GIT_COMMIT
#define DDPB_GIT_COMMIT "unknown"
#endif
#ifndef DDPB_VERSION
#define DDPB_VERSION "0.0.0"
#endif

namespace ddpb::bench {

const char* build_type() {
  return DDPB_BUILD_TYPE;
}

bool is_debug_build() {
  return std::string_view(DDPB_BUILD_TYPE) == "Debug";
}

// Variables that change what NCCL, Gloo, OpenMP or OpenBLAS do. The store token is a
// secret and never recorded.
nlohmann::json tuning_environment() {
  nlohmann::json env = nlohmann::json::object();
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    const auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = kv.substr(0, eq);
    for (std::string_view prefix :
         {"NCCL_", "OMP_", "GLOO_", "OPENBLAS_", "CUDA_VISIBLE_DEVICES"}) {
      if (key.substr(0, prefix.size()) == prefix) {
        env[std::string(key)] = std::string(kv.substr(eq + 1));
        break;
      }
    }
  }
  return env;
}

nlohmann::json build_context() {
  return {{"date", utc_timestamp()},
          {"host", host_name()},
          {"ddpbench_version", DDPB_VERSION},
          {"build_type", DDPB_BUILD_TYPE},
          {"compiler", __VERSION__},
          {"cuda_compiled", cuda_compiled_in()},
          {"nvtx_compiled", nvtx::compiled_in()},
          {"cuda_devices", cuda_device_count()},
          {"cpu_cores", std::thread::hardware_concurrency()},
          {"git_commit", DDPB_GIT_COMMIT},
          {"build_warning", is_debug_build() ? "DEBUG BUILD: timings are not representative" : ""},
          {"gloo_version", comm::gloo_version()},
          {"system", to_json(system_info())},
          {"environment", tuning_environment()}};
}

const char* ddpbench_version() {
  return DDPB_VERSION;
}

const char* git_commit() {
  return DDPB_GIT_COMMIT;
}

}  // namespace ddpb::bench
