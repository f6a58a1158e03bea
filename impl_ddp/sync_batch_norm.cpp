#include "impl_ddp/sync_batch_norm.h"

#include "core/clock.h"

namespace ddpb::ddp {

Tensor ProcessGroupBatchNormSync::all_gather(const Tensor& local) {
  const int64_t k = local.numel(), world = pg_->size();
  Tensor all = Tensor::empty({world * k}, local.dtype(), local.device());
  const int64_t issue = steady_now_ns();
  comm::WorkPtr work = pg_->allgather(all, local);
  work->wait();
  issued_.push_back({"allgather", work, issue, steady_now_ns()});
  return all.view({world, k});
}

void ProcessGroupBatchNormSync::all_reduce_sum(const Tensor& t) {
  const int64_t issue = steady_now_ns();
  comm::WorkPtr work = pg_->allreduce(t);
  work->wait();
  issued_.push_back({"allreduce", work, issue, steady_now_ns()});
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
