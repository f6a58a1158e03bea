// Devices. `cpu:N` is a logical CPU device: a thread with single-threaded BLAS and its own
// allocator, so N logical devices really use N cores. `cuda:N` is GPU N of this process.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/named_enum.h"

namespace ddpb {

enum class DeviceType : uint8_t { CPU, CUDA };
constexpr NameTable<DeviceType, 2> enum_names(DeviceType) {
  return {{{"cpu", DeviceType::CPU}, {"cuda", DeviceType::CUDA}}};
}

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu(int index = 0) { return {DeviceType::CPU, index}; }
  static Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  std::string str() const;
  friend bool operator==(const Device&, const Device&) = default;
};

// Device indices run from 0 to kMaxDeviceIndex - 1 for each type: the logical CPU devices a
// run may have (RunConfig's kMaxCpuDevices) and the per-GPU tables of the CUDA backend.
inline constexpr int kMaxDeviceIndex = 64;

// Parses "cpu", "cpu:N", "cuda" (= cuda:0) or "cuda:N", N < kMaxDeviceIndex. Throws
// UsageError otherwise.
// Does not check that the device exists: see require_device().
Device parse_device(std::string_view text);

// Parses --devices' comma-separated list ("cuda:0,cuda:0"), each entry as parse_device does;
// the one parser of a device list (DP's replicas, the ranks' devices, the suite's named runs).
std::vector<Device> parse_device_list(std::string_view text);

// Number of usable GPUs. 0 when built without CUDA or when the driver reports any error
// (on a machine without a GPU, cudaGetDeviceCount fails and leaves its output unwritten).
int cuda_device_count();
bool cuda_compiled_in();

// Throws UsageError when the device does not exist on this machine ("cuda:1 requested, but
// this machine has 0 GPUs").
void require_device(const Device& d);

// Makes `d` the calling thread's current device for the guard's lifetime: cudaSetDevice on
// CUDA (the previous GPU is restored on exit), and the device label that error messages carry.
class DeviceGuard {
 public:
  explicit DeviceGuard(const Device& d);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  std::string previous_label_;
  int previous_cuda_ = -1;  // restored on exit when the guard switched GPUs
};

}  // namespace ddpb

template <>
struct std::hash<ddpb::Device> {
  size_t operator()(const ddpb::Device& d) const noexcept {
    return static_cast<size_t>(d.index) * 2 + static_cast<size_t>(d.type);
  }
};
