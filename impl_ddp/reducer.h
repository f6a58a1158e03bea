// The DDP Reducer: turns gradient-ready hooks into bucketed, overlapped AllReduces.
//
// Data model (one concern each):
//  - Bucket: one flat buffer (dtype and device of its parameters) with a view per
//    parameter, a `pending` count of parameters not yet ready, and the Work of its
//    collective once launched.
//  - VariableLocator {bucket, index}: where a parameter's gradient lives.
//  - The assignment of parameters to buckets comes from compute_bucket_assignment(), a pure
//    function (impl_ddp/bucket_assignment.h).
//
// Per iteration: prepare_for_backward() before loss.backward(); the hooks fire during
// backward; finalize_backward() after it. prepare_for_backward names each parameter's
// bucket view as the destination of its gradient (Note [Gradient destinations] in
// core/autograd.h), so backward computes the gradient straight into the bucket. A hook then
// averages it in place (scales by 1/world_size: mark_variable_ready); only a gradient that
// did not land in its slot (a parameter with two uses, a replaced .grad) is copied in. A
// bucket whose pending count reaches zero is ready (mark_bucket_ready) and launched in
// order. After the collectives, the reduced gradients are handed over as the bucket views
// themselves: nothing is copied out.
//
// Note [DDP bucket dtypes]
// Buckets are f32 (a 16-bit comm hook casts a bucket for the wire and back), so every
// parameter must be f32: the Reducer refuses others at construction, naming the parameter,
// rather than mixing dtypes in one flat buffer.
//
// Note [DDP bucket launch order]
// Buckets are launched strictly in bucket index order: a ready bucket waits until every
// bucket before it has launched, and a comm hook issues its collectives in the order of
// Note [Comm hook collective order] (impl_ddp/comm_hooks.h). Every rank therefore issues the same
// collectives in the same order, whatever order its gradients became ready in, which is what a
// ProcessGroup requires (comm/process_group.h). The rebuild after the first iteration uses rank 0's
// observed order on every rank for the same reason (sent as integers). As in PyTorch, the
// buckets are not rebuilt with find_unused_parameters: which parameters get gradients may
// change every step, and so may the ready order. Code that launches collectives from the
// Reducer (launch_ready_buckets, finalize_backward, the rebuild) relies on this note.
//
// Note [DDP static graph]
// With static_graph (PyTorch's DistributedDataParallel(static_graph=True)) the graph is taken
// to be the same every iteration, and the first synchronising iteration learns it: every
// gradient-ready hook only counts, and all buckets are reduced after backward, in index order
// (a parameter may become ready more than once, as activation checkpointing's recomputation
// makes it, so no bucket can be launched before backward ends); parameters that got no
// gradient on any rank are the unused ones (one AllReduce of the used-map, once). The buckets
// are then rebuilt once in the observed order, as without unused parameters. From the second
// iteration on there is no search for unused parameters: the unused ones are marked ready
// at once, and a parameter is ready when its hook has fired as many times as in the first
// iteration, its gradient accumulated in its bucket slot over those firings (counts are each
// rank's own; a parameter no rank used keeps no gradient). A graph that
// changes after all (a parameter ready more often, or one that never comes) is an error naming
// the parameter.
//
// Threads: all methods run on the rank's training thread (the hooks run on the thread that
// calls backward, which is the same one).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/process_group.h"
#include "core/nn.h"
#include "impl_ddp/bucket_assignment.h"
#include "impl_ddp/comm_hooks.h"
#include "impl_ddp/zero_shards.h"

namespace ddpb::ddp {

struct ReducerOptions {
  size_t first_bucket_bytes = size_t{1} << 20;  // --first-bucket-mb
  size_t bucket_bytes = size_t{25} << 20;       // --bucket-cap-mb
  bool grad_as_bucket_view = false;             // --grad-as-bucket-view
  bool find_unused_parameters = false;          // --find-unused-params
  bool static_graph = false;                    // --static-graph (Note [DDP static graph])
  bool overlap = true;                          // false: --no-overlap
  CommHook comm_hook = CommHook::None;          // --comm-hook
  PowerSgdOptions powersgd;                     // --powersgd-*, with --comm-hook powersgd
  bool check_finite = false;                    // --check-finite: NaN/Inf check per gradient
  int zero_stage = 0;  // Note [ZeRO in DDP] (impl_ddp/zero_optimizer.h): 0 plain DDP, 1 or 2
};

// What ZeRO's optimizer sees of a bucket (Note [ZeRO in DDP]).
struct ZeroBucketView {
  Tensor buffer;     // padded to shard.padded: the gradients in (none between ZeRO-2's steps)
  Tensor shard_out;  // this rank's chunk of the averaged gradients
  BucketShard shard;
  std::vector<size_t> params;    // parameter indices, in bucket order
  std::vector<int64_t> offsets;  // each one's first element in the buffer
};

class Reducer {
 public:
  Reducer(std::vector<nn::NamedParameter> params, std::shared_ptr<comm::ProcessGroup> pg,
          ReducerOptions options);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Call before loss.backward(). `sync` false is no_sync (gradient accumulation without
  // communication). With find_unused_parameters, `output` is searched for the parameters
  // this forward used; the others are marked ready at once.
  void prepare_for_backward(const autograd::Var& output, bool sync);
  // Call after loss.backward(): launches what is left, waits for every bucket, writes the
  // averaged gradients back, and (once) rebuilds the buckets in the observed order.
  void finalize_backward();
  // Note [Join shadow]: a rank that has run out of input matches one iteration of its peers'
  // gradient synchronisation: zeros in every bucket, launched and completed in order through
  // the comm hook, and its zeros in the used-map sum. Collective. Its gradients are untouched.
  void join_shadow();
  // Each globally used parameter's .grad becomes its slot of its bucket, the reduced gradient
  // (as finalize_backward leaves it without grad_as_bucket_view; not under ZeRO, whose
  // buckets hold no average). PyTorch's ZeRO variant's joined rank steps with them.
  void hand_over_gradients();
  // Divide gradients by `ranks` instead of the world size (0: the world size again): DDP's
  // Join without divide_by_initial_world_size averages over the ranks still active.
  void set_average_over(int ranks);

  // Rebuilds the buckets with a new cap (`--bucket-cap-mb auto`), in the order they were
  // rebuilt in after the first iteration (or the initial order before it). Call between
  // iterations, with the same cap on every rank (Note [Bucket autotune agreement] in
  // bench/run/bucket_tuner.h).
  void set_bucket_cap(size_t bucket_bytes);
  // Call after the step's work is complete (the runner synchronises first).
  const std::vector<BucketRecord>& last_records();
  // Bucket layout: per bucket, parameter names and bytes.
  nlohmann::json layout() const;
  nlohmann::json initial_layout() const { return initial_layout_; }
  bool rebuilt() const { return rebuilt_; }
  size_t num_buckets() const;
  // Fault injection (--inject-fault corrupt-grad): the next gradient of parameter
  // `param_index` to reach its bucket gets a NaN in its first element.
  void corrupt_next_gradient(size_t param_index) {
    corrupt_param_ = static_cast<int64_t>(param_index);
  }
  // Fault injection (--inject-fault slow-backward=MS): the next synchronising backward sleeps
  // `ms` after its first gradient hook, so that every later bucket is ready that much later.
  void delay_next_backward(double ms) { backward_delay_ms_ = ms; }
  // The comm hook (for its --dump tensors).
  const BucketCommHook& comm_hook() const { return *hook_; }
  // ZeRO (Note [ZeRO in DDP]): the buckets as its optimizer steps and gathers them (without a
  // ZeRO stage, unpadded shards of DDP's own buckets), and a count that changes whenever the
  // buckets are rebuilt.
  std::vector<ZeroBucketView> zero_buckets() const;
  int64_t layout_generation() const { return layout_generation_; }
  // Which parameters some rank used in the last synchronising backward (all, without
  // find_unused_parameters or a static graph): the others keep no gradient.
  const std::vector<bool>& globally_used() const { return globally_used_; }
  const std::vector<nn::NamedParameter>& params() const { return params_; }
  // When the last synchronising backward started (the zero of BucketRecord's times).
  std::chrono::steady_clock::time_point backward_start() const { return backward_start_; }

 private:
  struct Bucket;
  struct VariableLocator {
    size_t bucket = 0;
    size_t index = 0;  // position within the bucket
  };

  void build_buckets(const BucketAssignment& assignment);
  // Note [ZeRO gradient release]: stage 2 allocates a bucket's buffer at its first gradient
  // and gives it back once its reduce-scatter is done.
  bool releases_buffers() const { return options_.zero_stage == 2; }
  static constexpr size_t kBucketsInFlight = 2;
  void allocate_buffer(Bucket& bucket) const;
  void finish_buckets_before(size_t end);
  void drop_unused_destinations();
  void reset_iteration();
  void complete_buckets();
  std::vector<bool> globally_used_parameters();
  void on_grad_ready(size_t param_index);
  // Note [DDP static graph]: the first iteration's hooks only count, and finalize_backward
  // marks every parameter ready; later ones are ready after their counted firings.
  bool learning_static_graph() const { return options_.static_graph && !graph_known_; }
  void learn_static_graph();
  // PyTorch's mark_variable_ready: the gradient is in its slot, averaged; then the bucket's
  // pending count drops (mark_bucket_ready once it reaches zero).
  void mark_variable_ready(size_t param_index);
  void average_into_bucket(size_t param_index, const Tensor& view);
  // Fault injection and --check-finite, applied to a gradient once it is in its slot.
  void inspect_gradient(size_t param_index, const Tensor& view);
  void mark_bucket_ready(size_t bucket_index);
  void launch_ready_buckets();  // Note [DDP bucket launch order]
  void rebuild_from_observed_order();
  void rebuild_buckets();  // from options_.bucket_bytes and bucket_order_
  double now_ms() const;

  std::vector<nn::NamedParameter> params_;
  std::shared_ptr<comm::ProcessGroup> pg_;
  ReducerOptions options_;
  std::unique_ptr<BucketCommHook> hook_;
  float copy_in_scale_ = 1.0f;  // 1/world size, or 1 where the hook averages itself
  int average_over_ = 0;        // set_average_over: 0 means the world size
  std::vector<Bucket> buckets_;
  std::vector<VariableLocator> locators_;
  size_t next_to_launch_ = 0;
  size_t next_to_finish_ = 0;
  bool sync_ = true;
  bool rebuilt_ = false;
  std::vector<size_t> ready_order_;
  std::vector<size_t> bucket_order_;  // the agreed order of the rebuild (empty before it)
  std::vector<bool> locally_used_;    // got a gradient from this rank's backward
  std::vector<bool> ready_;           // marked ready in this backward
  // Note [DDP static graph]: per parameter, this rank's hook firings in the first iteration
  // (0: marked ready at once), those still to come in this backward, and whether any rank
  // used it.
  bool graph_known_ = false;
  std::vector<int> static_fires_, fires_left_;
  std::vector<bool> statically_used_;
  int64_t corrupt_param_ = -1;    // fault injection, see corrupt_next_gradient()
  double backward_delay_ms_ = 0;  // fault injection, see delay_next_backward()
  std::chrono::steady_clock::time_point backward_start_;
  std::vector<BucketRecord> records_;
  int64_t records_zero_ns_ = 0;
  nlohmann::json initial_layout_;
  int64_t layout_generation_ = 0;
  std::vector<bool> globally_used_;
};

}  // namespace ddpb::ddp
