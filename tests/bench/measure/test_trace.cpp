// --trace: a Chrome trace that parses, nests per track, has every rank, honours the step
// window, and is still written (valid) when the run fails.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "../../util/run_cli.h"

namespace ddpb {
namespace {

using testing::run_cli;
using testing::TempDir;

nlohmann::json load(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "no trace at " << path;
  return nlohmann::json::parse(in);
}

// On every (pid, tid) track, complete events either nest or follow each other.
void expect_nesting(const nlohmann::json& events) {
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> tracks;
  for (const auto& e : events) {
    if (e["ph"] != "X") continue;
    tracks[{e["pid"].get<int>(), e["tid"].get<int>()}].emplace_back(
        e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>());
  }
  for (auto& [track, spans] : tracks) {
    std::sort(spans.begin(), spans.end(), [](auto& a, auto& b) {
      return a.first < b.first || (a.first == b.first && a.second > b.second);
    });
    std::vector<double> open_ends;
    for (auto [s, e] : spans) {
      while (!open_ends.empty() && open_ends.back() <= s + 1e-3) open_ends.pop_back();
      if (!open_ends.empty()) {
        EXPECT_LE(e, open_ends.back() + 1e-3)
            << "track pid " << track.first << " tid " << track.second << ": [" << s << ", " << e
            << "] overlaps its parent ending at " << open_ends.back();
      }
      open_ends.push_back(e);
    }
  }
}

TEST(Trace, DdpTraceHasEveryRankBucketsOnTheirOwnTracksAndNests) {
  TempDir dir("trace_ddp");
  std::string path = dir / "t.json";
  auto r = run_cli(
      "run --mode ddp --world-size 2 --workload mlp-small --global-batch 16 --steps 4 "
      "--warmup 1 --quiet --bucket-cap-mb 2 --first-bucket-mb 0.1 --trace " +
      path + " --trace-steps 2:4");
  ASSERT_EQ(r.code, 0) << r.output;
  auto doc = load(path);
  EXPECT_EQ(doc["distributedInfo"]["world_size"], 2);
  const auto& ev = doc["traceEvents"];
  std::set<int> pids, steps;
  std::set<std::string> process_names;
  int buckets = 0;
  for (const auto& e : ev) {
    pids.insert(e["pid"].get<int>());
    if (e["name"] == "process_name") process_names.insert(e["args"]["name"].get<std::string>());
    if (e.value("cat", "") == "step") steps.insert(e["args"]["step"].get<int>());
    if (e.value("cat", "").rfind("comm bucket", 0) == 0) {
      ++buckets;
      EXPECT_GT(e["args"]["bytes"].get<int64_t>(), 0);
      EXPECT_TRUE(e["args"].contains("busbw_GBps"));
    }
    if (e["ph"] == "X") EXPECT_GE(e["ts"].get<double>(), 0.0);
  }
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
  EXPECT_EQ(process_names, (std::set<std::string>{"rank 0", "rank 1"}));
  EXPECT_EQ(steps, (std::set<int>{2, 3, 4})) << "--trace-steps 2:4";
  EXPECT_GE(buckets, 2 * 3 * 2) << "at least 2 buckets per step per rank";
  expect_nesting(ev);
}

TEST(Trace, DpTraceShowsEveryReplica) {
  TempDir dir("trace_dp");
  std::string path = dir / "t.json";
  auto r = run_cli(
      "run --mode dp --world-size 2 --workload gpt-tiny --global-batch 8 --steps 2 --warmup 0 "
      "--quiet --trace " +
      path);
  ASSERT_EQ(r.code, 0) << r.output;
  auto doc = load(path);
  std::set<std::string> threads;
  for (const auto& e : doc["traceEvents"]) {
    if (e["name"] == "thread_name") threads.insert(e["args"]["name"].get<std::string>());
  }
  EXPECT_TRUE(threads.count("replica 0 (cpu:0)") && threads.count("replica 1 (cpu:1)"))
      << ::testing::PrintToString(threads);
  expect_nesting(doc["traceEvents"]);
}

TEST(Trace, AFailedRunStillLeavesAValidTrace) {
  TempDir dir("trace_fail");
  std::string path = dir / "t.json";
  // The skipped branch without --find-unused-params fails on rank 0 in the first step that
  // skips it; the trace of the steps before (maybe none) is still written and parses.
  auto r = run_cli(
      "run --mode ddp --world-size 2 --workload mlp-skip --global-batch 8 --steps 8 --warmup 0 "
      "--quiet --timeout 20 --trace " +
      path);
  ASSERT_NE(r.code, 0) << r.output;
  auto doc = load(path);
  EXPECT_TRUE(doc.contains("traceEvents"));
}

TEST(Trace, BadStepWindowIsAUsageError) {
  auto r = run_cli("run --workload mlp-small --steps 1 --trace /tmp/x.json --trace-steps 5:2");
  EXPECT_EQ(r.code, 2) << r.output;
}

}  // namespace
}  // namespace ddpb
