#include "comm/sync_batch_norm.h"

#include <string>
#include <string_view>

#include "core/clock.h"

namespace ddpb::comm {

Tensor ProcessGroupBatchNormSync::all_gather(const Tensor& local) {
  const int64_t k = local.numel(), world = pg_->size();
  Tensor all = Tensor::empty({world * k}, local.dtype(), local.device());
  const int64_t issue = steady_now_ns();
  WorkPtr work = pg_->allgather(all, local);
  work->wait();
  issued_.push_back({"allgather", work, issue, steady_now_ns()});
  return all.view({world, k});
}

void ProcessGroupBatchNormSync::all_reduce_sum(const Tensor& t) {
  const int64_t issue = steady_now_ns();
  WorkPtr work = pg_->allreduce(t);
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

SyncBnTimes sync_bn_times(const std::vector<SyncBnRecord>& records) {
  SyncBnTimes t;
  for (const SyncBnRecord& r : records) {
    const double ms = static_cast<double>(r.end_ns - r.start_ns) / 1e6;
    (std::string_view(r.op) == "allgather" ? t.forward_ms : t.backward_ms) += ms;
  }
  return t;
}

CollectiveTiming sync_bn_collective(const SyncBnRecord& record, int world, int64_t clock_zero_ns) {
  CollectiveTiming t;
  t.op = record.op;
  t.name = std::string("sync_bn ") + record.op;
  t.lane = "comm sync_bn";
  t.bytes = std::string_view(record.op) == "allgather" ? record.bytes * world : record.bytes;
  t.launch_ms = t.start_ms = static_cast<double>(record.start_ns - clock_zero_ns) / 1e6;
  t.complete_ms = static_cast<double>(record.end_ns - clock_zero_ns) / 1e6;
  return t;
}

}  // namespace ddpb::comm
