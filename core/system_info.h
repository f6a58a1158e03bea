// What this machine is, for the context block of every report and for `ddpbench env`:
// CPU model and cores, and (CUDA builds) runtime, driver and NCCL versions, every GPU with
// its name, memory and compute capability, and the peer-access matrix between GPUs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device.h"

namespace ddpb {

struct GpuInfo {
  int index = 0;
  std::string name;
  int64_t total_memory_bytes = 0;
  std::string compute_capability;  // "9.0"
  std::string pci_bus_id;
};

struct SystemInfo {
  std::string cpu_model;
  int cpu_cores = 0;
  std::string cuda_runtime_version;  // "13.0"; "" when not compiled in
  std::string cuda_driver_version;   // "" without a usable driver
  std::string nccl_version;          // "2.28.3"; "" when not compiled in
  std::string cudnn_version;         // "9.10.1"; "" without CUDA or libcudnn.so.9
  std::vector<GpuInfo> gpus;
  // peer_access[i][j]: GPU i can access GPU j's memory directly (cudaDeviceCanAccessPeer).
  std::vector<std::vector<bool>> peer_access;
  // [i, j] pairs this process enabled (cudaDeviceEnablePeerAccess: i reads and writes j's
  // memory without staging through the host), so far.
  std::vector<std::pair<int, int>> peer_access_enabled;
};

// Enables peer access between every two distinct GPUs of `devices` that support it, once
// per pair and process (DP's replicas and peer copies call it); CPU devices are ignored.
// Never throws: a pair that cannot be enabled keeps its copies staged through the host.
void enable_peer_access(const std::vector<Device>& devices);

// Never throws: on a machine without a GPU the CUDA fields stay empty.
SystemInfo system_info();
// This machine's host name ("unknown-host" when it has none).
std::string host_name();
// Now, in UTC, as ISO 8601: "2026-12-01T05:44:18Z".
std::string utc_timestamp();
nlohmann::json to_json(const SystemInfo& info);

}  // namespace ddpb
