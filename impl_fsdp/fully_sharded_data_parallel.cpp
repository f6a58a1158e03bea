#include "impl_fsdp/fully_sharded_data_parallel.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_set>
#include <utility>

#include "comm/broadcast_coalesced.h"
#include "comm/flight_recorder.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/memory_category.h"
#include "core/micro_steps.h"
#include "core/nvtx.h"
#include "core/ops.h"
#include "core/phase_timer.h"
#include "core/step_phase.h"

namespace ddpb::fsdp {

bool reshards_after_forward(ShardingStrategy strategy) {
  return strategy == ShardingStrategy::FullShard || strategy == ShardingStrategy::HybridShard;
}

// What the hooks keep per unit for one backward.
struct FullyShardedDataParallel::UnitState {
  size_t ready = 0;      // parameters whose gradient is final this backward
  bool reduced = false;  // its reduce-scatter is issued this backward
  std::vector<autograd::HookHandle> forward_hooks;
};

// One collective a unit issued this step, with its Work for the times it ran.
struct FullyShardedDataParallel::Issued {
  UnitCollective record;
  size_t unit = 0;
  comm::WorkPtr work;
  int64_t launch_ns = 0;
};

namespace {

constexpr size_t kNone = SIZE_MAX;

// Notes in the flight recorder what a collective was for ("fsdp unit h.0, forward"), which
// the doctor prints beside its op when a rank hangs; under its group's numbers (Note
// [Sub-groups]).
void tag_for_flight(const comm::WorkPtr& work, const UnitCollective& record) {
  if (!work || work->sequence < 0) return;
  comm::flight_recorder().tag(work->flight_ring, work->sequence,
                              "fsdp unit " + record.unit + ", " + record.when);
}

}  // namespace

FullyShardedDataParallel::FullyShardedDataParallel(nn::Module& module, ForwardFn forward,
                                                   FsdpGroups groups,
                                                   const std::vector<FsdpUnitSpec>& units,
                                                   FsdpOptions options)
    : module_(module), forward_(std::move(forward)), groups_(std::move(groups)), options_(options) {
  DDPB_USAGE_CHECK(groups_.world && groups_.shard) << "FSDP needs its world and shard groups";
  DDPB_USAGE_CHECK(options_.limit_all_gathers >= 0)
      << "--limit-all-gathers must be 0 (no limit) or more, not " << options_.limit_all_gathers;
  const std::vector<autograd::Var> params = module_.parameters();
  DDPB_USAGE_CHECK(!params.empty()) << "FSDP needs a model with parameters";
  device_ = params.front().data().device();
  if (options_.sync_batch_norm) {
    bn_sync_ = std::make_unique<comm::ProcessGroupBatchNormSync>(groups_.world);
    DDPB_USAGE_CHECK(comm::convert_sync_batchnorm(module_, bn_sync_.get()) > 0)
        << "--sync-bn needs a model with BatchNorm layers (the resnet workloads)";
  }
  for (const nn::NamedBuffer& b : module_.named_buffers()) buffers_.push_back(b.tensor);
  {
    // Every rank starts from rank 0's model, as DDP's constructor makes it (its parameters
    // are every rank's own only if every rank built it from the same seed).
    nvtx::Range range("fsdp.sync_module_states", nvtx::Category::Comm);
    std::vector<Tensor> values;
    for (const autograd::Var& p : params) values.push_back(p.data());
    comm::broadcast_coalesced(*groups_.world, values);
    sync_buffers_now();
  }
  build_units(units);
}

FullyShardedDataParallel::~FullyShardedDataParallel() {
  for (UnitState& s : state_)
    for (autograd::HookHandle& h : s.forward_hooks) h.remove();
  for (const auto& unit : units_)
    for (const autograd::Var& p : unit->params()) p.clear_grad_ready_hooks();
}

// Note [FSDP's step]: the specs' units in order, each of its modules' parameters not taken
// by an earlier unit; the root gets the rest.
void FullyShardedDataParallel::build_units(const std::vector<FsdpUnitSpec>& specs) {
  std::unordered_set<const autograd::VarImpl*> taken;
  for (const FsdpUnitSpec& spec : specs) {
    DDPB_USAGE_CHECK(!spec.modules.empty()) << "FSDP unit '" << spec.name << "' has no module";
    std::vector<autograd::Var> params;
    for (const nn::Module* m : spec.modules) {
      DDPB_USAGE_CHECK(m != nullptr) << "FSDP unit '" << spec.name << "' has a null module";
      for (const autograd::Var& p : m->parameters())
        if (taken.insert(p.impl()).second) params.push_back(p);
    }
    DDPB_USAGE_CHECK(!params.empty())
        << "FSDP unit '" << spec.name << "' has no parameters of its own";
    units_.push_back(
        std::make_unique<FlatParamUnit>(spec.name, params, groups_.shard, groups_.replicate));
    unit_names_.push_back(spec.name);
  }
  std::vector<autograd::Var> rest;
  for (const autograd::Var& p : module_.parameters())
    if (!taken.count(p.impl())) rest.push_back(p);
  if (!rest.empty()) {
    root_ = units_.size();
    units_.push_back(std::make_unique<FlatParamUnit>("", rest, groups_.shard, groups_.replicate));
    unit_names_.push_back("root");
  }
  state_.resize(units_.size());
  for (size_t i = 0; i < specs.size(); ++i) install_hooks(i, specs[i]);
  if (root_ == kNone) return;
  // For peak_unsharded_grad_numel: when in the first backward each root gradient is final,
  // counted in the units' reduce-scatters issued before it.
  for (const autograd::Var& p : units_[root_]->params())
    p.register_grad_ready_hook([this](const autograd::Var& v) {
      if (order_known_) return;
      size_t reduced = 0;  // the other units reduce-scattered so far in this backward
      for (size_t i = 0; i < state_.size(); ++i) reduced += i != root_ && state_[i].reduced;
      root_grads_ready_.emplace_back(v.grad().numel(), reduced);
    });
}

void FullyShardedDataParallel::install_hooks(size_t index, const FsdpUnitSpec& spec) {
  UnitState& s = state_[index];
  s.forward_hooks.push_back(spec.modules.front()->register_forward_pre_hook(
      [this, index](const nn::Module&) { pre_forward(index); }));
  s.forward_hooks.push_back(spec.modules.back()->register_forward_hook(
      [this, index](const nn::Module&, const std::vector<autograd::Var>& outputs) {
        post_forward(index, outputs);
      }));
  for (const autograd::Var& p : units_[index]->params())
    p.register_grad_ready_hook([this, index](const autograd::Var&) { grad_ready(index); });
}

// ---- The hooks --------------------------------------------------------------------------

void FullyShardedDataParallel::pre_forward(size_t index) {
  if (!order_known_) forward_order_.push_back(index);
  gather(index, "forward");
  if (options_.forward_prefetch) {
    const size_t next = next_in_forward(index, +1);
    if (next != kNone) gather(next, "prefetch forward");
  }
  wait_gather(index);
}

void FullyShardedDataParallel::post_forward(size_t index,
                                            const std::vector<autograd::Var>& outputs) {
  if (reshards_after_forward(options_.strategy)) reshard(index);
  state_[index].ready = 0;
  state_[index].reduced = false;
  autograd::register_multi_grad_hook(outputs, [this, index] { pre_backward(index); });
}

void FullyShardedDataParallel::pre_backward(size_t index) {
  in_backward_ = true;
  gather(index, "backward");
  if (options_.backward_prefetch) {
    // A unit reduced already in this backward (a fork whose branches finish out of forward
    // order) needs no second gather.
    const size_t next = next_in_forward(index, -1);
    if (next != kNone && !state_[next].reduced) gather(next, "prefetch backward");
  }
  wait_gather(index);
}

void FullyShardedDataParallel::grad_ready(size_t index) {
  UnitState& s = state_[index];
  if (++s.ready < units_[index]->params().size()) return;
  reduce_scatter(index, "backward", /*in_backward=*/true);
  reshard(index);  // every strategy frees the full parameters after backward
}

// The unit `direction` steps from `index` in the first forward's order; kNone before that
// order is known, past either end, or for a unit that did not run in it.
size_t FullyShardedDataParallel::next_in_forward(size_t index, int direction) const {
  if (!order_known_) return kNone;
  for (size_t k = 0; k < forward_order_.size(); ++k) {
    if (forward_order_[k] != index) continue;
    const size_t next = k + static_cast<size_t>(direction);  // wraps past 0 to a huge value
    return next < forward_order_.size() ? forward_order_[next] : kNone;
  }
  return kNone;
}

// ---- Collectives ------------------------------------------------------------------------

void FullyShardedDataParallel::gather(size_t index, const char* when) {
  FlatParamUnit& unit = *units_[index];
  if (unit.gathered()) return;  // gathered, or its gather in flight
  limit_in_flight();
  const int64_t launch_ns = steady_now_ns();
  record_issued(index, "allgather", when, unit.gather_bytes(), launch_ns, unit.gather());
}

// One of a unit's collectives over its shard group into this step's records, tagged for the
// flight recorder.
void FullyShardedDataParallel::record_issued(size_t index, const char* op, const char* when,
                                             int64_t bytes, int64_t launch_ns, comm::WorkPtr work) {
  Issued issued;
  issued.launch_ns = launch_ns;
  issued.work = std::move(work);
  issued.unit = index;
  issued.record = {unit_names_[index], op, when, bytes};
  issued.record.waited_before_ms = waits_.host_ms();
  tag_for_flight(issued.work, issued.record);
  issued_.push_back(std::move(issued));
}

void FullyShardedDataParallel::wait_gather(size_t index) {
  FlatParamUnit& unit = *units_[index];
  if (!unit.gather_pending()) return;
  waits_.time(in_backward_ ? ExposedWaits::kGatherBackward : ExposedWaits::kGatherForward,
              [&] { unit.wait_gather(); });
}

// Note [FSDP's step], the rate limiter: a reshard's event joins the queue.
void FullyShardedDataParallel::reshard(size_t index) {
  FlatParamUnit& unit = *units_[index];
  if (!unit.gathered()) return;
  unit.release();
  if (options_.limit_all_gathers == 0) return;
  Event freed = Event::create(device_);
  freed.record(current_stream(device_));
  reshard_events_.push_back(std::move(freed));
}

void FullyShardedDataParallel::limit_in_flight() {
  while (!reshard_events_.empty() && reshard_events_.front().query()) reshard_events_.pop_front();
  const size_t limit = static_cast<size_t>(options_.limit_all_gathers);
  while (limit > 0 && reshard_events_.size() >= limit) {
    ++limiter_waits_;
    reshard_events_.front().synchronize();
    reshard_events_.pop_front();
  }
}

void FullyShardedDataParallel::reduce_scatter(size_t index, const char* when, bool in_backward) {
  // Note [One reduce-scatter in flight]: the previous unit's input goes before this one's.
  for (const auto& other : units_) other->reclaim_reduce_scatter_input();
  if (last_reduced_ != kNone) {
    waits_.time(
        in_backward ? ExposedWaits::kReduceScatterBackward : ExposedWaits::kReduceScatterAfter,
        [&] { units_[last_reduced_]->await_reduce_scatter_input(); });
  }
  last_reduced_ = index;
  FlatParamUnit& unit = *units_[index];
  state_[index].reduced = true;
  const int64_t launch_ns = steady_now_ns();
  record_issued(index, "reduce_scatter", when, unit.reduce_scatter_bytes(), launch_ns,
                unit.reduce_scatter_grads());
}

// The reduce-scatter's wait and, across shard groups, the all-reduce it then issues.
void FullyShardedDataParallel::finish_unit(size_t index) {
  FlatParamUnit& unit = *units_[index];
  const int64_t launch = steady_now_ns();
  unit.wait_reduce_scatter();
  if (unit.replicate_group() && unit.last_allreduce()) {
    Issued issued;
    issued.launch_ns = launch;
    issued.work = unit.last_allreduce();
    issued.unit = index;
    issued.record = {unit_names_[index], "allreduce", "finish", unit.allreduce_bytes()};
    tag_for_flight(issued.work, issued.record);
    issued_.push_back(std::move(issued));
  }
}

// ---- The step ---------------------------------------------------------------------------

autograd::Var FullyShardedDataParallel::forward(const Tensor& x) {
  in_backward_ = false;
  if (root_ != kNone) {
    gather(root_, "forward");
    if (options_.forward_prefetch && order_known_ && !forward_order_.empty())
      gather(forward_order_.front(), "prefetch forward");
    wait_gather(root_);
  }
  return forward_(x);
}

void FullyShardedDataParallel::backward(const autograd::Var& loss, const Tensor& grad_output) {
  in_backward_ = true;
  loss.backward(grad_output);
}

void FullyShardedDataParallel::finish_gradient_sync() {
  // Units that were not reduced in backward (some parameter got no gradient), in unit order,
  // then the root (Note [FSDP's step]).
  for (size_t i = 0; i < units_.size(); ++i) {
    if (i == root_ || state_[i].reduced) continue;
    reduce_scatter(i, "finish", /*in_backward=*/false);
    reshard(i);
  }
  if (root_ != kNone) reduce_scatter(root_, "finish", /*in_backward=*/false);
  waits_.time(ExposedWaits::kReduceScatterAfter, [&] {
    for (size_t i = 0; i < units_.size(); ++i) finish_unit(i);
    for (const auto& unit : units_) unit->wait_replicate();
  });
  // Every unit released, the root and any a stray prefetch gathered again after its
  // reduce-scatter: the optimizer is about to step the shards, and a unit left gathered would
  // run the next forward on the values from before the step.
  for (size_t i = 0; i < units_.size(); ++i) reshard(i);
  for (UnitState& s : state_) s.ready = 0, s.reduced = false;
  order_known_ = true;
  in_backward_ = false;
}

int64_t FullyShardedDataParallel::sync_buffers() {
  if (!options_.broadcast_buffers || groups_.world->size() == 1) return 0;
  return sync_buffers_now();
}

// Rank 0's buffers to every rank, one coalesced broadcast per dtype (Note [DDP buffers]'s
// semantics: each rank then updates its own from its batch).
int64_t FullyShardedDataParallel::sync_buffers_now() {
  std::map<DType, std::vector<Tensor>> by_dtype;
  int64_t bytes = 0;
  for (const Tensor& b : buffers_) {
    by_dtype[b.dtype()].push_back(b);
    bytes += static_cast<int64_t>(b.nbytes());
  }
  for (const auto& [dtype, tensors] : by_dtype) comm::broadcast_coalesced(*groups_.world, tensors);
  return bytes;
}

std::vector<autograd::Var> FullyShardedDataParallel::shards() const {
  std::vector<autograd::Var> out;
  for (const auto& unit : units_) out.push_back(unit->shard());
  return out;
}

std::unique_ptr<optim::Optimizer> FullyShardedDataParallel::make_optimizer(
    const optim::OptimizerConfig& config) const {
  MemoryCategoryScope state(MemoryCategory::OptimizerState);
  return optim::make_optimizer(config, shards());
}

FsdpStepStats FullyShardedDataParallel::step(const std::function<MicroBatch()>& next_batch,
                                             const LossFn& loss_fn, optim::Optimizer& optimizer,
                                             const FsdpStepOptions& options) {
  optimizer.zero_grad(/*set_to_none=*/true);
  issued_.clear();
  limiter_waits_ = 0;
  waits_.start(device_);
  last_reduced_ = kNone;
  if (!order_known_) root_grads_ready_.clear();  // a first step that failed leaves none behind
  clock_zero_ns_ = steady_now_ns();
  PhaseTimer timer(current_stream(device_));
  FsdpStepStats stats;
  if (options_.broadcast_buffers && !buffers_.empty() && groups_.world->size() > 1) {
    timer.begin(step_phase_name(StepPhase::BufferBroadcast));
    nvtx::Range r("fsdp.buffer_broadcast", nvtx::Category::Comm);
    stats.buffer_broadcast_bytes = sync_buffers();
  }
  const std::vector<Tensor> losses = run_micro_steps(next_batch, loss_fn, options, timer);
  timer.begin(step_phase_name(StepPhase::Optimizer));
  {
    nvtx::Range r("fsdp.optimizer", nvtx::Category::Optimizer);
    optimizer.step();
  }
  timer.end();
  timer.synchronize();
  double sum = 0;  // Note [The loss is read last]
  for (const Tensor& l : losses) sum += l.item();
  stats.loss = static_cast<float>(sum / static_cast<double>(losses.size()));
  stats.clock_zero_ns = clock_zero_ns_;
  const int64_t backward_end = timer.device_end_ns(step_phase_name(StepPhase::BackwardCompute));
  stats.compute_end_ms = on_clock(backward_end);
  if (bn_sync_) {
    stats.sync_batch_norm = true;
    stats.sync_bn = bn_sync_->take_records();
  }
  fill_phases(stats, timer);
  fill_collectives(stats);
  return stats;
}

// Note [Micro-steps]: every micro-step synchronises its gradients (reduce-scatters into the
// shards, which add up), in comm_exposed.
std::vector<Tensor> FullyShardedDataParallel::run_micro_steps(
    const std::function<MicroBatch()>& next_batch, const LossFn& loss_fn,
    const FsdpStepOptions& options, PhaseTimer& timer) {
  MicroStepFns fns;
  fns.forward = [this](const Tensor& x) { return forward(x); };
  fns.backward = [&](const autograd::Var& loss, const Tensor& scale, int64_t, int64_t) {
    {
      nvtx::Range r("backward", nvtx::Category::Backward);
      backward(loss, scale);
    }
    timer.begin(step_phase_name(StepPhase::CommExposed));
    {
      nvtx::Range r("fsdp.finish", nvtx::Category::Comm);
      finish_gradient_sync();
    }
    timer.end();
  };
  return ddpb::run_micro_steps(options.accumulate, device_, next_batch, loss_fn,
                               options.in_first_forward, timer, fns);
}

// The phases; the host's waits for all-gathers inside forward and backward are their own
// phase (param_allgather), not compute, and so are SyncBatchNorm's collectives (sync_bn).
void FullyShardedDataParallel::fill_phases(FsdpStepStats& stats, const PhaseTimer& timer) const {
  const auto stalled = waits_.stalled_ms();  // the step has synchronised
  const double gather_forward = stalled[ExposedWaits::kGatherForward];
  const double gather_backward = stalled[ExposedWaits::kGatherBackward];
  const double reduce_scatter_backward = stalled[ExposedWaits::kReduceScatterBackward];
  stats.exposed_gather_forward_ms = gather_forward;
  stats.exposed_gather_backward_ms = gather_backward;
  stats.exposed_reduce_scatter_ms =
      reduce_scatter_backward + stalled[ExposedWaits::kReduceScatterAfter];
  stats.limiter_waits = limiter_waits_;
  const comm::SyncBnTimes sync = comm::sync_bn_times(stats.sync_bn);
  for (StepPhase p : {StepPhase::BufferBroadcast, StepPhase::Forward, StepPhase::ParamAllGather,
                      StepPhase::SyncBn, StepPhase::BackwardCompute, StepPhase::CommExposed,
                      StepPhase::Optimizer}) {
    const char* name = step_phase_name(p);
    double ms = timer.ms(name);
    if (p == StepPhase::Forward) ms -= gather_forward + sync.forward_ms;
    // A reduce-scatter waited for inside backward is exposed communication, not compute.
    if (p == StepPhase::BackwardCompute)
      ms -= gather_backward + sync.backward_ms + reduce_scatter_backward;
    if (p == StepPhase::CommExposed) ms += reduce_scatter_backward;
    if (p == StepPhase::ParamAllGather) ms = gather_forward + gather_backward;
    if (p == StepPhase::SyncBn) {
      if (!stats.sync_batch_norm) continue;
      ms = sync.total_ms();
    }
    const bool derived = p == StepPhase::ParamAllGather || p == StepPhase::SyncBn;
    if (!derived && !timer.has(name)) continue;
    ms = std::max(ms, 0.0);
    stats.phases.push_back({p, ms});
    stats.step_ms += ms;
  }
}

double FullyShardedDataParallel::on_clock(int64_t ns) const {
  return ns > 0 ? static_cast<double>(ns - clock_zero_ns_) / 1e6 : 0.0;
}

// Every collective of the step, on the step's clock: the units', which are the design's
// synchronisation (the 3Ψ or 2Ψ of Note [FSDP's step]), then SyncBatchNorm's, which are not.
void FullyShardedDataParallel::fill_collectives(FsdpStepStats& stats) const {
  const int64_t now = steady_now_ns();
  for (const Issued& issued : issued_) {
    UnitCollective r = issued.record;
    r.launch_ms = on_clock(issued.launch_ns);
    const comm::Work* w = issued.work.get();
    r.start_ms = w && w->start_ns > 0 ? on_clock(w->start_ns) : r.launch_ms;
    r.complete_ms = w && w->end_ns > 0 ? on_clock(w->end_ns) : on_clock(now);
    stats.units.push_back(r);
    const comm::ProcessGroup& group = r.op == "allreduce" ? *groups_.replicate : *groups_.shard;
    if (group.size() == 1) continue;  // a copy on this rank: nothing on the wire
    CollectiveTiming t;
    t.op = r.op;
    t.name = r.op + " " + r.unit;
    t.lane = "fsdp " + r.op;
    t.bytes = r.bytes;
    t.launch_ms = r.launch_ms;
    t.start_ms = r.start_ms;
    t.complete_ms = r.complete_ms;
    t.gradient = true;
    t.group = static_cast<int64_t>(issued.unit);
    t.group_size = group.size();
    stats.collectives.push_back(std::move(t));
  }
  for (const comm::SyncBnRecord& r : stats.sync_bn)
    stats.collectives.push_back(
        comm::sync_bn_collective(r, groups_.world->size(), stats.clock_zero_ns));
}

// ---- Whole parameters -------------------------------------------------------------------

void FullyShardedDataParallel::with_full_params(const std::function<void()>& visit,
                                                bool writeback) {
  for (size_t i = 0; i < units_.size(); ++i) gather(i, "full params");
  for (size_t i = 0; i < units_.size(); ++i) units_[i]->wait_gather();
  issued_.clear();  // not a step's
  try {
    visit();
  } catch (...) {
    for (size_t i = 0; i < units_.size(); ++i) units_[i]->release();
    throw;
  }
  if (writeback) {
    const int rank = groups_.shard->rank();
    for (const auto& unit : units_) {
      const FlatParamLayout& l = unit->layout();
      std::vector<float> flat(static_cast<size_t>(l.padded_numel), 0.0f);
      for (size_t k = 0; k < unit->params().size(); ++k) {
        const std::vector<float> v = unit->params()[k].data().to_floats();
        std::copy(v.begin(), v.end(), flat.begin() + l.offsets[k]);
      }
      const auto begin = flat.begin() + l.shard_begin(rank);
      const Tensor mine = Tensor::from_floats(std::vector<float>(begin, begin + l.shard_numel),
                                              {l.shard_numel}, device_);
      ops::copy(mine, unit->shard().data());
    }
  }
  for (size_t i = 0; i < units_.size(); ++i) units_[i]->release();
}

void FullyShardedDataParallel::check_replicas_consistent() {
  // Every rank's shard equals the other replicas' (hybrid_shard, no_shard): their sum over
  // the replicate group is the group's size times this rank's.
  if (groups_.replicate && groups_.replicate->size() > 1) {
    for (const auto& unit : units_) {
      const Tensor mine = unit->shard().data();
      Tensor sum = mine.clone();
      groups_.replicate->allreduce(sum)->wait();
      const std::vector<float> a = mine.to_floats(), b = sum.to_floats();
      const float n = static_cast<float>(groups_.replicate->size());
      for (size_t e = 0; e < a.size(); ++e)
        DDPB_CHECK(std::fabs(b[e] - n * a[e]) <= 1e-5f * (std::fabs(n * a[e]) + 1.0f))
            << "FSDP: the shard of unit '" << unit_names_[&unit - &units_[0]]
            << "' differs between its replicas (element " << e << ")";
    }
  }
  with_full_params([&] {
    for (const nn::NamedParameter& p : module_.named_parameters())
      for (float v : p.var.data().to_floats())
        DDPB_CHECK(std::isfinite(v))
            << "NaN or Inf in parameter " << p.name << " on rank " << groups_.world->rank();
  });
}

int64_t FullyShardedDataParallel::peak_unsharded_grad_numel() const {
  // Note [One reduce-scatter in flight]: the reduce-scatters go in reverse forward order, then
  // the root's. When unit k's is issued, a rank holds the shards' gradients of the units
  // before it, k's full gradients beside the larger of its flat copy and the previous one's
  // (freed just before k's is made), and the root's full gradients, which stay to the end of
  // backward once final (a root parameter used before the units in forward, as an
  // embedding, gets its gradient after them in backward); k's shard comes once its full
  // gradients are gone. What it holds beyond all the shards is the largest such sum less them.
  std::vector<size_t> order;  // a unit run twice in forward reduce-scatters once
  for (auto it = forward_order_.rbegin(); it != forward_order_.rend(); ++it)
    if (std::find(order.begin(), order.end(), *it) == order.end()) order.push_back(*it);
  if (!order_known_) {  // before a step: every unit in unit order
    order.clear();
    for (size_t i = 0; i < units_.size(); ++i) order.push_back(i);
  }
  std::erase(order, root_);
  if (root_ != kNone) order.push_back(root_);
  // The root's gradients final before the reduce-scatter that `issued` others preceded, as the
  // first backward had them (all of them before a step).
  const auto root_grads_before = [&](size_t issued) {
    if (root_ == kNone) return int64_t{0};
    if (!order_known_) return units_[root_]->numel();
    int64_t numel = 0;
    for (const auto& [n, after] : root_grads_ready_)
      if (after <= issued) numel += n;
    return numel;
  };
  int64_t shards = 0, all_shards = 0, peak = 0, previous_flat = 0;
  for (const auto& u : units_) all_shards += u->shard_numel();
  size_t issued = 0;
  for (size_t i : order) {
    const FlatParamUnit& u = *units_[i];
    const int64_t beside = i == root_ ? 0 : root_grads_before(issued++);
    peak = std::max(peak, shards + beside + u.numel() + std::max(previous_flat, u.padded_numel()));
    shards += u.shard_numel();
    previous_flat = u.padded_numel();
  }
  return std::max<int64_t>(0, peak - all_shards);
}

int64_t FullyShardedDataParallel::peak_unsharded_numel() const {
  std::vector<int64_t> sizes;
  int64_t total = root_ == kNone ? 0 : units_[root_]->padded_numel();
  for (size_t i = 0; i < units_.size(); ++i)
    if (i != root_) sizes.push_back(units_[i]->padded_numel());
  std::sort(sizes.rbegin(), sizes.rend());
  const bool one_at_a_time = reshards_after_forward(options_.strategy);
  const bool prefetch = options_.forward_prefetch || options_.backward_prefetch;
  const size_t held = one_at_a_time ? (prefetch ? 2 : 1) : sizes.size();
  for (size_t k = 0; k < std::min(held, sizes.size()); ++k) total += sizes[k];
  return total;
}

}  // namespace ddpb::fsdp
