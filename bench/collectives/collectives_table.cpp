// nccl-tests' table (src/common.cu there: the header, one row per size, the average bus
// bandwidth), with ddpbench's columns after #wrong: the arrival skew and the last rank.
#include <fmt/core.h>

#include "bench/collectives/collectives.h"

namespace ddpb::bench {

namespace {

const char* nccl_type_name(DType dtype) {
  switch (dtype) {
    case DType::BF16:
      return "bfloat16";
    case DType::F16:
      return "half";
    default:
      return "float";
  }
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

std::string row(const reports::CollectiveResult& r, DType dtype, bool check, bool per_iteration) {
  const bool reduces = r.op == "allreduce" || r.op == "reduce_scatter" || r.op == "reduce";
  std::string line = fmt::format(
      "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7.2f}  {:>6.2f}  {:>6.2f}  {:>5}", r.size_bytes,
      r.count, nccl_type_name(dtype), reduces ? "sum" : "none", r.root, r.time_us, r.algbw_GBps,
      r.busbw_GBps, check ? std::to_string(r.wrong.value_or(0)) : "N/A");
  if (per_iteration)
    line += fmt::format("  {:>7.2f}  {:>7.2f}", r.p50_us.value_or(0), r.p99_us.value_or(0));
  line += fmt::format("  {:>7.1f}  {:>4}", r.arrival_skew_us,
                      r.last_rank ? std::to_string(*r.last_rank) : "-");
  return line + "\n";
}

}  // namespace

std::string collectives_table(const std::vector<reports::CollectiveResult>& results,
                              const reports::CollectiveOpSummary& summary, DType dtype, bool check,
                              bool per_iteration) {
  std::string out;
  bool first = true;
  for (const reports::CollectiveResult& r : results) {
    if (r.op != summary.op) continue;
    if (first) out += header(r, per_iteration);
    first = false;
    out += row(r, dtype, check, per_iteration);
  }
  if (check)
    out += fmt::format("# Out of bounds values : {} {}\n", summary.wrong.value_or(0),
                       summary.wrong.value_or(0) == 0 ? "OK" : "FAILED");
  out += fmt::format("# Avg bus bandwidth    : {:g} \n", summary.avg_busbw_GBps);
  if (summary.last_rank) {
    out += fmt::format("# Arrived last         : rank {} at {} of the sizes\n", *summary.last_rank,
                       summary.last_rank_sizes);
  }
  return out;
}

}  // namespace ddpb::bench
