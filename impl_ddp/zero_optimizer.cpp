#include "impl_ddp/zero_optimizer.h"

#include "core/check.h"
#include "core/memory_category.h"
#include "core/nvtx.h"
#include "core/ops.h"

namespace ddpb::ddp {
namespace {

std::vector<autograd::Var> model_params(const Reducer& reducer) {
  std::vector<autograd::Var> out;
  for (const nn::NamedParameter& p : reducer.params()) out.push_back(p.var);
  return out;
}

}  // namespace

ZeroOptimizer::ZeroOptimizer(Reducer& reducer, std::shared_ptr<comm::ProcessGroup> pg,
                             optim::OptimizerConfig config, Scheme scheme)
    : optim::Optimizer(model_params(reducer)),
      reducer_(reducer),
      pg_(std::move(pg)),
      config_(std::move(config)),
      scheme_(scheme) {
  optim::make_optimizer(config_, {});  // an unknown optimizer is refused now, not at step 1
}

// Note [ZeRO in DDP]: every bucket's parameters in one flat padded buffer, laid out as the
// bucket is, each parameter rebound to its view of it, so that the all-gather writes them in
// place.
void ZeroOptimizer::flatten_parameters() {
  MemoryCategoryScope parameters(MemoryCategory::Parameters);
  const std::vector<nn::NamedParameter>& params = reducer_.params();
  flats_.clear();
  for (const ZeroBucketView& b : reducer_.zero_buckets()) {
    Tensor flat =
        Tensor::zeros({b.shard.padded}, DType::F32, params[b.params.front()].var.data().device());
    for (size_t k = 0; k < b.params.size(); ++k) {
      const autograd::Var& v = params[b.params[k]].var;
      Tensor view = flat.flat_view(b.offsets[k], v.shape());
      ops::copy(v.data(), view);
      v.set_data(std::move(view));
    }
    flats_.push_back(std::move(flat));
  }
}

// Each parameter's part of each bucket's shard becomes one segment: a view of its elements,
// with the matching view of the bucket's reduced chunk as its gradient.
void ZeroOptimizer::lay_out_shard() {
  if (scheme_ == Scheme::ReduceScatter) flatten_parameters();
  const std::vector<nn::NamedParameter>& params = reducer_.params();
  segments_.clear(), segment_params_.clear(), segment_grads_.clear(), segment_offsets_.clear();
  for (const ZeroBucketView& b : reducer_.zero_buckets()) {
    std::vector<int64_t> numels;
    for (size_t i : b.params) numels.push_back(params[i].var.data().numel());
    for (const ShardSegment& s : shard_segments(b.params, numels, b.shard)) {
      const Tensor& data = params[s.param].var.data();
      segments_.emplace_back(data.flat_view(s.param_offset, {s.numel}), /*requires_grad=*/true);
      segment_params_.push_back(s.param);
      segment_offsets_.push_back(s.param_offset);
      if (scheme_ == Scheme::ReduceScatter)
        segment_grads_.push_back(b.shard_out.flat_view(s.bucket_offset - b.shard.begin, {s.numel}));
    }
  }
  inner_ = optim::make_optimizer(config_, segments_);
  generation_ = reducer_.layout_generation();
}

void ZeroOptimizer::step() {
  if (!inner_) lay_out_shard();
  DDPB_CHECK(generation_ == reducer_.layout_generation())
      << "ZeRO: the buckets were rebuilt after the optimizer's first step, which would move "
         "optimizer state between ranks";
  // A parameter no rank used keeps no gradient, and the optimizer leaves it alone, as DDP's.
  // PyTorch's scheme reads the AllReduced gradient, which backward leaves in .grad each step.
  const std::vector<bool>& used = reducer_.globally_used();
  const std::vector<nn::NamedParameter>& params = reducer_.params();
  for (size_t k = 0; k < segments_.size(); ++k) {
    const bool has = used.empty() || used[segment_params_[k]];
    Tensor grad;
    if (has && scheme_ == Scheme::ReduceScatter) grad = segment_grads_[k];
    if (has && scheme_ == Scheme::AllReduceBroadcast) {
      const Tensor& full = params[segment_params_[k]].var.grad();
      if (full.defined()) grad = full.flat_view(segment_offsets_[k], segments_[k].data().shape());
    }
    segments_[k].set_grad(grad);
  }
  inner_->step();
}

// Every rank's shard of every bucket from its owner, in the same order on every rank: bucket
// by bucket, owner by owner, segment by segment.
comm::WorkPtr ZeroOptimizer::broadcast_shards() {
  nvtx::Range range("ddp.zero.broadcast", nvtx::Category::Comm, gather_bytes());
  const std::vector<nn::NamedParameter>& params = reducer_.params();
  std::vector<comm::WorkPtr> works;
  for (const ZeroBucketView& b : reducer_.zero_buckets()) {
    std::vector<int64_t> numels;
    for (size_t i : b.params) numels.push_back(params[i].var.data().numel());
    int64_t total = 0;
    for (int64_t n : numels) total += n;
    for (int owner = 0; owner < pg_->size(); ++owner) {
      for (const ShardSegment& s :
           shard_segments(b.params, numels, shard_bucket(total, pg_->size(), owner))) {
        const Tensor& data = params[s.param].var.data();
        works.push_back(pg_->broadcast(data.flat_view(s.param_offset, {s.numel}), owner));
      }
    }
  }
  for (const comm::WorkPtr& w : works) w->wait();
  return works.empty() ? nullptr : works.back();
}

comm::WorkPtr ZeroOptimizer::gather_parameters() {
  if (scheme_ == Scheme::AllReduceBroadcast) return broadcast_shards();
  nvtx::Range range("ddp.zero.allgather", nvtx::Category::Comm, gather_bytes());
  DDPB_CHECK(!flats_.empty()) << "ZeRO: gather_parameters before the optimizer's first step";
  // This rank's chunk of each flat buffer holds the elements it just stepped (Note [ZeRO in
  // DDP]): the chunks to all, in place.
  std::vector<Tensor> inputs;
  for (const Tensor& flat : flats_) {
    const int64_t chunk = flat.numel() / pg_->size();
    inputs.push_back(flat.flat_view(pg_->rank() * chunk, {chunk}));
  }
  comm::WorkPtr work = pg_->allgather_into_tensor_coalesced(flats_, inputs);
  work->wait();
  return work;
}

int64_t ZeroOptimizer::gather_bytes() const {
  int64_t bytes = 0;
  for (const ZeroBucketView& b : reducer_.zero_buckets())
    bytes += (scheme_ == Scheme::ReduceScatter ? b.shard.padded : b.shard.numel) *
             static_cast<int64_t>(sizeof(float));
  return bytes;
}

const char* ZeroOptimizer::gather_op() const {
  return scheme_ == Scheme::ReduceScatter ? "allgather" : "broadcast";
}

}  // namespace ddpb::ddp
