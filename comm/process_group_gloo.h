// ProcessGroupGloo: the collectives of comm/process_group.h over Gloo's TCP transport.
//
// Rendezvous (in the constructor): a TCP device bound to options.hostname, then a full mesh
// of connections whose addresses are exchanged through `store`. The constructor blocks until
// every rank has arrived, and throws CommTimeout when one has not within options.timeout.
// `store` is used as given: two groups on one store need different prefixes, which
// make_process_group provides (see Note [Process group store prefix] in process_group.cpp).
//
// Execution: one communication thread ("ddpb-gloo") runs the issued collectives strictly
// in issue order; each Work completes when its collective has finished. Gloo tags each
// collective with its sequence number, so ranks whose orders differ fail with a timeout
// rather than mixing data. The first failure (a Gloo timeout, a peer that died) breaks the
// group: every later collective fails at once with an error naming the first one.
//
// Tensors:
//  - CPU tensors are communicated in place. Any cpu:N device is accepted (host memory).
//  - CUDA tensors must be on the group's device. They are staged through pinned host
//    buffers: the comm thread, on the comm stream "ddpb-gloo", copies D2H, synchronizes,
//    runs the host collective, copies H2D and synchronizes again before completing the Work
//    (so no device work on the tensors is pending after completion). Work::wait() also
//    makes the caller's current stream wait on an event recorded after the H2D copy.
//  - Either way the collective starts after an event recorded on the caller's current
//    stream at issue (Note [Gloo stream order] in the .cpp).
//  - The issued tensors are kept alive by the group until the collective completes.
//
// Reductions (sums): f32, i32 and i64 exactly; bf16 and f16 are reduced with their 16-bit
// payload on the wire (half the bytes of f32, which is the point of a compression hook):
// each partial sum is computed in f32 and rounded to the 16-bit type, as NCCL does.
// reduce_scatter is a ring (size-1 steps, each sending one chunk to the right neighbour), so
// every rank sends (n-1)/n of the input, the same as the reduce-scatter half of a ring
// allreduce; Gloo 0.5 has no unbound-buffer reduce_scatter of its own.
//
// Destruction cancels the collectives that have not started (their Works fail) and waits
// for the running one, which Gloo ends within options.timeout.
//
// Thread-safety: as ProcessGroup (issue from one thread; Works may be waited anywhere).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "comm/process_group.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace ddpb::comm {

class ProcessGroupGloo final : public ProcessGroup {
 public:
  ProcessGroupGloo(std::shared_ptr<Store> store, int rank, int size,
                   const ProcessGroupOptions& options);
  ~ProcessGroupGloo() override;
  ProcessGroupGloo(const ProcessGroupGloo&) = delete;
  ProcessGroupGloo& operator=(const ProcessGroupGloo&) = delete;

  std::string backend() const override { return "gloo"; }
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

 private:
  struct PendingOp;  // a collective waiting for, or running on, the comm thread

  WorkPtr issue(std::unique_ptr<PendingOp> op);
  void check_tensor(const Tensor& t, const char* op, const char* what) const;
  void run_loop();
  void execute(PendingOp& op);
  void sanitize_collective(const Stream& stream, const PendingOp& op) const;
  std::string describe_op(const PendingOp& op) const;

  Device device_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<gloo::Context> context_;
  // The group's communication stream, "ddpb-gloo" on every device: on CUDA the stream of
  // the staging copies (D2H, the host collective, H2D); on CPU an inline stream whose
  // executor is the communication thread. Collectives are ordered on it after an event on
  // the caller's stream, as NCCL's are (Note [Gloo stream order]).
  StreamPtr comm_stream_;

  std::mutex mutex_;
  std::condition_variable queue_changed_;
  std::deque<std::unique_ptr<PendingOp>> queue_;
  int64_t next_sequence_ = 0;  // under mutex_
  bool stopping_ = false;      // under mutex_
  // Set by the comm thread when a collective fails; read only there.
  std::string broken_reason_;
  std::thread thread_;
};

// The Gloo library version this binary was built against ("0.5.0").
std::string gloo_version();

}  // namespace ddpb::comm
