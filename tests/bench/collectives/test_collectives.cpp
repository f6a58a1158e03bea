// `ddpbench collectives` (Note [Collectives measurement]): the sweep, nccl-tests' counts and
// table, and real ranks over Gloo checking every result and writing a record that validates.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <fstream>

#include "../../util/run_cli.h"
#include "../../util/temp_dir.h"
#include "bench/collectives/collectives.h"
#include "comm/group_team.h"
#include "comm/hash_store.h"
#include "core/check.h"

namespace ddpb::bench {
namespace {

using testing::run_cli;
using testing::TempDir;

TEST(CollectivesSweep, FactorAndStepGiveNcclTestsSizes) {
  CollectivesOptions o;
  o.min_bytes = 8, o.max_bytes = 128, o.step_factor = 2;
  EXPECT_EQ(sweep_sizes(o), (std::vector<int64_t>{8, 16, 32, 64, 128}));
  o.step_factor = 3;
  EXPECT_EQ(sweep_sizes(o), (std::vector<int64_t>{8, 24, 72}));
  o.step_bytes = 50;
  EXPECT_EQ(sweep_sizes(o), (std::vector<int64_t>{8, 58, 108}));
  o.min_bytes = 256;
  EXPECT_THROW(sweep_sizes(o), UsageError);  // -b above -e
  o = {};
  o.step_factor = 1;
  EXPECT_THROW(sweep_sizes(o), UsageError);  // endless
}

TEST(CollectivesSweep, CountsSplitEvenlyWhereTheOpSplits) {
  EXPECT_EQ(collective_count(CollectiveOp::AllReduce, 1000, 3, DType::F32), 250);
  EXPECT_EQ(collective_count(CollectiveOp::AllGather, 1000, 3, DType::F32), 249);
  EXPECT_EQ(collective_count(CollectiveOp::ReduceScatter, 8, 4, DType::F32), 0);
  EXPECT_EQ(collective_count(CollectiveOp::Broadcast, 1000, 3, DType::BF16), 500);
}

// Note [Settling]: every rank runs the same settling rounds (else the sweep would deadlock),
// for at least kSettleNs, before the sweep's own collectives; rank 0 gets every size.
TEST(CollectivesSweep, TheRanksSettleTogetherBeforeTheFirstSize) {
  comm::GroupTeam team("gloo", 2, std::chrono::seconds(30));
  comm::HashStore store;
  CollectivesOptions o;
  o.min_bytes = 1024, o.max_bytes = 2048, o.iters = 2, o.warmup = 1;
  std::vector<int64_t> issued(2);
  std::vector<std::vector<reports::CollectiveResult>> results(2);
  const auto t0 = std::chrono::steady_clock::now();
  team.run([&](int rank, comm::ProcessGroup& pg) {
    results[static_cast<size_t>(rank)] = run_collectives(pg, store, Device::cpu(rank), o, 0);
    issued[static_cast<size_t>(rank)] = pg.barrier()->sequence;
  });
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  // Per size: 1 warm-up, the barrier before the timed loop, 2 timed and 2 probes.
  const int64_t sweep = 2 * (1 + 1 + 2 + 2);
  const int64_t settling = issued[0] - sweep;
  EXPECT_EQ(issued[0], issued[1]);
  EXPECT_GE(settling, kSettleRound + 1);
  EXPECT_EQ(settling % (kSettleRound + 1), 0) << "whole rounds of operations and their flag";
  EXPECT_GE(elapsed, std::chrono::nanoseconds(kSettleNs));
  ASSERT_EQ(results[0].size(), 2u);
  EXPECT_EQ(results[0][0].size_bytes, 1024);
  EXPECT_EQ(results[0][1].size_bytes, 2048);
  EXPECT_TRUE(results[1].empty());
}

TEST(CollectivesTable, NcclTestsColumnsAverageBusbwAndTheLastRank) {
  std::vector<reports::CollectiveResult> results(2);
  results[0].op = results[1].op = "allreduce";
  results[0].in_place = results[1].in_place = true;
  results[0].size_bytes = 1024, results[0].count = 256, results[0].time_us = 10;
  results[0].algbw_GBps = 0.1024, results[0].busbw_GBps = 0.1536, results[0].last_rank = 2;
  results[1].size_bytes = 2048, results[1].count = 512, results[1].time_us = 12;
  results[1].algbw_GBps = 0.17, results[1].busbw_GBps = 0.2464, results[1].last_rank = 2;
  results[0].wrong = 0, results[1].wrong = 3;
  const auto summary = summarize_collectives(results, 3);
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_NEAR(summary[0].avg_busbw_GBps, (0.1536 + 0.2464) / 2, 1e-12);
  EXPECT_EQ(summary[0].wrong.value_or(-1), 3);
  EXPECT_EQ(summary[0].last_rank.value_or(-1), 2);
  EXPECT_EQ(summary[0].last_rank_sizes, 2);
  EXPECT_DOUBLE_EQ(summary[0].busbw.factor, 2.0 * 2 / 3);
  const std::string t = collectives_table(results, summary[0], DType::F32, true, false);
  EXPECT_NE(t.find("in-place"), std::string::npos) << t;
  EXPECT_NE(t.find("#       size         count      type   redop    root     time   algbw   "
                   "busbw #wrong"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("        1024           256     float     sum      -1    10.00    0.10    0.15"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("# Out of bounds values : 3 FAILED"), std::string::npos) << t;
  EXPECT_NE(t.find("# Avg bus bandwidth    : 0.2 "), std::string::npos) << t;
  EXPECT_NE(t.find("# Arrived last         : rank 2 at 2 of the sizes"), std::string::npos) << t;
}

nlohmann::json read(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(CollectivesCommand, EveryOpOnTwoGlooRanksIsRightAndTheRecordValidates) {
  TempDir dir("collectives_all");
  const std::string out = dir / "c.json";
  const auto r = run_cli(
      "collectives -g 2 -b 1K -e 64K -f 4 "
      "-o allreduce,allgather,reduce_scatter,broadcast,reduce,alltoall,sendrecv -c -I -n 4 -w 1 "
      "-J " +
      out);
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* op : {"# allreduce: busbw = algbw * 2(n-1)/n",
                         "# allgather:", "# reduce_scatter:", "# broadcast:"})
    EXPECT_NE(r.output.find(op), std::string::npos) << op << "\n" << r.output;
  EXPECT_NE(r.output.find("out-of-place"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("FAILED"), std::string::npos) << r.output;
  const auto rec = read(out);
  EXPECT_EQ(rec["kind"], "collectives");
  ASSERT_EQ(rec["results"].size(), 28u) << "7 ops x 1K, 4K, 16K, 64K";
  for (const auto& x : rec["results"]) {
    EXPECT_EQ(x["wrong"], 0) << x.dump();
    EXPECT_GT(x["time_us"].get<double>(), 0) << x.dump();
    EXPECT_TRUE(x.contains("p50_us") && x.contains("p99_us")) << x.dump();
    // nccl-tests' factors at 2 ranks: 2(n-1)/n = 1 for allreduce, 1 for broadcast, reduce and
    // sendrecv, (n-1)/n = 1/2 for allgather, reduce_scatter and alltoall.
    const std::string op = x["op"];
    const double factor =
        op == "allgather" || op == "reduce_scatter" || op == "alltoall" ? 0.5 : 1.0;
    EXPECT_NEAR(x["busbw_GBps"].get<double>(), factor * x["algbw_GBps"].get<double>(), 1e-9);
    EXPECT_NEAR(x["algbw_GBps"].get<double>(),
                x["size_bytes"].get<double>() / x["time_us"].get<double>() / 1e3, 1e-9);
  }
  ASSERT_EQ(rec["ops"].size(), 7u);
  const auto v = run_cli("validate " + out);
  EXPECT_EQ(v.code, 0) << v.output;
}

// Over MPI, started through mpirun by ddpbench itself; every operation of the sweep runs in an
// issue burst, on the issuing thread (Note [Issue bursts]), and every result is checked.
TEST(CollectivesCommand, EveryOpOnTwoMpiRanksIsRightAndTheRecordValidates) {
  TempDir dir("collectives_mpi");
  const std::string out = dir / "c.json";
  const auto r = run_cli(
      "collectives --backend mpi -g 2 -b 1K -e 64K -f 8 "
      "-o allreduce,allgather,reduce_scatter,broadcast,reduce,alltoall,sendrecv -c -I -n 3 -w 1 "
      "--timeout 60 -J " +
      out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("through mpirun"), std::string::npos) << r.output;
  const auto rec = read(out);
  EXPECT_EQ(rec["config"]["backend"], "mpi");
  ASSERT_EQ(rec["results"].size(), 21u) << "7 ops x 1K, 8K, 64K";
  for (const auto& x : rec["results"]) {
    EXPECT_EQ(x["wrong"], 0) << x.dump();
    EXPECT_GT(x["time_us"].get<double>(), 0) << x.dump();
  }
  const auto v = run_cli("validate " + out);
  EXPECT_EQ(v.code, 0) << v.output;
}

TEST(CollectivesCommand, HalfPrecisionSumsAreCheckedOnThreeRanks) {
  for (const char* dtype : {"bf16", "f16"}) {
    const auto r =
        run_cli(std::string("collectives -g 3 -b 96 -e 6K -f 8 -o allreduce,reduce_scatter "
                            "-c -n 3 -w 0 -d ") +
                dtype);
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find(std::string(dtype) == "bf16" ? "bfloat16" : "half"), std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("FAILED"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("# Out of bounds values : 0 OK"), std::string::npos) << r.output;
  }
}

TEST(CollectivesCommand, RootedAndPairwiseExchangesAreRightOnThreeRanks) {
  // reduce to rank 0, alltoall's personalised chunks and the ring's sendrecv: each result
  // differs from every other rank's, so a chunk from the wrong peer is counted.
  const auto r =
      run_cli("collectives -g 3 -b 120 -e 12K -f 10 -o reduce,alltoall,sendrecv -c -n 3 -w 1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("FAILED"), std::string::npos) << r.output;
  size_t ok = 0;
  for (size_t at = r.output.find("Out of bounds values : 0 OK"); at != std::string::npos;
       at = r.output.find("Out of bounds values : 0 OK", at + 1))
    ++ok;
  EXPECT_EQ(ok, 3u) << r.output;
}

// Under torchrun's, mpirun's and srun's environment each process is one rank: two started by
// hand with only those variables (and MASTER_ADDR/MASTER_PORT) set, the record names the
// launcher.
TEST(CollectivesCommand, RunsAsTheRanksOfTorchrunMpirunAndSlurm) {
  TempDir dir("collectives_ext");
  struct Scheme {
    std::string name, rank_var, size_var, local_var;
    int port;
  };
  for (const Scheme& s :
       {Scheme{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", 29621},
        Scheme{"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
               "OMPI_COMM_WORLD_LOCAL_RANK", 29623},
        Scheme{"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", 29625}}) {
    auto env = [&](int rank) {
      return "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(s.port) + " " + s.size_var +
             "=2 " + s.rank_var + "=" + std::to_string(rank) + " " + s.local_var + "=" +
             std::to_string(rank);
    };
    const std::string out = dir / (s.name + ".json");
    const std::string args = "collectives -b 1K -e 4K -f 4 -c -n 2 -w 0 --timeout 20 -J " + out;
    const std::string cmd1 = "(" + env(1) + " " + std::string(DDPBENCH_BIN) + " " + args + " > " +
                             (dir / (s.name + "1.log")) + " 2>&1) &";
    ASSERT_EQ(std::system(cmd1.c_str()), 0);
    const auto r0 = run_cli(args, env(0));
    ASSERT_EQ(r0.code, 0) << s.name << "\n" << r0.output;
    EXPECT_NE(r0.output.find("# Out of bounds values : 0 OK"), std::string::npos) << r0.output;
    const auto rec = read(out);
    EXPECT_EQ(rec["config"]["launcher"], s.name);
    EXPECT_EQ(rec["config"]["world_size"], 2);
  }
}

TEST(CollectivesCommand, BadFlagsAreOneLineUsageErrorsBeforeAnyRankStarts) {
  for (const char* flags : {"-b 1K -e 8", "-o allreduce,nope", "-f 1", "-b 12Q", "-d f64", "-n 0",
                            "--device tpu", "-J /nonexistent-dir/x.json"}) {
    const auto r = run_cli(std::string("collectives ") + flags);
    EXPECT_EQ(r.code, 2) << flags << "\n" << r.output;
    EXPECT_EQ(r.output.find("launcher: starting"), std::string::npos) << flags << r.output;
  }
}

}  // namespace
}  // namespace ddpb::bench
