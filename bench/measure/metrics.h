// The formulas behind every derived number in ddpbench's reports, defined once here and
// documented in docs/metrics.md. They take plain numbers (no runtime types; the records' types
// at most), so the tests
// check them on synthetic timelines with known answers (tests/bench/measure/test_metrics.cpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/named_enum.h"
#include "reports/run_record.h"

namespace ddpb::bench {

// Busy intervals [start, end) in ms on one timeline.
using Interval = std::pair<double, double>;

struct CommTime {
  double comm_ms = 0;     // length of the union of the collectives' busy intervals
  double exposed_ms = 0;  // the part of that union after `compute_end_ms`, plus compute waits
};

// Communication time and its exposed part. `compute_end_ms` is when backward compute ended
// on the same clock; `compute_wait_ms` is time compute spent blocked on communication
// (e.g. a stream wait), which is exposed however early it happens.
CommTime comm_time(std::vector<Interval> busy, double compute_end_ms, double compute_wait_ms = 0);

// 1 - exposed / comm: 1 when all communication hides behind compute, 0 when none does.
// Zero when there was no communication.
double overlap_ratio(double comm_ms, double exposed_ms);

// PyTorch DDP logger's definition, for side-by-side comparison: the share of the span from
// the first bucket's launch to the last bucket's completion that lies before backward compute
// ended (backward_compute_comm_overlap_time / backward_comm_time). The span includes time a
// bucket queues behind another, so it reads higher than overlap_ratio on the same timeline.
double span_overlap_ratio(double first_launch_ms, double last_complete_ms, double compute_end_ms);

// nccl-tests' bus-bandwidth factors (doc/PERFORMANCE.md there): busbw = algbw * factor.
enum class Collective {
  AllReduce,
  AllGather,
  ReduceScatter,
  Broadcast,
  Reduce,
  AllToAll,
  SendRecv,
  // PyTorch's allgather_into_tensor_coalesced and reduce_scatter_tensor_coalesced (c10d's
  // Backend): the size split into kCoalescedParts pairs of equal tensors, one call.
  AllGatherCoalesced,
  ReduceScatterCoalesced
};
inline constexpr int kCoalescedParts = 4;
// The names `ddpbench collectives -o` takes and its record holds (collective_name() below is
// the busbw record's older spelling, "reducescatter").
constexpr NameTable<Collective, 9> enum_names(Collective) {
  return {{{"allreduce", Collective::AllReduce},
           {"allgather", Collective::AllGather},
           {"reduce_scatter", Collective::ReduceScatter},
           {"broadcast", Collective::Broadcast},
           {"reduce", Collective::Reduce},
           {"alltoall", Collective::AllToAll},
           {"sendrecv", Collective::SendRecv},
           {"allgather_coalesced", Collective::AllGatherCoalesced},
           {"reduce_scatter_coalesced", Collective::ReduceScatterCoalesced}}};
}
double busbw_factor(Collective op, int world_size);
const char* busbw_formula(Collective op);
const char* collective_name(Collective op);
// The op, factor and formula for the record.
reports::BusBw busbw_record(Collective op, int world_size);
// algbw in GB/s (1e9 bytes) for `bytes` moved in `ms`; 0 when ms <= 0.
double algbw_GBps(double bytes, double ms);

// Weak scaling (per-device batch fixed): T(N) / (N * T(1)), T = throughput.
double weak_scaling_efficiency(double throughput_n, int n, double throughput_1);
// Strong scaling (global batch fixed): speed-up = t(1) / t(N) for step times; efficiency =
// speed-up / N.
double strong_speedup(double step_ms_1, double step_ms_n);
double strong_efficiency(double step_ms_1, double step_ms_n, int n);

// A rank's compute time in one step: the sum of its phase medians of kind compute (Note [Phase
// kinds]), leaving out the phases spent on data and on communication, where a rank waits for
// the others. Every rank's step time is the same, since each waits for the slowest; the
// compute time is the part a straggler makes longer.
double compute_time_ms(const std::vector<reports::PhaseMedian>& phase_medians);

// A straggler is a rank whose compute time is over kStragglerFactor times the fastest rank's.
inline constexpr double kStragglerFactor = 1.2;
struct Straggler {
  int rank = 0;
  double compute_ms = 0;
  double skew = 0;  // compute_ms / the fastest rank's
};
struct StragglerSummary {
  double skew = 0;  // slowest / fastest compute time; 0 when the fastest is 0
  std::vector<Straggler> stragglers;
};
// From each rank's compute time, indexed by rank.
StragglerSummary straggler_summary(const std::vector<double>& compute_ms_by_rank);

// Achieved FLOP/s over the GEMM peak of the devices that did the work.
double flop_fraction(double achieved_flops_per_s, double peak_flops_per_s_per_device, int devices);

}  // namespace ddpb::bench
