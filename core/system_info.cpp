#include "core/system_info.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "core/device.h"

#ifdef DDPB_HAVE_CUDA
#include <cuda_runtime.h>

#include "core/cuda/conv_engines.h"
#endif
#ifdef DDPB_HAVE_NCCL
#include <nccl.h>
#endif

namespace ddpb {
namespace {

std::string read_cpu_model() {
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

std::mutex g_peer_mutex;
std::set<std::pair<int, int>> g_peer_tried;       // pairs asked about, enabled or not
std::vector<std::pair<int, int>> g_peer_enabled;  // in the order they were enabled

#ifdef DDPB_HAVE_CUDA
// Lets GPU `from` access GPU `to`'s memory; false when unsupported or refused.
bool enable_one_peer(int from, int to) {
  int can = 0;
  if (cudaDeviceCanAccessPeer(&can, from, to) != cudaSuccess || can == 0) {
    cudaGetLastError();
    return false;
  }
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  cudaSetDevice(from);
  const cudaError_t err = cudaDeviceEnablePeerAccess(to, 0);
  cudaGetLastError();  // cudaErrorPeerAccessAlreadyEnabled must not stay sticky
  if (previous >= 0) cudaSetDevice(previous);
  return err == cudaSuccess || err == cudaErrorPeerAccessAlreadyEnabled;
}
#endif

// CUDA encodes versions as 1000 * major + 10 * minor.
[[maybe_unused]] std::string cuda_version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

void fill_cuda(SystemInfo& info) {
#ifdef DDPB_HAVE_CUDA
  int v = 0;
  if (cudaRuntimeGetVersion(&v) == cudaSuccess) info.cuda_runtime_version = cuda_version_string(v);
  v = 0;
  if (cudaDriverGetVersion(&v) == cudaSuccess && v > 0)
    info.cuda_driver_version = cuda_version_string(v);
  const int n = cuda_device_count();  // 0 when the runtime reports any error
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    char bus[32] = {};
    cudaDeviceGetPCIBusId(bus, sizeof(bus) - 1, i);
    info.gpus.push_back({i, prop.name, static_cast<int64_t>(prop.totalGlobalMem),
                         std::to_string(prop.major) + "." + std::to_string(prop.minor), bus});
  }
  info.peer_access.assign(info.gpus.size(), std::vector<bool>(info.gpus.size(), false));
  for (size_t i = 0; i < info.gpus.size(); ++i) {
    for (size_t j = 0; j < info.gpus.size(); ++j) {
      int can = 0;
      if (i == j) {
        can = 1;
      } else if (cudaDeviceCanAccessPeer(&can, static_cast<int>(i), static_cast<int>(j)) !=
                 cudaSuccess) {
        can = 0;
      }
      info.peer_access[i][j] = can != 0;
    }
  }
  cudaGetLastError();  // clear any sticky "no device" error left by the queries
  info.cudnn_version = gpu::cudnn_version_string();
#else
  (void)info;
#endif
#ifdef DDPB_HAVE_NCCL
  int nv = 0;
  if (ncclGetVersion(&nv) == ncclSuccess) {
    // NCCL >= 2.9: major * 10000 + minor * 100 + patch.
    info.nccl_version = std::to_string(nv / 10000) + "." + std::to_string((nv % 10000) / 100) +
                        "." + std::to_string(nv % 100);
  }
#endif
}

}  // namespace

void enable_peer_access(const std::vector<Device>& devices) {
  std::lock_guard lock(g_peer_mutex);
  for (const Device& a : devices) {
    for (const Device& b : devices) {
      if (!a.is_cuda() || !b.is_cuda() || a.index == b.index) continue;
      if (!g_peer_tried.insert({a.index, b.index}).second) continue;
#ifdef DDPB_HAVE_CUDA
      if (enable_one_peer(a.index, b.index)) g_peer_enabled.emplace_back(a.index, b.index);
#endif
    }
  }
}

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == 0) return "unknown-host";
  return host;
}

std::string utc_timestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

SystemInfo system_info() {
  SystemInfo info;
  {
    std::lock_guard lock(g_peer_mutex);
    info.peer_access_enabled = g_peer_enabled;
  }
  info.cpu_model = read_cpu_model();
  info.cpu_cores = static_cast<int>(std::thread::hardware_concurrency());
  fill_cuda(info);
  return info;
}

nlohmann::json to_json(const SystemInfo& info) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : info.gpus) {
    gpus.push_back({{"index", g.index},
                    {"name", g.name},
                    {"total_memory_bytes", g.total_memory_bytes},
                    {"compute_capability", g.compute_capability},
                    {"pci_bus_id", g.pci_bus_id}});
  }
  nlohmann::json peer = nlohmann::json::array();
  for (const auto& row : info.peer_access) peer.push_back(row);
  return {{"cpu_model", info.cpu_model},
          {"cpu_cores", info.cpu_cores},
          {"cuda_runtime_version", info.cuda_runtime_version},
          {"cuda_driver_version", info.cuda_driver_version},
          {"nccl_version", info.nccl_version},
          {"cudnn_version", info.cudnn_version},
          {"gpus", gpus},
          {"peer_access", peer},
          {"peer_access_enabled", info.peer_access_enabled}};
}

}  // namespace ddpb
