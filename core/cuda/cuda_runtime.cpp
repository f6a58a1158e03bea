// CUDA streams, events, memory sources and device discovery.
#include <cuda_runtime_api.h>
#ifdef DDPB_HAVE_NVTX
#include <nvtx3/nvToolsExtCudaRt.h>  // after the runtime header it extends
#endif

#include <string>
#include <utility>

#include "core/backend.h"
#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "core/device.h"

namespace ddpb {
namespace gpu {
namespace {

// DeviceScope for destructors: reports failures instead of throwing.
class NothrowDeviceScope {
 public:
  explicit NothrowDeviceScope(int index) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      (void)cudaGetLastError();
      previous_ = -1;
    }
    if (previous_ != index) CUDA_CHECK_NOTHROW(cudaSetDevice(index));
    changed_ = previous_ != index && previous_ >= 0;
  }
  ~NothrowDeviceScope() {
    if (changed_) CUDA_CHECK_NOTHROW(cudaSetDevice(previous_));
  }
  NothrowDeviceScope(const NothrowDeviceScope&) = delete;
  NothrowDeviceScope& operator=(const NothrowDeviceScope&) = delete;

 private:
  int previous_ = -1;
  bool changed_ = false;
};

class CudaDeviceMemory final : public MemoryBackend {
 public:
  explicit CudaDeviceMemory(const Device& device) : device_(device) {}

  void* raw_alloc(size_t nbytes) override {
    DeviceScope scope(device_.index);
    void* ptr = nullptr;
    CUDA_CHECK(cudaMalloc(&ptr, nbytes))
        << "allocating " << nbytes << " bytes on " << device_.str();
    return ptr;
  }

  // Not throwing: the caching allocator frees from its destructor, which can run at process
  // exit. Freed under the owning device: cudaFree on another current device synchronises
  // that one instead and, on some drivers, fails for the pointer.
  void raw_free(void* ptr) override {
    NothrowDeviceScope scope(device_.index);
    CUDA_CHECK_NOTHROW(cudaFree(ptr));
  }

 private:
  Device device_;
};

class PinnedHostMemory final : public MemoryBackend {
 public:
  // Portable: the buffer is pinned for every GPU, not only the one current at allocation,
  // so one pinned pool serves all devices of the process.
  void* raw_alloc(size_t nbytes) override {
    void* ptr = nullptr;
    CUDA_CHECK(cudaHostAlloc(&ptr, nbytes, cudaHostAllocPortable))
        << "allocating " << nbytes << " bytes of pinned host memory";
    return ptr;
  }
  void raw_free(void* ptr) override { CUDA_CHECK_NOTHROW(cudaFreeHost(ptr)); }
};

}  // namespace

// ---- DeviceScope -----------------------------------------------------------------------

DeviceScope::DeviceScope(int index) {
  CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ == index) {
    previous_ = -1;  // nothing to restore
    return;
  }
  CUDA_CHECK(cudaSetDevice(index)) << "switching to cuda:" << index;
}

DeviceScope::~DeviceScope() {
  if (previous_ >= 0) CUDA_CHECK_NOTHROW(cudaSetDevice(previous_));
}

// ---- CudaStream ------------------------------------------------------------------------

CudaStream::CudaStream(const Device& device, std::string name)
    : device_(device), name_(std::move(name)) {
  DDPB_CHECK(device.is_cuda()) << "CUDA stream '" << name_ << "' requested on " << device.str();
  // DeviceScope rather than DeviceGuard: creating a stream must not change the caller's
  // current device afterwards.
  DeviceScope scope(device.index);
  // Non-blocking: the stream never synchronises with the legacy default stream, which
  // third-party code might use implicitly.
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking))
      << "creating stream '" << name_ << "' on " << device.str();
#ifdef DDPB_HAVE_NVTX
  // Nsight Systems shows the stream under this name instead of "Stream 14".
  nvtxNameCudaStreamA(stream_, (name_ + " " + device.str()).c_str());
#endif
}

CudaStream::~CudaStream() {
  NothrowDeviceScope scope(device_.index);
  if (stream_ != nullptr) {
    // Drain first. Queued GEMMs may still use the workspace, and the caching allocator keys
    // its pools by the cudaStream_t value (core/tensor.cpp): a new stream that gets the same
    // handle inherits this stream's cached blocks, which is only safe once our work is done.
    CUDA_CHECK_NOTHROW(cudaStreamSynchronize(stream_));
    CUDA_CHECK_NOTHROW(cudaStreamDestroy(stream_));
  }
  if (workspace_ != nullptr) CUDA_CHECK_NOTHROW(cudaFree(workspace_));
}

void CudaStream::enqueue(std::function<void()> /*fn*/) {
  DDPB_FAIL() << "Stream::enqueue is CPU only: stream '" << name_ << "' on " << device_.str()
              << " runs kernels, not host functions";
}

void CudaStream::synchronize_impl() {
  CUDA_CHECK(cudaStreamSynchronize(stream_)) << "stream '" << name_ << "' on " << device_.str();
}

void CudaStream::wait_impl(const Event& e) {
  if (!e.defined()) return;  // a default-constructed event is complete
  if (const auto* cuda_event = dynamic_cast<const CudaEvent*>(e.impl())) {
    // Events of other devices are fine: cudaStreamWaitEvent orders across GPUs.
    CUDA_CHECK(cudaStreamWaitEvent(stream_, cuda_event->handle(), 0))
        << "stream '" << name_ << "' waiting on an event of " << cuda_event->device().str();
    return;
  }
  // A CPU event: its work runs on a host thread the GPU cannot observe. Blocking here is
  // correct because anything enqueued after this call is enqueued after the event completed.
  e.synchronize();
}

namespace {

class CudaGraph final : public StreamGraph {
 public:
  CudaGraph(const Device& device, cudaGraphExec_t exec, std::vector<std::shared_ptr<void>> keep)
      : device_(device), exec_(exec), keep_(std::move(keep)) {}
  ~CudaGraph() override { CUDA_CHECK_NOTHROW(cudaGraphExecDestroy(exec_)); }
  void replay_impl(Stream& stream) override {
    DeviceScope scope(device_.index);
    CUDA_CHECK(cudaGraphLaunch(exec_, static_cast<cudaStream_t>(stream.native_handle())))
        << "replaying a graph on stream '" << stream.name() << "'";
  }

 private:
  Device device_;
  cudaGraphExec_t exec_;
  std::vector<std::shared_ptr<void>> keep_;  // released after the exec is destroyed
};

}  // namespace

void CudaStream::begin_capture() {
  DDPB_CHECK(!capturing_) << "stream '" << name_ << "' is already capturing";
  DeviceScope scope(device_.index);
  // The GEMM workspace must exist before the capture: its cudaMalloc would not be replayed.
  gemm_workspace();
  capture_detail::begin_keepalive(device_);  // throws if this thread captures already
  const cudaError_t begun = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed);
  if (begun != cudaSuccess) capture_detail::end_keepalive();
  CUDA_CHECK(begun) << "stream '" << name_ << "' on " << device_.str();
  capturing_ = true;
}

std::unique_ptr<StreamGraph> CudaStream::end_capture_impl() {
  DDPB_CHECK(capturing_) << "stream '" << name_ << "' is not capturing";
  DeviceScope scope(device_.index);
  capturing_ = false;
  auto keep = capture_detail::end_keepalive();
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  if (ended != cudaSuccess) {
    cudaGetLastError();  // the capture error is reported below, not by the next call
    DDPB_FAIL() << "the step could not be captured in a CUDA graph on " << device_.str() << ": "
                << cudaGetErrorString(ended)
                << " (a host synchronisation or work on another stream inside the step?)";
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  CUDA_CHECK(made) << "instantiating the captured graph on " << device_.str();
  return std::make_unique<CudaGraph>(device_, exec, std::move(keep));
}

void* CudaStream::gemm_workspace() {
  std::lock_guard<std::mutex> lock(workspace_mutex_);
  if (workspace_ == nullptr) {
    DeviceScope scope(device_.index);
    CUDA_CHECK(cudaMalloc(&workspace_, kGemmWorkspaceBytes))
        << "GEMM workspace of stream '" << name_ << "' on " << device_.str();
  }
  return workspace_;
}

// ---- CudaEvent -------------------------------------------------------------------------

CudaEvent::CudaEvent(const Device& device) : device_(device) {
  DDPB_CHECK(device.is_cuda()) << "CUDA event requested on " << device.str();
  DeviceScope scope(device.index);
  // Timing stays enabled so that elapsed_ms works on every event (benchmarks time with them).
  CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDefault)) << "on " << device.str();
}

CudaEvent::~CudaEvent() {
  if (event_ == nullptr) return;
  NothrowDeviceScope scope(device_.index);
  CUDA_CHECK_NOTHROW(cudaEventDestroy(event_));
}

void CudaEvent::record(Stream& stream) {
  DDPB_CHECK(stream.device() == device_) << "event of " << device_.str() << " recorded on stream '"
                                         << stream.name() << "' of " << stream.device().str();
  auto* handle = static_cast<cudaStream_t>(stream.native_handle());
  DDPB_CHECK(handle != nullptr) << "stream '" << stream.name() << "' has no CUDA handle";
  CUDA_CHECK(cudaEventRecord(event_, handle)) << "on stream '" << stream.name() << "'";
}

void CudaEvent::wait_host() const {
  CUDA_CHECK(cudaEventSynchronize(event_));
}

bool CudaEvent::query() const {
  const cudaError_t err = cudaEventQuery(event_);
  if (err == cudaSuccess) return true;
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();  // "not ready" is an answer, not an error to report later
    return false;
  }
  CUDA_CHECK(err) << "querying an event of " << device_.str();
  return false;
}

double CudaEvent::elapsed_ms_to(const EventImpl& end) const {
  const auto* other = dynamic_cast<const CudaEvent*>(&end);
  DDPB_CHECK(other != nullptr) << "elapsed time between a CUDA event and a non-CUDA event";
  float ms = 0.0f;
  CUDA_CHECK(cudaEventElapsedTime(&ms, event_, other->event_))
      << "both events must have been recorded and completed";
  return ms;
}

// ---- Free functions --------------------------------------------------------------------

CudaStream& current_cuda_stream(const Device& device) {
  Stream& stream = current_stream(device);
  auto* cuda_stream = dynamic_cast<CudaStream*>(&stream);
  DDPB_CHECK(cuda_stream != nullptr)
      << "current stream '" << stream.name() << "' of " << device.str() << " is not a CUDA stream";
  return *cuda_stream;
}

std::unique_ptr<MemoryBackend> make_device_memory(const Device& device) {
  DDPB_CHECK(device.is_cuda()) << "CUDA memory requested on " << device.str();
  return std::make_unique<CudaDeviceMemory>(device);
}

std::string unavailable_reason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("cudaGetDeviceCount failed with ") + cudaGetErrorName(err) + " (" +
           cudaGetErrorString(err) + ")";
  }
  if (count == 0) return "cudaGetDeviceCount reported 0 devices";
  return "";
}

}  // namespace gpu

std::unique_ptr<MemoryBackend> make_pinned_host_memory() {
  return std::make_unique<gpu::PinnedHostMemory>();
}

int cuda_device_count_impl() {
  // The count cannot change once the driver is initialised (CUDA_VISIBLE_DEVICES is read
  // then), so it is queried once. On a machine without a GPU the call fails and leaves its
  // output unwritten: hence the 0 it starts from, and 0 for any error.
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

}  // namespace ddpb
