#include "impl_ddp/comm_hooks.h"

#include "comm/flight_recorder.h"
#include "core/check.h"
#include "core/ops.h"
#include "impl_ddp/powersgd_hook.h"

namespace ddpb::ddp {

void BucketCommHook::issue(HookBucket& b, std::string name, const Tensor& payload) {
  issue_with(b, std::move(name), payload, [&] { return pg_->allreduce(payload); });
}

void BucketCommHook::issue_reduce_scatter(HookBucket& b, const Tensor& out, const Tensor& in) {
  issue_with(b, "reduce_scatter", in, [&] { return pg_->reduce_scatter(out, in); });
}

void BucketCommHook::issue_with(HookBucket& b, std::string name, const Tensor& payload,
                                const std::function<comm::WorkPtr()>& start) {
  CollectiveRecord c;
  c.name = std::move(name);
  c.bytes = static_cast<int64_t>(payload.nbytes());
  c.launch_ms = now_ms_();
  const std::string label = "ddp." + c.name + " bucket " + std::to_string(b.index);
  b.ranges.emplace_back(label, nvtx::Category::Comm, c.bytes);
  nvtx::Range range(label + " launch", nvtx::Category::Comm, c.bytes);
  c.work = start();
  comm::flight_recorder().tag(
      c.work->flight_ring, c.work->sequence,
      "bucket " + std::to_string(b.index) + (c.name == "allreduce" ? "" : " " + c.name));
  b.record.bytes += c.bytes;
  b.record.collectives.push_back(std::move(c));
}

void BucketCommHook::wait(HookBucket& b, size_t k) {
  DDPB_CHECK(k < b.record.collectives.size() && k < b.ranges.size())
      << "bucket " << b.index << " has no collective " << k;
  CollectiveRecord& c = b.record.collectives[k];
  c.work->wait();
  b.ranges[k].end();
  c.complete_ms = now_ms_();  // replaced by the collective's own end once known
}

void BucketCommHook::wait_all(HookBucket& b) {
  for (size_t k = 0; k < b.record.collectives.size(); ++k) wait(b, k);
}

void BucketCommHook::compute(HookBucket& b, const char* name, const std::function<void()>& fn) {
  const double start = now_ms_();
  {
    nvtx::Range range(std::string("ddp.") + name + " bucket " + std::to_string(b.index),
                      nvtx::Category::Comm);
    fn();
  }
  if (!b.buffer.device().is_cuda()) b.record.compute.push_back({name, start, now_ms_()});
}

namespace {

// PyTorch's allreduce_hook. The Reducer divided by the world size at copy-in.
class AllReduceHook final : public BucketCommHook {
 public:
  using BucketCommHook::BucketCommHook;
  void launch(HookBucket& b) override { issue(b, "allreduce", b.buffer); }
};

// fp16_compress_hook and bf16_compress_hook: the wire carries 16 bits per gradient.
class CastHook final : public BucketCommHook {
 public:
  CastHook(DType wire, std::shared_ptr<comm::ProcessGroup> pg, std::function<double()> now_ms)
      : BucketCommHook(std::move(pg), std::move(now_ms)), wire_(wire) {}

  void launch(HookBucket& b) override {
    if (b.index >= compressed_.size()) compressed_.resize(b.index + 1);
    Tensor& half = compressed_[b.index];
    if (!half.defined() || half.numel() != b.buffer.numel())
      half = Tensor::empty(b.buffer.shape(), wire_, b.buffer.device());
    ops::cast(b.buffer, half);  // already divided by the world size at copy-in
    issue(b, "allreduce", half);
  }
  void finish(HookBucket& b) override {
    wait_all(b);
    ops::cast(compressed_[b.index], b.buffer);
  }
  void buckets_rebuilt() override { compressed_.clear(); }

 private:
  DType wire_;
  std::vector<Tensor> compressed_;  // per bucket index
};

}  // namespace

std::unique_ptr<BucketCommHook> make_comm_hook(CommHook hook, const PowerSgdOptions& powersgd,
                                               std::shared_ptr<comm::ProcessGroup> pg,
                                               std::function<double()> now_ms) {
  switch (hook) {
    case CommHook::None:
      return std::make_unique<AllReduceHook>(std::move(pg), std::move(now_ms));
    case CommHook::FP16:
      return std::make_unique<CastHook>(DType::F16, std::move(pg), std::move(now_ms));
    case CommHook::BF16:
      return std::make_unique<CastHook>(DType::BF16, std::move(pg), std::move(now_ms));
    case CommHook::PowerSGD:
      return std::make_unique<PowerSgdHook>(powersgd, std::move(pg), std::move(now_ms));
  }
  DDPB_CHECK(false) << "unknown comm hook";
  return nullptr;
}

namespace {

// Note [ZeRO in DDP] (impl_ddp/zero_optimizer.h): each rank receives only its chunk of the
// bucket's sum (divided by the world size at copy-in), in the bucket's shard_out.
class ReduceScatterHook final : public BucketCommHook {
 public:
  using BucketCommHook::BucketCommHook;
  void launch(HookBucket& b) override { issue_reduce_scatter(b, b.shard_out, b.buffer); }
};

}  // namespace

std::unique_ptr<BucketCommHook> make_reduce_scatter_hook(std::shared_ptr<comm::ProcessGroup> pg,
                                                         std::function<double()> now_ms) {
  return std::make_unique<ReduceScatterHook>(std::move(pg), std::move(now_ms));
}

}  // namespace ddpb::ddp
