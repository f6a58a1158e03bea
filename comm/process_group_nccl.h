// ProcessGroupNccl: the collectives of comm/process_group.h with NCCL, one GPU per rank
// (built only with CUDA and NCCL; make_process_group dispatches "nccl" here).
//
// Construction (blocks until every rank has arrived, or throws):
//  1. Each rank publishes "hostname + GPU UUID" in `store`. If two ranks share a GPU, every
//     rank throws UsageError ("NCCL cannot run two ranks on one GPU ...; use --backend
//     gloo"), since NCCL would hang or fail on it. See Note [One GPU per NCCL rank].
//  2. Rank 0 publishes an ncclUniqueId; the others wait for it (options.timeout).
//  3. ncclCommInitRankConfig with blocking = 0, polled with ncclCommGetAsyncError, so that
//     a rank that never comes makes the others abort and throw CommTimeout, not hang.
// `store` is used as given: make_process_group hands each group its own key prefix (Note
// [Process group store prefix] in process_group.cpp).
//
// Streams: collectives run on the group's own stream "ddpb-nccl" on options.device. Each
// one (see Note [NCCL stream order] in the .cpp):
//  - records an event on the caller's current stream and makes the comm stream wait on it
//    (the host never blocks), so the collective sees everything the caller enqueued before;
//  - enqueues the NCCL call(s) between a start and an end event on the comm stream;
//  - returns a Work whose wait() makes the caller's current stream wait on the end event.
//
// Work semantics (they differ from Gloo's, whose wait() blocks the host):
//  - wait() does NOT block the host (except for barrier()): it throws the error recorded so
//    far, if any, and orders the caller's current stream after the collective. Reading the
//    result on the host (Tensor::to_floats, a stream sync) then waits for it. A collective
//    that fails after wait() returned is reported by its Work (is_completed/exception) and
//    by every later collective, which fails at once because the group is broken.
//  - is_completed() never blocks: the end event has completed, or the collective failed.
//  - barrier().wait() blocks the host until every rank has reached the barrier (or the
//    group failed, which throws).
//  - start_ns/end_ns (steady clock) are filled, from the CUDA events, by the first
//    is_completed() or wait() that finds the collective complete, in the calling thread.
//
// Watchdog: a thread ("ddpb-nccl-wd") polls the pending collectives and
// ncclCommGetAsyncError. When an NCCL error appears, or a collective has not completed
// options.timeout after it was issued, it aborts the communicator (ncclCommAbort, which ends
// the running kernels) and fails every pending Work: CommTimeout naming the op, its sequence
// number and the rank, or NcclError with NCCL's message. The group is then broken.
//
// Memory: the issued tensors are held by the group until the watchdog sees the end event
// complete, because the caching allocator (core/allocator.h) would otherwise hand their
// blocks to the caller's stream while the comm stream still reads or writes them.
//
// Destruction never hangs: pending collectives get a short grace to complete; then the
// communicator is aborted (collectives pending) or finalized and destroyed, each step
// bounded. Works still pending fail ("destroyed while pending").
//
// Thread-safety: as ProcessGroup (issue from one thread; Works may be used from any thread).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "comm/process_group.h"
#include "core/allocator.h"

namespace ddpb::comm {

namespace nccl_detail {
class Communicator;  // the ncclComm_t, shared with the Works (they poll its errors)
class NcclWork;
struct ClockAnchor;  // a CUDA event with a known steady-clock time
}  // namespace nccl_detail

class ProcessGroupNccl final : public ProcessGroup {
 public:
  ProcessGroupNccl(std::shared_ptr<Store> store, int rank, int size,
                   const ProcessGroupOptions& options);
  ~ProcessGroupNccl() override;
  ProcessGroupNccl(const ProcessGroupNccl&) = delete;
  ProcessGroupNccl& operator=(const ProcessGroupNccl&) = delete;

  std::string backend() const override { return "nccl"; }
  const Device& device() const { return device_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // The communication stream (for tests and timelines).
  const StreamPtr& comm_stream() const { return comm_stream_; }

  // Tensors must be on device(). allreduce/reduce_scatter sum f32, bf16, f16, i32 and i64.
  WorkPtr allreduce(const Tensor& tensor) override;
  WorkPtr broadcast(const Tensor& tensor, int root) override;
  WorkPtr allgather(const Tensor& output, const Tensor& input) override;
  WorkPtr reduce_scatter(const Tensor& output, const Tensor& input) override;
  WorkPtr reduce(const Tensor& tensor, int root) override;
  WorkPtr alltoall(const Tensor& output, const Tensor& input) override;
  WorkPtr sendrecv(const Tensor& send, int dst, const Tensor& recv, int src) override;
  WorkPtr barrier() override;
  // One ncclGroupStart/End: a single launch, one sequence number, one Work.
  WorkPtr allreduce_coalesced(const std::vector<Tensor>& tensors) override;
  WorkPtr reduce_scatter_tensor_coalesced(const std::vector<Tensor>& outputs,
                                          const std::vector<Tensor>& inputs, ReduceOp op) override;
  WorkPtr allgather_into_tensor_coalesced(const std::vector<Tensor>& outputs,
                                          const std::vector<Tensor>& inputs) override;

 private:
  // Declared first, destroyed last: the allocator keeps its cache on out-of-memory while
  // the communicator lives (Note [Out of memory with NCCL live]).
  CommunicatorLease lease_;
  // A collective issued and not yet seen complete by the watchdog.
  struct Pending {
    std::shared_ptr<nccl_detail::NcclWork> work;
    std::vector<Tensor> tensors;  // kept alive until the end event completes
    std::chrono::steady_clock::time_point deadline;
  };
  using Enqueue = std::function<ncclResult_t(ncclComm_t, cudaStream_t)>;
  // Issues one collective: orders the comm stream after the caller's, then runs `enqueue`
  // (the NCCL call or group of calls, returning the first failure) between the start and
  // end events. `tensors` are held until the end event completes.
  WorkPtr launch(const std::string& op, int64_t bytes, std::vector<Tensor> tensors,
                 const Enqueue& enqueue, bool host_blocking_wait);
  void check_tensor(const Tensor& t, const char* op, const char* what) const;
  std::string describe(const std::string& op, int64_t sequence,
                       const std::vector<Tensor>& tensors) const;
  void watchdog_loop();
  // The watchdog's steps; each is called with mutex_ held (`lock`, which the first releases
  // while it asks NCCL).
  void check_async_error_locked(std::unique_lock<std::mutex>& lock);
  void retire_completed_locked();
  void release_drained_locked();
  // Under mutex_: aborts the communicator (once) and fails every pending Work.
  void fail_pending_locked(const std::string& reason, bool timed_out);
  // Records a new clock anchor on clock_stream_; keeps the old one if the GPU does not
  // answer within `patience`.
  void refresh_clock_anchor(std::chrono::milliseconds patience);

  Device device_;
  std::chrono::milliseconds timeout_;
  std::string who_;  // "rank 0 of 2 on cuda:0", for messages
  std::shared_ptr<nccl_detail::Communicator> comm_;
  StreamPtr comm_stream_;
  StreamPtr clock_stream_;  // idle: clock anchors are recorded here (watchdog thread)

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Pending> pending_;   // under mutex_, in issue order
  std::deque<Pending> draining_;  // under mutex_: failed, tensors held until the stream ends
  std::shared_ptr<const nccl_detail::ClockAnchor> anchor_;  // under mutex_
  int64_t next_sequence_ = 0;                               // under mutex_
  size_t flight_ring_ = 0;     // ProcessGroupOptions::flight_group's ring in the flight recorder
  std::string broken_reason_;  // under mutex_
  bool stopping_ = false;      // under mutex_
  std::thread watchdog_;
};

}  // namespace ddpb::comm
