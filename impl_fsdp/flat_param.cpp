#include "impl_fsdp/flat_param.h"

#include <algorithm>
#include <sstream>
#include <unordered_set>
#include <utility>

#include "core/check.h"
#include "core/memory_category.h"
#include "core/nvtx.h"
#include "core/ops.h"

namespace ddpb::fsdp {
namespace {

std::string describe_param(const autograd::Var& v) {
  if (!v.name().empty()) return "parameter '" + v.name() + "'";
  return "an unnamed parameter " + v.data().describe();
}

std::string unit_label(const std::string& name) {
  return "FSDP unit '" + name + "'";
}

// What a read of a released parameter reports (Tensor::raw_data names the storage's owner):
// every parameter of the unit by name, since the buffer is one Storage for all of them.
std::string released_owner(const std::string& name, const std::vector<autograd::Var>& params) {
  std::ostringstream os;
  os << unit_label(name) << " (";
  for (size_t k = 0; k < params.size(); ++k) os << (k ? ", " : "") << describe_param(params[k]);
  os << "; gather() brings it back)";
  return os.str();
}

}  // namespace

int64_t FlatParamLayout::shard_padding(int rank) const {
  const int64_t begin = shard_begin(rank), end = begin + shard_numel;
  return end - std::clamp(numel, begin, end);
}

FlatParamLayout flat_param_layout(const std::vector<Shape>& shapes, int world) {
  DDPB_USAGE_CHECK(world >= 1) << "a flat parameter over a group of " << world << " ranks";
  FlatParamLayout layout;
  layout.shapes = shapes;
  layout.world = world;
  for (const Shape& shape : shapes) {
    for (int64_t d : shape) DDPB_USAGE_CHECK(d >= 0) << "a parameter of shape " << shape_str(shape);
    layout.offsets.push_back(layout.numel);
    layout.numel += shape_numel(shape);
  }
  layout.shard_numel = (layout.numel + world - 1) / world;
  layout.padded_numel = layout.shard_numel * world;
  return layout;
}

FlatParamUnit::FlatParamUnit(std::string name, std::vector<autograd::Var> params,
                             std::shared_ptr<comm::ProcessGroup> pg,
                             std::shared_ptr<comm::ProcessGroup> replicate)
    : name_(std::move(name)),
      params_(std::move(params)),
      pg_(std::move(pg)),
      replicate_(std::move(replicate)) {
  DDPB_USAGE_CHECK(pg_ != nullptr) << unit_label(name_) << " needs a process group";
  check_params();
  device_ = params_.front().data().device();
  std::vector<Shape> shapes;
  for (const autograd::Var& p : params_) shapes.push_back(p.shape());
  layout_ = flat_param_layout(shapes, pg_->size());
  DDPB_USAGE_CHECK(layout_.numel > 0) << unit_label(name_) << " has no parameter elements";
  owner_ = released_owner(name_, params_);
  flatten_and_shard();
}

void FlatParamUnit::check_params() const {
  DDPB_USAGE_CHECK(!params_.empty()) << unit_label(name_) << " has no parameters";
  std::unordered_set<const autograd::VarImpl*> seen;
  for (const autograd::Var& p : params_) {
    DDPB_USAGE_CHECK(p.defined() && p.data().defined())
        << unit_label(name_) << ": an undefined Var";
    const Device device = params_.front().data().device();  // checked first, above
    const std::string what = unit_label(name_) + ": " + describe_param(p);
    DDPB_USAGE_CHECK(p.is_leaf() && p.requires_grad()) << what << " is not a trainable leaf";
    DDPB_USAGE_CHECK(p.data().dtype() == DType::F32) << what << " is not f32";
    DDPB_USAGE_CHECK(p.data().device() == device)
        << what << " is on " << p.data().device().str() << ", the unit's first on " << device.str();
    DDPB_USAGE_CHECK(!p.storage_freed()) << what << " has no memory to take its values from";
    DDPB_USAGE_CHECK(seen.insert(p.impl()).second) << what << " is listed twice";
  }
}

// Note [Flat parameters]: the values into one padded buffer, this rank's chunk copied out as
// the shard, every parameter rebound to its view and the buffer released.
void FlatParamUnit::flatten_and_shard() {
  MemoryCategoryScope parameters(MemoryCategory::Parameters);
  flat_ = Tensor::empty({layout_.padded_numel}, DType::F32, device_);
  for (size_t k = 0; k < params_.size(); ++k) {
    views_.push_back(flat_.flat_view(layout_.offsets[k], layout_.shapes[k]));
    ops::copy(params_[k].data(), views_.back());
  }
  if (layout_.padded_numel > layout_.numel)
    ops::zero(flat_.flat_view(layout_.numel, {layout_.padded_numel - layout_.numel}));
  const Tensor mine = flat_.flat_view(layout_.shard_begin(pg_->rank()), {layout_.shard_numel});
  shard_ = autograd::Var(mine.clone(), /*requires_grad=*/true);
  shard_.set_name(name_.empty() ? "flat_param" : name_ + ".flat_param");
  for (size_t k = 0; k < params_.size(); ++k) params_[k].set_data(views_[k]);
  flat_.storage()->release(owner_);
}

comm::WorkPtr FlatParamUnit::gather() {
  if (gather_work_) return gather_work_;
  if (gathered()) return nullptr;
  {
    // The Storage the parameters' views and autograd's saved tensors share gets memory again.
    MemoryCategoryScope parameters(MemoryCategory::Parameters);
    flat_.storage()->reallocate();
  }
  for (size_t k = 0; k < params_.size(); ++k) params_[k].restore_storage(views_[k]);
  nvtx::Range range("fsdp.allgather", nvtx::Category::Comm, gather_bytes());
  gather_work_ = pg_->allgather(flat_, shard_.data());
  last_gather_ = gather_work_;
  ++traffic_.gathers;
  traffic_.bytes_gathered += gather_bytes();
  return gather_work_;
}

void FlatParamUnit::wait_gather() {
  // Cleared first: a failed wait leaves no Work to wait on again.
  if (comm::WorkPtr work = std::exchange(gather_work_, nullptr)) work->wait();
}

bool FlatParamUnit::gathered() const {
  return flat_.storage()->allocated();
}

void FlatParamUnit::release() {
  wait_gather();  // the all-gather still writes into the buffer
  flat_.storage()->release(owner_);
}

// Each gradient scaled by 1/N into its slot (Note [Flat parameters]); zeros where none.
void FlatParamUnit::copy_grads_in(const Tensor& flat_grad) const {
  const int ranks = pg_->size() * (replicate_ ? replicate_->size() : 1);
  const float scale = 1.0f / static_cast<float>(ranks);
  for (size_t k = 0; k < params_.size(); ++k) {
    const Tensor slot = flat_grad.flat_view(layout_.offsets[k], layout_.shapes[k]);
    const Tensor& grad = params_[k].grad();
    if (!grad.defined()) {
      ops::zero(slot);
      continue;
    }
    DDPB_CHECK(grad.shape() == slot.shape() && grad.dtype() == DType::F32)
        << unit_label(name_) << ": the gradient of " << describe_param(params_[k]) << " is "
        << grad.describe();
    if (scale == 1.0f) {
      ops::copy(grad, slot);
    } else {
      ops::scale_copy(grad, slot, scale);
    }
  }
  if (layout_.padded_numel > layout_.numel)
    ops::zero(flat_grad.flat_view(layout_.numel, {layout_.padded_numel - layout_.numel}));
}

comm::WorkPtr FlatParamUnit::reduce_scatter_grads() {
  DDPB_CHECK(rs_work_ == nullptr && ar_work_ == nullptr)
      << unit_label(name_) << ": reduce_scatter_grads() with one in flight; wait_replicate() first";
  MemoryCategoryScope gradients(MemoryCategory::Gradients);
  flat_grad_ = Tensor::empty({layout_.padded_numel}, DType::F32, device_);
  copy_grads_in(flat_grad_);
  for (const autograd::Var& p : params_) p.set_grad(Tensor());  // in the flat buffer now
  rs_accumulates_ = shard_.grad().defined();
  rs_out_ = Tensor::empty({layout_.shard_numel}, DType::F32, device_);
  if (!rs_accumulates_) shard_.set_grad(rs_out_);  // written in place by the collective
  nvtx::Range range("fsdp.reduce_scatter", nvtx::Category::Comm, reduce_scatter_bytes());
  rs_work_ = pg_->reduce_scatter(rs_out_, flat_grad_);
  last_rs_ = rs_work_;
  ++traffic_.reduce_scatters;
  traffic_.bytes_reduce_scattered += reduce_scatter_bytes();
  return rs_work_;
}

void FlatParamUnit::reclaim_reduce_scatter_input() {
  // A completed collective has let go of its operands (comm/'s Work), so this frees it.
  if (rs_work_ && flat_grad_.defined() && rs_work_->is_completed()) flat_grad_ = Tensor();
}

void FlatParamUnit::await_reduce_scatter_input() {
  if (!rs_work_ || !flat_grad_.defined()) return;
  try {
    rs_work_->wait();
  } catch (...) {  // as wait_reduce_scatter: a failed collective leaves nothing to finish
    rs_work_ = nullptr;
    flat_grad_ = Tensor();
    rs_out_ = Tensor();
    throw;
  }
  flat_grad_ = Tensor();
}

void FlatParamUnit::wait_reduce_scatter() {
  comm::WorkPtr work = std::exchange(rs_work_, nullptr);
  if (!work) return;
  // The buffers go whatever the outcome: a failed collective leaves nothing to finish.
  Tensor flat_grad = std::exchange(flat_grad_, Tensor()), out = std::exchange(rs_out_, Tensor());
  work->wait();
  if (replicate_) {  // the shard's sum over its group, then over the replicas of the shard
    nvtx::Range range("fsdp.allreduce", nvtx::Category::Comm, allreduce_bytes());
    ar_out_ = out;
    ar_work_ = replicate_->allreduce(ar_out_);
    last_ar_ = ar_work_;
    ++traffic_.allreduces;
    traffic_.bytes_allreduced += allreduce_bytes();
    return;
  }
  if (rs_accumulates_) ops::axpy(1.0f, out, shard_.grad());
}

void FlatParamUnit::wait_replicate() {
  wait_reduce_scatter();
  comm::WorkPtr work = std::exchange(ar_work_, nullptr);
  if (!work) return;
  const Tensor out = std::exchange(ar_out_, Tensor());
  work->wait();
  if (rs_accumulates_) ops::axpy(1.0f, out, shard_.grad());
}

int64_t FlatParamUnit::gather_bytes() const {
  return layout_.padded_numel * static_cast<int64_t>(sizeof(float));
}

int64_t FlatParamUnit::allreduce_bytes() const {
  return layout_.shard_numel * static_cast<int64_t>(sizeof(float));
}

int64_t FlatParamUnit::reduce_scatter_bytes() const {
  return layout_.padded_numel * static_cast<int64_t>(sizeof(float));
}

}  // namespace ddpb::fsdp
