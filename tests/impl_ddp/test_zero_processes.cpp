// Note [ZeRO in DDP]: ZeRO stages 1 and 2 train exactly as plain DDP does, move the paper's
// 2Ψ, and refuse what they cannot keep, naming both flags. Real ranks through the launcher.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "ddp_runs.h"

namespace ddpb {
namespace {

using testing::CliResult;
using testing::max_param_rel_diff;
using testing::run_cli;
using testing::TempDir;
using testing::ddp_runs::record;
using testing::ddp_runs::train;

struct Case {
  std::string name, args;
};

// The same final parameters as DDP within 1e-5 relative: SGD with momentum and AdamW, on
// mlp, gpt and resnet (BatchNorm buffers), at 3 ranks (padded shards) and 2.
TEST(Zero, BothStagesEndWithDdpsParameters) {
  TempDir dir("zero_parity");
  const std::vector<Case> cases = {
      {"mlp_sgd", "--workload mlp-small --world-size 3 --global-batch 24"},
      {"mlp_adamw",
       "--workload mlp-small --world-size 2 --global-batch 16 --optimizer adamw --momentum 0.9"},
      {"gpt", "--workload gpt-tiny --world-size 3 --global-batch 6"},
      {"resnet", "--workload resnet-tiny --world-size 2 --global-batch 8 --bucket-cap-mb 0.05"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string args = c.args;
    if (args.find("adamw") != std::string::npos) args.erase(args.find(" --momentum 0.9"));
    const std::string ddp = train(dir, c.name + "_ddp", "--mode ddp " + args);
    for (const std::string stage : {"zero1", "zero2", "zero1-pytorch"}) {
      const std::string zero = train(dir, c.name + "_" + stage, "--mode " + stage + " " + args);
      const double d = max_param_rel_diff(zero, ddp);
      std::printf("%s %s vs ddp: max rel diff %.3g\n", c.name.c_str(), stage.c_str(), d);
      EXPECT_LE(d, 1e-5) << stage;
      const nlohmann::json r = record(dir, c.name + "_" + stage);
      EXPECT_EQ(r["config"]["mode"], stage);
      EXPECT_EQ(r["config"]["zero_stage"], stage[4] - '0');
      const bool pytorch = stage == "zero1-pytorch";
      EXPECT_EQ(r["config"]["zero_variant"], pytorch ? "pytorch" : "paper");
      EXPECT_EQ(r["summary"]["comm"]["op"], pytorch ? "allreduce" : "reduce_scatter");
      // The parameters after the optimizer: an all-gather, or PyTorch's broadcasts.
      std::vector<std::string> ops;
      for (const nlohmann::json& op : r["summary"]["comm"]["by_op"]) ops.push_back(op["op"]);
      EXPECT_NE(std::find(ops.begin(), ops.end(), pytorch ? "broadcast" : "allgather"), ops.end())
          << "the stage ran as plain DDP";
    }
  }
}

// DDP's flags keep their meaning under both stages (Note [ZeRO in DDP]): gradient
// accumulation (no_sync), a static graph, unused parameters (mlp-skip's branch, skipped in
// some steps), SyncBatchNorm and reducing after backward each end where DDP with the same
// flag ends.
TEST(Zero, DdpsFlagsKeepTheirMeaningUnderBothStages) {
  TempDir dir("zero_flags");
  const std::vector<Case> cases = {
      {"accumulate", "--workload mlp-small --global-batch 16 --accumulate 2"},
      {"static", "--workload mlp-small --global-batch 16 --static-graph"},
      {"unused", "--workload mlp-skip --global-batch 16 --find-unused-params"},
      {"sync_bn", "--workload resnet-tiny --global-batch 8 --sync-bn --bucket-cap-mb 0.05"},
      {"no_overlap", "--workload mlp-small --global-batch 16 --no-overlap"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string args = c.args + " --world-size 2";
    const std::string ddp = train(dir, c.name + "_ddp", "--mode ddp " + args, 3, 4);
    for (const std::string stage : {"zero1", "zero2"}) {
      const std::string zero =
          train(dir, c.name + "_" + stage, "--mode " + stage + " " + args, 3, 4);
      EXPECT_LE(max_param_rel_diff(zero, ddp), 1e-5) << stage;
    }
  }
}

// Note [DDP Join] under ZeRO: gpt-tiny on 2500 tokens, each rank its own share, so rank 1 runs
// out a step before rank 0. The joined rank still owns a shard: it steps it with the active
// rank's average and takes its part in the gather, so every stage ends where DDP with Join
// ends (a shard left unstepped would differ by a whole step's update).
TEST(Zero, AJoinedRankStillStepsItsShard) {
  TempDir dir("zero_join");
  const std::string tokens = dir / "tokens";
  const CliResult made = run_cli("data make tokens --tokens 2500 --shards 1 --out " + tokens);
  ASSERT_EQ(made.code, 0) << made.output;
  const std::string args = "--workload gpt-tiny --world-size 2 --global-batch 4 --data " + tokens +
                           " --epochs 1 --sampler unpadded --uneven-inputs join";
  const std::string ddp = train(dir, "ddp", "--mode ddp " + args, 3, 100);
  for (const std::string stage : {"zero1", "zero2", "zero1-pytorch"}) {
    const std::string zero = train(dir, stage, "--mode " + stage + " " + args, 3, 100);
    EXPECT_LE(max_param_rel_diff(zero, ddp), 1e-5) << stage;
  }
}

// PyTorch's variant moves half as much again: the AllReduce's 2Ψ(n-1)/n and Ψ of broadcasts.
TEST(Zero, PyTorchsVariantAddsABroadcastOfEveryParameter) {
  TempDir dir("zero_pytorch_bytes");
  train(dir, "z",
        "--mode ddp --zero-stage 1 --zero-variant pytorch --workload mlp-small --world-size 2 "
        "--global-batch 16");
  const nlohmann::json r = record(dir, "z");
  EXPECT_EQ(r["config"]["mode"], "zero1-pytorch");
  const double gradients = 4.0 * r["workload"]["parameters"].get<double>();
  const nlohmann::json& comm = r["summary"]["comm"];
  EXPECT_DOUBLE_EQ(comm["expected_gradient_bus_bytes"].get<double>(), 2 * gradients);
  EXPECT_DOUBLE_EQ(comm["gradient_bus_bytes_per_step"].get<double>(), 2 * gradients);
}

// docs/metrics.md "Bytes on the wire": a reduce-scatter and an all-gather of the padded
// buckets, 2(n-1)/n of the gradients to within the padding; the all-gather is its own phase.
TEST(Zero, MovesThePapersTwoPsiAndGathersInItsOwnPhase) {
  TempDir dir("zero_bytes");
  train(dir, "z2",
        "--mode ddp --zero-stage 2 --workload mlp-small --world-size 3 --global-batch 24");
  const nlohmann::json r = record(dir, "z2");
  EXPECT_EQ(r["config"]["mode"], "zero2") << "--mode ddp --zero-stage 2 is the row zero2";
  const nlohmann::json& comm = r["summary"]["comm"];
  EXPECT_EQ(comm["op"], "reduce_scatter");
  const double gradients = 4.0 * r["workload"]["parameters"].get<double>();
  const double measured = comm["gradient_bus_bytes_per_step"].get<double>();
  EXPECT_DOUBLE_EQ(comm["expected_gradient_bus_bytes"].get<double>(), gradients * 4 / 3);
  const int64_t buckets = static_cast<int64_t>(r["mode"]["details"]["buckets_rebuilt"].size());
  EXPECT_GE(measured, gradients * 4 / 3);
  EXPECT_LE(measured, gradients * 4 / 3 + 2.0 * buckets * 3 * 4) << "more than the padding";
  std::vector<std::string> ops;
  for (const nlohmann::json& op : comm["by_op"]) ops.push_back(op["op"]);
  EXPECT_EQ(ops, (std::vector<std::string>{"reduce_scatter", "allgather"}));
  bool gathered = false;
  for (const nlohmann::json& p : r["summary"]["phases_median_ms"])
    gathered = gathered || (p["phase"] == "param_allgather" && p["kind"] == "communication");
  EXPECT_TRUE(gathered);
}

// Note [Model-state memory]: each rank holds what its design's formula promises, at the peak
// of the measured steps: DDP 16Ψ and ZeRO-1 8Ψ + 8Ψ/N exactly (AdamW, fp32). ZeRO-2 holds 4Ψ/N
// of gradients plus the buckets in flight (Note [ZeRO gradient release]): with small buckets
// a few of them, with buckets as large as the model all of them, which the record's ratio
// says. Each category is taken at its own most (Note [A category's own peak]), over steps
// after the first two: DDP rebuilds its buckets after its first iteration, and for a moment
// holds the old buckets beside the new (twice the gradients), which a measured step would
// include.
TEST(Zero, EveryStageHoldsWhatItsFormulaPromises) {
  TempDir dir("zero_memory");
  const std::string args = " --workload gpt-tiny --world-size 2 --optimizer adamw";
  const std::string small_buckets = " --bucket-cap-mb 0.1 --first-bucket-mb 0.1";
  train(dir, "ddp", "--mode ddp" + args, 3, 3, 2);
  train(dir, "zero1", "--mode zero1" + args, 3, 3, 2);
  train(dir, "zero2", "--mode zero2" + args + small_buckets, 3, 3, 2);
  train(dir, "zero2_big", "--mode zero2" + args, 3, 3, 2);
  const double psi = record(dir, "ddp")["workload"]["parameters"].get<double>();
  const auto memory = [&](const std::string& name, int rank) {
    return record(dir, name)["ranks"][rank]["memory"][0];
  };
  const struct {
    const char* name;
    double parameters, gradients, optimizer_state;
  } formulas[] = {{"ddp", 4, 4, 8}, {"zero1", 4, 4, 4}, {"zero2", 4, 2, 4}, {"zero2_big", 4, 2, 4}};
  for (int rank : {0, 1}) {
    for (const auto& f : formulas) {
      const nlohmann::json m = memory(f.name, rank);
      SCOPED_TRACE(std::string(f.name) + " rank " + std::to_string(rank) + ": " + m.dump());
      EXPECT_NEAR(m["expected_by_category"]["parameters"].get<double>(), f.parameters * psi, 1);
      EXPECT_NEAR(m["expected_by_category"]["gradients"].get<double>(), f.gradients * psi, 1);
      EXPECT_NEAR(m["expected_by_category"]["optimizer_state"].get<double>(),
                  f.optimizer_state * psi, 1);
      EXPECT_NEAR(m["ratio_by_category"]["parameters"].get<double>(), 1.0, 0.05);
      EXPECT_NEAR(m["ratio_by_category"]["optimizer_state"].get<double>(), 1.0, 0.05);
    }
    EXPECT_NEAR(memory("ddp", rank)["ratio_by_category"]["model_state"].get<double>(), 1.0, 0.05);
    EXPECT_NEAR(memory("zero1", rank)["ratio_by_category"]["model_state"].get<double>(), 1.0, 0.05);
    // Note [ZeRO gradient release]: besides its shard, ZeRO-2 holds at most the two launched
    // buckets, the one filling, the next one ready for it, and one early gradient on its way
    // in: five of its largest buckets however many it has.
    const nlohmann::json zero2 = record(dir, "zero2");
    double largest = 0;
    for (const nlohmann::json& b : zero2["summary"]["comm"]["buckets"])
      largest = std::max(largest, b["bytes"].get<double>());
    ASSERT_GT(zero2["summary"]["comm"]["buckets"].size(), 5u);
    EXPECT_LE(memory("zero2", rank)["by_category"]["gradients"].get<double>(),
              2 * psi + 5 * largest);
    EXPECT_GT(memory("zero2_big", rank)["ratio_by_category"]["gradients"].get<double>(), 1.4);
  }
}

TEST(Zero, WhatAStageCannotKeepIsAUsageErrorNamingBothFlags) {
  const std::string base = "run --workload mlp-small --steps 1 --world-size 2 ";
  const struct {
    std::string args, needle;
  } cases[] = {
      {"--mode zero1 --comm-hook fp16",
       "--comm-hook fp16 compresses DDP's AllReduce, which "
       "--zero-stage 1 replaces"},
      {"--mode zero2 --grad-as-bucket-view", "--grad-as-bucket-view"},
      {"--mode zero2 --bucket-cap-mb auto --warmup 8", "--bucket-cap-mb auto"},
      {"--mode zero1 --zero-stage 2", "--mode zero1 is ZeRO stage 1, not --zero-stage 2"},
      {"--mode dp --zero-stage 1", "--zero-stage 1 is not a stage of --mode dp"},
      {"--mode ddp --zero-stage 2 --zero-variant pytorch",
       "--zero-stage 2 --zero-variant pytorch is not a stage of --mode ddp"},
  };
  for (const auto& c : cases) {
    const CliResult r = run_cli(base + c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.needle), std::string::npos) << c.args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace ddpb
