// --mode fsdp through the launcher: real rank processes. Every sharding strategy trains as DDP
// and single-device training do (Note [FSDP's step]), moves the bytes its row promises
// (docs/metrics.md "Bytes on the wire"), and the flags that do not apply are refused in one
// line.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../impl_ddp/ddp_runs.h"

namespace ddpb {
namespace {

using testing::CliResult;
using testing::max_param_rel_diff;
using testing::run_cli;
using testing::TempDir;
using testing::ddp_runs::record;
using testing::ddp_runs::train;

const std::vector<std::string> kStrategies = {"fsdp", "fsdp-grad-op", "fsdp-no-shard",
                                              "fsdp-hybrid"};

struct Case {
  std::string name, args;
};

// The final parameters of `mode` against those of `reference`, printed and bounded.
double diff_against(const std::string& mode_file, const std::string& reference_file,
                    const std::string& what) {
  const double d = max_param_rel_diff(mode_file, reference_file);
  std::printf("%s: max rel diff %.3g\n", what.c_str(), d);
  return d;
}

// 5 steps of SGD with momentum: every strategy ends with DDP's parameters within 1e-5
// relative, at 3 ranks (padded shards) and 2, on mlp (every Linear a unit, no root), gpt (a
// root of the tied embedding and ln_f) and resnet (stages as units, BatchNorm buffers).
TEST(FsdpProcesses, EveryStrategyEndsWithDdpsParameters) {
  TempDir dir("fsdp_parity");
  const std::vector<Case> cases = {
      {"mlp_w3", "--workload mlp-small --world-size 3 --global-batch 12"},
      {"mlp_w2", "--workload mlp-small --world-size 2 --global-batch 8"},
      {"gpt_w2", "--workload gpt-tiny --world-size 2 --global-batch 4"},
      {"resnet_w2", "--workload resnet-tiny --world-size 2 --global-batch 4"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string ddp = train(dir, c.name + "_ddp", "--mode ddp " + c.args);
    for (const std::string& mode : kStrategies) {
      const std::string fsdp = train(dir, c.name + "_" + mode, "--mode " + mode + " " + c.args);
      EXPECT_LE(diff_against(fsdp, ddp, c.name + " " + mode + " vs ddp"), 1e-5) << mode;
      const nlohmann::json r = record(dir, c.name + "_" + mode);
      EXPECT_EQ(r["config"]["mode"], mode);
      EXPECT_EQ(r["design"]["shards_parameters"], mode != "fsdp-no-shard");
    }
  }
}

// --sync-bn: the BatchNorm layers inside FSDP's units normalise with the world's statistics
// (SyncBatchNorm's all-gather and all-reduce over the world, between the units' gathers), so
// FSDP ends where DDP with --sync-bn ends; the negative control, FSDP's plain BatchNorm, does
// not (each rank's own half of the batch). The collectives' time is the sync_bn phase.
TEST(FsdpProcesses, SyncBatchNormEndsWithDdpsSyncBatchNormParameters) {
  TempDir dir("fsdp_sync_bn");
  const std::string args = "--workload resnet-tiny --world-size 2 --global-batch 8";
  const std::string ddp = train(dir, "ddp", "--mode ddp --sync-bn " + args);
  for (const std::string& mode : {std::string("fsdp"), std::string("fsdp-grad-op")}) {
    SCOPED_TRACE(mode);
    const std::string fsdp = train(dir, mode, "--mode " + mode + " --sync-bn " + args);
    EXPECT_LE(diff_against(fsdp, ddp, mode + " --sync-bn vs ddp --sync-bn"), 1e-5);
    const nlohmann::json r = record(dir, mode);
    for (const nlohmann::json& step : r["steps"]) {
      EXPECT_TRUE(step["phases_ms"].contains("sync_bn")) << step["phases_ms"].dump();
      EXPECT_GT(step["mode"]["sync_bn_bytes"].get<int64_t>(), 0);
    }
    EXPECT_NE(r["mode"]["details"]["buffers"].get<std::string>().find("SyncBatchNorm"),
              std::string::npos);
  }
  const std::string local = train(dir, "local", "--mode fsdp " + args);
  EXPECT_GT(diff_against(local, ddp, "fsdp (plain BatchNorm) vs ddp --sync-bn"), 1e-3)
      << "per-rank statistics must differ from the world's";
}

// The same global batch on one device: the sharded step is the single step's arithmetic.
TEST(FsdpProcesses, FullShardEndsWithSingleDeviceTrainingsParameters) {
  TempDir dir("fsdp_single");
  for (const Case& c : std::vector<Case>{{"mlp", "--workload mlp-small --global-batch 8"},
                                         {"gpt", "--workload gpt-tiny --global-batch 4"}}) {
    SCOPED_TRACE(c.name);
    const std::string single = train(dir, c.name + "_single", "--mode single " + c.args);
    const std::string fsdp = train(dir, c.name + "_fsdp", "--mode fsdp --world-size 2 " + c.args);
    EXPECT_LE(diff_against(fsdp, single, c.name + " fsdp vs single"), 1e-5);
  }
}

// hybrid_shard over two shard groups of two (a shard all-reduced across groups), --sharding-
// strategy as the way to name the row, the whole model as one unit, and --accumulate.
TEST(FsdpProcesses, HybridGroupsOneUnitAndAccumulationTrainAsDdp) {
  TempDir dir("fsdp_hybrid");
  const std::string w4 = "--workload mlp-small --world-size 4 --global-batch 16";
  const std::string ddp4 = train(dir, "ddp4", "--mode ddp " + w4);
  const std::string hybrid = train(
      dir, "hybrid", "--mode fsdp --sharding-strategy hybrid_shard --shard-group-size 2 " + w4);
  EXPECT_LE(diff_against(hybrid, ddp4, "hybrid_shard 2x2 vs ddp"), 1e-5);
  const nlohmann::json h = record(dir, "hybrid");
  EXPECT_EQ(h["config"]["mode"], "fsdp-hybrid");
  EXPECT_EQ(h["mode"]["details"]["shard_group_size"], 2);
  EXPECT_EQ(h["mode"]["details"]["replicate_group_size"], 2);

  const std::string w2 = "--workload mlp-small --world-size 2 --global-batch 8";
  const std::string ddp2 = train(dir, "ddp2", "--mode ddp " + w2);
  const std::string whole = train(dir, "whole", "--mode fsdp --fsdp-wrap model " + w2);
  EXPECT_LE(diff_against(whole, ddp2, "fsdp --fsdp-wrap model vs ddp"), 1e-5);
  const nlohmann::json units = record(dir, "whole")["mode"]["details"]["units"];
  ASSERT_EQ(units.size(), 1u) << units.dump();
  EXPECT_EQ(units[0]["name"], "root");

  // Gradient accumulation: every micro-step reduce-scatters into the shard's gradient, which
  // adds up to what DDP's no_sync micro-steps and one AllReduce give.
  const std::string accumulate = w2 + " --accumulate 2";
  const std::string ddp_acc = train(dir, "ddp_acc", "--mode ddp " + accumulate);
  const std::string fsdp_acc = train(dir, "fsdp_acc", "--mode fsdp " + accumulate);
  EXPECT_LE(diff_against(fsdp_acc, ddp_acc, "fsdp --accumulate 2 vs ddp"), 1e-5);
}

// no_shard is DDP's arithmetic through FSDP's code path: a shard group of one rank, the
// gradients averaged at copy-in and all-reduced over the world. Bit for bit.
TEST(FsdpProcesses, NoShardIsDdpBitForBit) {
  TempDir dir("fsdp_no_shard");
  const std::string args = "--workload mlp-small --world-size 2 --global-batch 8";
  const std::string ddp = train(dir, "ddp", "--mode ddp " + args);
  const std::string no_shard = train(dir, "no_shard", "--mode fsdp-no-shard " + args);
  EXPECT_EQ(diff_against(no_shard, ddp, "no_shard vs ddp"), 0.0);
  // The negative control: another seed's run differs.
  const std::string other = train(dir, "other", "--mode fsdp-no-shard " + args, /*seed=*/4);
  EXPECT_GT(max_param_rel_diff(other, ddp), 1e-3);
}

// --init-from goes into the gathered parameters and from there into the shards (Note [The
// runner seam]): FSDP from a checkpoint ends where DDP from it ends, and not where it would
// from its own initialisation.
TEST(FsdpProcesses, InitFromIsLoadedIntoTheShards) {
  TempDir dir("fsdp_init_from");
  const std::string args = "--workload gpt-tiny --world-size 2 --global-batch 4";
  const std::string checkpoint = train(dir, "checkpoint",
                                       "--mode single --global-batch 4 "
                                       "--workload gpt-tiny",
                                       /*seed=*/5, /*steps=*/2);
  const std::string from = " --init-from " + checkpoint;
  const std::string ddp = train(dir, "ddp", "--mode ddp " + args + from, 3, 2);
  const std::string fsdp = train(dir, "fsdp", "--mode fsdp " + args + from, 3, 2);
  EXPECT_LE(diff_against(fsdp, ddp, "fsdp --init-from vs ddp --init-from"), 1e-5);
  const std::string fresh = train(dir, "fresh", "--mode fsdp " + args, 3, 2);
  EXPECT_GT(max_param_rel_diff(fresh, ddp), 1e-2) << "the checkpoint was not loaded";
}

// docs/metrics.md "Bytes on the wire": full_shard gathers every unit twice and reduce-scatters
// it once, 3Ψ(n-1)/n; shard_grad_op keeps the units gathered from forward to backward, 2Ψ. Ψ is
// the units' elements (mode.details), measured with each unit's padding to a multiple of n.
TEST(FsdpProcesses, FullShardMovesThreePsiAndShardGradOpTwo) {
  TempDir dir("fsdp_bytes");
  const int n = 3;
  for (const auto& [mode, factor] :
       std::vector<std::pair<std::string, double>>{{"fsdp", 3.0}, {"fsdp-grad-op", 2.0}}) {
    SCOPED_TRACE(mode);
    train(dir, mode, "--mode " + mode + " --workload mlp-small --world-size 3 --global-batch 12", 3,
          2, 1);
    const nlohmann::json r = record(dir, mode);
    double psi = 0, padded = 0;
    for (const nlohmann::json& u : r["mode"]["details"]["units"]) {
      psi += u["numel"].get<double>();
      padded += u["padded_numel"].get<double>();
    }
    EXPECT_EQ(psi, r["workload"]["parameters"].get<double>());
    const nlohmann::json& comm = r["summary"]["comm"];
    const double measured = comm["bus_bytes_per_step"].get<double>();
    const double on_wire = factor * (n - 1) / n * 4.0;  // per element, fp32
    EXPECT_DOUBLE_EQ(comm["expected_gradient_bus_bytes"].get<double>(), on_wire * psi);
    EXPECT_GE(measured, on_wire * psi);
    EXPECT_DOUBLE_EQ(measured, on_wire * padded) << "more than the padding";
    EXPECT_EQ(comm["op"], "reduce_scatter");
  }
}

// hybrid_shard at 2x2: full_shard's 3Ψ(g-1)/g within each shard group of g = 2, then each
// rank's shard, Ψ/g, all-reduced over the r = 2 groups: 2(Ψ/g)(r-1)/r. mlp-small's units are
// multiples of 2 elements, so no padding.
TEST(FsdpProcesses, HybridShardMovesItsGroupsBytes) {
  TempDir dir("fsdp_hybrid_bytes");
  train(dir, "h",
        "--mode fsdp-hybrid --shard-group-size 2 --workload mlp-small --world-size 4 "
        "--global-batch 16",
        3, 2, 1);
  const nlohmann::json r = record(dir, "h");
  const double psi = 4.0 * r["workload"]["parameters"].get<double>();
  const double g = 2, groups = 2;
  const double promise = 3.0 * psi * (g - 1) / g + 2.0 * psi / g * (groups - 1) / groups;
  const nlohmann::json& comm = r["summary"]["comm"];
  EXPECT_DOUBLE_EQ(comm["expected_gradient_bus_bytes"].get<double>(), promise);
  EXPECT_DOUBLE_EQ(comm["bus_bytes_per_step"].get<double>(), promise);
}

// Each category at its own most (Note [A category's own peak]) against Note [Model-state
// memory]'s formula plus what FSDP holds while units run: the gathered parameters (the root,
// the running unit and the prefetched one, or every unit under shard_grad_op) and the
// gradients beyond the shards' (Note [One reduce-scatter in flight]: a unit's full gradients
// beside its flat copy or the previous one's, the root's final ones): every category within 5%
// of the promise, on gpt-tiny at 3 ranks (a root with an embedding tied to the head) and
// mlp-small at 2 (no root; units of 4 MB whose reduce-scatters lag behind backward over Gloo,
// where without the rule flat copies pile up: gradients measured 1.14 of the formula). The
// sharded optimizer state is 8Ψ/N of AdamW to within the padding; full_shard holds less than
// DDP.
TEST(FsdpProcesses, MemoryIsWhatTheStrategyPromises) {
  TempDir dir("fsdp_memory");
  const std::string gpt = " --workload gpt-tiny --world-size 3 --global-batch 6 --optimizer adamw";
  const std::string mlp =
      " --workload mlp-small --world-size 2 --global-batch 16 --optimizer adamw";
  train(dir, "ddp", "--mode ddp" + gpt, 3, 3, 1);
  const nlohmann::json ddp = record(dir, "ddp")["memory"][0];
  for (const std::string& run : {std::string("fsdp") + gpt, std::string("fsdp-grad-op") + gpt,
                                 std::string("fsdp") + mlp, std::string("fsdp-grad-op") + mlp}) {
    SCOPED_TRACE(run);
    train(dir, "f", "--mode " + run, 3, 3, 1);
    const nlohmann::json r = record(dir, "f");
    const nlohmann::json& m = r["memory"][0];
    const double psi = r["workload"]["parameters"].get<double>();
    const double world = r["config"]["world_size"].get<double>();
    EXPECT_NEAR(m["by_category"]["optimizer_state"].get<double>(), 8.0 * psi / world, 4096.0);
    for (const char* category : {"parameters", "gradients", "optimizer_state", "model_state"})
      EXPECT_NEAR(m["ratio_by_category"][category].get<double>(), 1.0, 0.05) << category;
    // The promise is the formula's shard plus the transient units, never below the shard.
    EXPECT_GT(m["expected_by_category"]["parameters"].get<double>(), 4.0 * psi / world);
    if (run == std::string("fsdp") + gpt) {
      EXPECT_LT(m["by_category"]["optimizer_state"].get<double>(),
                ddp["by_category"]["optimizer_state"].get<double>() / 2);
    }
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A rank that dies mid-run (the others then fail in their next all-gather, its peer gone):
// the launcher names it, the job fails, and no record is written as if the run were complete.
TEST(FsdpFaults, ARankCrashingMidRunIsNamedAndTheJobFails) {
  TempDir dir("fsdp_crash");
  const std::string out = dir / "r.json";
  const auto t0 = std::chrono::steady_clock::now();
  const CliResult r = run_cli(
      "run --mode fsdp --world-size 3 --workload mlp-small --global-batch 24 --steps 20 "
      "--warmup 0 --quiet --timeout 5 --inject-fault crash@rank=1,step=3 --out " +
      out);
  const double secs = seconds_since(t0);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("rank 1 exited with code 3"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out)) << "no report is written as if complete";
  EXPECT_LT(secs, 30.0) << "within the timeout, not a hang";
  std::printf("crash of rank 1 at step 3: launcher returned %d after %.1f s\n", r.code, secs);
}

// A rank stuck before its forward: the others wait in the first unit's all-gather until the
// group timeout ends the job; the launcher and the doctor name the rank behind, and the
// doctor the all-gather and its unit (FSDP's tag in the flight recorder). The launcher's line
// comes from the dumps, or from the hung rank's own step watchdog when that fired first
// (Note [Step watchdog]), as in DdpFaults.HangIsDetectedAndTheDoctorNamesTheRankBehind.
TEST(FsdpFaults, AHangEndsTheJobAndTheDoctorSaysTheOthersWaitInAnAllgather) {
  TempDir dir("fsdp_hang");
  const std::string flight = dir / "flight";
  const auto t0 = std::chrono::steady_clock::now();
  const CliResult r = run_cli(
      "run --mode fsdp --world-size 3 --workload mlp-small --global-batch 24 --steps 20 "
      "--warmup 0 --quiet --timeout 3 --inject-fault hang@rank=1,step=3 --flight-dir " +
      flight);
  const double secs = seconds_since(t0);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_LT(secs, 30.0) << "detected within the timeout, not a hang";
  const bool from_dumps =
      r.output.find("ddpbench launcher: rank 1 is behind") != std::string::npos &&
      r.output.find("did not complete within the group timeout") != std::string::npos;
  const bool from_watchdog =
      r.output.find("ddpbench launcher: rank 1 exited with code 1: no progress") !=
      std::string::npos;
  EXPECT_TRUE(from_dumps || from_watchdog) << r.output;
  const CliResult doc = run_cli("doctor " + flight);
  EXPECT_EQ(doc.code, 0) << doc.output;
  EXPECT_NE(doc.output.find("verdict: rank 1 is behind"), std::string::npos) << doc.output;
  EXPECT_NE(doc.output.find("phase forward of step 3"), std::string::npos) << doc.output;
  EXPECT_NE(doc.output.find("while other ranks wait in #"), std::string::npos) << doc.output;
  EXPECT_NE(doc.output.find(" allgather (fsdp unit "), std::string::npos) << doc.output;
  EXPECT_EQ(doc.output.find("bucket"), std::string::npos) << "FSDP has no buckets\n" << doc.output;
  std::printf("hang of rank 1 detected after %.1f s (timeout 3 s); doctor says:\n%s", secs,
              doc.output.c_str());
}

// hybrid_shard's all-gathers and reduce-scatters run in shard groups, its all-reduces in
// replicate groups (Note [Sub-groups]): the dumps list them under each group's numbers, and
// the doctor names the hung rank by its shard group's, ahead of the ranks that only wait.
TEST(FsdpFaults, AHangInAHybridShardGroupIsNamedByThatGroupsCollectives) {
  TempDir dir("fsdp_hybrid_hang");
  const std::string flight = dir / "flight";
  const auto t0 = std::chrono::steady_clock::now();
  const CliResult r = run_cli(
      "run --mode fsdp --sharding-strategy hybrid_shard --shard-group-size 2 --world-size 4 "
      "--workload mlp-small --global-batch 24 --steps 20 --warmup 0 --quiet --timeout 3 "
      "--inject-fault hang@rank=3,step=3 --flight-dir " +
      flight);
  const double secs = seconds_since(t0);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_LT(secs, 40.0) << "detected within the timeout, not a hang";
  const CliResult doc = run_cli("doctor " + flight);
  EXPECT_EQ(doc.code, 0) << doc.output;
  const size_t verdict = doc.output.find("verdict: ");
  ASSERT_NE(verdict, std::string::npos) << doc.output;
  EXPECT_EQ(doc.output.find("verdict: rank 3 is behind in group ranks ", verdict), verdict)
      << doc.output;
  EXPECT_NE(doc.output.find("verdict: rank 3 is behind in group ranks 2,3: it issued"),
            std::string::npos)
      << doc.output;
  // Rank 2 has not reached the replicate group's all-reduce that rank 0 waits in: it waits in
  // its shard group's all-gather for rank 3, and is said to.
  const size_t bystander = doc.output.find("verdict: rank 2 is behind in group ranks 0,2");
  if (bystander != std::string::npos) {
    EXPECT_NE(doc.output.find("itself waiting in #", bystander), std::string::npos) << doc.output;
  }
  EXPECT_NE(doc.output.find(" allgather (fsdp unit "), std::string::npos) << doc.output;
  EXPECT_EQ(doc.output.find("none is behind"), std::string::npos) << doc.output;
  std::printf("hybrid hang of rank 3 detected after %.1f s; doctor says:\n%s", secs,
              doc.output.c_str());
}

// Each one line with the usage exit code, naming the flag.
TEST(FsdpProcesses, FlagsThatDoNotApplyAreUsageErrorsInOneLine) {
  const std::string base = "run --workload mlp-small --steps 1 ";
  const struct {
    std::string args, needle;
  } cases[] = {
      {"--mode ddp --world-size 2 --sharding-strategy full_shard", "--sharding-strategy"},
      {"--mode fsdp-hybrid --world-size 4 --global-batch 16 --shard-group-size 3",
       "--shard-group-size 3 does not divide --world-size 4"},
      {"--mode fsdp --world-size 2 --bucket-cap-mb 4", "--bucket-cap-mb is DDP's"},
      {"--mode fsdp --world-size 2 --shard-group-size 2", "--shard-group-size is hybrid_shard's"},
      {"--mode fsdp-grad-op --world-size 2 --sharding-strategy no_shard",
       "--mode fsdp-grad-op is FSDP's shard_grad_op, not --sharding-strategy no_shard"},
      {"--mode ddp --world-size 2 --no-forward-prefetch", "--no-forward-prefetch is FSDP's"},
      {"--mode fsdp --world-size 2 --zero-stage 1", "--zero-stage 1 is not a stage of --mode fsdp"},
      {"--mode fsdp --world-size 2 --static-graph", "--static-graph is DDP's"},
  };
  for (const auto& c : cases) {
    const CliResult r = run_cli(base + c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.needle), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << c.args << "\n" << r.output;
  }
}

// hybrid_shard's groups follow each node's LOCAL_WORLD_SIZE: ranks whose launchers give
// different sizes (torchrun's variables here, as two nodes of unequal size would) would build
// different groups and wait in each other's collectives for ever. The configuration
// fingerprint names the size on both ranks at the rendezvous instead, before any step.
TEST(FsdpProcesses, HybridRanksWithOtherLocalWorldSizesAreRefusedAtTheRendezvous) {
  TempDir dir("fsdp_hybrid_local");
  const std::string port = std::to_string(29801 + ::getpid() % 150);
  const std::string env = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port +
                          " WORLD_SIZE=2 DDPBENCH_STORE_TOKEN=hybrid-local-0123456789";
  const std::string args =
      " run --mode fsdp-hybrid --world-size 2 --workload mlp-small --global-batch 8 --steps 5 "
      "--warmup 0 --quiet --timeout 20";
  const std::string cmd1 = "(" + env +
                           " RANK=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 timeout -s KILL 60 " +
                           std::string(DDPBENCH_BIN) + args + " > " + (dir / "rank1.log") +
                           " 2>&1; echo $? > " + (dir / "rank1.rc") + ") &";
  ASSERT_EQ(std::system(cmd1.c_str()), 0);
  const auto t0 = std::chrono::steady_clock::now();
  const CliResult r0 = run_cli(args, env + " RANK=0 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2");
  const std::string line =
      "hybrid_shard's shard group size (--shard-group-size, else LOCAL_WORLD_SIZE) is 2 on rank 0 "
      "but 1 on rank 1";
  EXPECT_EQ(r0.code, 2) << r0.output;
  EXPECT_NE(r0.output.find(line), std::string::npos) << r0.output;
  for (int i = 0; i < 150 && !std::filesystem::exists(dir / "rank1.rc"); ++i)
    std::system("sleep 0.1");
  EXPECT_EQ(testing::read_file_bytes(dir / "rank1.rc"), "2\n");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 15.0)
      << "at once, not after a timeout";
}

// Note [Bucket blame] for units: a slow loader on rank 1 holds every unit's reduce-scatter
// back, and is named with its phase, as DDP names a bucket's holder.
TEST(FsdpBlame, ASlowLoaderIsNamedWithItsRankAndPhase) {
  TempDir dir("fsdp_blame");
  const std::string out = dir / "slow.json";
  const CliResult r = run_cli(
      "run --mode fsdp --world-size 2 --workload mlp-small --global-batch 16 --steps 8 "
      "--warmup 2 --quiet --inject-fault slow-data=40@rank=1,step=1 --out " +
      out);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream in(out);
  const nlohmann::json b =
      nlohmann::json::parse(in)["summary"].value("bucket_blame", nlohmann::json::object());
  ASSERT_TRUE(b.contains("holder")) << b.dump();
  EXPECT_EQ(b["holder"], 1) << b.dump();
  EXPECT_EQ(b.value("holder_phase", ""), "data") << b.dump();
  EXPECT_NEAR(b.value("holder_phase_excess_ms", 0.0), 40, 15) << b.dump();
  EXPECT_NE(r.output.find("fsdp: bucket blame: rank 1 holds back"), std::string::npos) << r.output;
  EXPECT_NE(b.value("finding", "").find("% of units"), std::string::npos) << b.dump();
}

// hybrid_shard shards within its group (--shard-group-size), not over the world: its promise
// and what it holds are AdamW's 8Ψ over the group's 2 ranks, not the world's 4.
TEST(FsdpProcesses, HybridShardPromisesItsShardGroupsShare) {
  TempDir dir("fsdp_hybrid_memory");
  train(dir, "hybrid",
        "--mode fsdp-hybrid --shard-group-size 2 --workload mlp-small --world-size 4 "
        "--global-batch 16 --optimizer adamw",
        3, 2, 1);
  const nlohmann::json r = record(dir, "hybrid");
  const nlohmann::json& m = r["memory"][0];
  const double psi = r["workload"]["parameters"].get<double>();
  EXPECT_NEAR(m["expected_by_category"]["optimizer_state"].get<double>(), 8.0 * psi / 2, 8.0);
  EXPECT_NEAR(m["by_category"]["optimizer_state"].get<double>(), 8.0 * psi / 2, 4096.0);
}

}  // namespace
}  // namespace ddpb
