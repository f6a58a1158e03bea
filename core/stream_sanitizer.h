// The stream-order sanitizer: finds accesses to a tensor from two streams that nothing
// orders, on CPU as on CUDA (`DDPB_STREAM_SANITIZER=1`).
//
// Note [Stream-order sanitizer]
// A race between streams is a pair of accesses to one storage, at least one a write, from
// two streams with no happens-before edge between them. On a GPU such a pair can run in
// either order; on a CPU whose compute stream runs inline it never shows. The sanitizer
// tracks the order that the program *asks for*, not the order in which work happened to
// run, so a CPU run finds the races a GPU run would hit:
//  - every stream has a vector clock over all streams; each op enqueued on it advances the
//    stream's own entry and is stamped (stream, clock);
//  - Event::record snapshots the recording stream's clock; Stream::wait(event) merges the
//    snapshot into the waiting stream's clock;
//  - the host is stream 0 ("host"): Stream::synchronize and Event::synchronize merge the
//    stream's (the event's) clock into the host's, and every op enqueued afterwards, on any
//    stream, is ordered after what the host has waited for (the host launched it later);
//  - each storage remembers its last write and the reads since, with their op names; an
//    access checks them against its stream's clock before it is recorded.
// Accesses are recorded when work is *enqueued* (what CUDA's launch order defines), by the
// ops layer (core/ops.cpp) for every op, by the process groups for their collectives, and
// by Tensor::to_floats/to_ints/item for host reads. The host is one stream for all host
// threads, as in PyTorch's CSAN: a hand-off between host threads is not an edge it models,
// so such a race can be missed but never invented.
//
// Cost: off, each op pays one relaxed atomic load; on, a global mutex and a map lookup per
// tensor (docs/performance.md, "Stream-order sanitizer").
#pragma once

#include <atomic>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"

namespace ddpb {
class Stream;
class EventImpl;
}  // namespace ddpb

namespace ddpb::sanitizer {

// A race found by the sanitizer: a runtime failure (exit 1) whose message names both
// streams, both ops and the tensor.
class StreamRaceError : public Error {
 public:
  using Error::Error;
};

namespace detail {
extern std::atomic<int> g_state;  // -1: not read yet, 0: off, 1: on
int init_from_env();
}  // namespace detail

// Whether the sanitizer is on: DDPB_STREAM_SANITIZER=1 in the environment, or set_enabled.
inline bool enabled() {
  int s = detail::g_state.load(std::memory_order_relaxed);
  return (s < 0 ? detail::init_from_env() : s) == 1;
}
// Turns it on or off for this process (tests). Turning it on forgets earlier state.
void set_enabled(bool on);

// A snapshot of a stream's clock: what an event or a collective's completion stands for.
using Clock = std::shared_ptr<const std::vector<uint64_t>>;

// An op enqueued on `stream` that reads `reads` and writes `writes` (undefined tensors are
// skipped). Throws StreamRaceError on a race. `op` must be a string literal.
void on_op(const Stream& stream, const char* op, std::initializer_list<const Tensor*> reads,
           std::initializer_list<const Tensor*> writes);
void on_op(const Stream& stream, const char* op, const std::vector<Tensor>& reads,
           const std::vector<Tensor>& writes);
// The host reads (or writes) `t` directly.
void on_host_access(const char* what, const Tensor& t, bool write);

// Event and stream synchronisation (called by core/stream.cpp).
void on_record(EventImpl& event, const Stream& stream);
void on_stream_wait(const Stream& stream, const EventImpl& event);
void on_host_wait(const EventImpl& event);
void on_host_sync(const Stream& stream);

// The same edges for synchronisation points that are not Events (a collective's end).
Clock snapshot(const Stream& stream);
void stream_acquire(const Stream& stream, const Clock& clock);
void host_acquire(const Clock& clock);

// Graph capture: while `stream` captures, ops on it are logged instead of checked (their
// work does not run). take_capture hands the log over as the graph's accesses (null
// pointers drop it); StreamGraph::replay then checks them as one op.
void take_capture(const Stream& stream, std::vector<Tensor>* reads, std::vector<Tensor>* writes);

// Names `t`'s storage in race reports ("fc1.weight", "grad of fc1.weight", "bucket 0").
void set_name(const Tensor& t, std::string name);
// Storage destruction: its history goes with it. A page-locked block released while a
// stream may still use it (nothing ordered that stream's last access before the host) is a
// race, thrown by the next op, host access or stream synchronize the sanitizer sees, since
// a destructor cannot throw.
void forget(const Storage* storage);

}  // namespace ddpb::sanitizer
