// FSDP's flat parameters (Note [Flat parameters] in impl_fsdp/flat_param.h): the layout and
// its padding, gather() and release() with the memory they hold, reduce_scatter_grads()'s
// averaged shard, and a mini FSDP step driven by module and autograd hooks that trains as one
// device does on the whole batch. Ranks are threads over Gloo at world sizes 1, 2 and 3; the
// test unit's 59 elements are a multiple of neither 2 nor 3, so the last shard is padded.
#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../comm/pg_test_util.h"
#include "../core/test_util.h"
#include "../util/error_of.h"
#include "batch_rows.h"
#include "core/allocator.h"
#include "core/functional.h"
#include "core/nn.h"
#include "core/optim.h"
#include "core/stream_sanitizer.h"
#include "impl_fsdp/flat_param.h"

namespace ddpb::fsdp {
namespace {

using autograd::Var;
using comm::ProcessGroup;

// body(rank, group) on `world` thread-ranks over Gloo, rank r on cpu:r.
void on_ranks(int world, const std::function<void(int, std::shared_ptr<ProcessGroup>)>& body) {
  comm::testing::run_thread_ranks(
      world,
      [](int r) {
        comm::ProcessGroupOptions o;
        o.device = Device::cpu(r);
        o.timeout = std::chrono::seconds(20);  // a failure must not wait out the default
        return o;
      },
      [&](int rank, ProcessGroup& group) {
        body(rank, std::shared_ptr<ProcessGroup>(&group, [](ProcessGroup*) {}));
      },
      std::chrono::seconds(30));
}

std::vector<uint32_t> bits(const Tensor& t) {
  std::vector<uint32_t> out;
  for (float f : t.to_floats()) out.push_back(std::bit_cast<uint32_t>(f));
  return out;
}

// The test unit: 30 + 5 + 20 + 4 = 59 elements, the same values on every rank.
const std::vector<Shape> kShapes{{5, 6}, {5}, {4, 5}, {4}};
const std::vector<std::string> kNames{"u.a", "u.b", "u.c", "u.d"};
constexpr int64_t kNumel = 59;

std::vector<Var> unit_params(int rank) {
  std::vector<Var> params;
  for (size_t k = 0; k < kShapes.size(); ++k) {
    params.emplace_back(testing::random_tensor(kShapes[k], 40 + k, 1.0f, Device::cpu(rank)), true);
    params.back().set_name(kNames[k]);
  }
  return params;
}

// ---- The layout (a pure function) --------------------------------------------------------

TEST(FlatParamLayout, ParametersFollowInOrderAndThePaddingRoundsUpToTheWorld) {
  const std::vector<int64_t> padded{59, 60, 60, 60}, shard{59, 30, 20, 15};
  for (int world = 1; world <= 4; ++world) {
    SCOPED_TRACE("world " + std::to_string(world));
    const FlatParamLayout l = flat_param_layout(kShapes, world);
    EXPECT_EQ(l.offsets, (std::vector<int64_t>{0, 30, 35, 55}));
    EXPECT_EQ(l.shapes, kShapes);
    EXPECT_EQ(l.numel, kNumel);
    EXPECT_EQ(l.padded_numel, padded[size_t(world - 1)]);
    EXPECT_EQ(l.shard_numel, shard[size_t(world - 1)]);
    EXPECT_EQ(l.padded_numel % world, 0);
    // One element of padding, at the end of the last rank's shard.
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(l.shard_begin(r), r * l.shard_numel);
      EXPECT_EQ(l.shard_padding(r), world > 1 && r == world - 1 ? 1 : 0) << "rank " << r;
    }
  }
}

TEST(FlatParamLayout, TrailingShardsMayBeWhollyPadding) {
  // A scalar and an empty tensor take 1 and 0 elements.
  const FlatParamLayout l = flat_param_layout({{2}, {}, {3, 0}}, 5);
  EXPECT_EQ(l.offsets, (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(l.numel, 3);
  EXPECT_EQ(l.padded_numel, 5);
  EXPECT_EQ(l.shard_numel, 1);
  std::vector<int64_t> padding;
  for (int r = 0; r < 5; ++r) padding.push_back(l.shard_padding(r));
  EXPECT_EQ(padding, (std::vector<int64_t>{0, 0, 0, 1, 1}));
  EXPECT_THROW(flat_param_layout(kShapes, 0), UsageError);
  EXPECT_THROW(flat_param_layout({{2, -1}}, 2), UsageError);
}

TEST(FlatParamUnit, RefusesWhatCannotBeFlattened) {
  on_ranks(1, [](int, std::shared_ptr<ProcessGroup> pg) {
    std::vector<Var> params = unit_params(0);
    const auto refusal = [](std::vector<Var> list, std::shared_ptr<ProcessGroup> group) {
      try {
        FlatParamUnit unit("u", std::move(list), std::move(group));
      } catch (const UsageError& e) {
        return std::string(e.what());
      }
      return std::string("accepted");
    };
    const std::string twice = refusal({params[0], params[1], params[0]}, pg);
    EXPECT_NE(twice.find("parameter 'u.a' is listed twice"), std::string::npos) << twice;
    const Var frozen(testing::random_tensor({3}, 1), false);
    EXPECT_NE(refusal({params[0], frozen}, pg).find("not a trainable leaf"), std::string::npos);
    EXPECT_NE(refusal({}, pg).find("has no parameters"), std::string::npos);
    EXPECT_NE(refusal(params, nullptr).find("needs a process group"), std::string::npos);
  });
}

// ---- gather(), release() and reduce_scatter_grads() on 1, 2 and 3 ranks ------------------

class FlatParamOnRanks : public ::testing::TestWithParam<int> {};

INSTANTIATE_TEST_SUITE_P(Worlds, FlatParamOnRanks, ::testing::Values(1, 2, 3),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

// Construction leaves every parameter released and this rank's chunk of the padded values in
// its shard.
TEST_P(FlatParamOnRanks, TheShardIsThisRanksChunkAndTheParametersStartReleased) {
  const int world = GetParam();
  on_ranks(world, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    std::vector<Var> params = unit_params(rank);
    std::vector<float> padded;
    for (const Var& p : params) {
      const std::vector<float> v = p.data().to_floats();
      padded.insert(padded.end(), v.begin(), v.end());
    }
    FlatParamUnit unit("u", params, pg);
    const FlatParamLayout& l = unit.layout();
    EXPECT_EQ(l.offsets, (std::vector<int64_t>{0, 30, 35, 55}));
    EXPECT_EQ(unit.numel(), kNumel);
    EXPECT_EQ(unit.padded_numel(), flat_param_layout(kShapes, world).padded_numel);
    EXPECT_EQ(unit.shard_numel() * world, unit.padded_numel());
    EXPECT_EQ(unit.gather_bytes(), unit.padded_numel() * 4);
    EXPECT_EQ(unit.reduce_scatter_bytes(), unit.padded_numel() * 4);
    padded.resize(size_t(unit.padded_numel()), 0.0f);
    const auto begin = padded.begin() + l.shard_begin(rank);
    EXPECT_EQ(unit.shard().data().to_floats(),
              std::vector<float>(begin, begin + unit.shard_numel()))
        << "rank " << rank;
    EXPECT_TRUE(unit.shard().is_leaf() && unit.shard().requires_grad());
    EXPECT_EQ(unit.shard().name(), "u.flat_param");
    EXPECT_FALSE(unit.gathered());
    for (const Var& p : params) EXPECT_TRUE(p.storage_freed()) << p.name();
  });
}

// Every rank gets every parameter back bit for bit, twice; release() gives the buffer's memory
// back, and a read of a released parameter names it.
TEST_P(FlatParamOnRanks, GatherGivesEveryRankTheOriginalValuesAndReleaseFreesThem) {
  const int world = GetParam();
  on_ranks(world, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    std::vector<Var> params = unit_params(rank);
    std::vector<std::vector<uint32_t>> original;
    for (const Var& p : params) original.push_back(bits(p.data()));
    FlatParamUnit unit("u", params, pg);
    CachingAllocator& allocator = device_allocator(Device::cpu(rank));
    const auto parameter_bytes = [&] {
      return allocator.stats().current_by_category[size_t(MemoryCategory::Parameters)];
    };
    const int64_t released = parameter_bytes(), released_live = allocator.stats().current_bytes;
    const int64_t bytes = unit.padded_numel() * 4;
    for (int cycle = 0; cycle < 2; ++cycle) {
      SCOPED_TRACE("rank " + std::to_string(rank) + ", cycle " + std::to_string(cycle));
      const comm::WorkPtr work = unit.gather();
      ASSERT_NE(work, nullptr);
      EXPECT_EQ(unit.gather(), work) << "a second gather() returns the one in flight";
      unit.wait_gather();
      EXPECT_EQ(unit.gather(), nullptr) << "gathered already: nothing to issue";
      EXPECT_TRUE(unit.gathered());
      EXPECT_EQ(parameter_bytes(), released + bytes);
      for (size_t k = 0; k < params.size(); ++k) {
        EXPECT_FALSE(params[k].storage_freed());
        EXPECT_EQ(bits(params[k].data()), original[k]) << kNames[k];
      }
      unit.release();
      EXPECT_FALSE(unit.gathered());
      EXPECT_EQ(parameter_bytes(), released);
      EXPECT_EQ(allocator.stats().current_bytes, released_live);
      for (const Var& p : params) EXPECT_TRUE(p.storage_freed()) << p.name();
      const std::string read = testing::error_of<Error>([&] { params[1].data().to_floats(); });
      EXPECT_NE(read.find("parameter 'u.b'"), std::string::npos) << read;
      const std::string op = testing::error_of<Error>([&] { fn::relu(params[2]); });
      EXPECT_NE(op.find("parameter 'u.c'"), std::string::npos) << op;
      unit.release();  // released already: nothing
    }
    EXPECT_EQ(unit.traffic().gathers, 2);
    EXPECT_EQ(unit.traffic().bytes_gathered, 2 * bytes);
    EXPECT_EQ(unit.traffic().reduce_scatters, 0);
  });
}

// The stream-order sanitizer sees a unit's gathered buffer on CPU (Note [Stream-order
// sanitizer]): Gloo's all-gather writes it on the group's comm stream, and only wait_gather()
// orders the compute stream after that write. A forward that read a parameter between
// gather() and wait_gather() is the race FSDP's hooks must never have (Note [FSDP's step]):
// here it is made on purpose, after the collective has run (is_completed() is no edge the
// sanitizer models, only what the program asks for), and must fail; the same read after
// wait_gather() is the control. Every --mode fsdp run in test_fsdp_processes runs under the
// sanitizer, so the hooks' real order is checked there.
TEST(FlatParamSanitizer, ReadingAParameterBeforeTheGathersWaitIsARace) {
  sanitizer::set_enabled(true);
  on_ranks(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    std::vector<Var> params = unit_params(rank);
    FlatParamUnit unit("u", params, pg);
    const comm::WorkPtr work = unit.gather();
    ASSERT_NE(work, nullptr);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!work->is_completed() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    ASSERT_TRUE(work->is_completed()) << "rank " << rank;
    const std::string race =
        testing::error_of<sanitizer::StreamRaceError>([&] { fn::relu(params[2]); });
    EXPECT_NE(race.find("allgather"), std::string::npos) << race;
    if (rank == 0) std::printf("the sanitizer's verdict: %s\n", race.c_str());
    unit.wait_gather();
    EXPECT_NO_THROW(fn::relu(params[2])) << "the wait orders the read after the gather";
    unit.release();
  });
  sanitizer::set_enabled(false);
}

// Gradients (rank + 1) * (1 + f % 7) at flat index f, so that every sum is exact; 'u.c' has
// one on rank 0 only (unused elsewhere: zeros). Each rank's shard gradient is its chunk of the
// mean over ranks, zero on the padding; a second backward's gradients are added to it.
TEST_P(FlatParamOnRanks, ReduceScatterGivesEachRankItsChunkOfTheMeanGradient) {
  const int world = GetParam();
  on_ranks(world, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    std::vector<Var> params = unit_params(rank);
    FlatParamUnit unit("u", params, pg);
    const FlatParamLayout& l = unit.layout();
    const auto backward = [&] {
      for (size_t k = 0; k < params.size(); ++k) {
        if (k == 2 && rank != 0) continue;
        const std::vector<float> g =
            comm::testing::ramp(rank, shape_numel(kShapes[k]), l.offsets[k]);
        params[k].set_grad(Tensor::from_floats(g, kShapes[k], Device::cpu(rank)));
      }
    };
    std::vector<float> mean = comm::testing::ramp_sum(world, kNumel);
    const std::vector<float> rank0 = comm::testing::ramp(0, kNumel);
    for (int64_t f = 0; f < kNumel; ++f) {
      const bool only_rank0 = f >= l.offsets[2] && f < l.offsets[3];
      mean[size_t(f)] = (only_rank0 ? rank0[size_t(f)] : mean[size_t(f)]) / float(world);
    }
    mean.resize(size_t(l.padded_numel), 0.0f);
    const auto begin = mean.begin() + l.shard_begin(rank);
    std::vector<float> want(begin, begin + l.shard_numel);
    for (int pass = 1; pass <= 2; ++pass) {
      SCOPED_TRACE("rank " + std::to_string(rank) + ", backward " + std::to_string(pass));
      backward();
      ASSERT_NE(unit.reduce_scatter_grads(), nullptr);
      EXPECT_TRUE(unit.reduce_scatter_pending());
      for (const Var& p : params) EXPECT_FALSE(p.grad().defined()) << p.name() << " kept";
      unit.wait_reduce_scatter();
      EXPECT_FALSE(unit.reduce_scatter_pending());
      EXPECT_TRUE(testing::all_close(unit.shard().grad().to_floats(), want, 0.0f, 1e-6f));
      if (rank == world - 1 && world > 1) EXPECT_EQ(unit.shard().grad().to_floats().back(), 0.0f);
      for (float& w : want) w *= 2;  // the next pass accumulates
    }
    EXPECT_FALSE(unit.gathered()) << "reduce-scattering needs no parameter memory";
    EXPECT_EQ(unit.traffic().reduce_scatters, 2);
    EXPECT_EQ(unit.traffic().bytes_reduce_scattered, 2 * unit.padded_numel() * 4);
  });
}

// ---- A mini FSDP step ----------------------------------------------------------------------

// Linears with ReLU between them; each Linear is one FSDP unit.
struct Stack final : nn::Module {
  std::vector<std::shared_ptr<nn::Linear>> layers;
  Stack(const std::vector<int64_t>& sizes, const Device& device) {
    nn::Context ctx{device, /*seed=*/7, ""};
    for (size_t i = 0; i + 1 < sizes.size(); ++i) {
      const std::string name = std::to_string(i);
      layers.push_back(register_module(
          name, std::make_shared<nn::Linear>(ctx.child(name), sizes[i], sizes[i + 1])));
    }
  }
  Var forward(const Var& x) const {
    Var h = x;
    for (size_t i = 0; i < layers.size(); ++i) {
      const bool last = i + 1 == layers.size();
      h = layers[i]->forward(h, last ? ops::Activation::None : ops::Activation::ReLU);
    }
    return h;
  }
};

// FSDP's cycle around every Linear of a Stack (Note [Flat parameters]): a unit is gathered in
// its forward pre-hook and released in its forward hook, which hooks its outputs to gather it
// again before its backward, and to issue the previous unit's gather then (backward prefetch,
// waited in that unit's own hook). Once all its parameters' gradients are ready, the unit
// reduce-scatters them and is released. finish_backward() waits for the reduce-scatters.
class MiniFsdp {
 public:
  MiniFsdp(const Stack& model, const std::shared_ptr<ProcessGroup>& pg) {
    for (size_t i = 0; i < model.layers.size(); ++i) {
      units_.push_back(
          std::make_unique<FlatParamUnit>(std::to_string(i), model.layers[i]->parameters(), pg));
      ready_.push_back(0);
    }
    for (size_t i = 0; i < units_.size(); ++i) wrap(*model.layers[i], i);
  }

  std::vector<Var> shards() const {
    std::vector<Var> out;
    for (const auto& u : units_) out.push_back(u->shard());
    return out;
  }
  const std::vector<std::unique_ptr<FlatParamUnit>>& units() const { return units_; }
  int freed_at_ready = 0;  // gradient-ready hooks that found their unit released

  void finish_backward() {
    for (size_t i = 0; i < units_.size(); ++i) {
      EXPECT_EQ(ready_[i], units_[i]->params().size()) << "unit " << i << " was not reduced";
      units_[i]->wait_reduce_scatter();
      ready_[i] = 0;
    }
  }

 private:
  void wrap(nn::Linear& layer, size_t i) {
    FlatParamUnit* unit = units_[i].get();
    layer.register_forward_pre_hook([unit](const nn::Module&) {
      unit->gather();
      unit->wait_gather();
    });
    layer.register_forward_hook([this, unit, i](const nn::Module&, const std::vector<Var>& out) {
      unit->release();
      autograd::register_multi_grad_hook(out, [this, unit, i] {
        unit->gather();
        if (i > 0) units_[i - 1]->gather();
        unit->wait_gather();
      });
    });
    for (const Var& p : unit->params()) {
      p.register_grad_ready_hook([this, unit, i](const Var& v) {
        freed_at_ready += v.storage_freed();
        if (++ready_[i] < unit->params().size()) return;
        unit->reduce_scatter_grads();
        unit->release();
      });
    }
  }

  std::vector<std::unique_ptr<FlatParamUnit>> units_;
  std::vector<size_t> ready_;  // per unit: parameters whose gradient is ready this backward
};

const std::vector<int64_t> kSizes{6, 5, 4, 3};  // units of 35, 24 and 15 elements
constexpr int64_t kBatch = 6, kSteps = 3;

// Every test's global batches.
const testing::SyntheticBatches kBatches{kBatch, kSizes.front(), kSizes.back(), 100, 7};

Tensor batch_x(int step, const Device& device) {
  return kBatches.x(step, device);
}

std::vector<int32_t> batch_y(int step) {
  return kBatches.y(step);
}

// Parameter values by name after kSteps of SGD with momentum on one device, whole batch.
std::map<std::string, std::vector<float>> train_single_device() {
  Stack model(kSizes, Device::cpu());
  return testing::train_single_device(model, kBatches, kSteps);
}

// Rank `rank`'s FSDP training on its rows of every global batch; the parameters gathered at
// the end, by name.
std::map<std::string, std::vector<float>> train_fsdp(int rank, int world,
                                                     const std::shared_ptr<ProcessGroup>& pg) {
  const Device device = Device::cpu(rank);
  Stack model(kSizes, device);
  MiniFsdp fsdp(model, pg);
  optim::SGD sgd(fsdp.shards(), 0.1f, 0.9f, 0.0f);
  const int64_t rows = kBatch / world;
  for (int step = 0; step < kSteps; ++step) {
    const MicroBatch mine =
        testing::batch_rows(batch_x(step, device), batch_y(step), rank * rows, rows, device);
    Var loss = fn::cross_entropy(model.forward(Var(mine.x)), mine.y);
    for (const Var& p : model.parameters()) EXPECT_TRUE(p.storage_freed()) << "after forward";
    loss.backward();
    fsdp.finish_backward();
    for (const Var& p : model.parameters()) {
      EXPECT_TRUE(p.storage_freed()) << "after backward";
      EXPECT_FALSE(p.grad().defined()) << "a full gradient kept";
    }
    sgd.step();
    sgd.zero_grad();
  }
  EXPECT_EQ(fsdp.freed_at_ready, 0) << "every unit is gathered before its backward";
  std::map<std::string, std::vector<float>> out;
  for (const auto& unit : fsdp.units()) {
    unit->gather();
    unit->wait_gather();
    // One gather before each forward and each backward, and this one.
    EXPECT_EQ(unit->traffic().gathers, 2 * kSteps + 1);
    EXPECT_EQ(unit->traffic().reduce_scatters, kSteps);
  }
  for (const nn::NamedParameter& p : model.named_parameters())
    out[p.name] = p.var.data().to_floats();
  for (const auto& unit : fsdp.units()) unit->release();
  return out;
}

// FSDP's promise: sharded training equals one device training on the whole batch. On one rank
// the arithmetic is the same (bit for bit); on more, only the gradients' sum is in another
// order.
TEST_P(FlatParamOnRanks, MiniFsdpTrainsAsOneDeviceOnTheWholeBatch) {
  const int world = GetParam();
  const auto want = train_single_device();
  const Stack initial(kSizes, Device::cpu());
  for (const nn::NamedParameter& p : initial.named_parameters())
    EXPECT_NE(want.at(p.name), p.var.data().to_floats()) << "the steps left " << p.name << " as is";
  std::vector<std::map<std::string, std::vector<float>>> got(static_cast<size_t>(world));
  on_ranks(world, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    got[size_t(rank)] = train_fsdp(rank, world, pg);
  });
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(got[size_t(r)].size(), want.size()) << "rank " << r;
    for (const auto& [name, values] : want) {
      const std::vector<float>& mine = got[size_t(r)][name];
      if (world == 1) {
        EXPECT_EQ(mine, values) << name;
      } else {
        EXPECT_TRUE(testing::all_close(mine, values, 0.0f, 1e-5f)) << "rank " << r << ": " << name;
      }
    }
  }
}

}  // namespace
}  // namespace ddpb::fsdp
