// The CUDA runtime pieces behind core/stream.h and core/allocator.h (CUDA builds only).
//
// Ownership: a CudaStream owns its cudaStream_t and the cuBLASLt workspace used by GEMMs on
// it; a CudaEvent owns its cudaEvent_t. Both are created and destroyed with their device
// current, so a thread may create streams for any GPU.
//
// Thread-safety: every method may be called from any thread (the CUDA runtime serialises
// what it must; the workspace is created under a mutex).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "core/allocator.h"
#include "core/stream.h"

namespace ddpb::gpu {

// Makes CUDA device `index` current on the calling thread for the scope and restores the
// previous one. Unlike DeviceGuard it leaves the error-message label alone, so it is cheap
// enough to wrap every op: cudaSetDevice is only called when the device actually changes.
class DeviceScope {
 public:
  explicit DeviceScope(int index);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
};

class CudaStream final : public Stream {
 public:
  CudaStream(const Device& device, std::string name);
  ~CudaStream() override;

  Device device() const override { return device_; }
  const std::string& name() const override { return name_; }
  // Always throws: host callbacks on CUDA streams are not supported.
  void enqueue(std::function<void()> fn) override;
  void synchronize_impl() override;
  // CUDA events: cudaStreamWaitEvent (the host does not block). CPU events: the host waits
  // for the event before returning, since a CUDA stream cannot wait on a CPU executor.
  void wait_impl(const Event& e) override;
  void* native_handle() const override { return stream_; }
  // cudaStreamBeginCapture in relaxed mode (the caching allocator may cudaMalloc while the
  // step is captured); end_capture instantiates the graph.
  void begin_capture() override;
  std::unique_ptr<StreamGraph> end_capture_impl() override;
  bool capturing() const override { return capturing_; }

  cudaStream_t handle() const { return stream_; }

  // Scratch memory for cuBLASLt GEMMs on this stream, allocated on first use. One per
  // stream, not per device: two streams running GEMMs concurrently must not share scratch,
  // and kernels on one stream are ordered, so they can.
  void* gemm_workspace();
  static constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;

 private:
  Device device_;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  std::mutex workspace_mutex_;
  void* workspace_ = nullptr;
  bool capturing_ = false;
};

class CudaEvent final : public EventImpl {
 public:
  explicit CudaEvent(const Device& device);
  ~CudaEvent() override;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  // `stream` must be a CUDA stream of this event's device.
  void record(Stream& stream) override;
  void wait_host() const override;
  bool query() const override;
  double elapsed_ms_to(const EventImpl& end) const override;

  cudaEvent_t handle() const { return event_; }
  const Device& device() const { return device_; }

 private:
  Device device_;
  cudaEvent_t event_ = nullptr;
};

// The calling thread's current stream of `device` (a CUDA device) as a CudaStream.
CudaStream& current_cuda_stream(const Device& device);
inline cudaStream_t current_stream_handle(const Device& device) {
  return current_cuda_stream(device).handle();
}

// cudaMalloc/cudaFree on `device` (never managed memory). Used under device_allocator().
std::unique_ptr<MemoryBackend> make_device_memory(const Device& device);

// Why no GPU can be used ("cudaGetDeviceCount: cudaErrorNoDevice (no CUDA-capable device is
// detected)"), or "" when at least one can. For skip messages and diagnostics.
std::string unavailable_reason();

}  // namespace ddpb::gpu
