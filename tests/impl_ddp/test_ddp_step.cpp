// DistributedDataParallel::step (Note [One phase vocabulary]): the step DDP owns, as DP owns
// its own. Two thread-ranks over Gloo train a two-layer model on different data: the phases
// come in DDP's order and add up to the step, the buckets carry their times, the micro-steps
// of --accumulate each take a batch, and the ranks end with the same parameters.
#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "../comm/pg_test_util.h"
#include "core/functional.h"
#include "core/optim.h"
#include "impl_ddp/distributed_data_parallel.h"

namespace ddpb::ddp {
namespace {

class TwoLayers final : public nn::Module {
 public:
  explicit TwoLayers(const Device& device) {
    nn::Context ctx{device, /*seed=*/3, ""};
    a_ = register_module("a", std::make_shared<nn::Linear>(ctx.child("a"), 8, 16));
    b_ = register_module("b", std::make_shared<nn::Linear>(ctx.child("b"), 16, 3));
  }
  autograd::Var forward(const Tensor& x) const {
    return b_->forward(a_->forward(autograd::Var(x), ops::Activation::ReLU));
  }

 private:
  std::shared_ptr<nn::Linear> a_, b_;
};

MicroBatch batch_of(int rank, int index) {
  std::vector<float> x(4 * 8);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float((i * 5 + size_t(rank) * 3 + size_t(index)) % 7) / 7;
  return {Tensor::from_floats(x, {4, 8}, Device::cpu(rank)),
          Tensor::from_ints({0, 1, 2, rank}, {4}, Device::cpu(rank))};
}

struct RankResult {
  DdpStepStats stats;
  std::vector<std::vector<float>> params;
  int batches = 0, first_forward_calls = 0;
};

std::vector<RankResult> train_one_step(int64_t accumulate) {
  std::vector<RankResult> results(2);
  comm::testing::run_thread_ranks(
      2,
      [](int r) {
        comm::ProcessGroupOptions o;
        o.device = Device::cpu(r);
        o.timeout = std::chrono::seconds(20);  // a failure must not wait out the default
        return o;
      },
      [&](int rank, comm::ProcessGroup& group) {
        RankResult& out = results[size_t(rank)];
        TwoLayers model(Device::cpu(rank));
        DdpOptions options;
        options.reducer.first_bucket_bytes = options.reducer.bucket_bytes = 256;
        std::shared_ptr<comm::ProcessGroup> pg(&group, [](comm::ProcessGroup*) {});
        DistributedDataParallel ddp(
            model, [&](const Tensor& x) { return model.forward(x); }, pg, options);
        optim::SGD sgd(model.parameters(), 0.1f, 0.0f, 0.0f);
        DdpStepOptions step_options;
        step_options.accumulate = accumulate;
        step_options.in_first_forward = [&] { ++out.first_forward_calls; };
        out.stats = ddp.step([&] { return batch_of(rank, out.batches++); },
                             [](const autograd::Var& logits, const Tensor& y) {
                               return fn::cross_entropy(logits, y);
                             },
                             sgd, step_options);
        for (auto& p : model.parameters()) out.params.push_back(p.data().to_floats());
      },
      std::chrono::seconds(30));
  return results;
}

TEST(DdpStep, PhasesComeInOrderAndAddUpAndTheRanksAgree) {
  const std::vector<RankResult> ranks = train_one_step(1);
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const DdpStepStats& s = ranks[size_t(r)].stats;
    std::vector<std::string> names;
    double sum = 0;
    for (const PhaseTime& p : s.phases) {
      names.push_back(step_phase_name(p.phase));
      EXPECT_GE(p.ms, 0.0);
      sum += p.ms;
    }
    EXPECT_EQ(names, (std::vector<std::string>{"forward", "backward_compute", "comm_exposed",
                                               "optimizer"}))
        << "a model without buffers has no buffer broadcast, and no SyncBatchNorm";
    EXPECT_DOUBLE_EQ(s.step_ms, sum);
    EXPECT_EQ(s.buffer_broadcast_bytes, -1);
    EXPECT_FALSE(s.sync_batch_norm);
    ASSERT_GE(s.buckets.size(), 2u) << "256-byte buckets over 8x16 and 16x3 weights";
    for (const BucketRecord& b : s.buckets) EXPECT_GE(b.complete_ms, b.launch_ms);
    EXPECT_GT(s.compute_end_ms, 0.0);
    EXPECT_GT(s.clock_zero_ns, 0);
    // Note [Step stats]: every bucket's collectives are the step's gradient collectives.
    int64_t gradient_bytes = 0, bucket_bytes = 0;
    size_t gradient_collectives = 0;
    for (const CollectiveTiming& c : s.collectives) {
      EXPECT_TRUE(c.gradient) << c.name << ": no SyncBatchNorm here";
      EXPECT_EQ(c.op, "allreduce");
      EXPECT_GE(c.complete_ms, c.start_ms);
      gradient_bytes += c.bytes;
      ++gradient_collectives;
    }
    for (const BucketRecord& b : s.buckets) bucket_bytes += b.bytes;
    EXPECT_EQ(gradient_collectives, s.buckets.size());
    EXPECT_EQ(gradient_bytes, bucket_bytes);
    EXPECT_EQ(ranks[size_t(r)].batches, 1);
    EXPECT_EQ(ranks[size_t(r)].first_forward_calls, 1);
  }
  EXPECT_EQ(ranks[0].params, ranks[1].params) << "the averaged gradients differ between ranks";
  EXPECT_NE(ranks[0].stats.loss, ranks[1].stats.loss) << "the ranks trained on the same data";
}

TEST(DdpStep, EachMicroStepTakesABatchAndTheHookRunsOnce) {
  const std::vector<RankResult> ranks = train_one_step(3);
  for (const RankResult& r : ranks) {
    EXPECT_EQ(r.batches, 3);
    EXPECT_EQ(r.first_forward_calls, 1);
  }
  EXPECT_EQ(ranks[0].params, ranks[1].params);
}

}  // namespace
}  // namespace ddpb::ddp
