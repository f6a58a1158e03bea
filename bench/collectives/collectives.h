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
//            -c): each rank stamps its arrival (on rank 0's clock, Note [Clock offset for
//            arrivals]) and its own duration. -I reports the p50 and p99 of the slowest rank's
//            durations; the arrival skew is the median of last minus first arrival, and the last
//            rank the one that arrived last most often where it led beyond the clocks'
//            uncertainty (Note [Arrivals against the clocks]). Back to back, a rank arrives when
//            its previous operation completed, so the skew is the collective's own completion
//            order plus whatever the ranks do between calls;
//   check    (-c) every probed iteration starts from rank-dependent small integers and its
//            result is compared with the exact answer (bf16 and f16 within 1%); #wrong counts
//            the elements that differ, over the ranks.
// algbw = size / time, busbw = algbw x nccl-tests' factor (bench/measure/metrics.h; 0 for
// every op at one rank, which moves nothing over any link: collectives_busbw). size is
// nccl-tests' too: the whole buffer (allreduce, broadcast, reduce, sendrecv), the gathered
// output (allgather) or the split input (reduce_scatter, alltoall), rounded down to a multiple
// of the world size there. Allreduce, broadcast and reduce run in place; reduce's root and
// broadcast's are rank 0; sendrecv sends to rank + 1 and receives from rank - 1.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/measure/metrics.h"
#include "comm/process_group.h"
#include "comm/rendezvous.h"
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

// Note [Clock offset for arrivals]
// The arrival skew compares timestamps of different ranks, so it is only as good as the offset
// that puts them on rank 0's clock. The rendezvous' exchange through the store (Note [Clock
// offset through the store]) knows its offset to half a round trip through the store: hundreds
// of microseconds, against a skew of a few. Once settled, the ranks refine it over the process
// group itself, NTP's way: a rank stamps s, all ranks allreduce a flag (it completes on rank 0
// only once every rank has issued it, so after every s), rank 0 then stamps T and broadcasts
// it, and the rank stamps e on receipt (after T). T lies within [s, e], so the offset
// T - (s + e) / 2 is right to within (e - s) / 2. Of kClockRounds such exchanges and the
// rendezvous' one, each rank keeps the one with the smallest uncertainty (NTP's minimum-delay
// filter: the exchange least delayed by scheduling is the most symmetric one). On a loaded
// 2-core machine a Gloo round trip is still about a millisecond, so one more step settles the
// common case: ranks on rank 0's host read the same clock (steady_clock is CLOCK_MONOTONIC,
// one per boot of the kernel and per time namespace, which can shift it), so a rank whose
// boot id and time namespace are rank 0's has offset 0, exactly (uncertainty 0). Every rank
// runs the exchanges all the same, as the ranks of other hosts need them.
inline constexpr int kClockRounds = 8;

// Note [Arrivals against the clocks]
// A rank's arrival is off by its offset's error, at most its uncertainty u_r (u_0 = 0), so a
// difference of two ranks' arrivals is off by at most u_i + u_j, and the skew (the latest
// minus the earliest) by at most the sum of the two largest uncertainties: the skew's
// uncertainty. A skew at or below it is not resolved: the table shows "<X", X = skew +
// uncertainty, the most the true skew can be. A probe's last rank counts only where it led the
// next-latest rank by more than their two uncertainties; a size none of whose probes resolved
// its last rank has none ("?" in the table). With one rank there is no skew ("-").

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

// Throws UsageError when some op of the sweep would measure no size at `world` ranks (issue 48,
// P25: -b 1 -e 3 holds no f32, and wrote an empty table with exit 0).
void check_every_op_measured(const CollectivesOptions& o, int world);

// Collective over `pg` and `store`: the sweep of every op. Rank 0 returns every result, in op
// then size order; the others return nothing.
// `rendezvous` is this rank's offset onto rank 0's clock from the rendezvous, refined first
// (Note [Clock offset for arrivals]); `clock`, when given, gets rank 0's view of every rank's.
std::vector<reports::CollectiveResult> run_collectives(comm::ProcessGroup& pg, comm::Store& store,
                                                       const Device& device,
                                                       const CollectivesOptions& o,
                                                       const comm::ClockOffset& rendezvous,
                                                       reports::CollectivesClock* clock = nullptr);

// Note [Clock offset for arrivals]: this rank's offset, the best of `rendezvous` and
// kClockRounds exchanges over `pg`. Collective over `pg`; rank 0's is {0, 0}.
comm::ClockOffset refine_clock_offset(comm::ProcessGroup& pg, const Device& device,
                                      const comm::ClockOffset& rendezvous);

// This host's steady clock: its boot id and time namespace ("" where /proc does not say).
std::string clock_identity();
// Whether this rank reads rank 0's clock: rank 0 publishes its `identity` through `store`,
// the others compare theirs (an empty one never matches). Collective over the store.
bool shares_rank0_clock(comm::Store& store, int rank, const std::string& identity);

// Note [Arrivals against the clocks]: the skew, its uncertainty and the last rank of probes
// stamped on rank 0's clock. arrival_ns[rank][probe]; uncertainty_ns[rank].
struct Arrivals {
  double skew_us = 0, skew_uncertainty_us = 0;
  std::optional<int64_t> last_rank;  // most often last where it led beyond the uncertainty
  double last_rank_share = 0;        // of the probes
};
Arrivals summarize_arrivals(const std::vector<std::vector<int64_t>>& arrival_ns,
                            const std::vector<int64_t>& uncertainty_ns);

// Whether a measured spread stands out of the clocks' error: strictly above it.
bool beyond_uncertainty(double measured_us, double uncertainty_us);

// nccl-tests' busbw factor and formula, but 0 for every op at one rank (nccl-tests' broadcast,
// reduce and sendrecv keep 1 there): one rank moves nothing over any link.
reports::BusBw collectives_busbw(CollectiveOp op, int world);

// Per op: nccl-tests' average bus bandwidth, the #wrong total and the rank last at most sizes.
std::vector<reports::CollectiveOpSummary> summarize_collectives(
    const std::vector<reports::CollectiveResult>& results, int world);

// The table's last two cells (Note [Arrivals against the clocks]): the skew ("-" at one rank,
// "<X" where not beyond its uncertainty) and the last rank ("-" at one rank, "?" unresolved).
std::string skew_cell(const reports::CollectiveResult& r, int world);
std::string last_rank_cell(const reports::CollectiveResult& r, int world);

// nccl-tests' table for one op's results, its "Avg bus bandwidth" line and ours of arrivals
// (with the legend of "<X" and "?" where a row has one), under `config`'s dtype, -c, -I and
// world size.
std::string collectives_table(const std::vector<reports::CollectiveResult>& results,
                              const reports::CollectiveOpSummary& summary,
                              const reports::CollectivesConfigInfo& config);

// The line printed above the tables at one rank, "" otherwise.
std::string one_rank_note(int world);

}  // namespace ddpb::bench
