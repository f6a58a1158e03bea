#include "core/stream.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "core/backend.h"
#include "core/check.h"
#include "core/stream_sanitizer.h"

namespace ddpb {
namespace {

// Default streams live for the process: one per device, shared by all threads.
StreamPtr default_stream(const Device& device) {
  static std::mutex mutex;
  static std::unordered_map<Device, StreamPtr> streams;
  std::lock_guard lock(mutex);
  auto& s = streams[device];
  if (!s)
    s = backend_for(device.type).make_stream(device, "default:" + device.str(), StreamKind::Inline);
  return s;
}

thread_local std::unordered_map<Device, StreamPtr> t_current;

// The capture in progress on this thread, if any: its device and what it keeps alive.
struct Keepalive {
  bool active = false;
  Device device;
  // By address, so that held_by_capture is a lookup.
  std::unordered_map<const void*, std::shared_ptr<void>> storages;
};
thread_local Keepalive t_keepalive;

}  // namespace

Stream::Stream()
    : sanitizer_id_([] {
        static std::atomic<uint32_t> next{1};  // 0 is the host
        return next++;
      }()) {}

void Stream::synchronize() {
  synchronize_impl();
  if (sanitizer::enabled()) sanitizer::on_host_sync(*this);
}

void Stream::wait(const Event& e) {
  if (sanitizer::enabled() && e.impl()) sanitizer::on_stream_wait(*this, *e.impl());
  wait_impl(e);
}

void Stream::begin_capture() {
  DDPB_USAGE_FAIL() << "stream " << name() << " on " << device().str()
                    << " cannot capture a graph (CPU executor streams do not)";
}

std::unique_ptr<StreamGraph> Stream::end_capture_impl() {
  DDPB_FAIL() << "stream " << name() << " is not capturing";
  return nullptr;
}

std::unique_ptr<StreamGraph> Stream::end_capture() {
  if (!sanitizer::enabled()) return end_capture_impl();
  std::unique_ptr<StreamGraph> graph;
  try {
    graph = end_capture_impl();
  } catch (...) {
    sanitizer::take_capture(*this, nullptr, nullptr);
    throw;
  }
  sanitizer::take_capture(*this, &graph->sanitizer_reads, &graph->sanitizer_writes);
  return graph;
}

void StreamGraph::replay(Stream& stream) {
  if (sanitizer::enabled())
    sanitizer::on_op(stream, "graph replay", sanitizer_reads, sanitizer_writes);
  replay_impl(stream);
}

namespace capture_detail {

void begin_keepalive(const Device& device) {
  DDPB_CHECK(!t_keepalive.active) << "a graph capture is already in progress on this thread";
  t_keepalive = Keepalive{true, device, {}};
}

std::vector<std::shared_ptr<void>> end_keepalive() {
  std::vector<std::shared_ptr<void>> out;
  out.reserve(t_keepalive.storages.size());
  for (auto& entry : t_keepalive.storages) out.push_back(std::move(entry.second));
  t_keepalive = Keepalive{};
  return out;
}

void keep_alive_if_capturing(const Device& device, std::shared_ptr<void> storage) {
  if (t_keepalive.active && t_keepalive.device == device) {
    const void* address = storage.get();
    t_keepalive.storages.emplace(address, std::move(storage));
  }
}

bool capturing_on_this_thread() {
  return t_keepalive.active;
}

bool held_by_capture(const void* storage) {
  return t_keepalive.active && t_keepalive.storages.count(storage) > 0;
}

}  // namespace capture_detail

StreamPtr make_stream(const Device& device, std::string name, StreamKind kind) {
  return backend_for(device.type).make_stream(device, std::move(name), kind);
}

StreamPtr current_stream_ptr(const Device& device) {
  auto it = t_current.find(device);
  if (it != t_current.end() && it->second) return it->second;
  return default_stream(device);
}

// Default streams are never destroyed (default_stream keeps them for the process), so a
// thread may keep a plain pointer to the last one it looked up: current_stream is on every
// op's path, and the lookup otherwise takes a process-wide mutex and copies a shared_ptr.
thread_local Device t_last_default_device;
thread_local Stream* t_last_default = nullptr;

Stream& current_stream(const Device& device) {
  if (!t_current.empty()) {
    auto it = t_current.find(device);
    if (it != t_current.end() && it->second) return *it->second;
  }
  if (t_last_default == nullptr || !(t_last_default_device == device)) {
    t_last_default = default_stream(device).get();
    t_last_default_device = device;
  }
  return *t_last_default;
}

StreamGuard::StreamGuard(StreamPtr stream) : device_(stream->device()) {
  auto it = t_current.find(device_);
  if (it != t_current.end()) previous_ = it->second;
  t_current[device_] = std::move(stream);
}

StreamGuard::~StreamGuard() {
  t_current[device_] = previous_;
}

Event Event::create(const Device& device) {
  Event e;
  e.impl_ = backend_for(device.type).make_event(device);
  return e;
}

void Event::record(Stream& stream) {
  DDPB_CHECK(impl_) << "recording an undefined Event";
  impl_->record(stream);
  if (sanitizer::enabled()) sanitizer::on_record(*impl_, stream);
}

void Event::synchronize() const {
  if (!impl_) return;
  impl_->wait_host();
  if (sanitizer::enabled()) sanitizer::on_host_wait(*impl_);
}

bool Event::query() const {
  return !impl_ || impl_->query();
}

double Event::elapsed_ms(const Event& end) const {
  DDPB_CHECK(impl_ && end.impl_) << "elapsed_ms needs two recorded events";
  return impl_->elapsed_ms_to(*end.impl_);
}

}  // namespace ddpb
