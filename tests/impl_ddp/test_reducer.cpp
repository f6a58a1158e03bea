// The Reducer in one process: ranks are threads over a Gloo group, and every rank sees its
// gradients become ready in a *different* order. Note [DDP bucket launch order] says the
// buckets still launch in index order on every rank, the rebuilt layout is rank 0's on every
// rank, and the gradients are the average over ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <random>
#include <vector>

#include "../comm/pg_test_util.h"
#include "core/functional.h"
#include "impl_ddp/reducer.h"

namespace ddpb::ddp {
namespace {

constexpr int kRanks = 3;
constexpr size_t kParams = 6;
constexpr int64_t kIn = 64;  // each parameter is a [2, kIn] weight: 512 bytes

Tensor input_of(int rank, size_t param) {
  std::vector<float> v(kIn);
  for (int64_t i = 0; i < kIn; ++i) v[size_t(i)] = float((rank + 1) * (1 + (i + param) % 5)) / 8;
  return Tensor::from_floats(v, {1, kIn});
}

// Parameter k's gradient on `rank`: of cross_entropy(x_k w_k^T, class 0).
Tensor local_gradient(const autograd::Var& w, int rank, size_t k) {
  autograd::Var x(input_of(rank, k));
  autograd::Var loss =
      fn::cross_entropy(fn::linear(x, w, autograd::Var()), Tensor::from_ints({0}, {1}));
  loss.backward();
  return w.grad();
}

// The order in which `rank` makes its gradients ready: 0..n-1, reversed, shuffled.
std::vector<size_t> ready_order(int rank) {
  std::vector<size_t> order(kParams);
  for (size_t k = 0; k < kParams; ++k) order[k] = k;
  if (rank == 1) std::reverse(order.begin(), order.end());
  if (rank == 2) std::shuffle(order.begin(), order.end(), std::mt19937(7));
  return order;
}

std::vector<nn::NamedParameter> make_params() {
  std::vector<nn::NamedParameter> params;
  for (size_t k = 0; k < kParams; ++k) {
    std::vector<float> v(2 * kIn);
    for (size_t i = 0; i < v.size(); ++i) v[i] = float((i * 7 + k * 3) % 11) / 100;
    params.push_back({"w" + std::to_string(k), autograd::Var(Tensor::from_floats(v, {2, kIn}),
                                                             /*requires_grad=*/true)});
  }
  return params;
}

// Per parameter, the average over ranks of `uses(rank, k)` times each rank's own gradient of
// it, computed here without the Reducer.
std::vector<std::vector<float>> expected_means(const std::function<int(int, size_t)>& uses) {
  auto reference = make_params();
  std::vector<std::vector<float>> means;
  for (size_t k = 0; k < kParams; ++k) {
    std::vector<float> mean(2 * kIn, 0.0f);
    for (int r = 0; r < kRanks; ++r) {
      reference[k].var.set_grad(Tensor());
      const auto g = local_gradient(reference[k].var, r, k).to_floats();
      for (size_t i = 0; i < g.size(); ++i) mean[i] += float(uses(r, k)) * g[i] / kRanks;
    }
    means.push_back(std::move(mean));
  }
  return means;
}

TEST(Reducer, DifferentReadyOrdersStillLaunchInOrderAndAverage) {
  std::mutex mutex;
  std::vector<std::string> layouts(kRanks);
  std::vector<std::vector<std::vector<float>>> grads(kRanks);
  comm::testing::run_thread_ranks(
      kRanks, [](int) { return comm::ProcessGroupOptions{}; },
      [&](int rank, comm::ProcessGroup& group) {
        auto params = make_params();
        ReducerOptions options;
        options.first_bucket_bytes = options.bucket_bytes = 1024;  // two parameters a bucket
        std::shared_ptr<comm::ProcessGroup> pg(&group, [](comm::ProcessGroup*) {});
        Reducer reducer(params, pg, options);
        for (int iteration = 0; iteration < 2; ++iteration) {
          for (auto& p : params) p.var.set_grad(Tensor());
          reducer.prepare_for_backward(autograd::Var(), /*sync=*/true);
          for (size_t k : ready_order(rank)) local_gradient(params[k].var, rank, k);
          reducer.finalize_backward();
          const auto& records = reducer.last_records();
          for (size_t b = 0; b < records.size(); ++b) {
            EXPECT_EQ(records[b].index, b);
            if (b > 0) EXPECT_LE(records[b - 1].launch_ms, records[b].launch_ms) << "rank " << rank;
          }
        }
        std::lock_guard lock(mutex);
        EXPECT_TRUE(reducer.rebuilt());
        layouts[size_t(rank)] = reducer.layout().dump();
        for (auto& p : params) grads[size_t(rank)].push_back(p.var.grad().to_floats());
      },
      std::chrono::seconds(30));
  for (int r = 1; r < kRanks; ++r) {
    EXPECT_EQ(layouts[size_t(r)], layouts[0]) << "rank " << r << " rebuilt other buckets";
  }
  // The average of the ranks' own gradients, computed here without the Reducer.
  const auto mean_of = expected_means([](int, size_t) { return 1; });
  for (size_t k = 0; k < kParams; ++k) {
    const std::vector<float>& mean = mean_of[k];
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_EQ(grads[size_t(r)][k], grads[0][k]) << "ranks disagree on w" << k;
      for (size_t i = 0; i < mean.size(); ++i)
        EXPECT_NEAR(grads[size_t(r)][k][i], mean[i], 1e-6) << "w" << k << "[" << i << "]";
    }
  }
}

// Note [DDP static graph]: w0 becomes ready twice a backward (its gradient arrives in two
// parts, as under activation checkpointing), w4 is used by rank 0 only and w5 by no rank. The
// first iteration learns that and reduces after backward; later ones need no search, and
// every gradient is the average over ranks of what each rank's backward produced.
TEST(Reducer, StaticGraphLearnsTheFirstIterationAndAllowsAParameterReadyTwice) {
  std::mutex mutex;
  std::vector<std::vector<std::vector<float>>> grads(kRanks);
  std::vector<std::string> layouts(kRanks);
  auto uses = [](int rank, size_t k) { return k == 0 ? 2 : k == 5 ? 0 : k == 4 ? rank == 0 : 1; };
  comm::testing::run_thread_ranks(
      kRanks, [](int) { return comm::ProcessGroupOptions{}; },
      [&](int rank, comm::ProcessGroup& group) {
        auto params = make_params();
        ReducerOptions options;
        options.first_bucket_bytes = options.bucket_bytes = 1024;
        options.static_graph = true;
        std::shared_ptr<comm::ProcessGroup> pg(&group, [](comm::ProcessGroup*) {});
        Reducer reducer(params, pg, options);
        for (int iteration = 0; iteration < 3; ++iteration) {
          for (auto& p : params) p.var.set_grad(Tensor());
          reducer.prepare_for_backward(autograd::Var(), /*sync=*/true);
          for (size_t k : ready_order(rank)) {
            for (int u = 0; u < uses(rank, k); ++u) local_gradient(params[k].var, rank, k);
          }
          reducer.finalize_backward();
          EXPECT_TRUE(reducer.rebuilt()) << "rebuilt once, after the first iteration";
        }
        std::lock_guard lock(mutex);
        layouts[size_t(rank)] = reducer.layout().dump();
        for (auto& p : params) {
          grads[size_t(rank)].push_back(p.var.grad().defined() ? p.var.grad().to_floats()
                                                               : std::vector<float>{});
        }
      },
      std::chrono::seconds(30));
  for (int r = 1; r < kRanks; ++r) EXPECT_EQ(layouts[size_t(r)], layouts[0]);
  const auto mean_of = expected_means(uses);
  for (size_t k = 0; k < kParams; ++k) {
    const std::vector<float>& mean = mean_of[k];
    for (int r = 0; r < kRanks; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r) + ", w" + std::to_string(k));
      if (k == 5) {
        EXPECT_TRUE(grads[size_t(r)][k].empty()) << "no rank used w5: it keeps no gradient";
        continue;
      }
      ASSERT_EQ(grads[size_t(r)][k].size(), mean.size());
      for (size_t i = 0; i < mean.size(); ++i) EXPECT_NEAR(grads[size_t(r)][k][i], mean[i], 1e-6);
    }
  }
}

// A parameter ready more often than in the first iteration, or not at all: the graph changed.
TEST(Reducer, StaticGraphThatChangesIsAnErrorNamingTheParameter) {
  comm::testing::run_thread_ranks(
      1, [](int) { return comm::ProcessGroupOptions{}; },
      [&](int, comm::ProcessGroup& group) {
        auto params = make_params();
        ReducerOptions options;
        options.static_graph = true;
        std::shared_ptr<comm::ProcessGroup> pg(&group, [](comm::ProcessGroup*) {});
        Reducer reducer(params, pg, options);
        auto iteration = [&](const std::vector<size_t>& fired) {
          for (auto& p : params) p.var.set_grad(Tensor());
          reducer.prepare_for_backward(autograd::Var(), /*sync=*/true);
          for (size_t k : fired) local_gradient(params[k].var, 0, k);
          reducer.finalize_backward();
        };
        iteration({0, 1, 2, 3, 4, 5});
        iteration({0, 1, 2, 3, 4, 5});
        try {
          iteration({0, 1, 1});
          ADD_FAILURE() << "w1 ready twice was accepted";
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("parameter w1 became ready 2 times"),
                    std::string::npos)
              << e.what();
        }
      },
      std::chrono::seconds(30));
}

TEST(Reducer, RefusesParametersThatAreNotF32) {
  comm::testing::run_thread_ranks(
      1, [](int) { return comm::ProcessGroupOptions{}; },
      [&](int, comm::ProcessGroup& group) {
        std::vector<nn::NamedParameter> params{
            {"half", autograd::Var(Tensor::zeros({4}, DType::BF16, Device::cpu()), true)}};
        std::shared_ptr<comm::ProcessGroup> pg(&group, [](comm::ProcessGroup*) {});
        EXPECT_THROW(Reducer(params, pg, ReducerOptions{}), UsageError);
      },
      std::chrono::seconds(10));
}

}  // namespace
}  // namespace ddpb::ddp
