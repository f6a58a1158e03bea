// `ddpbench collectives` (Note [Collectives measurement]): the sweep, nccl-tests' counts and
// table, and real ranks over Gloo checking every result and writing a record that validates.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <utility>

#include "../../util/run_cli.h"
#include "../../util/temp_dir.h"
#include "bench/collectives/collectives.h"
#include "comm/group_team.h"
#include "comm/hash_store.h"
#include "core/check.h"
#include "reports/schema_validator.h"

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
    results[static_cast<size_t>(rank)] = run_collectives(pg, store, Device::cpu(rank), o, {});
    issued[static_cast<size_t>(rank)] = pg.barrier()->sequence;
  });
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  // Per size: 1 warm-up, the barrier before the timed loop, 2 timed and 2 probes; before the
  // sizes, the clock's exchanges (an allreduce and a broadcast each).
  const int64_t sweep = 2 * (1 + 1 + 2 + 2) + 2 * kClockRounds;
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
  reports::CollectivesConfigInfo config;
  config.dtype = "f32", config.check = true, config.world_size = 3;
  const std::string t = collectives_table(results, summary[0], config);
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

// Note [Arrivals against the clocks], with synthetic stamps: rank r's arrivals at each probe
// and its offset's uncertainty, in ns.
TEST(CollectivesArrivals, TheSkewCountsOnlyBeyondTheClocksUncertainty) {
  const std::vector<std::vector<int64_t>> two = {{0, 0, 0}, {50'000, 40'000, 60'000}};
  const Arrivals sure = summarize_arrivals(two, {0, 10'000});
  EXPECT_DOUBLE_EQ(sure.skew_us, 50);
  EXPECT_DOUBLE_EQ(sure.skew_uncertainty_us, 10);
  EXPECT_EQ(sure.last_rank.value_or(-1), 1);
  EXPECT_DOUBLE_EQ(sure.last_rank_share, 1.0);
  // Negative control: the same stamps against offsets known to 80 us resolve nothing.
  const Arrivals unsure = summarize_arrivals(two, {0, 80'000});
  EXPECT_DOUBLE_EQ(unsure.skew_us, 50);
  EXPECT_DOUBLE_EQ(unsure.skew_uncertainty_us, 80);
  EXPECT_FALSE(unsure.last_rank.has_value());
  EXPECT_DOUBLE_EQ(unsure.last_rank_share, 0);
  // Three ranks: the skew's uncertainty is the two largest offsets' together, and the last
  // rank must lead the next-latest, not the first, by their two uncertainties.
  const std::vector<std::vector<int64_t>> three = {{0}, {100'000}, {103'000}};
  const Arrivals led = summarize_arrivals(three, {0, 1'000, 1'000});
  EXPECT_DOUBLE_EQ(led.skew_us, 103);
  EXPECT_DOUBLE_EQ(led.skew_uncertainty_us, 2);
  EXPECT_EQ(led.last_rank.value_or(-1), 2);
  const Arrivals close = summarize_arrivals(three, {0, 2'000, 2'000});
  EXPECT_DOUBLE_EQ(close.skew_uncertainty_us, 4);
  EXPECT_FALSE(close.last_rank.has_value()) << "a 3 us lead within 2 + 2 us";
  EXPECT_TRUE(beyond_uncertainty(close.skew_us, close.skew_uncertainty_us));
  const Arrivals one = summarize_arrivals({{5, 6}}, {0});
  EXPECT_DOUBLE_EQ(one.skew_us, 0);
  EXPECT_FALSE(one.last_rank.has_value());
  EXPECT_TRUE(beyond_uncertainty(1.01, 1.0));
  EXPECT_FALSE(beyond_uncertainty(1.0, 1.0));
}

TEST(CollectivesTable, UnresolvedSkewAndLastRankAreMarkedWithALegend) {
  std::vector<reports::CollectiveResult> results(2);
  for (auto& r : results) r.op = "allreduce", r.in_place = true, r.skew_uncertainty_us = 12.5;
  results[0].size_bytes = 8, results[0].arrival_skew_us = 40, results[0].last_rank = 1;
  results[1].size_bytes = 16, results[1].arrival_skew_us = 3.25;  // no last rank resolved
  EXPECT_EQ(skew_cell(results[0], 2), "40.0");
  EXPECT_EQ(skew_cell(results[1], 2), "<15.8");
  EXPECT_EQ(last_rank_cell(results[0], 2), "1");
  EXPECT_EQ(last_rank_cell(results[1], 2), "?");
  EXPECT_EQ(skew_cell(results[0], 1), "-");
  EXPECT_EQ(last_rank_cell(results[0], 1), "-");
  reports::CollectivesConfigInfo config;
  config.dtype = "f32", config.world_size = 2;
  const auto summary = summarize_collectives(results, 2);
  const std::string t = collectives_table(results, summary[0], config);
  EXPECT_NE(t.find("     40.0     1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("    <15.8     ?\n"), std::string::npos) << t;
  EXPECT_NE(t.find("# skew <X"), std::string::npos) << t;
  EXPECT_NE(t.find("(12.5 us)"), std::string::npos) << t;
  EXPECT_NE(t.find("# last rank ?"), std::string::npos) << t;
  EXPECT_NE(t.find("# Arrived last         : rank 1 at 1 of the sizes"), std::string::npos) << t;
  // Negative control: every row resolved, no legend.
  results[1].arrival_skew_us = 30, results[1].last_rank = 1;
  const std::string sure = collectives_table(results, summarize_collectives(results, 2)[0], config);
  EXPECT_EQ(sure.find("# skew <X"), std::string::npos) << sure;
  EXPECT_EQ(sure.find("# last rank ?"), std::string::npos) << sure;
  EXPECT_EQ(sure.find('<'), std::string::npos) << sure;
}

// A record from before the clock was measured (no skew_uncertainty_us, no clock) validates,
// reads, and shows its skew as it was measured.
TEST(CollectivesRecord, RecordsWithoutTheClockStillValidateAndRead) {
  reports::CollectivesRecord rec;
  rec.config.backend = "gloo", rec.config.device = "cpu", rec.config.dtype = "f32";
  rec.config.world_size = 2, rec.config.iters = 1;
  reports::CollectiveResult r;
  r.op = "allreduce", r.arrival_skew_us = 7, r.skew_uncertainty_us = 9, r.last_rank = 1;
  rec.results = {r};
  rec.ops = summarize_collectives(rec.results, 2);
  rec.clock = reports::CollectivesClock{{0, 3}, {0, 9}};
  nlohmann::json j = rec.to_json();
  EXPECT_TRUE(reports::validate_collectives_record(j).empty())
      << reports::format_errors(reports::validate_collectives_record(j));
  EXPECT_EQ(reports::CollectivesRecord::from_json(j).clock->uncertainty_us[1], 9);
  j.erase("clock");
  j["results"][0].erase("skew_uncertainty_us");
  EXPECT_TRUE(reports::validate_collectives_record(j).empty())
      << reports::format_errors(reports::validate_collectives_record(j));
  const auto old = reports::CollectivesRecord::from_json(j);
  EXPECT_FALSE(old.clock.has_value());
  ASSERT_EQ(old.results.size(), 1u);
  EXPECT_FALSE(old.results[0].skew_uncertainty_us.has_value());
  EXPECT_EQ(skew_cell(old.results[0], 2), "7.0");
  // Negative control: a negative uncertainty does not validate.
  j["clock"] = {{"offset_us", {0, 1}}, {"uncertainty_us", {0, -1}}};
  EXPECT_FALSE(reports::validate_collectives_record(j).empty());
}

// Note [Clock offset through the store]: on one clock (threads of this process) the true offset
// is 0, and the estimate is within its uncertainty of it.
TEST(CollectivesClock, TheStoreExchangeBoundsTheTrueOffset) {
  comm::HashStore store;
  store.set_timeout(std::chrono::seconds(10));
  std::vector<comm::ClockOffset> got(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.emplace_back(
        [&, r] { got[static_cast<size_t>(r)] = comm::measure_clock_offset(store, r, 3); });
  for (auto& t : ranks) t.join();
  EXPECT_EQ(got[0].offset_ns, 0);
  EXPECT_EQ(got[0].uncertainty_ns, 0);
  for (int r = 1; r < 3; ++r) {
    EXPECT_GT(got[static_cast<size_t>(r)].uncertainty_ns, 0) << r;
    EXPECT_LE(std::llabs(got[static_cast<size_t>(r)].offset_ns),
              got[static_cast<size_t>(r)].uncertainty_ns)
        << r;
  }
}

// Note [Clock offset for arrivals]: the exchanges over the group replace a looser offset with
// one whose uncertainty still bounds the true offset (0: one clock).
TEST(CollectivesClock, TheGroupExchangeTightensTheRendezvousOffset) {
  comm::GroupTeam team("gloo", 2, std::chrono::seconds(30));
  // 0.5 s, known to 1 s: true but loose, and far above what the best of the exchanges' round
  // trips can be even on a loaded machine.
  const comm::ClockOffset loose{500'000'000, 1'000'000'000};
  std::vector<comm::ClockOffset> got(2);
  team.run([&](int rank, comm::ProcessGroup& pg) {
    got[static_cast<size_t>(rank)] = refine_clock_offset(pg, Device::cpu(rank), loose);
  });
  EXPECT_EQ(got[0].offset_ns, 0);
  EXPECT_EQ(got[0].uncertainty_ns, 0);
  EXPECT_GT(got[1].uncertainty_ns, 0);
  EXPECT_LT(got[1].uncertainty_ns, loose.uncertainty_ns);
  EXPECT_LE(std::llabs(got[1].offset_ns), got[1].uncertainty_ns);
  // The check can fail: the loose offset is not within the refined uncertainty of the truth.
  EXPECT_GT(std::llabs(loose.offset_ns), got[1].uncertainty_ns);
}

// Note [Clock offset for arrivals]: ranks of rank 0's host take offset 0, exactly; another
// host's (another boot id) or an unknown clock does not.
TEST(CollectivesClock, RanksOfRankZerosHostShareItsClock) {
  const std::string here = clock_identity();
  ASSERT_FALSE(here.empty()) << "/proc/sys/kernel/random/boot_id";
  EXPECT_EQ(clock_identity(), here);
  comm::HashStore store;
  store.set_timeout(std::chrono::seconds(10));
  EXPECT_TRUE(shares_rank0_clock(store, 0, here));
  EXPECT_TRUE(shares_rank0_clock(store, 1, here));
  EXPECT_FALSE(shares_rank0_clock(store, 2, "another-boot|time:[1]"));
  EXPECT_FALSE(shares_rank0_clock(store, 3, ""));
}

TEST(CollectivesBusbw, OneRankMovesNothing) {
  for (const CollectiveOp op : {CollectiveOp::AllReduce, CollectiveOp::Broadcast,
                                CollectiveOp::SendRecv, CollectiveOp::AllGather}) {
    EXPECT_EQ(collectives_busbw(op, 1).factor, 0.0) << enum_name(op);
    EXPECT_GT(collectives_busbw(op, 2).factor, 0.0) << enum_name(op);
  }
  EXPECT_EQ(one_rank_note(2), "");
  EXPECT_NE(one_rank_note(1).find("nothing moves"), std::string::npos);
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
      "-o allreduce,allgather,reduce_scatter,broadcast,reduce,alltoall,sendrecv,"
      "allgather_coalesced,reduce_scatter_coalesced -c -I -n 4 -w 1 "
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
  ASSERT_EQ(rec["results"].size(), 36u) << "9 ops x 1K, 4K, 16K, 64K";
  for (const auto& x : rec["results"]) {
    EXPECT_EQ(x["wrong"], 0) << x.dump();
    EXPECT_GT(x["time_us"].get<double>(), 0) << x.dump();
    EXPECT_TRUE(x.contains("p50_us") && x.contains("p99_us")) << x.dump();
    // nccl-tests' factors at 2 ranks: 2(n-1)/n = 1 for allreduce, 1 for broadcast, reduce and
    // sendrecv, (n-1)/n = 1/2 for allgather, reduce_scatter, alltoall and the coalesced ones.
    const std::string op = x["op"];
    const double factor = op == "allgather" || op == "reduce_scatter" || op == "alltoall" ||
                                  op.ends_with("_coalesced")
                              ? 0.5
                              : 1.0;
    EXPECT_NEAR(x["busbw_GBps"].get<double>(), factor * x["algbw_GBps"].get<double>(), 1e-9);
    EXPECT_NEAR(x["algbw_GBps"].get<double>(),
                x["size_bytes"].get<double>() / x["time_us"].get<double>() / 1e3, 1e-9);
  }
  ASSERT_EQ(rec["ops"].size(), 9u);
  // Note [Clock offset for arrivals]: two ranks of one host read one clock, so the skew is
  // exact (and shown, not "<X").
  ASSERT_EQ(rec["clock"]["uncertainty_us"], nlohmann::json::array({0.0, 0.0}))
      << rec["clock"].dump();
  EXPECT_EQ(rec["clock"]["offset_us"], nlohmann::json::array({0.0, 0.0})) << rec["clock"].dump();
  for (const auto& x : rec["results"]) EXPECT_EQ(x["skew_uncertainty_us"], 0.0) << x.dump();
  EXPECT_EQ(r.output.find("# skew <X"), std::string::npos) << r.output;
  const auto v = run_cli("validate " + out);
  EXPECT_EQ(v.code, 0) << v.output;
}

// nccl-tests' -c <0|1>, and the bare -c ddpbench had before.
TEST(CollectivesCommand, CheckTakesZeroOrOneAndABareCheckIsOne) {
  TempDir dir("collectives_check");
  for (const auto& [flags, checked] :
       std::vector<std::pair<std::string, bool>>{{"-c 1 -n 2", true},
                                                 {"-c 0 -n 2", false},
                                                 {"-n 2 --check=0", false},
                                                 {"-c -n 2", true},
                                                 {"-n 2 -c", true},
                                                 {"-n 2", false}}) {
    const std::string out = dir / "c.json";
    const auto r = run_cli("collectives -g 2 -b 1K -e 1K -w 0 -J " + out + " " + flags);
    ASSERT_EQ(r.code, 0) << flags << "\n" << r.output;
    EXPECT_EQ(r.output.find("# Out of bounds values : 0 OK") != std::string::npos, checked)
        << flags << "\n"
        << r.output;
    const auto rec = read(out);
    EXPECT_EQ(rec["config"]["check"], checked) << flags;
    EXPECT_EQ(rec["results"][0].contains("wrong"), checked) << flags;
  }
  for (const char* bad : {"-c 2", "-c yes", "--check=-1"}) {
    const auto r = run_cli(std::string("collectives -g 2 ") + bad);
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.output;
    EXPECT_NE(r.output.find("ddpbench: error: -c"), std::string::npos) << bad << r.output;
    EXPECT_NE(r.output.find("expected 0 or 1"), std::string::npos) << bad << r.output;
    EXPECT_EQ(r.output.find("launcher: starting"), std::string::npos) << bad << r.output;
  }
}

// One rank moves nothing: one line says so, busbw is 0 for every op, and there is no skew.
TEST(CollectivesCommand, OneRankPrintsANoteAndZeroBusbw) {
  TempDir dir("collectives_one");
  const std::string out = dir / "c.json";
  const auto r =
      run_cli("collectives -g 1 -b 1K -e 64K -f 8 -o allreduce,broadcast -c -n 3 -w 1 -J " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("# one rank: nothing moves over any link"), std::string::npos)
      << r.output;
  size_t zero_averages = 0;  // allreduce's and broadcast's (nccl-tests' broadcast keeps 1)
  for (size_t at = r.output.find("# Avg bus bandwidth    : 0 \n"); at != std::string::npos;
       at = r.output.find("# Avg bus bandwidth    : 0 \n", at + 1))
    ++zero_averages;
  EXPECT_EQ(zero_averages, 2u) << r.output;
  const auto rec = read(out);
  ASSERT_EQ(rec["results"].size(), 6u) << "2 ops x 1K, 8K, 64K";
  for (const auto& x : rec["results"]) {
    EXPECT_EQ(x["busbw_GBps"], 0.0) << x.dump();
    EXPECT_GT(x["algbw_GBps"].get<double>(), 0) << x.dump();
    EXPECT_FALSE(x.contains("last_rank")) << x.dump();
    EXPECT_FALSE(x.contains("skew_uncertainty_us")) << x.dump();
    EXPECT_EQ(x["wrong"], 0) << x.dump();
  }
  for (const auto& s : rec["ops"]) EXPECT_EQ(s["busbw"]["factor"], 0.0) << s.dump();
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
      "-o allreduce,allgather,reduce_scatter,broadcast,reduce,alltoall,sendrecv,"
      "allgather_coalesced,reduce_scatter_coalesced -c -I -n 3 -w 1 --timeout 60 -J " +
      out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("through mpirun"), std::string::npos) << r.output;
  const auto rec = read(out);
  EXPECT_EQ(rec["config"]["backend"], "mpi");
  ASSERT_EQ(rec["results"].size(), 27u) << "9 ops x 1K, 8K, 64K";
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

// Issue 48's P5: alltoall's size rounded to the rank count, as allgather's is, so that the
// defaults (8 B up) work at 3 and 4 ranks.
TEST(CollectivesCommand, AlltoallSizesAreRoundedToTheRankCount) {
  for (const char* ranks : {"3", "4"}) {
    const auto r = run_cli(std::string("collectives -o alltoall -e 1K -c -n 2 -w 0 -g ") + ranks);
    EXPECT_EQ(r.code, 0) << ranks << "\n" << r.output;
    EXPECT_EQ(r.output.find("FAILED"), std::string::npos) << r.output;
  }
}

// Issue 48's P25: a sweep that measures nothing for some op is a usage error before any rank
// starts, naming the op and the size it needs (it once printed an empty table, exit 0).
TEST(CollectivesCommand, ASweepWithNoSizeAnOpCanMoveIsAUsageError) {
  const auto tiny = run_cli("collectives -b 1 -e 3");
  EXPECT_EQ(tiny.code, 2) << tiny.output;
  EXPECT_NE(tiny.output.find("allreduce of f32 moves at 2 ranks: it needs a size of at least 4"),
            std::string::npos)
      << tiny.output;
  EXPECT_EQ(tiny.output.find("starting"), std::string::npos) << "no rank starts\n" << tiny.output;
  const auto coalesced = run_cli("collectives -g 3 -b 8 -e 32 -o allreduce,allgather_coalesced");
  EXPECT_EQ(coalesced.code, 2) << coalesced.output;
  EXPECT_NE(coalesced.output.find("allgather_coalesced of f32 moves at 3 ranks: it needs a size "
                                  "of at least 48 bytes"),
            std::string::npos)
      << coalesced.output;
}

TEST(CollectivesCommand, RootedAndPairwiseExchangesAreRightOnThreeRanks) {
  // reduce to rank 0, alltoall's personalised chunks, the ring's sendrecv and the coalesced
  // ops' parts (ZeRO's collectives): each result differs from every other rank's, so a chunk
  // from the wrong peer or the wrong part is counted.
  const auto r = run_cli(
      "collectives -g 3 -b 120 -e 12K -f 10 "
      "-o reduce,alltoall,sendrecv,allgather_coalesced,reduce_scatter_coalesced -c -n 3 -w 1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("FAILED"), std::string::npos) << r.output;
  size_t ok = 0;
  for (size_t at = r.output.find("Out of bounds values : 0 OK"); at != std::string::npos;
       at = r.output.find("Out of bounds values : 0 OK", at + 1))
    ++ok;
  EXPECT_EQ(ok, 5u) << r.output;
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

// Issue 48, P14: ranks started with other flags (another node's command line) are compared at
// start, and the first flag that differs is named; P24: -g under a launcher that started
// another number of ranks is refused.
TEST(CollectivesCommand, RanksStartedWithOtherFlagsAreNamed) {
  TempDir dir("collectives_mismatch");
  const auto env = [](int rank) {
    return "DDPBENCH_STORE_TOKEN=mismatch-test-token-0123456789 MASTER_ADDR=127.0.0.1 "
           "MASTER_PORT=29627 WORLD_SIZE=2 RANK=" +
           std::to_string(rank) + " LOCAL_RANK=" + std::to_string(rank);
  };
  const std::string log1 = dir / "rank1.log";
  const std::string cmd1 = "(" + env(1) + " " + std::string(DDPBENCH_BIN) +
                           " collectives -b 1K -e 4K -n 4 -w 0 --timeout 20 > " + log1 + " 2>&1) &";
  ASSERT_EQ(std::system(cmd1.c_str()), 0);
  const auto r0 = run_cli("collectives -b 1K -e 4K -n 3 -w 0 --timeout 20", env(0));
  EXPECT_EQ(r0.code, 2) << r0.output;
  EXPECT_NE(r0.output.find("-n"), std::string::npos) << r0.output;
  EXPECT_NE(r0.output.find("rank 1"), std::string::npos) << r0.output;
  const auto g = run_cli("collectives -g 4 -b 1K -e 4K",
                         "MASTER_ADDR=127.0.0.1 MASTER_PORT=29629 "
                         "WORLD_SIZE=1 RANK=0 LOCAL_RANK=0");
  EXPECT_EQ(g.code, 2) << g.output;
  EXPECT_NE(g.output.find("-g 4 but the launcher started 1 ranks"), std::string::npos) << g.output;
}

// P28: "-b 64G" said "-b must be an integer from 0 to 16, got '64'" (the range in units of
// the G it dropped, and 0, which no sweep takes). A size is named as given, with what -b takes.
TEST(CollectivesCommand, ASizeOutOfRangeSaysWhatSizesAreAllowed) {
  const std::string takes =
      "give bytes from 1 to 16G as an integer with an optional K, M or G (1024-based), such as "
      "8, 1K or 64M\n";
  for (const auto& [flags, said] : std::vector<std::pair<std::string, std::string>>{
           {"-b 64G", "-b '64G' is out of range: "},
           {"-b 0", "-b '0' is out of range: "},
           {"-e 17G", "-e '17G' is out of range: "},
           {"-i -1", "-i '-1' is out of range: "},
           {"-b 99999999999999999999", "-b '99999999999999999999' is out of range: "},
           {"-b 1.5K", "-b '1.5K' is not a size: "},
           {"-b 1T", "-b '1T' is not a size: "},
           {"-e K", "-e 'K' is not a size: "}}) {
    const auto r = run_cli("collectives " + flags);
    EXPECT_EQ(r.code, 2) << flags << "\n" << r.output;
    EXPECT_EQ(r.output, "ddpbench: error: " + said + takes) << flags;
  }
  const auto above = run_cli("collectives -b 64 -e 8");
  EXPECT_EQ(above.code, 2) << above.output;
  EXPECT_EQ(above.output,
            "ddpbench: error: collectives: -b 64 is above -e 8: the sweep runs from -b up to -e "
            "(bytes)\n");
}

TEST(CollectivesCommand, BadFlagsAreOneLineUsageErrorsBeforeAnyRankStarts) {
  for (const char* flags : {"-b 1K -e 8", "-o allreduce,nope", "-f 1", "-b 12Q", "-d f64", "-n 0",
                            "--device tpu", "-J /nonexistent-dir/x.json", "-J ''", "-i 1K -f 4",
                            // Issue 48, P4: more than this machine's memory, refused up front.
                            "-g 64 -b 16G -e 16G"}) {
    const auto r = run_cli(std::string("collectives ") + flags);
    EXPECT_EQ(r.code, 2) << flags << "\n" << r.output;
    EXPECT_EQ(r.output.find("launcher: starting"), std::string::npos) << flags << r.output;
  }
}

}  // namespace
}  // namespace ddpb::bench
