// `ddpbench collectives`: nccl-tests' sweep over the process groups ddpbench trains with
// (docs/cli.md, "Collectives"). Every rank runs the same sweep; rank 0 gathers the ranks'
// times through the store and gets the results.
//
// Note [Collectives measurement]
// The sweep starts once the ranks have settled (Note [Settling]) and runs its sizes back to
// back; the ranks' times go to rank 0 after the last. Per operation and size, after `warmup`
// untimed iterations, all in one issue burst (Note
// [Issue bursts], comm/process_group.h: on gloo and mpi each operation then runs on the
// issuing thread, as in a bare loop of the library's calls; nccl is unaffected):
//   time     `iters` operations issued back to back and waited for together, as nccl-tests
//            times them: (end - start) / iters, the slowest rank's;
//   probe    then min(iters, kProbeIterations) iterations one at a time (every one with -I or
//            -c): each rank stamps its arrival (on rank 0's clock, the rendezvous' offsets) and
//            its own duration. -I reports the p50 and p99 of the slowest rank's durations; the
//            arrival skew is the median of last minus first arrival, and the last rank the one
//            that arrived last most often. Back to back, a rank arrives when its previous
//            operation completed, so the skew is the collective's own completion order plus
//            whatever the ranks do between calls;
//   check    (-c) every probed iteration starts from rank-dependent small integers and its
//            result is compared with the exact answer (bf16 and f16 within 1%); #wrong counts
//            the elements that differ, over the ranks.
// algbw = size / time, busbw = algbw x nccl-tests' factor (bench/measure/metrics.h). size is
// nccl-tests' too: the whole buffer (allreduce, broadcast, reduce, sendrecv), the gathered
// output (allgather) or the split input (reduce_scatter, alltoall), rounded down to a multiple
// of the world size there. Allreduce, broadcast and reduce run in place; reduce's root and
// broadcast's are rank 0; sendrecv sends to rank + 1 and receives from rank - 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/measure/metrics.h"
#include "comm/process_group.h"
#include "comm/store.h"
#include "core/device.h"
#include "core/dtype.h"
#include "reports/collectives_record.h"

namespace ddpb::bench {

// The operations are bench/measure/metrics.h's Collective, by the names of its table.
using CollectiveOp = Collective;

inline constexpr int64_t kProbeIterations = 10;

// Note [Settling]
// A CPU that has been idle runs a host collective slower for the next few milliseconds (its
// clocks and the hypervisor's scheduling ramp back up): on the 2-vCPU development VM a bare
// MPI_Allreduce loop of 20 64 KiB calls, started 500 ms after the ranks went idle, took 43.5 us
// a call against 25.2 us started at once (41 alternated pairs), and about 100 calls of warm-up
// brought it back. The ranks arrive from the rendezvous idle, and waiting for each other
// between sizes would idle them again. So before the first size every rank runs its first
// operation untimed for kSettleNs of rank 0's clock (rounds of kSettleRound, the same count on
// every rank), at most kSettleMaxBytes of it (settling needs the CPU busy, not a size), and
// the sizes then follow one another without a wait on the store.
inline constexpr int64_t kSettleNs = 25'000'000;
inline constexpr int kSettleRound = 16;
inline constexpr int64_t kSettleMaxBytes = 64 * 1024;

struct CollectivesOptions {
  std::vector<CollectiveOp> ops = {CollectiveOp::AllReduce};
  int64_t min_bytes = 8, max_bytes = int64_t{32} << 20;
  double step_factor = 2;  // -f
  int64_t step_bytes = 0;  // -i; when > 0 it replaces the factor
  DType dtype = DType::F32;
  int64_t iters = 20, warmup = 5;
  bool check = false, per_iteration = false;
};

// The sweep's sizes in bytes: min_bytes, then times step_factor (or plus step_bytes) up to
// max_bytes. Throws UsageError for an empty or endless sweep.
std::vector<int64_t> sweep_sizes(const CollectivesOptions& o);

// The elements `op` moves at `size_bytes` (nccl-tests' count): the size over the element size,
// rounded down to a multiple of `world` for allgather and reduce_scatter; 0: nothing to run.
int64_t collective_count(CollectiveOp op, int64_t size_bytes, int world, DType dtype);

// Collective over `pg` and `store`: the sweep of every op. Rank 0 returns every result, in op
// then size order; the others return nothing.
std::vector<reports::CollectiveResult> run_collectives(comm::ProcessGroup& pg, comm::Store& store,
                                                       const Device& device,
                                                       const CollectivesOptions& o,
                                                       int64_t clock_offset_ns);

// Per op: nccl-tests' average bus bandwidth, the #wrong total and the rank last at most sizes.
std::vector<reports::CollectiveOpSummary> summarize_collectives(
    const std::vector<reports::CollectiveResult>& results, int world);

// nccl-tests' table for one op's results, its "Avg bus bandwidth" line and ours of arrivals.
std::string collectives_table(const std::vector<reports::CollectiveResult>& results,
                              const reports::CollectiveOpSummary& summary, DType dtype, bool check,
                              bool per_iteration);

}  // namespace ddpb::bench
