// Streams and events: the ordering model that CPU and CUDA share.
//
// A Stream is an ordered queue of work on one device.
//  - CUDA: a real non-blocking cudaStream_t. Kernels are launched onto native_handle().
//  - CPU, kind Inline: work runs immediately on the calling thread. This is the compute
//    stream of a logical CPU device: the thread that drives the device *is* its executor.
//  - CPU, kind Executor: a worker thread runs enqueued work in order. Used for side
//    streams (data prefetch, communication) so that they overlap with compute.
//
// An Event marks a point in a stream. Another stream can wait on it without blocking the
// host (cudaStreamWaitEvent on CUDA; a queued wait on a CPU executor). Only an Inline
// stream's wait() blocks its caller, because the caller is that stream's executor.
//
// Thread-safety: enqueue/record/wait on one Stream may be called from any thread; the
// *order* among concurrent callers is whatever order the calls reach the stream.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/device.h"

namespace ddpb {

class Event;

enum class StreamKind { Inline, Executor };

class Stream {
 public:
  virtual ~Stream() = default;
  virtual Device device() const = 0;
  virtual const std::string& name() const = 0;
  // CPU only: runs fn in stream order (now, for an Inline stream). An exception thrown by fn
  // on an Executor is kept and rethrown by the next synchronize().
  virtual void enqueue(std::function<void()> fn) = 0;
  // Blocks the host until all work enqueued so far has finished.
  virtual void synchronize() = 0;
  // Work enqueued after this call starts only after `e` has completed.
  virtual void wait(const Event& e) = 0;
  // cudaStream_t on CUDA, nullptr on CPU.
  virtual void* native_handle() const { return nullptr; }
  virtual bool is_inline() const { return false; }
};

using StreamPtr = std::shared_ptr<Stream>;

// Creates a stream. `kind` matters on CPU only; CUDA streams are always asynchronous.
StreamPtr make_stream(const Device& device, std::string name,
                      StreamKind kind = StreamKind::Executor);

// The calling thread's current stream for `device`; the device's default stream unless a
// StreamGuard is active. CPU default streams are Inline.
Stream& current_stream(const Device& device);
StreamPtr current_stream_ptr(const Device& device);

// Makes `stream` current for its device on this thread for the guard's lifetime.
class StreamGuard {
 public:
  explicit StreamGuard(StreamPtr stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Device device_;
  StreamPtr previous_;
};

// Backend interface of an event; see Event.
class EventImpl {
 public:
  virtual ~EventImpl() = default;
  virtual void record(Stream& stream) = 0;
  virtual void wait_host() const = 0;
  virtual bool query() const = 0;
  // Milliseconds from this event to `end`; both must have completed.
  virtual double elapsed_ms_to(const EventImpl& end) const = 0;
};

// A copyable handle to a marker in a stream. Default-constructed events are "complete".
class Event {
 public:
  Event() = default;
  static Event create(const Device& device);
  // Records the point after all work enqueued on `stream` so far.
  void record(Stream& stream);
  void synchronize() const;  // blocks the host until the event completes
  bool query() const;        // true when complete (or never recorded)
  double elapsed_ms(const Event& end) const;
  bool defined() const { return impl_ != nullptr; }
  EventImpl* impl() const { return impl_.get(); }

 private:
  std::shared_ptr<EventImpl> impl_;
};

}  // namespace ddpb
