// The record of `ddpbench collectives -J FILE` (reports/schema/collectives.schema.json,
// docs/records.md "Collectives record"): per operation and size, nccl-tests' columns (time,
// algbw, busbw, #wrong) with the per-iteration percentiles and the ranks' arrival skew, and
// the clock offsets the arrivals were stamped with.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/json_io.h"
#include "reports/record_fields.h"
#include "reports/run_record.h"

namespace ddpb::reports {

// What was measured: the command's flags, resolved.
struct CollectivesConfigInfo {
  static constexpr bool kRecord = true;
  std::string backend, device, dtype;
  int64_t world_size = 0, min_bytes = 0, max_bytes = 0, iters = 0, warmup = 0;
  double step_factor = 0;  // -f; 0 when -i gave a fixed step
  int64_t step_bytes = 0;  // -i; 0 when -f gave a factor
  bool check = false, per_iteration = false;
  std::string launcher;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("backend", s.backend), v("device", s.device), v("dtype", s.dtype);
    v("world_size", s.world_size), v("min_bytes", s.min_bytes), v("max_bytes", s.max_bytes);
    v("step_factor", s.step_factor), v("step_bytes", s.step_bytes), v("iters", s.iters);
    v("warmup", s.warmup), v("check", s.check), v("per_iteration", s.per_iteration);
    v("launcher", s.launcher);
  }
};

// One operation at one size. Times are the slowest rank's, in microseconds.
struct CollectiveResult {
  static constexpr bool kRecord = true;
  std::string op;
  int64_t size_bytes = 0, count = 0;  // nccl-tests' size and count (elements)
  int64_t root = -1;                  // broadcast's root; -1 for the others
  bool in_place = false;
  double time_us = 0, algbw_GBps = 0, busbw_GBps = 0;
  std::optional<int64_t> wrong;          // -c: elements that differ from the expected result
  std::optional<double> p50_us, p99_us;  // -I: over the iterations
  double arrival_skew_us = 0;            // median over the probed iterations: last - first
  // The most the clocks' offsets can move arrival_skew_us (Note [Arrivals against the clocks],
  // bench/collectives/collectives.h): a skew at or below it is not resolved. Optional, so that
  // records written without it still read; absent at one rank.
  std::optional<double> skew_uncertainty_us;
  // The rank that arrived last most often, counting the probes where it led beyond the clocks'
  // uncertainty; absent when none did (before skew_uncertainty_us: counting every probe).
  std::optional<int64_t> last_rank;
  double last_rank_share = 0;  // of the probed iterations
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("op", s.op), v("size_bytes", s.size_bytes), v("count", s.count), v("root", s.root);
    v("in_place", s.in_place), v("time_us", s.time_us), v("algbw_GBps", s.algbw_GBps);
    v("busbw_GBps", s.busbw_GBps), v("wrong", s.wrong), v("p50_us", s.p50_us);
    v("p99_us", s.p99_us), v("arrival_skew_us", s.arrival_skew_us);
    v("skew_uncertainty_us", s.skew_uncertainty_us), v("last_rank", s.last_rank);
    v("last_rank_share", s.last_rank_share);
  }
};

// Each rank's clock against rank 0's, as the arrivals were stamped (Note [Clock offset for
// arrivals]): indexed by rank; the true offset lies within offset_us ± uncertainty_us.
struct CollectivesClock {
  static constexpr bool kRecord = true;
  std::vector<double> offset_us, uncertainty_us;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("offset_us", s.offset_us), v("uncertainty_us", s.uncertainty_us);
  }
};

// Per operation over the sweep: nccl-tests' "Avg bus bandwidth" and the straggler line.
struct CollectiveOpSummary {
  static constexpr bool kRecord = true;
  std::string op;
  BusBw busbw;
  double avg_busbw_GBps = 0;
  std::optional<int64_t> wrong;      // -c: over every size
  std::optional<int64_t> last_rank;  // the rank that arrived last at the most sizes
  int64_t last_rank_sizes = 0;       // at how many sizes
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("op", s.op), v("busbw", s.busbw), v("avg_busbw_GBps", s.avg_busbw_GBps);
    v("wrong", s.wrong), v("last_rank", s.last_rank), v("last_rank_sizes", s.last_rank_sizes);
  }
};

// One level of a hierarchical sweep (`collectives --node-size K`): the same sweep on the
// groups of one level at once, the table of the group holding world rank 0.
//  - "intra": each node's K ranks (one group per node);
//  - "inter": the ranks of one local index across the nodes (K groups, sharing each node's
//    link as a design's per-device traffic between nodes does).
struct CollectivesLevel {
  static constexpr bool kRecord = true;
  std::string level;
  int64_t ranks = 0, groups = 0;  // ranks of a group, and groups run at once
  std::vector<CollectiveResult> results;
  std::vector<CollectiveOpSummary> ops;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("level", s.level), v("ranks", s.ranks), v("groups", s.groups), v("results", s.results);
    v("ops", s.ops);
  }
};

struct CollectivesRecord {
  static constexpr bool kRecord = true;
  int64_t schema_version = kSchemaVersion;
  std::string implementation = "ddpbench", kind = "collectives";
  RunContext context;
  CollectivesConfigInfo config;
  std::vector<CollectiveResult> results;
  std::vector<CollectiveOpSummary> ops;
  std::optional<CollectivesClock> clock;  // optional, so that records written without it read
  std::optional<std::vector<CollectivesLevel>> levels;  // --node-size
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("schema_version", s.schema_version), v("implementation", s.implementation);
    v("kind", s.kind), v("context", s.context), v("config", s.config);
    v("results", s.results), v("ops", s.ops), v("clock", s.clock), v("levels", s.levels);
  }

  nlohmann::json to_json() const { return record_to_json(*this); }
  static CollectivesRecord from_json(const nlohmann::json& j) {
    return record_from_json<CollectivesRecord>(j);
  }
};

}  // namespace ddpb::reports
