#include "impl_ddp/distributed_data_parallel.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "comm/broadcast_coalesced.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/memory_category.h"
#include "core/micro_steps.h"
#include "core/nvtx.h"
#include "core/ops.h"
#include "core/phase_timer.h"
#include "core/rng.h"
#include "core/stream.h"

namespace ddpb::ddp {

DistributedDataParallel::DistributedDataParallel(nn::Module& module, ForwardFn forward,
                                                 std::shared_ptr<comm::ProcessGroup> pg,
                                                 DdpOptions options)
    : module_(module), forward_(std::move(forward)), pg_(std::move(pg)), options_(options) {
  const auto params = module_.named_parameters();
  DDPB_CHECK(!params.empty()) << "DDP needs a module with parameters";
  device_ = params.front().var.data().device();
  DDPB_USAGE_CHECK(!options_.join.enable || !options_.sync_batch_norm)
      << "--uneven-inputs join does not combine with --sync-bn (SyncBatchNorm's collectives sit "
         "inside forward, which a rank without input cannot shadow)";
  if (options_.sync_batch_norm) {
    bn_sync_ = std::make_unique<comm::ProcessGroupBatchNormSync>(pg_);
    DDPB_USAGE_CHECK(comm::convert_sync_batchnorm(module_, bn_sync_.get()) > 0)
        << "--sync-bn needs a model with BatchNorm layers (the resnet workloads)";
  }
  // The buffers are the same tensors for the module's life: grouped by dtype once, for the
  // one coalesced broadcast per dtype of sync_buffers().
  for (auto& b : module_.named_buffers()) {
    (b.tensor.dtype() == DType::I64 ? i64_buffers_ : f32_buffers_).push_back(b.tensor);
    buffer_bytes_ += static_cast<int64_t>(b.tensor.nbytes());
  }
  verify_same_model();
  broadcast_from_rank0();
  reducer_ = std::make_unique<Reducer>(params, pg_, options_.reducer);
}

bool DistributedDataParallel::syncs_buffers() const {
  return options_.broadcast_buffers && pg_->size() > 1 &&
         !(f32_buffers_.empty() && i64_buffers_.empty());
}

std::unique_ptr<optim::Optimizer> DistributedDataParallel::make_optimizer(
    const optim::OptimizerConfig& config) {
  if (!sharded()) return optim::make_optimizer(config, module_.parameters());
  auto zero = std::make_unique<ZeroOptimizer>(*reducer_, pg_, config,
                                              options_.zero_broadcast
                                                  ? ZeroOptimizer::Scheme::AllReduceBroadcast
                                                  : ZeroOptimizer::Scheme::ReduceScatter);
  zero_ = zero.get();
  return zero;
}

int64_t DistributedDataParallel::sync_buffers() {
  buffer_broadcasts_.clear();
  if (!syncs_buffers()) return 0;
  for (const std::vector<Tensor>* buffers : {&f32_buffers_, &i64_buffers_}) {
    if (buffers->empty()) continue;
    int64_t bytes = 0;
    for (const Tensor& t : *buffers) bytes += static_cast<int64_t>(t.nbytes());
    const int64_t start_ns = steady_now_ns();
    comm::broadcast_coalesced(*pg_, *buffers, buffer_source_);
    buffer_broadcasts_.push_back({"broadcast", bytes, start_ns, steady_now_ns()});
  }
  return buffer_bytes_;
}

void DistributedDataParallel::backward(const autograd::Var& loss, const Tensor& grad_output) {
  reducer_->prepare_for_backward(loss, sync_);
  loss.backward(grad_output);
}

void DistributedDataParallel::finish_gradient_sync() {
  reducer_->finalize_backward();
}

// Rank 0's parameters and buffers on every rank, before the first step (PyTorch's
// _sync_module_states).
void DistributedDataParallel::broadcast_from_rank0() const {
  for (auto& p : module_.named_parameters()) pg_->broadcast(p.var.data(), /*root=*/0)->wait();
  comm::broadcast_coalesced(*pg_, f32_buffers_);
  comm::broadcast_coalesced(*pg_, i64_buffers_);
}

// Every rank must hold the same parameters (names, shapes, dtypes): allgather a compact
// description (a 24-bit hash per parameter, exact in f32) and name the first difference.
void DistributedDataParallel::verify_same_model() const {
  auto params = module_.named_parameters();
  const int n = pg_->size();
  Tensor count = Tensor::from_floats({static_cast<float>(params.size())}, {1}, device_);
  Tensor counts = Tensor::empty({n}, DType::F32, device_);
  pg_->allgather(counts, count)->wait();
  auto cv = counts.to_floats();
  const int64_t max_count = static_cast<int64_t>(*std::max_element(cv.begin(), cv.end()));
  std::vector<float> mine(static_cast<size_t>(max_count), -1.0f);
  for (size_t i = 0; i < params.size(); ++i) {
    std::string sig = params[i].name + "|" + shape_str(params[i].var.shape()) + "|" +
                      std::string(dtype_name(params[i].var.data().dtype()));
    mine[i] = static_cast<float>(hash_name(sig.c_str()) & 0xFFFFFF);
  }
  Tensor local = Tensor::from_floats(mine, {max_count}, device_);
  Tensor all = Tensor::empty({n * max_count}, DType::F32, device_);
  pg_->allgather(all, local)->wait();
  auto av = all.to_floats();
  for (int64_t i = 0; i < max_count; ++i) {
    std::string who;
    for (int r = 1; r < n; ++r) {
      if (av[static_cast<size_t>(r * max_count + i)] != av[static_cast<size_t>(i)])
        who += (who.empty() ? "" : ", ") + std::to_string(r);
    }
    if (who.empty()) continue;
    const auto index = static_cast<size_t>(i);
    std::string name =
        index < params.size()
            ? params[index].name + " " + shape_str(params[index].var.shape())
            : "(none: this rank has only " + std::to_string(params.size()) + " parameters)";
    DDPB_USAGE_FAIL() << "DDP model mismatch: parameter #" << i
                      << " differs between rank 0 and rank(s) " << who << " (on rank "
                      << pg_->rank() << " it is " << name << ")";
  }
}

// A checksum per rank (sum and sum of squares in double, sent as f32) is allgathered and
// compared. A non-finite parameter is named first: its checksum would be NaN on every rank,
// and NaN never equals NaN, so the checksums alone would report a meaningless difference.
void DistributedDataParallel::check_replicas_consistent() const {
  auto params = module_.named_parameters();
  double sum = 0, sq = 0;
  float first_bad = -1;  // index of this rank's first non-finite parameter
  for (size_t i = 0; i < params.size(); ++i) {
    for (float v : params[i].var.data().to_floats()) {
      if (!std::isfinite(v) && first_bad < 0) first_bad = static_cast<float>(i);
      sum += v;
      sq += double(v) * v;
    }
  }
  const int n = pg_->size();
  Tensor mine = Tensor::from_floats({static_cast<float>(sum), static_cast<float>(sq), first_bad},
                                    {3}, device_);
  Tensor all = Tensor::empty({3 * n}, DType::F32, device_);
  pg_->allgather(all, mine)->wait();
  auto v = all.to_floats();
  for (int r = 0; r < n; ++r) {
    const float bad = v[3 * r + 2];
    DDPB_CHECK(bad < 0) << "NaN or Inf in parameter " << params[static_cast<size_t>(bad)].name
                        << " on rank " << r << " at the end of the run";
  }
  for (int r = 1; r < n; ++r) {
    DDPB_CHECK(v[3 * r] == v[0] && v[3 * r + 1] == v[1])
        << "DDP replicas diverged: rank " << r << "'s parameter checksum (" << v[3 * r] << ", "
        << v[3 * r + 1] << ") differs from rank 0's (" << v[0] << ", " << v[1] << ")";
  }
}

std::vector<bool> DistributedDataParallel::ranks_with_input(bool have_input) const {
  const int n = pg_->size();
  Tensor mine = Tensor::from_floats({have_input ? 1.0f : 0.0f}, {1}, device_);
  Tensor all = Tensor::empty({n}, DType::F32, device_);
  pg_->allgather(all, mine)->wait();
  const std::vector<float> flags = all.to_floats();
  std::vector<bool> active(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) active[static_cast<size_t>(r)] = flags[static_cast<size_t>(r)] > 0.5f;
  return active;
}

std::vector<bool> DistributedDataParallel::join_round(bool have_input) {
  const std::vector<bool> active = ranks_with_input(have_input);
  int count = 0;
  for (int r = 0; r < static_cast<int>(active.size()); ++r) {
    if (active[static_cast<size_t>(r)]) {
      ++count;
      buffer_source_ = r;  // the highest active rank, PyTorch's authoritative one
    }
  }
  reducer_->set_average_over(options_.join.divide_by_initial_world_size ? 0 : count);
  return active;
}

bool DistributedDataParallel::join_shadow() {
  DDPB_CHECK(options_.join.enable) << "join_shadow() without JoinOptions::enable";
  const std::vector<bool> active = join_round(false);
  if (std::find(active.begin(), active.end(), true) == active.end()) return false;
  if (syncs_buffers()) sync_buffers();  // its part in the broadcast; its buffers are replaced
  reducer_->join_shadow();
  if (sharded()) {
    // Note [DDP Join]: under ZeRO the joined rank still owns its shard, which the active
    // ranks' step must move: it steps it with what the shadowed collectives brought it (the
    // active ranks' average), then takes its part in the parameters' gather.
    DDPB_CHECK(zero_ != nullptr) << "a ZeRO rank joined before its optimizer's first step";
    if (options_.zero_broadcast) reducer_->hand_over_gradients();  // the AllReduced buckets
    zero_->step();
    zero_->gather_parameters();
  }
  return true;
}

int64_t DistributedDataParallel::join_finish() {
  int64_t shadowed = 0;
  while (join_shadow()) ++shadowed;
  // The last rank to join: the most iterations, ties to the highest rank.
  const int n = pg_->size();
  Tensor mine = Tensor::from_floats({static_cast<float>(iterations_)}, {1}, device_);
  Tensor all = Tensor::empty({n}, DType::F32, device_);
  pg_->allgather(all, mine)->wait();
  const std::vector<float> counts = all.to_floats();
  int last = 0;
  for (int r = 1; r < n; ++r) {
    if (counts[static_cast<size_t>(r)] >= counts[static_cast<size_t>(last)]) last = r;
  }
  std::vector<Tensor> params;
  for (auto& p : module_.parameters()) params.push_back(p.data());
  comm::broadcast_coalesced(*pg_, params, last);
  comm::broadcast_coalesced(*pg_, f32_buffers_, last);
  comm::broadcast_coalesced(*pg_, i64_buffers_, last);
  return shadowed;
}

namespace {
// The mean of one-element losses; the first read waits for the device.
float mean_of_items(const std::vector<Tensor>& losses) {
  float sum = 0;
  for (const Tensor& l : losses) sum += l.item();
  return losses.empty() ? 0.0f : sum / static_cast<float>(losses.size());
}
}  // namespace

DdpStepStats DistributedDataParallel::step(const std::function<MicroBatch()>& next_batch,
                                           const LossFn& loss, optim::Optimizer& optimizer,
                                           const DdpStepOptions& options) {
  if (options_.join.enable) {
    join_round(true);
    ++iterations_;
  }
  // set_to_none also with --grad-as-bucket-view: backward then computes every gradient into
  // its bucket slot (Note [Gradient destinations]), which is cheaper than zeroing the
  // buckets and accumulating into them, and leaves .grad the bucket view all the same.
  optimizer.zero_grad(/*set_to_none=*/true);
  PhaseTimer timer(current_stream(device_));
  DdpStepStats stats;
  if (syncs_buffers()) {
    timer.begin(step_phase_name(StepPhase::BufferBroadcast));
    nvtx::Range r("ddp.buffer_broadcast", nvtx::Category::Comm);
    stats.buffer_broadcast_bytes = sync_buffers();
    timer.end();
  }
  // Note [The loss is read last]: reading a loss waits for the device to finish the step
  // so far. Read after the backward, it held the host until the backward's kernels had run,
  // and the gradient sync and the optimizer were issued only then; read after the
  // optimizer, the host issues the whole step while the device computes.
  const std::vector<Tensor> losses = run_micro_steps(next_batch, loss, options, timer);
  {
    nvtx::Range r("ddp.finalize", nvtx::Category::Comm);
    finish_gradient_sync();
  }
  timer.begin(step_phase_name(StepPhase::Optimizer));
  optimizer.step();
  param_gathers_.clear();
  comm::WorkPtr gathered;
  if (sharded()) {  // Note [ZeRO in DDP]: every rank's shard to all
    DDPB_CHECK(zero_ && &optimizer == zero_)
        << "a ZeRO step needs the optimizer DistributedDataParallel::make_optimizer made (the "
           "reducer leaves the parameters no gradient: another optimizer would step nothing)";
    timer.begin(step_phase_name(options_.zero_broadcast ? StepPhase::ParamBroadcast
                                                        : StepPhase::ParamAllGather));
    const int64_t start_ns = steady_now_ns();
    gathered = zero_->gather_parameters();
    param_gathers_.push_back(
        {zero_->gather_op(), zero_->gather_bytes(), start_ns, steady_now_ns()});
  }
  timer.end();
  timer.synchronize();
  stats.loss = mean_of_items(losses);
  // The collective's own times once the stream caught up (NCCL's wait() only orders the
  // stream; the host times above are its launch there).
  if (gathered && gathered->is_completed() && gathered->end_ns != 0)
    param_gathers_.back().start_ns = gathered->start_ns,
    param_gathers_.back().end_ns = gathered->end_ns;
  if (bn_sync_) {
    stats.sync_batch_norm = true;
    stats.sync_bn = bn_sync_->take_records();
  }
  fill_phases(stats, timer);
  stats.buckets = reducer_->last_records();
  const auto zero = reducer_->backward_start();
  stats.clock_zero_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(zero.time_since_epoch()).count();
  if (!stats.buckets.empty()) {  // when the device ended the backward, not when it was issued
    const int64_t end_ns = timer.device_end_ns(step_phase_name(StepPhase::BackwardCompute));
    stats.compute_end_ms = static_cast<double>(end_ns - stats.clock_zero_ns) / 1e6;
  }
  add_collectives(stats);
  return stats;
}

// Note [Micro-steps]: all but the last micro-step accumulate locally (no_sync); the last one's
// backward synchronises, and its exposed communication follows in step().
std::vector<Tensor> DistributedDataParallel::run_micro_steps(
    const std::function<MicroBatch()>& next_batch, const LossFn& loss_fn,
    const DdpStepOptions& options, PhaseTimer& timer) {
  MicroStepFns fns;
  fns.forward = [this](const Tensor& x) { return forward(x); };
  fns.backward = [&](const autograd::Var& loss, const Tensor& scale, int64_t j, int64_t k) {
    {
      nvtx::Range r("backward", nvtx::Category::Backward);
      if (j < k - 1) {
        auto local = no_sync();
        backward(loss, scale);
      } else {
        backward(loss, scale);
      }
    }
    if (j < k - 1) {
      timer.end();
    } else {
      timer.begin(step_phase_name(StepPhase::CommExposed));
    }
  };
  return ddpb::run_micro_steps(options.accumulate, device_, next_batch, loss_fn,
                               options.in_first_forward, timer, fns);
}

// Every bucket's collectives (PowerSGD's P, Q and uncompressed ones are AllReduces too), which
// synchronise the gradients, and the buffer broadcast's and SyncBatchNorm's, which do not; on
// the backward's clock (the broadcast comes before it: negative times).
void DistributedDataParallel::add_collectives(DdpStepStats& stats) const {
  for (const BucketRecord& b : stats.buckets) {
    const std::string index = std::to_string(b.index);
    for (size_t k = 0; k < b.collectives.size(); ++k) {
      const CollectiveRecord& c = b.collectives[k];
      CollectiveTiming t;
      const bool plain = c.name == "allreduce" || c.name == "reduce_scatter";
      t.op = c.name == "reduce_scatter" ? "reduce_scatter" : "allreduce";
      t.name = (plain ? c.name : "powersgd " + c.name) + " bucket " + index;
      t.lane = "comm bucket " + index;
      t.bytes = c.bytes;
      // A bucket's communication is issued when the Reducer hands it to the hook: its first
      // collective counts from there, the hook's compression included, as PyTorch's DDP
      // logger starts its comm clock before the hook runs (span_overlap_ratio).
      t.launch_ms = k == 0 ? b.launch_ms : c.launch_ms;
      t.start_ms = c.start_ms > 0 ? c.start_ms : c.launch_ms;
      t.complete_ms = c.complete_ms;
      t.gradient = true;
      t.group = static_cast<int64_t>(b.index);
      stats.collectives.push_back(std::move(t));
    }
  }
  for (const comm::SyncBnRecord& r : param_gathers_) {  // ZeRO's: after the optimizer, exposed
    CollectiveTiming t;
    t.op = r.op;
    t.name = std::string("param ") + r.op;
    t.lane = std::string("comm param ") + r.op;
    t.bytes = r.bytes;
    t.launch_ms = t.start_ms = static_cast<double>(r.start_ns - stats.clock_zero_ns) / 1e6;
    t.complete_ms = static_cast<double>(r.end_ns - stats.clock_zero_ns) / 1e6;
    t.gradient = true;  // half of the design's synchronisation (the paper's 2Ψ)
    stats.collectives.push_back(std::move(t));
  }
  for (const comm::SyncBnRecord& r : buffer_broadcasts_) {
    CollectiveTiming t;
    t.op = r.op;
    t.name = "buffer broadcast";
    t.lane = "comm buffers";
    t.bytes = r.bytes;
    t.launch_ms = t.start_ms = static_cast<double>(r.start_ns - stats.clock_zero_ns) / 1e6;
    t.complete_ms = static_cast<double>(r.end_ns - stats.clock_zero_ns) / 1e6;
    stats.collectives.push_back(std::move(t));
  }
  for (const comm::SyncBnRecord& r : stats.sync_bn)
    stats.collectives.push_back(comm::sync_bn_collective(r, pg_->size(), stats.clock_zero_ns));
}

// SyncBatchNorm's collectives run inside forward and backward: they become a phase of their
// own, taken out of the two they interrupt, so that the phases still add up to the step.
void DistributedDataParallel::fill_phases(DdpStepStats& stats, const PhaseTimer& timer) const {
  const comm::SyncBnTimes sync = comm::sync_bn_times(stats.sync_bn);
  for (StepPhase p : {StepPhase::BufferBroadcast, StepPhase::Forward, StepPhase::SyncBn,
                      StepPhase::BackwardCompute, StepPhase::CommExposed, StepPhase::Optimizer,
                      StepPhase::ParamAllGather, StepPhase::ParamBroadcast}) {
    const char* name = step_phase_name(p);
    if (p == StepPhase::SyncBn ? !stats.sync_batch_norm : !timer.has(name)) continue;
    double ms = timer.ms(name);
    if (p == StepPhase::Forward) ms -= sync.forward_ms;
    if (p == StepPhase::BackwardCompute) ms -= sync.backward_ms;
    if (p == StepPhase::SyncBn) ms = sync.total_ms();
    stats.phases.push_back({p, ms});
    stats.step_ms += ms;
  }
}

}  // namespace ddpb::ddp
