// FullyShardedDataParallel on thread-ranks over Gloo (impl_fsdp/fully_sharded_data_parallel.h,
// Note [FSDP's step]): every strategy trains as one device does on the whole batch, moves the
// collectives its strategy names, keeps at most the running and the prefetched unit gathered,
// and gives the full parameters back on demand.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "../core/test_util.h"
#include "base/rank_team.h"
#include "batch_rows.h"
#include "comm/hash_store.h"
#include "comm/process_group.h"
#include "core/functional.h"
#include "core/nn.h"
#include "core/optim.h"
#include "impl_fsdp/fully_sharded_data_parallel.h"

namespace ddpb::fsdp {
namespace {

using autograd::Var;
using comm::ProcessGroup;

constexpr std::chrono::seconds kTimeout{20};

// Linears with ReLU between them (the units), then a head Linear in no unit (the root's).
struct Net final : nn::Module {
  std::vector<std::shared_ptr<nn::Linear>> layers;
  std::shared_ptr<nn::Linear> head;
  Net(const std::vector<int64_t>& sizes, const Device& device) {
    nn::Context ctx{device, /*seed=*/11, ""};
    for (size_t i = 0; i + 2 < sizes.size(); ++i) {
      const std::string name = "layers." + std::to_string(i);
      layers.push_back(register_module(
          name, std::make_shared<nn::Linear>(ctx.child(name), sizes[i], sizes[i + 1])));
    }
    const size_t n = sizes.size();
    head = register_module(
        "head", std::make_shared<nn::Linear>(ctx.child("head"), sizes[n - 2], sizes[n - 1]));
  }
  Var forward(const Var& x) const {
    Var h = x;
    for (const auto& layer : layers) h = layer->forward(h, ops::Activation::ReLU);
    return head->forward(h, ops::Activation::None);
  }
  std::vector<FsdpUnitSpec> units() const {
    std::vector<FsdpUnitSpec> out;
    for (size_t i = 0; i < layers.size(); ++i)
      out.push_back({"layers." + std::to_string(i), {layers[i].get()}});
    return out;
  }
};

const std::vector<int64_t> kSizes{6, 7, 5, 4, 3};  // units of 49, 40 and 24 elements; root 15
constexpr int64_t kBatch = 12, kSteps = 3;

// Every test's global batches.
const testing::SyntheticBatches kBatches{kBatch, kSizes.front(), kSizes.back(), 200, 5};

Tensor batch_x(int step, const Device& device) {
  return kBatches.x(step, device);
}

std::vector<int32_t> batch_y(int step) {
  return kBatches.y(step);
}

using Params = std::map<std::string, std::vector<float>>;

Params train_single_device() {
  Net model(kSizes, Device::cpu());
  return testing::train_single_device(model, kBatches, kSteps);
}

// The groups of `strategy` on `world` thread-ranks; hybrid_shard shards within pairs.
FsdpGroups make_groups(ShardingStrategy strategy, const std::shared_ptr<comm::HashStore>& store,
                       int rank, int world, const comm::ProcessGroupOptions& o) {
  FsdpGroups g;
  g.world = comm::make_process_group(store, rank, world, o);
  g.shard = g.world;
  if (strategy == ShardingStrategy::NoShard) {
    for (int r = 0; r < world; ++r)
      if (auto group = comm::new_group(store, rank, world, {r}, o)) g.shard = group;
    g.replicate = g.world;
  }
  if (strategy == ShardingStrategy::HybridShard) {
    const int shard_size = 2, groups = world / shard_size;
    for (int s = 0; s < groups; ++s) {
      std::vector<int> ranks;
      for (int i = 0; i < shard_size; ++i) ranks.push_back(s * shard_size + i);
      if (auto group = comm::new_group(store, rank, world, ranks, o)) g.shard = group;
    }
    for (int i = 0; i < shard_size; ++i) {
      std::vector<int> ranks;
      for (int s = 0; s < groups; ++s) ranks.push_back(s * shard_size + i);
      if (auto group = comm::new_group(store, rank, world, ranks, o)) g.replicate = group;
    }
  }
  return g;
}

// body(rank, groups) on `world` thread-ranks.
void on_ranks(int world, ShardingStrategy strategy,
              const std::function<void(int, const FsdpGroups&)>& body) {
  auto store = std::make_shared<comm::HashStore>();
  store->set_timeout(kTimeout);
  RankTeam team(world);
  team.run_void([&](int r) {
    comm::ProcessGroupOptions o;
    o.backend = comm::CommBackend::Gloo;
    o.device = Device::cpu(r);
    o.timeout = kTimeout;
    DeviceGuard guard(o.device);
    body(r, make_groups(strategy, store, r, world, o));
  });
}

struct RankRun {
  Params params;
  std::vector<FsdpStepStats> steps;
  std::vector<int> most_gathered;  // per step: the most units gathered at once in forward
};

RankRun train_fsdp(int rank, int world, const FsdpGroups& groups, FsdpOptions options,
                   int64_t accumulate) {
  const Device device = Device::cpu(rank);
  Net model(kSizes, device);
  FullyShardedDataParallel fsdp(
      model, [&](const Tensor& x) { return model.forward(Var(x)); }, groups, model.units(),
      options);
  EXPECT_EQ(fsdp.unit_names().back(), "root");
  int most = 0;
  // How many units are gathered as one starts (after FSDP's own pre-hook, registered first).
  for (const auto& layer : model.layers) {
    layer->register_forward_pre_hook([&](const nn::Module&) {
      int gathered = 0;
      for (size_t i = 0; i + 1 < fsdp.units().size(); ++i) gathered += fsdp.units()[i]->gathered();
      most = std::max(most, gathered);
    });
  }
  auto sgd = fsdp.make_optimizer({.name = "sgd", .lr = 0.1f, .momentum = 0.9f});
  EXPECT_EQ(kBatch % (world * accumulate), 0) << "the micro-batches cover the batch";
  const int64_t rows = kBatch / world / accumulate;  // of a micro-batch
  RankRun run;
  for (int step = 0; step < kSteps; ++step) {
    const std::vector<int32_t> y = batch_y(step);
    int64_t micro = 0;
    const auto next = [&] {
      const int64_t first = (rank * accumulate + micro++) * rows;
      return testing::batch_rows(batch_x(step, device), y, first, rows, device);
    };
    most = 0;
    run.steps.push_back(fsdp.step(next, fn::cross_entropy, *sgd, {.accumulate = accumulate}));
    EXPECT_EQ(micro, accumulate);
    run.most_gathered.push_back(most);
    for (const Var& p : model.parameters()) EXPECT_TRUE(p.storage_freed()) << p.name();
  }
  fsdp.with_full_params([&] {
    for (const nn::NamedParameter& p : model.named_parameters())
      run.params[p.name] = p.var.data().to_floats();
  });
  fsdp.check_replicas_consistent();
  return run;
}

std::vector<RankRun> run_world(int world, FsdpOptions options, int64_t accumulate = 1) {
  std::vector<RankRun> runs(static_cast<size_t>(world));
  on_ranks(world, options.strategy, [&](int rank, const FsdpGroups& groups) {
    runs[size_t(rank)] = train_fsdp(rank, world, groups, options, accumulate);
  });
  return runs;
}

void expect_single_device_parameters(const std::vector<RankRun>& runs) {
  const Params want = train_single_device();
  for (size_t r = 0; r < runs.size(); ++r) {
    ASSERT_EQ(runs[r].params.size(), want.size()) << "rank " << r;
    for (const auto& [name, values] : want)
      EXPECT_TRUE(testing::all_close(runs[r].params.at(name), values, 1e-6f, 1e-5f))
          << name << " on rank " << r;
  }
}

int count(const FsdpStepStats& s, const std::string& op, const std::string& when = "") {
  int n = 0;
  for (const UnitCollective& c : s.units) n += c.op == op && (when.empty() || c.when == when);
  return n;
}

struct StrategyCase {
  ShardingStrategy strategy;
  int world;
};

// For test names and messages: "full_shard at 2 ranks".
void PrintTo(const StrategyCase& c, std::ostream* os) {
  *os << enum_name(c.strategy) << " at " << c.world << " ranks";
}

class FsdpStrategies : public ::testing::TestWithParam<StrategyCase> {};

INSTANTIATE_TEST_SUITE_P(Cases, FsdpStrategies,
                         ::testing::Values(StrategyCase{ShardingStrategy::FullShard, 1},
                                           StrategyCase{ShardingStrategy::FullShard, 2},
                                           StrategyCase{ShardingStrategy::FullShard, 3},
                                           StrategyCase{ShardingStrategy::ShardGradOp, 3},
                                           StrategyCase{ShardingStrategy::NoShard, 2},
                                           StrategyCase{ShardingStrategy::HybridShard, 4}),
                         [](const auto& info) {
                           return std::string(enum_name(info.param.strategy)) + "_world" +
                                  std::to_string(info.param.world);
                         });

// Note [FSDP's step]: each strategy's parameters after 3 steps of SGD with momentum equal one
// device's on the whole batch, on every rank.
TEST_P(FsdpStrategies, TrainsAsOneDeviceOnTheWholeBatch) {
  FsdpOptions options;
  options.strategy = GetParam().strategy;
  expect_single_device_parameters(run_world(GetParam().world, options));
}

// full_shard gathers each unit before its forward and again before its backward (3Ψ);
// shard_grad_op once (2Ψ); the root once either way. From the second step the gathers of the
// next unit are prefetched; at most the running unit and the prefetched one are gathered.
TEST(FsdpStep, EachStrategyMovesWhatItsNameSays) {
  for (const ShardingStrategy strategy :
       {ShardingStrategy::FullShard, ShardingStrategy::ShardGradOp}) {
    SCOPED_TRACE(std::string(enum_name(strategy)));
    FsdpOptions options;
    options.strategy = strategy;
    const std::vector<RankRun> runs = run_world(2, options);
    const bool full = strategy == ShardingStrategy::FullShard;
    for (const RankRun& run : runs) {
      for (size_t s = 0; s < run.steps.size(); ++s) {
        const FsdpStepStats& st = run.steps[s];
        EXPECT_EQ(count(st, "allgather"), full ? 3 * 2 + 1 : 3 + 1) << "step " << s;
        EXPECT_EQ(count(st, "reduce_scatter"), 4);
        EXPECT_EQ(count(st, "reduce_scatter", "backward"), 3) << "the units' as backward runs";
        EXPECT_EQ(st.collectives.size(), st.units.size()) << "every collective is on the wire";
        EXPECT_EQ(st.limiter_waits, 0) << "CPU events complete when recorded";
        if (s == 0) {
          EXPECT_EQ(count(st, "allgather", "prefetch forward"), 0) << "no order known yet";
        } else {
          EXPECT_EQ(count(st, "allgather", "prefetch forward"), 3)
              << "the root's prefetches the first";
          if (full) EXPECT_EQ(count(st, "allgather", "prefetch backward"), 2);
        }
        if (full) EXPECT_LE(run.most_gathered[s], 2) << "the running unit and the next";
      }
    }
  }
}

// Without prefetch every gather is issued where its unit needs it.
TEST(FsdpStep, PrefetchCanBeSwitchedOff) {
  FsdpOptions options;
  options.forward_prefetch = options.backward_prefetch = false;
  const std::vector<RankRun> runs = run_world(2, options);
  for (const RankRun& run : runs) {
    for (size_t s = 0; s < run.steps.size(); ++s) {
      EXPECT_EQ(count(run.steps[s], "allgather", "forward"), 4);
      EXPECT_EQ(count(run.steps[s], "allgather", "backward"), 3);
      EXPECT_LE(run.most_gathered[s], 1) << "step " << s;
    }
  }
  expect_single_device_parameters(runs);
}

// Gradient accumulation: each micro-step reduce-scatters into the shard's gradient, which adds
// up to the whole batch's (each micro-loss scaled by 1/K); shard_grad_op and hybrid_shard too.
TEST(FsdpStep, AccumulatedMicroStepsTrainAsTheWholeBatch) {
  for (const auto& [strategy, world] :
       {std::pair{ShardingStrategy::FullShard, 2}, std::pair{ShardingStrategy::ShardGradOp, 3},
        std::pair{ShardingStrategy::HybridShard, 4}}) {
    SCOPED_TRACE(std::string(enum_name(strategy)));
    FsdpOptions options;
    options.strategy = strategy;
    // 12 rows: 2 ranks x 2 micro-batches of 3, 3 x 4 of 1, 4 x 3 of 1.
    const int64_t accumulate = world == 2 ? 2 : world == 3 ? 4 : 3;
    const std::vector<RankRun> runs = run_world(world, options, accumulate);
    expect_single_device_parameters(runs);
    EXPECT_EQ(count(runs[0].steps.back(), "reduce_scatter"), 4 * accumulate);
  }
}

// no_shard: the shards are whole (a group of one), the gathers local copies with nothing on
// the wire, the gradients all-reduced over the world.
TEST(FsdpStep, NoShardAllReducesWholeGradients) {
  FsdpOptions options;
  options.strategy = ShardingStrategy::NoShard;
  const std::vector<RankRun> runs = run_world(2, options);
  for (const RankRun& run : runs) {
    const FsdpStepStats& st = run.steps.back();
    EXPECT_EQ(count(st, "allreduce"), 4);
    for (const CollectiveTiming& c : st.collectives) EXPECT_EQ(c.op, "allreduce") << c.name;
  }
}

// Two units side by side on one input, summed (a fork): their backwards need not run in
// reverse forward order, and a unit reduced already must not be gathered again by the other's
// backward prefetch and kept into the next forward (it would run on the values from before
// the optimizer's step). Both orders of the branches' backwards train as one device does.
struct Fork final : nn::Module {
  std::shared_ptr<nn::Linear> left, right, head;
  explicit Fork(const Device& device) {
    nn::Context ctx{device, /*seed=*/5, ""};
    left = register_module("left", std::make_shared<nn::Linear>(ctx.child("left"), 6, 5));
    right = register_module("right", std::make_shared<nn::Linear>(ctx.child("right"), 6, 5));
    head = register_module("head", std::make_shared<nn::Linear>(ctx.child("head"), 5, 3));
  }
  Var forward(const Var& x) const {
    return head->forward(
        fn::add(left->forward(x, ops::Activation::ReLU), right->forward(x, ops::Activation::None)),
        ops::Activation::None);
  }
};

Params train_fork(int rank, int world, const FsdpGroups* groups) {
  const Device device = Device::cpu(rank);
  Fork model(device);
  std::unique_ptr<FullyShardedDataParallel> fsdp;
  std::unique_ptr<optim::Optimizer> sgd;
  if (groups) {
    fsdp = std::make_unique<FullyShardedDataParallel>(
        model, [&](const Tensor& x) { return model.forward(Var(x)); }, *groups,
        std::vector<FsdpUnitSpec>{{"left", {model.left.get()}}, {"right", {model.right.get()}}},
        FsdpOptions{});
    sgd = fsdp->make_optimizer({.name = "sgd", .lr = 0.1f, .momentum = 0.9f});
  } else {
    sgd = std::make_unique<optim::SGD>(model.parameters(), 0.1f, 0.9f, 0.0f);
  }
  const int64_t rows = kBatch / world;
  for (int step = 0; step < kSteps; ++step) {
    const MicroBatch mine =
        testing::batch_rows(batch_x(step, device), batch_y(step), rank * rows, rows, device);
    const Tensor &x = mine.x, &labels = mine.y;
    if (fsdp) {
      fsdp->step([&] { return mine; }, fn::cross_entropy, *sgd);
      for (const Var& p : model.parameters()) EXPECT_TRUE(p.storage_freed()) << p.name();
    } else {
      fn::cross_entropy(model.forward(Var(x)), labels).backward();
      sgd->step();
      sgd->zero_grad();
    }
  }
  Params out;
  const auto read = [&] {
    for (const nn::NamedParameter& p : model.named_parameters())
      out[p.name] = p.var.data().to_floats();
  };
  if (fsdp) {
    fsdp->with_full_params(read);
  } else {
    read();
  }
  return out;
}

TEST(FsdpStep, AForkOfUnitsTrainsAsOneDevice) {
  const Params want = train_fork(0, 1, nullptr);
  std::vector<Params> got(2);
  on_ranks(2, ShardingStrategy::FullShard, [&](int rank, const FsdpGroups& groups) {
    got[size_t(rank)] = train_fork(rank, 2, &groups);
  });
  for (const Params& g : got)
    for (const auto& [name, values] : want)
      EXPECT_TRUE(testing::all_close(g.at(name), values, 1e-6f, 1e-5f)) << name;
}

// with_full_params(writeback) puts edited parameters into the shards.
TEST(FsdpStep, FullParametersCanBeReadAndWrittenBack) {
  on_ranks(2, ShardingStrategy::FullShard, [](int rank, const FsdpGroups& groups) {
    Net model(kSizes, Device::cpu(rank));
    FullyShardedDataParallel fsdp(model, [&](const Tensor& x) { return model.forward(Var(x)); },
                                  groups, model.units(), {});
    const Net fresh(kSizes, Device::cpu(rank));
    fsdp.with_full_params(
        [&] {
          const std::vector<nn::NamedParameter> want = fresh.named_parameters();
          const std::vector<nn::NamedParameter> got = model.named_parameters();
          for (size_t k = 0; k < got.size(); ++k) {
            EXPECT_EQ(got[k].var.data().to_floats(), want[k].var.data().to_floats());
            ops::fill(got[k].var.data(), float(k));
          }
        },
        /*writeback=*/true);
    for (const Var& p : model.parameters()) EXPECT_TRUE(p.storage_freed());
    fsdp.with_full_params([&] {
      const std::vector<nn::NamedParameter> got = model.named_parameters();
      for (size_t k = 0; k < got.size(); ++k)
        EXPECT_EQ(got[k].var.data().to_floats(),
                  std::vector<float>(size_t(got[k].var.data().numel()), float(k)))
            << got[k].name;
    });
  });
}

}  // namespace
}  // namespace ddpb::fsdp
