#include "core/nvtx.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef DDPB_HAVE_CUDA
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#endif

#ifdef DDPB_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>

#include <mutex>
#include <unordered_map>
#endif

namespace ddpb::nvtx {

#ifdef DDPB_HAVE_NVTX
namespace {

struct DomainState {
  nvtxDomainHandle_t domain;
  DomainState() {
    domain = nvtxDomainCreateA("ddpbench");
    const char* names[] = {"data", "forward", "backward", "comm", "optimizer", "dp", "op"};
    for (uint32_t i = 0; i < 7; ++i) nvtxDomainNameCategoryA(domain, i + 1, names[i]);
  }
};

nvtxDomainHandle_t domain() {
  static DomainState state;
  return state.domain;
}

uint32_t colour(Category c) {
  switch (c) {
    case Category::Data:
      return 0xFF8E8E8E;
    case Category::Forward:
      return 0xFF2E7D32;
    case Category::Backward:
      return 0xFF1565C0;
    case Category::Comm:
      return 0xFFE65100;
    case Category::Optimizer:
      return 0xFF6A1B9A;
    case Category::DP:
      return 0xFFC62828;
    case Category::Op:
      return 0xFF9E9D24;
  }
  return 0xFF000000;
}

nvtxStringHandle_t registered(const char* message) {
  static std::mutex mutex;
  static std::unordered_map<const char*, nvtxStringHandle_t> cache;
  std::lock_guard lock(mutex);
  auto& h = cache[message];
  if (!h) h = nvtxDomainRegisterStringA(domain(), message);
  return h;
}

nvtxEventAttributes_t attributes(Category c, int64_t payload_bytes) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.category = static_cast<uint32_t>(c);
  a.colorType = NVTX_COLOR_ARGB;
  a.color = colour(c);
  if (payload_bytes >= 0) {
    a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a.payload.ullValue = static_cast<uint64_t>(payload_bytes);
  }
  return a;
}

}  // namespace

Range::Range(const char* message, Category category, int64_t payload_bytes) {
  auto a = attributes(category, payload_bytes);
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = registered(message);
  nvtxDomainRangePushEx(domain(), &a);
}

Range::Range(const std::string& message, Category category, int64_t payload_bytes) {
  auto a = attributes(category, payload_bytes);
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = message.c_str();
  nvtxDomainRangePushEx(domain(), &a);
}

Range::Range(const RegisteredString& message, Category category, int64_t payload_bytes) {
  auto a = attributes(category, payload_bytes);
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = static_cast<nvtxStringHandle_t>(message.handle());
  nvtxDomainRangePushEx(domain(), &a);
}

RegisteredString::RegisteredString(const char* message)
    : message_(message), handle_(nvtxDomainRegisterStringA(domain(), message)) {}

Range::~Range() {
  nvtxDomainRangePop(domain());
}

AsyncRange::AsyncRange(const std::string& message, Category category, int64_t payload_bytes) {
  auto a = attributes(category, payload_bytes);
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = message.c_str();
  id_ = nvtxDomainRangeStartEx(domain(), &a);
  if (id_ == 0) id_ = ~uint64_t{0};  // 0 means "no range" here; keep end() paired
}

void AsyncRange::end() {
  if (id_ != 0) {
    if (id_ != ~uint64_t{0}) nvtxDomainRangeEnd(domain(), id_);
    id_ = 0;
  }
}

void name_thread(const std::string& name) {
  // NVTX initialises itself lazily on first call; doing that inside domain()'s static
  // initialisation gives every later call from any thread a happens-before edge.
  domain();
  nvtxNameOsThreadA(static_cast<uint32_t>(syscall(SYS_gettid)), name.c_str());
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

bool compiled_in() {
  return true;
}

#else  // NVTX compiled out

Range::Range(const char*, Category, int64_t) {}
Range::Range(const RegisteredString&, Category, int64_t) {}
RegisteredString::RegisteredString(const char* message) : message_(message) {}
Range::Range(const std::string&, Category, int64_t) {}
Range::~Range() = default;
AsyncRange::AsyncRange(const std::string&, Category, int64_t) {}
void AsyncRange::end() {
  id_ = 0;
}
void name_thread(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}
bool compiled_in() {
  return false;
}

#endif

void profiler_start() {
#ifdef DDPB_HAVE_CUDA
  if (cudaProfilerStart() != cudaSuccess) cudaGetLastError();
#endif
}

void profiler_stop() {
#ifdef DDPB_HAVE_CUDA
  if (cudaProfilerStop() != cudaSuccess) cudaGetLastError();
#endif
}

AsyncRange::AsyncRange(AsyncRange&& other) noexcept : id_(other.id_) {
  other.id_ = 0;
}
AsyncRange& AsyncRange::operator=(AsyncRange&& other) noexcept {
  if (this != &other) {
    end();
    id_ = other.id_;
    other.id_ = 0;
  }
  return *this;
}
AsyncRange::~AsyncRange() {
  end();
}

}  // namespace ddpb::nvtx
