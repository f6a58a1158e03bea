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

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"

namespace ddpb {

class Event;
class Stream;

// Work recorded from a stream by Stream::end_capture, replayed as a whole: a CUDA graph, or
// on CPU the recorded closures. Owns every tensor allocated on the device by the capturing
// thread during the capture, so the addresses the recorded work uses stay valid (and are
// never handed to another tensor) for as long as the graph lives. Tensors from before the
// capture are the caller's to keep alive while the graph may replay (the single runner's
// parameters, optimizer state and static inputs live as long as it does). Nothing is reused
// within a capture either, so a captured step holds the sum of its temporaries, not their
// peak.
class StreamGraph {
 public:
  virtual ~StreamGraph() = default;
  // Enqueues the recorded work on `stream` (a stream of the same device). For the
  // stream-order sanitizer a replay is one op that reads and writes what the captured ops
  // did; the capture itself accesses nothing (its work does not run then).
  void replay(Stream& stream);
  // What the captured ops read and wrote (set by Stream::end_capture when the sanitizer is on).
  std::vector<Tensor> sanitizer_reads, sanitizer_writes;

 protected:
  virtual void replay_impl(Stream& stream) = 0;
};

enum class StreamKind { Inline, Executor };

class Stream {
 public:
  virtual ~Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  virtual Device device() const = 0;
  virtual const std::string& name() const = 0;
  // CPU only: runs fn in stream order (now, for an Inline stream). An exception thrown by fn
  // on an Executor is kept and rethrown by the next synchronize().
  virtual void enqueue(std::function<void()> fn) = 0;
  // Blocks the host until all work enqueued so far has finished.
  void synchronize();
  // Work enqueued after this call starts only after `e` has completed.
  void wait(const Event& e);
  // cudaStream_t on CUDA, nullptr on CPU.
  virtual void* native_handle() const { return nullptr; }
  virtual bool is_inline() const { return false; }

  // Graph capture (`--cuda-graph`). Between begin_capture() and end_capture() the work
  // enqueued on this stream is recorded, not run: cudaStreamBeginCapture on CUDA; an Inline
  // CPU stream keeps the closures. Host code must not read device results meanwhile, and
  // every op must use this stream. CPU Executor streams do not capture (UsageError).
  virtual void begin_capture();
  // Ends the capture; throws (leaving the stream out of capture) when it failed.
  std::unique_ptr<StreamGraph> end_capture();
  virtual bool capturing() const { return false; }

  // This stream's index in the stream-order sanitizer's clocks (core/stream_sanitizer.h).
  uint32_t sanitizer_id() const { return sanitizer_id_; }

 protected:
  Stream();
  // What synchronize() and wait() do on the backend; the public calls also tell the
  // sanitizer about the edge.
  virtual void synchronize_impl() = 0;
  virtual void wait_impl(const Event& e) = 0;
  virtual std::unique_ptr<StreamGraph> end_capture_impl();

 private:
  const uint32_t sanitizer_id_;
};

// Capture bookkeeping shared by the backends (core/stream.cpp).
namespace capture_detail {
// From begin_capture on, tensors allocated on `device` by this thread are kept alive ...
void begin_keepalive(const Device& device);
// ... until end_keepalive hands them over (to the graph).
std::vector<std::shared_ptr<void>> end_keepalive();
// Called by Tensor allocation: keeps `storage` when this thread is capturing on `device`.
void keep_alive_if_capturing(const Device& device, std::shared_ptr<void> storage);
// Whether this thread's capture holds `storage`: one of its owners then is the graph, which
// ownership tests (autograd's adopt-if-unshared) must not count.
bool held_by_capture(const void* storage);
bool capturing_on_this_thread();
}  // namespace capture_detail

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
  // The recording stream's clock at the last record(), for the stream-order sanitizer
  // (guarded by its lock; null when it is off or the event was never recorded).
  std::shared_ptr<const std::vector<uint64_t>> sanitizer_clock;
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
