// DDP comm hooks: what a bucket's communication is (`--comm-hook`). The Reducer owns the
// buckets and decides when each is ready; a hook decides which collectives carry it and
// what it leaves in the bucket afterwards: the gradient averaged over the ranks.
//
//  - none: one AllReduce of the f32 bucket (PyTorch's default allreduce_hook);
//  - fp16, bf16: cast to 16 bits, AllReduce, cast back (fp16_compress_hook,
//    bf16_compress_hook);
//  - powersgd: low-rank compression with error feedback (impl_ddp/powersgd_hook.h).
//
// Note [Comm hook collective order]
// Every rank must issue the same collectives in the same order (comm/process_group.h). The
// Reducer calls, for buckets in index order: launch(b), then advance(b - 1); after the last
// launch, advance(last); then finish() of every bucket in order, then end_iteration(). (ZeRO-2's
// reduce-scatter hook is finished earlier, still in order: Note [ZeRO gradient release].) A hook
// issues collectives only from these calls, and decides what to issue only from state that
// is the same on every rank (the iteration count, the bucket layout, its options), never
// from timing or from the values of local tensors.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/named_enum.h"
#include "comm/process_group.h"
#include "core/nvtx.h"
#include "core/tensor.h"

namespace ddpb::ddp {

enum class CommHook { None, FP16, BF16, PowerSGD };
constexpr NameTable<CommHook, 4> enum_names(CommHook) {
  return {{{"none", CommHook::None},
           {"fp16", CommHook::FP16},
           {"bf16", CommHook::BF16},
           {"powersgd", CommHook::PowerSGD}}};
}

// PyTorch's PowerSGDState, less its logging (`--powersgd-*`).
struct PowerSgdOptions {
  int64_t rank = 1;                   // matrix_approximation_rank
  int64_t start_iter = 10;            // start_powerSGD_iter: plain AllReduce before it
  double min_compression_rate = 2.0;  // below it a matrix is AllReduced uncompressed
  bool error_feedback = true;         // use_error_feedback
  bool warm_start = true;             // warm_start: Q carries over between iterations
  double epsilon = 0.0;               // orthogonalization_epsilon
  uint64_t seed = 0;                  // random_seed: the initial Q, the same on every rank
  bool keep_random_q = false;         // keep every random Q drawn, for --dump
};

// One collective of a bucket in the last synchronising iteration. Times are milliseconds
// since the start of that backward, on the host's steady clock.
struct CollectiveRecord {
  std::string name;  // "allreduce", or PowerSGD's "uncompressed", "P", "Q"
  int64_t bytes = 0;
  double launch_ms = 0, start_ms = 0, complete_ms = 0;
  comm::WorkPtr work;  // until its own start and end times are read
};

// Host-timed compute a hook does between its collectives (CPU devices only: on CUDA the
// host only enqueues it, and NVTX shows it in Nsight Systems).
struct HookComputeSpan {
  std::string name;
  double start_ms = 0, end_ms = 0;
};

// What one bucket did in the last synchronising iteration.
struct BucketRecord {
  size_t index = 0;
  int64_t params = 0;
  int64_t bytes = 0;       // bytes of its collectives (after compression)
  double ready_ms = 0;     // its last gradient arrived
  double launch_ms = 0;    // its first collective was issued
  double start_ms = 0;     // its first collective started on the communication thread/stream
  double complete_ms = 0;  // its last collective finished
  std::vector<CollectiveRecord> collectives;
  std::vector<HookComputeSpan> compute;
};

// What a hook sees of a bucket.
struct HookBucket {
  size_t index = 0;
  Tensor buffer;                   // flat f32: local gradients in, averaged gradients out
  Tensor shard_out;                // ZeRO: this rank's chunk of the averaged bucket
  std::vector<Tensor> views;       // views[k]: parameter k of the bucket, in its shape
  std::vector<std::string> names;  // names[k]: its name
  BucketRecord record;
  std::vector<nvtx::AsyncRange> ranges;  // ranges[k]: collective k, until it completes
};

class BucketCommHook {
 public:
  BucketCommHook(std::shared_ptr<comm::ProcessGroup> pg, std::function<double()> now_ms)
      : pg_(std::move(pg)), now_ms_(std::move(now_ms)) {}
  virtual ~BucketCommHook() = default;

  // Whether the Reducer divides each gradient by the world size as it enters the bucket, in
  // this iteration. A hook that answers false averages in its own way (PowerSGD).
  virtual bool averages_at_copy_in() const { return true; }
  // Note [Comm hook collective order] for the four calls below.
  virtual void launch(HookBucket& b) = 0;
  virtual void advance(HookBucket& b) { (void)b; }
  virtual void finish(HookBucket& b) { wait_all(b); }
  virtual void end_iteration() {}
  // The Reducer rebuilt its buckets: state kept per bucket no longer applies.
  virtual void buckets_rebuilt() {}
  // Tensors for --dump (PowerSGD: every random Q it drew).
  virtual std::vector<std::pair<std::string, Tensor>> dump_tensors() const { return {}; }

 protected:
  // Issues an AllReduce of `payload` as collective `name` of bucket b.
  void issue(HookBucket& b, std::string name, const Tensor& payload);
  // Issues a reduce-scatter of bucket b's `in` into `out` (ZeRO).
  void issue_reduce_scatter(HookBucket& b, const Tensor& out, const Tensor& in);
  // Waits for collective k of bucket b (Gloo: the host waits; NCCL: the current stream).
  void wait(HookBucket& b, size_t k);
  void wait_all(HookBucket& b);
  // Runs fn as a named compute span of bucket b (an NVTX range; host-timed on CPU).
  void compute(HookBucket& b, const char* name, const std::function<void()>& fn);
  comm::ProcessGroup& pg() { return *pg_; }

 private:
  void issue_with(HookBucket& b, std::string name, const Tensor& payload,
                  const std::function<comm::WorkPtr()>& start);

  std::shared_ptr<comm::ProcessGroup> pg_;
  std::function<double()> now_ms_;
};

std::unique_ptr<BucketCommHook> make_comm_hook(CommHook hook, const PowerSgdOptions& powersgd,
                                               std::shared_ptr<comm::ProcessGroup> pg,
                                               std::function<double()> now_ms);
// ZeRO's communication (Note [ZeRO in DDP]): a reduce-scatter of the bucket into shard_out.
std::unique_ptr<BucketCommHook> make_reduce_scatter_hook(std::shared_ptr<comm::ProcessGroup> pg,
                                                         std::function<double()> now_ms);

}  // namespace ddpb::ddp
