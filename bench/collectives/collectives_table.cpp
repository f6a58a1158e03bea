// nccl-tests' table (src/common.cu there: the header, one row per size, the average bus
// bandwidth), with ddpbench's columns after #wrong: the arrival skew and the last rank, shown
// where they stand out of the clocks' uncertainty (Note [Arrivals against the clocks]).
#include <fmt/core.h>

#include <algorithm>

#include "bench/collectives/collectives.h"

namespace ddpb::bench {

namespace {

// The record's dtype ("f32", "bf16", "f16") as nccl-tests names it.
const char* nccl_type_name(const std::string& dtype) {
  if (dtype == "bf16") return "bfloat16";
  if (dtype == "f16") return "half";
  return "float";
}

std::string header(const reports::CollectiveResult& first, bool per_iteration) {
  const std::string place = first.in_place ? "in-place" : "out-of-place";
  const std::string extra_names = per_iteration ? "      p50      p99" : "";
  const std::string extra_units = per_iteration ? "     (us)     (us)" : "";
  return fmt::format("#{:>66}\n", place) +
         "#       size         count      type   redop    root     time   algbw   busbw #wrong" +
         extra_names + "     skew  last\n" +
         "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       " +
         extra_units + "     (us)  rank\n";
}

std::string row(const reports::CollectiveResult& r, const reports::CollectivesConfigInfo& c) {
  const bool reduces = r.op == "allreduce" || r.op == "reduce_scatter" || r.op == "reduce" ||
                       r.op == "reduce_scatter_coalesced";
  std::string line = fmt::format(
      "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7.2f}  {:>6.2f}  {:>6.2f}  {:>5}", r.size_bytes,
      r.count, nccl_type_name(c.dtype), reduces ? "sum" : "none", r.root, r.time_us, r.algbw_GBps,
      r.busbw_GBps, c.check ? std::to_string(r.wrong.value_or(0)) : "N/A");
  if (c.per_iteration)
    line += fmt::format("  {:>7.2f}  {:>7.2f}", r.p50_us.value_or(0), r.p99_us.value_or(0));
  const int world = static_cast<int>(c.world_size);
  line += fmt::format("  {:>7}  {:>4}", skew_cell(r, world), last_rank_cell(r, world));
  return line + "\n";
}

bool skew_resolved(const reports::CollectiveResult& r) {
  return !r.skew_uncertainty_us || beyond_uncertainty(r.arrival_skew_us, *r.skew_uncertainty_us);
}

// Note [Arrivals against the clocks]: what "<X" and "?" mean, under a table that shows one.
std::string legend(const std::vector<reports::CollectiveResult>& results, const std::string& op,
                   int world) {
  if (world < 2) return "";
  bool unresolved_skew = false, unresolved_last = false;
  double uncertainty = 0;
  for (const reports::CollectiveResult& r : results) {
    if (r.op != op) continue;
    unresolved_skew = unresolved_skew || !skew_resolved(r);
    unresolved_last = unresolved_last || !r.last_rank;
    uncertainty = std::max(uncertainty, r.skew_uncertainty_us.value_or(0));
  }
  std::string out;
  if (unresolved_skew)
    out += fmt::format(
        "# skew <X              : not beyond the clock offsets' uncertainty ({:.1f} us): the "
        "true skew is under X\n",
        uncertainty);
  if (unresolved_last)
    out += "# last rank ?          : no rank arrived last by more than the clocks' uncertainty\n";
  return out;
}

}  // namespace

std::string skew_cell(const reports::CollectiveResult& r, int world) {
  if (world < 2) return "-";
  if (skew_resolved(r)) return fmt::format("{:.1f}", r.arrival_skew_us);
  return fmt::format("<{:.1f}", r.arrival_skew_us + *r.skew_uncertainty_us);
}

std::string last_rank_cell(const reports::CollectiveResult& r, int world) {
  if (world < 2) return "-";
  return r.last_rank ? std::to_string(*r.last_rank) : "?";
}

std::string one_rank_note(int world) {
  if (world > 1) return "";
  return "# one rank: nothing moves over any link; algbw is the size over the time of a call with "
         "no peer, busbw is 0\n";
}

std::string collectives_table(const std::vector<reports::CollectiveResult>& results,
                              const reports::CollectiveOpSummary& summary,
                              const reports::CollectivesConfigInfo& config) {
  std::string out;
  bool first = true;
  for (const reports::CollectiveResult& r : results) {
    if (r.op != summary.op) continue;
    if (first) out += header(r, config.per_iteration);
    first = false;
    out += row(r, config);
  }
  if (config.check)
    out += fmt::format("# Out of bounds values : {} {}\n", summary.wrong.value_or(0),
                       summary.wrong.value_or(0) == 0 ? "OK" : "FAILED");
  out += fmt::format("# Avg bus bandwidth    : {:g} \n", summary.avg_busbw_GBps);
  if (summary.last_rank) {
    out += fmt::format("# Arrived last         : rank {} at {} of the sizes\n", *summary.last_rank,
                       summary.last_rank_sizes);
  }
  return out + legend(results, summary.op, static_cast<int>(config.world_size));
}

}  // namespace ddpb::bench
