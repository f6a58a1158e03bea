#include "impl_ddp/reducer.h"

#include <algorithm>
#include <limits>
#include <thread>
#include <unordered_set>

#include "core/check.h"
#include "core/memory_category.h"
#include "core/nvtx.h"
#include "core/ops.h"
#include "core/stream_sanitizer.h"

namespace ddpb::ddp {

// A bucket: its parameters' gradients side by side in one flat f32 buffer (Note [DDP bucket
// dtypes]), each parameter's slot a view into it (HookBucket). Backward writes the gradients
// into the slots, the comm hook reduces the buffer in place, and the views are the reduced
// gradients.
struct Reducer::Bucket : HookBucket {
  std::vector<size_t> params;  // parameter indices, in bucket order
  std::vector<int64_t> offsets;
  BucketShard shard;     // ZeRO: this rank's part (Note [ZeRO shards])
  int64_t elements = 0;  // the buffer's: its parameters', padded under ZeRO
  size_t pending = 0;
  bool launched = false;
};

Reducer::Reducer(std::vector<nn::NamedParameter> params, std::shared_ptr<comm::ProcessGroup> pg,
                 ReducerOptions options)
    : params_(std::move(params)), pg_(std::move(pg)), options_(options) {
  DDPB_CHECK(!params_.empty()) << "DDP needs at least one parameter";
  DDPB_CHECK(options_.zero_stage >= 0 && options_.zero_stage <= 2)
      << "ZeRO stage " << options_.zero_stage;
  if (options_.zero_stage > 0) {
    DDPB_USAGE_CHECK(options_.comm_hook == CommHook::None && !options_.grad_as_bucket_view)
        << "ZeRO reduce-scatters the buckets itself: no comm hook, no gradients as bucket views";
    hook_ = make_reduce_scatter_hook(pg_, [this] { return now_ms(); });
  } else {
    hook_ = make_comm_hook(options_.comm_hook, options_.powersgd, pg_, [this] { return now_ms(); });
  }
  for (const auto& p : params_) {  // Note [DDP bucket dtypes]
    DDPB_USAGE_CHECK(p.var.data().dtype() == DType::F32)
        << "DDP buckets are f32, but parameter " << p.name << " is " << p.var.data().describe();
  }
  rebuild_buckets();  // in reverse model order until the first iteration shows the real one
  initial_layout_ = layout();
  for (size_t i = 0; i < params_.size(); ++i) {
    params_[i].var.register_grad_ready_hook([this, i](const autograd::Var&) { on_grad_ready(i); });
  }
  locally_used_.assign(params_.size(), false);
}

Reducer::~Reducer() {
  for (auto& p : params_) p.var.clear_grad_ready_hooks();
}

void Reducer::build_buckets(const BucketAssignment& assignment) {
  MemoryCategoryScope gradients(MemoryCategory::Gradients);  // the buckets hold the gradients
  std::vector<Bucket> buckets(assignment.size());
  locators_.assign(params_.size(), {});
  for (size_t b = 0; b < assignment.size(); ++b) {
    Bucket& bk = buckets[b];
    bk.index = b;
    bk.params = assignment[b];
    int64_t total = 0;
    for (size_t i : bk.params) {
      bk.offsets.push_back(total);
      total += params_[i].var.data().numel();
    }
    bk.elements = total;
    if (options_.zero_stage > 0) {  // Note [ZeRO shards]: padded, and this rank's chunk
      bk.shard = shard_bucket(total, pg_->size(), pg_->rank());
      bk.elements = bk.shard.padded;
    }
    if (releases_buffers()) {  // Note [ZeRO gradient release]: only the shard stays
      bk.shard_out = Tensor::zeros({bk.shard.chunk}, DType::F32,
                                   params_[bk.params.front()].var.data().device());
    } else {
      allocate_buffer(bk);
    }
    for (size_t k = 0; k < bk.params.size(); ++k) {
      size_t i = bk.params[k];
      const autograd::Var& v = params_[i].var;
      bk.names.push_back(params_[i].name);
      locators_[i] = {b, k};
      if (options_.grad_as_bucket_view) {
        // The gradient lives in the bucket from now on: AccumulateGrad adds into the view.
        if (v.grad().defined()) ops::copy(v.grad(), bk.views[k]);
        v.set_grad(bk.views[k]);
      }
    }
    bk.record.index = b;
    bk.record.params = static_cast<int64_t>(bk.params.size());
  }
  buckets_ = std::move(buckets);
}

// The bucket's flat buffer and its parameters' views into it. Stage 1 of ZeRO reduce-scatters
// in place: its chunk of the buffer is its shard_out, so the reduced shard costs no memory.
void Reducer::allocate_buffer(Bucket& bk) const {
  MemoryCategoryScope gradients(MemoryCategory::Gradients);  // the buckets hold the gradients
  const Device device = params_[bk.params.front()].var.data().device();
  const int64_t used = bk.offsets.back() + params_[bk.params.back()].var.data().numel();
  if (releases_buffers()) {
    // Allocated by the bucket's first gradient, every one of whose slots is written before
    // it launches (copied in or zeroed): only the padding needs zeros.
    bk.buffer = Tensor::empty({bk.elements}, DType::F32, device);
    if (bk.elements > used) ops::zero(bk.buffer.flat_view(used, {bk.elements - used}));
  } else {
    bk.buffer = Tensor::zeros({bk.elements}, DType::F32, device);
  }
  if (sanitizer::enabled()) sanitizer::set_name(bk.buffer, "bucket " + std::to_string(bk.index));
  bk.views.clear();
  for (size_t k = 0; k < bk.params.size(); ++k) {
    bk.views.push_back(bk.buffer.flat_view(bk.offsets[k], params_[bk.params[k]].var.shape()));
    // Note [ZeRO gradient release]: the bucket's gradients still to come go straight in.
    if (releases_buffers() && sync_ && ready_.size() == params_.size() && !ready_[bk.params[k]])
      params_[bk.params[k]].var.set_grad_destination(bk.views.back());
  }
  if (options_.zero_stage == 1)
    bk.shard_out = bk.buffer.flat_view(pg_->rank() * bk.shard.chunk, {bk.shard.chunk});
}

// Finishes buckets [next_to_finish_, end) in order; under ZeRO-2 each gives its buffer back
// (Note [ZeRO gradient release]).
void Reducer::finish_buckets_before(size_t end) {
  for (; next_to_finish_ < end; ++next_to_finish_) {
    Bucket& bk = buckets_[next_to_finish_];
    hook_->finish(bk);
    bk.record.complete_ms = now_ms();  // replaced by the collectives' own end once known
    if (releases_buffers()) {
      bk.buffer = Tensor();
      bk.views.clear();
    }
  }
}

// A synchronising iteration starts: every bucket pending, none launched, fresh records.
void Reducer::reset_iteration() {
  backward_start_ = std::chrono::steady_clock::now();
  next_to_launch_ = 0;
  next_to_finish_ = 0;
  for (auto& bk : buckets_) {
    bk.pending = bk.params.size();
    bk.launched = false;
    bk.ranges.clear();
    BucketRecord fresh;
    fresh.index = bk.record.index;
    fresh.params = bk.record.params;
    bk.record = std::move(fresh);
  }
  const int over = average_over_ > 0 ? average_over_ : pg_->size();
  copy_in_scale_ = hook_->averages_at_copy_in() ? 1.0f / static_cast<float>(over) : 1.0f;
  locally_used_.assign(params_.size(), false);
  ready_.assign(params_.size(), false);
  if (options_.static_graph) {
    fires_left_ = graph_known_ ? static_fires_ : std::vector<int>(params_.size(), 0);
  }
}

void Reducer::prepare_for_backward(const autograd::Var& output, bool sync) {
  sync_ = sync;
  if (!sync_) return;
  reset_iteration();
  // Backward may compute each gradient straight into its bucket slot (Note [Gradient
  // destinations]): then the copy into the bucket below is skipped. Not into a buffer that
  // does not exist yet (Note [ZeRO gradient release]).
  for (size_t i = 0; i < params_.size() && !releases_buffers(); ++i) {
    params_[i].var.set_grad_destination(buckets_[locators_[i].bucket].views[locators_[i].index]);
  }
  // Note [ZeRO gradient release]: the first bucket backward fills, ready for its gradients.
  if (releases_buffers() && !buckets_.front().buffer.defined()) allocate_buffer(buckets_.front());
  if (options_.static_graph && graph_known_) {
    // Note [DDP static graph]: no search; the first iteration said which are unused.
    for (size_t i = 0; i < params_.size(); ++i) {
      if (static_fires_[i] == 0) mark_variable_ready(i);
    }
  } else if (options_.find_unused_parameters && !options_.static_graph) {
    auto reached = autograd::reachable_leaves(output);
    std::unordered_set<const autograd::VarImpl*> used(reached.begin(), reached.end());
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!used.count(params_[i].var.impl())) mark_variable_ready(i);  // no gradient will come
    }
  }
}

void Reducer::on_grad_ready(size_t i) {
  if (!sync_) return;  // no_sync: the gradient accumulates locally in .grad
  if (options_.static_graph) {
    // Note [DDP static graph]: learning, the firings are counted; known, the last firing of
    // the first iteration's count makes the parameter ready.
    if (learning_static_graph()) {
      if (fires_left_[i]++ == 0) ready_order_.push_back(i);
      locally_used_[i] = true;
      return;
    }
    DDPB_CHECK(fires_left_[i] > 0)
        << "--static-graph: parameter " << params_[i].name << " became ready "
        << static_fires_[i] + 1 << " times in one backward, more than in the first iteration ("
        << static_fires_[i] << "): the graph changed, so it is not static";
    if (--fires_left_[i] > 0) return;
  }
  locally_used_[i] = true;
  mark_variable_ready(i);
  if (backward_delay_ms_ > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(backward_delay_ms_));
    backward_delay_ms_ = 0;
  }
}

void Reducer::mark_variable_ready(size_t i) {
  const auto [b, k] = locators_[i];
  Bucket& bk = buckets_[b];
  DDPB_CHECK(!bk.launched) << "parameter " << params_[i].name << " became ready after bucket " << b
                           << " was launched (marked ready twice in one backward?)";
  DDPB_CHECK(!ready_[i]) << "parameter " << params_[i].name
                         << " became ready twice in one backward";
  ready_[i] = true;
  if (!bk.buffer.defined()) allocate_buffer(bk);  // Note [ZeRO gradient release]
  average_into_bucket(i, bk.views[k]);
  inspect_gradient(i, bk.views[k]);
  // Under ZeRO the bucket holds the gradient from here on and the parameter keeps none
  // (Note [ZeRO in DDP]): freed now rather than after backward, it is not counted twice.
  if (options_.zero_stage > 0) params_[i].var.set_grad(Tensor());
  // Kept for the one rebuild (none under ZeRO, Note [ZeRO in DDP]).
  if (!rebuilt_ && options_.zero_stage == 0 && !options_.find_unused_parameters &&
      !options_.static_graph)
    ready_order_.push_back(i);
  DDPB_CHECK(bk.pending > 0) << "bucket " << b << " has no pending parameter left for "
                             << params_[i].name;
  if (--bk.pending == 0) mark_bucket_ready(b);
}

// Parameter i's gradient, divided by the world size unless the comm hook averages itself, in
// its bucket slot `view`.
void Reducer::average_into_bucket(size_t i, const Tensor& view) {
  const float scale = copy_in_scale_;
  const autograd::Var& v = params_[i].var;
  {
    nvtx::Range range("ddp.copy_in", nvtx::Category::Comm, static_cast<int64_t>(view.nbytes()));
    const bool in_bucket = v.grad().defined() && v.grad().raw_data() == view.raw_data();
    if (in_bucket && locally_used_[i]) {
      // Computed into the bucket (or still the view from the last step): average in place.
      if (scale != 1.0f) ops::scale(view, scale);
    } else if (options_.grad_as_bucket_view) {
      if (!v.grad().defined() || v.grad().raw_data() != view.raw_data()) {
        // Someone replaced the gradient (e.g. set_to_none): put it back into the bucket.
        if (v.grad().defined()) {
          ops::copy(v.grad(), view);
        } else {
          ops::zero(view);
        }
        v.set_grad(view);
      }
      if (scale != 1.0f) ops::scale(view, scale);  // world size 1: nothing to average
    } else if (v.grad().defined() && locally_used_[i]) {
      ops::scale_copy(v.grad(), view, scale);
    } else {
      ops::zero(view);
    }
  }
}

void Reducer::inspect_gradient(size_t i, const Tensor& view) {
  if (corrupt_param_ == static_cast<int64_t>(i)) {
    ops::fill(view.flat_view(0, {1}), std::numeric_limits<float>::quiet_NaN());
    corrupt_param_ = -1;
  }
  if (!options_.check_finite) return;
  // Checked before the AllReduce, so the rank that produced the value is the one named.
  Tensor flag = Tensor::empty({1}, DType::F32, view.device());
  ops::all_finite(view, flag);
  DDPB_CHECK(flag.item() != 0.0f) << "non-finite gradient on rank " << pg_->rank()
                                  << " in parameter " << params_[i].name << " (bucket "
                                  << locators_[i].bucket
                                  << "), found by --check-finite before the AllReduce";
}

void Reducer::mark_bucket_ready(size_t b) {
  buckets_[b].record.ready_ms = now_ms();
  // Note [ZeRO gradient release]: the next bucket, ready for its gradients before they come.
  if (releases_buffers() && b + 1 < buckets_.size() && !buckets_[b + 1].buffer.defined())
    allocate_buffer(buckets_[b + 1]);
  if (options_.overlap) launch_ready_buckets();
}

// See Note [DDP bucket launch order] and Note [Comm hook collective order].
void Reducer::launch_ready_buckets() {
  while (next_to_launch_ < buckets_.size() && buckets_[next_to_launch_].pending == 0) {
    Bucket& bk = buckets_[next_to_launch_];
    bk.launched = true;
    bk.record.launch_ms = now_ms();
    MemoryCategoryScope staging(MemoryCategory::Communication);  // what a hook stages
    hook_->launch(bk);
    if (next_to_launch_ > 0) hook_->advance(buckets_[next_to_launch_ - 1]);
    ++next_to_launch_;
    // Note [ZeRO gradient release]: at most kBucketsInFlight launched buffers are kept.
    if (releases_buffers() && next_to_launch_ > kBucketsInFlight)
      finish_buckets_before(next_to_launch_ - kBucketsInFlight);
  }
}

void Reducer::finalize_backward() {
  if (!sync_) return;
  if (learning_static_graph()) learn_static_graph();
  std::string missing;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!ready_[i]) missing += (missing.empty() ? "" : ", ") + params_[i].name;
  }
  DDPB_CHECK(missing.empty())
      << "rank " << pg_->rank() << ": DDP expected every parameter to receive a gradient, but "
      << missing << " did not: they were not used to produce the loss. "
      << (options_.static_graph
              ? "With --static-graph every iteration must use the parameters the first one used"
              : "Run with --find-unused-params, or make sure every parameter takes part in the "
                "loss");
  // --no-overlap launches everything here, after backward, still strictly in order.
  if (!options_.overlap) launch_ready_buckets();
  DDPB_CHECK(next_to_launch_ == buckets_.size())
      << "only " << next_to_launch_ << " of " << buckets_.size() << " buckets launched";
  complete_buckets();
  drop_unused_destinations();
  globally_used_ = globally_used_parameters();
  // Under ZeRO the parameters keep no gradient (mark_variable_ready dropped each one: the
  // bucket holds the local gradients, and only shard_out is averaged; Note [ZeRO in DDP]).
  if (options_.zero_stage == 0 && !options_.grad_as_bucket_view) hand_over_gradients();
  records_.clear();
  for (auto& bk : buckets_) records_.push_back(bk.record);
  records_zero_ns_ =
      std::chrono::duration_cast<std::chrono::nanoseconds>(backward_start_.time_since_epoch())
          .count();

  // Note [DDP bucket launch order]: not with find_unused_parameters, as in PyTorch, unless
  // the graph is static (Note [DDP static graph]); nor under ZeRO, whose shards follow the
  // buckets (Note [ZeRO in DDP]).
  if (!rebuilt_ && options_.zero_stage == 0 &&
      (!options_.find_unused_parameters || options_.static_graph))
    rebuild_from_observed_order();
}

// Note [DDP static graph]: the end of the first synchronising backward. This rank's firing
// counts are kept (0: it will mark the parameter ready at once), and which parameters some
// rank used (the used-map summed over ranks, as globally_used_parameters does for
// find_unused_parameters): the others keep no gradient. Then every parameter is marked ready,
// in index order, and the buckets launch after backward.
void Reducer::learn_static_graph() {
  std::vector<float> used(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) used[i] = fires_left_[i] > 0 ? 1.0f : 0.0f;
  Tensor map = Tensor::from_floats(used, {static_cast<int64_t>(used.size())},
                                   params_[0].var.data().device());
  pg_->allreduce(map)->wait();
  const std::vector<float> summed = map.to_floats();
  static_fires_ = fires_left_;  // this rank's own counts: 0 where it used no gradient
  statically_used_.assign(params_.size(), false);
  for (size_t i = 0; i < params_.size(); ++i) statically_used_[i] = summed[i] > 0.0f;
  graph_known_ = true;
  for (size_t i = 0; i < params_.size(); ++i) mark_variable_ready(i);
}

// Note [Comm hook collective order]. Gloo: the host waits; NCCL: the current stream.
void Reducer::complete_buckets() {
  MemoryCategoryScope staging(MemoryCategory::Communication);  // what a hook stages
  hook_->advance(buckets_.back());
  finish_buckets_before(buckets_.size());
  hook_->end_iteration();
}

// Parameters no rank used keep no gradient (as PyTorch): the used-map is summed over ranks.
std::vector<bool> Reducer::globally_used_parameters() {
  std::vector<bool> globally_used(params_.size(), true);
  if (options_.static_graph) {  // Note [DDP static graph]: known since the first iteration
    return statically_used_;
  }
  if (!options_.find_unused_parameters) return globally_used;
  std::vector<float> used(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) used[i] = locally_used_[i] ? 1.0f : 0.0f;
  Tensor map = Tensor::from_floats(used, {static_cast<int64_t>(used.size())},
                                   params_[0].var.data().device());
  pg_->allreduce(map)->wait();
  auto summed = map.to_floats();
  for (size_t i = 0; i < params_.size(); ++i) globally_used[i] = summed[i] > 0.0f;
  return globally_used;
}

void Reducer::join_shadow() {
  // ZeRO never rebuilds (Note [ZeRO in DDP]): its buckets are the same on every rank already.
  DDPB_CHECK(rebuilt_ || options_.zero_stage > 0 ||
             (options_.find_unused_parameters && !options_.static_graph))
      << "a rank joined before DDP's first iteration rebuilt its buckets: every rank needs at "
         "least one batch";
  sync_ = true;
  reset_iteration();
  for (auto& bk : buckets_) {
    if (!bk.buffer.defined()) allocate_buffer(bk);
    ops::zero(bk.buffer);
    bk.pending = 0;
  }
  launch_ready_buckets();  // in index order, the peers' order (Note [DDP bucket launch order])
  complete_buckets();
  drop_unused_destinations();
  globally_used_ = globally_used_parameters();  // its zeros in the peers' used-map sum
  records_.clear();
}

// Note [ZeRO gradient release]: a destination backward did not use would keep a released
// buffer alive.
void Reducer::drop_unused_destinations() {
  for (size_t i = 0; i < params_.size() && releases_buffers(); ++i)
    params_[i].var.set_grad_destination(Tensor());
}

// The reduced gradient is handed over as the bucket view itself rather than copied into .grad
// (a pass over every gradient byte saved per step). The bucket is written again only when the
// next synchronising backward copies the new gradients in, by which time the optimizer has
// used these; the trainer's zero_grad(set_to_none) detaches them first, and a gradient that
// still is the view is scaled in place there.
void Reducer::hand_over_gradients() {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!globally_used_.empty() && !globally_used_[i]) continue;
    params_[i].var.set_grad(buckets_[locators_[i].bucket].views[locators_[i].index]);
  }
}

void Reducer::set_average_over(int ranks) {
  DDPB_CHECK(ranks >= 0 && ranks <= pg_->size()) << "average over " << ranks << " ranks";
  average_over_ = ranks;
}

void Reducer::rebuild_from_observed_order() {
  // Every rank adopts rank 0's observed order, so all ranks build the same buckets and
  // keep launching the same collectives in the same order (Note [DDP bucket launch order]).
  std::vector<size_t> order;
  std::vector<bool> seen(params_.size(), false);
  for (size_t i : ready_order_) {
    if (!seen[i]) order.push_back(i);
    seen[i] = true;
  }
  for (size_t i = params_.size(); i-- > 0;) {
    if (!seen[i]) order.push_back(i);
  }
  std::vector<int32_t> indices(order.begin(), order.end());
  Tensor t = Tensor::from_ints(indices, {static_cast<int64_t>(order.size())},
                               params_[0].var.data().device());
  pg_->broadcast(t, /*root=*/0)->wait();
  const std::vector<int32_t> agreed = t.to_ints();
  for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<size_t>(agreed[k]);

  bucket_order_ = order;
  rebuild_buckets();
  rebuilt_ = true;
  ready_order_.clear();
}

void Reducer::rebuild_buckets() {
  std::vector<ParamInfo> infos;
  for (auto& p : params_)
    infos.push_back({p.var.data().numel(), p.var.data().dtype(), p.var.data().device()});
  build_buckets(compute_bucket_assignment(infos, options_.first_bucket_bytes, options_.bucket_bytes,
                                          bucket_order_));
  next_to_launch_ = next_to_finish_ = 0;  // new buckets, none launched
  ++layout_generation_;
  hook_->buckets_rebuilt();
}

void Reducer::set_bucket_cap(size_t bucket_bytes) {
  DDPB_CHECK(next_to_launch_ == 0 || next_to_launch_ == buckets_.size())
      << "set_bucket_cap during a backward (" << next_to_launch_ << " of " << buckets_.size()
      << " buckets launched)";
  options_.bucket_bytes = bucket_bytes;
  rebuild_buckets();
}

const std::vector<BucketRecord>& Reducer::last_records() {
  // A collective's own start/end times are known once it completed: at once for Gloo (the
  // host waited), after the stream caught up for NCCL (whose wait() does not block). A
  // bucket starts with its first collective and completes with its last.
  for (BucketRecord& r : records_) {
    bool first = true;
    for (CollectiveRecord& c : r.collectives) {
      const comm::WorkPtr& w = c.work;
      if (w && w->is_completed() && w->end_ns != 0) {
        c.start_ms = (w->start_ns - records_zero_ns_) / 1e6;
        c.complete_ms = (w->end_ns - records_zero_ns_) / 1e6;
        c.work.reset();
      }
      if (c.work) continue;
      r.start_ms = first ? c.start_ms : std::min(r.start_ms, c.start_ms);
      r.complete_ms = first ? c.complete_ms : std::max(r.complete_ms, c.complete_ms);
      first = false;
    }
  }
  return records_;
}

double Reducer::now_ms() const {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                   backward_start_)
      .count();
}

std::vector<ZeroBucketView> Reducer::zero_buckets() const {
  std::vector<ZeroBucketView> out;
  for (const Bucket& b : buckets_) {
    // Plain DDP's buckets (PyTorch's ZeRO variant): the same shards, unpadded.
    int64_t total = 0;
    for (size_t i : b.params) total += params_[i].var.data().numel();
    const BucketShard shard =
        options_.zero_stage > 0 ? b.shard : shard_bucket(total, pg_->size(), pg_->rank());
    out.push_back({b.buffer, b.shard_out, shard, b.params, b.offsets});
  }
  return out;
}

nlohmann::json Reducer::layout() const {
  nlohmann::json out = nlohmann::json::array();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    nlohmann::json names = nlohmann::json::array();
    for (size_t i : buckets_[b].params) names.push_back(params_[i].name);
    const int64_t bytes = buckets_[b].elements * static_cast<int64_t>(sizeof(float));
    out.push_back({{"bucket", b}, {"bytes", bytes}, {"params", names}});
  }
  return out;
}

}  // namespace ddpb::ddp

namespace ddpb::ddp {
size_t Reducer::num_buckets() const {
  return buckets_.size();
}
}  // namespace ddpb::ddp
