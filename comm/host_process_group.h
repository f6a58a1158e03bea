// HostProcessGroup: what the process groups that compute on host memory (Gloo, MPI) share.
// A backend says how one collective runs on host buffers (run_host); this class checks the
// tensors, queues the collectives, runs them in issue order on one communication thread,
// stages CUDA tensors through pinned host buffers, records them in the flight recorder and
// completes their Works.
//
// Execution: one communication thread ("ddpb-<backend>") runs the issued collectives strictly
// in issue order; each Work completes when its collective has finished. In a burst (Note
// [Issue bursts], comm/process_group.h) a collective on host memory issued while that thread
// is idle runs on the issuing thread instead, before issue returns, and its Work is complete
// when returned (it keeps how the collective ended, not its tensors). The first failure
// (a timeout, a peer that died) breaks the group: every later collective fails at once with
// an error naming the first one.
//
// Tensors:
//  - CPU tensors are communicated in place. Any cpu:N device is accepted (host memory).
//  - CUDA tensors must be on the group's device. They are staged through pinned host
//    buffers: the comm thread, on the comm stream, copies D2H, synchronizes, runs the host
//    collective, copies H2D and synchronizes again before completing the Work (so no device
//    work on the tensors is pending after completion). Work::wait() also makes the caller's
//    current stream wait on an event recorded after the H2D copy.
//  - Either way the collective starts after an event recorded on the caller's current
//    stream at issue (Note [Host collective stream order] in the .cpp).
//  - The issued tensors are kept alive by the group until the collective completes.
//
// Work::wait() throws CommTimeout when the collective has not completed within the group's
// timeout. Destruction cancels the collectives that have not started (their Works fail) and
// waits for the running one: a subclass stops its communication thread (stop_thread) before
// its own members go.
//
// Thread-safety: as ProcessGroup (issue from one thread; Works may be waited anywhere).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/process_group.h"

namespace ddpb::comm {

namespace host_group {
struct Request;
struct Outcome;
}  // namespace host_group

// One collective as the backend runs it: which one, and its roots or peers.
struct HostCollective {
  enum class Kind {
    AllReduce,
    Broadcast,
    AllGather,
    ReduceScatter,
    Reduce,
    AllToAll,
    SendRecv,
    Barrier
  };
  Kind kind = Kind::Barrier;
  int root = -1;           // broadcast, reduce
  int dst = -1, src = -1;  // sendrecv
};

// The tensors of one host collective as run_host reads them: at most two, not owned (the
// caller of run_host keeps them alive for the call).
class HostTensors {
 public:
  static constexpr size_t kMax = 2;
  void push_back(const Tensor& t) { tensors_[size_++] = &t; }  // at most kMax
  size_t size() const { return size_; }
  const Tensor& operator[](size_t i) const { return *tensors_[i]; }
  const Tensor& back() const { return *tensors_[size_ - 1]; }

 private:
  std::array<const Tensor*, kMax> tensors_{};
  size_t size_ = 0;
};

class HostProcessGroup : public ProcessGroup {
 public:
  ~HostProcessGroup() override;
  HostProcessGroup(const HostProcessGroup&) = delete;
  HostProcessGroup& operator=(const HostProcessGroup&) = delete;

  const Device& device() const { return device_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  WorkPtr allreduce(const Tensor& tensor) override;
  WorkPtr broadcast(const Tensor& tensor, int root) override;
  WorkPtr allgather(const Tensor& output, const Tensor& input) override;
  WorkPtr reduce_scatter(const Tensor& output, const Tensor& input) override;
  WorkPtr reduce(const Tensor& tensor, int root) override;
  WorkPtr alltoall(const Tensor& output, const Tensor& input) override;
  WorkPtr sendrecv(const Tensor& send, int dst, const Tensor& recv, int src) override;
  WorkPtr barrier() override;
  // In a burst, a collective on host memory issued while the communication thread is idle
  // runs on the issuing thread (Note [Issue bursts]).
  void begin_burst() override;
  void end_burst() override;

 protected:
  // `name`: the backend's, in messages, the flight recorder and the thread's name.
  HostProcessGroup(int rank, int size, const ProcessGroupOptions& options, std::string name);

  // Runs one collective on host memory, on the communication thread (or, in a burst, on the
  // issuing thread; never two at once). `host` holds one tensor per operand: allreduce, broadcast,
  // reduce: {tensor}; allgather, reduce_scatter, alltoall: {output, input}; sendrecv: {recv, send};
  // barrier: {}. `sequence` is the collective's issue number on this group (the same on every
  // rank). Throws on failure; a CommTimeout, or an error whose message holds "Timed out", counts as
  // a timeout.
  virtual void run_host(const HostCollective& collective, const HostTensors& host,
                        int64_t sequence) = 0;
  // Whether run_host takes CUDA tensors as they are (a CUDA-aware MPI) rather than staged
  // through pinned host buffers.
  virtual bool takes_device_pointers() const { return false; }
  // The subclass's constructor starts the thread once it can run collectives, and its
  // destructor stops it before its own members are destroyed.
  void start_thread();
  void stop_thread();
  // The collective now running on the communication thread: its sequence and when it started
  // (steady ns), or -1 and 0 when none is (for a watchdog).
  std::pair<int64_t, int64_t> running() const;

 private:
  class PendingOp;  // a queued collective's Work, waiting for or running on the comm thread
  using Request = host_group::Request;
  using Outcome = host_group::Outcome;

  static bool needs_event(const Stream& stream);
  WorkPtr issue(Request request);
  void check_tensor(const Tensor& t, const char* op, const char* what) const;
  void run_loop();
  void execute(PendingOp& op);
  Outcome run_collective(const Request& request, const Event& ready, int64_t sequence,
                         int64_t start_ns);
  void record_failure(const Request& request, int64_t sequence, Outcome& outcome);
  void run_staged(const Request& request, const Event& ready, int64_t sequence);
  void sanitize_collective(const Stream& stream, const Request& request) const;

  Device device_;
  std::chrono::milliseconds timeout_;
  std::string name_;        // the backend's name
  size_t flight_ring_ = 0;  // ProcessGroupOptions::flight_group's ring
  // The group's communication stream, "ddpb-<backend>" on every device: on CUDA the stream of
  // the staging copies (D2H, the host collective, H2D); on CPU an inline stream whose
  // executor is the communication thread.
  StreamPtr comm_stream_;

  std::mutex mutex_;
  std::condition_variable queue_changed_;     // the comm thread waits for the queue on it
  std::condition_variable comm_thread_idle_;  // begin_burst waits for the thread to sleep
  std::deque<std::shared_ptr<PendingOp>> queue_;
  int64_t next_sequence_ = 0;  // under mutex_
  bool stopping_ = false;      // under mutex_
  // Under mutex_: the communication thread waits for the queue, and no issue has woken it.
  bool comm_thread_sleeping_ = false;
  bool in_burst_ = false;  // the issuing thread's
  std::atomic<int64_t> running_sequence_{-1}, running_since_ns_{0};
  // Set where a collective fails; read where the next one runs (the comm thread, or the
  // issuing thread in a burst; the two never run collectives at the same time).
  std::string broken_reason_;
  std::thread thread_;
};

}  // namespace ddpb::comm
