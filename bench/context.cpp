#include "bench/context.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <thread>

#include "core/device.h"
#include "core/nvtx.h"

#ifndef DDPB_BUILD_TYPE
#define DDPB_BUILD_TYPE "unknown"
#endif
#ifndef DDPB_VERSION
#define DDPB_VERSION "0.0.0"
#endif

namespace ddpb::bench {

const char* build_type() { return DDPB_BUILD_TYPE; }

nlohmann::json build_context() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char date[64];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return {{"date", date},
          {"host", host},
          {"ddpbench_version", DDPB_VERSION},
          {"build_type", DDPB_BUILD_TYPE},
          {"compiler", __VERSION__},
          {"cuda_compiled", cuda_compiled_in()},
          {"nvtx_compiled", nvtx::compiled_in()},
          {"cuda_devices", cuda_device_count()},
          {"cpu_cores", std::thread::hardware_concurrency()}};
}

}  // namespace ddpb::bench
