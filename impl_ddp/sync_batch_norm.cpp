#include "impl_ddp/sync_batch_norm.h"

#include <chrono>

namespace ddpb::ddp {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Tensor ProcessGroupBatchNormSync::all_gather(const Tensor& local) {
  const int64_t k = local.numel(), world = pg_->size();
  Tensor all = Tensor::empty({world * k}, local.dtype(), local.device());
  const int64_t issue = now_ns();
  comm::WorkPtr work = pg_->allgather(all, local);
  work->wait();
  issued_.push_back({"allgather", work, issue, now_ns()});
  return all.view({world, k});
}

void ProcessGroupBatchNormSync::all_reduce_sum(const Tensor& t) {
  const int64_t issue = now_ns();
  comm::WorkPtr work = pg_->allreduce(t);
  work->wait();
  issued_.push_back({"allreduce", work, issue, now_ns()});
}

std::vector<SyncBnRecord> ProcessGroupBatchNormSync::take_records() {
  std::vector<SyncBnRecord> out;
  for (const Issued& i : issued_) {
    const bool timed = i.work->start_ns > 0 && i.work->end_ns > 0;
    out.push_back({i.op, i.work->bytes, timed ? i.work->start_ns : i.issue_ns,
                   timed ? i.work->end_ns : i.return_ns});
  }
  issued_.clear();
  return out;
}

int convert_sync_batchnorm(nn::Module& module, fn::BatchNormSync* sync) {
  int converted = 0;
  module.apply([&](nn::Module& m) {
    if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(&m)) {
      bn->set_sync(sync);
      ++converted;
    }
  });
  return converted;
}

}  // namespace ddpb::ddp
