// ProcessGroup: collectives among the ranks of one job (as torch.distributed's).
//
// Every collective is asynchronous and returns a Work. The element count and dtype always
// come from the tensors, never from the caller. Collectives on one ProcessGroup run in the
// order they were issued, on the group's communication thread (Gloo) or stream (NCCL), so
// they overlap with the caller's compute; every rank must issue the same collectives in the
// same order (DDP guarantees this: see Note [DDP bucket launch order] in impl_ddp).
//
// Device tensors:
//  - gloo and mpi stage CUDA tensors through pinned host buffers (D2H on its stream, the host
//    collective, then H2D), which also lets several ranks share one GPU;
//  - nccl runs on a dedicated stream that first waits on an event recorded on the caller's
//    current stream, so no host sync is needed.
//
// Thread-safety: issue collectives from one thread per group; Work objects may be waited on
// from any thread.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/named_enum.h"
#include "comm/store.h"
#include "core/stream.h"
#include "core/tensor.h"

namespace ddpb::comm {

class CommTimeout : public Error {
 public:
  using Error::Error;
};

// One issued collective.
class Work {
 public:
  virtual ~Work() = default;
  // True once the collective finished (successfully or not). Never blocks.
  virtual bool is_completed() = 0;
  // Gloo: blocks until complete; throws the collective's error, or CommTimeout (naming the
  // op, its sequence number and the timeout) if it does not finish in time.
  // NCCL: does not block the host (barrier excepted): throws the error recorded so far and
  // makes the caller's current stream wait for the result, so stream-ordered work and host
  // reads through a stream sync see it (comm/process_group_nccl.h).
  virtual void wait() = 0;
  // The failure, if any (after completion).
  virtual std::exception_ptr exception() const = 0;

  // Description, for records, timelines and the flight recorder.
  int64_t sequence = 0;    // per-group issue order, from 0
  size_t flight_ring = 0;  // its group's ring in the flight recorder (FlightRecorder::Ring)
  std::string op;          // "allreduce", "broadcast", ...
  int64_t bytes = 0;       // payload bytes of this rank's input
  // Host timestamps (steady clock, ns) when the collective started and finished on the
  // communication thread or stream; 0 until known.
  int64_t start_ns = 0, end_ns = 0;
};

using WorkPtr = std::shared_ptr<Work>;

// How reduce_scatter_tensor_coalesced combines the ranks' chunks (c10d's ReduceOp).
enum class ReduceOp { Sum, Avg };

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual std::string backend() const = 0;

  // In-place sum of `tensor` over all ranks (f32, bf16, f16).
  virtual WorkPtr allreduce(const Tensor& tensor) = 0;
  // `tensor` on every rank becomes root's.
  virtual WorkPtr broadcast(const Tensor& tensor, int root) = 0;
  // output = concat over ranks of each rank's input (output numel = size * input numel).
  virtual WorkPtr allgather(const Tensor& output, const Tensor& input) = 0;
  // input holds size() equal chunks; output (one chunk) = sum over ranks of chunk[rank].
  virtual WorkPtr reduce_scatter(const Tensor& output, const Tensor& input) = 0;
  // root's `tensor` becomes the sum over ranks; the others' is left unspecified (scratch).
  virtual WorkPtr reduce(const Tensor& tensor, int root) = 0;
  // input holds size() equal chunks; chunk j goes to rank j, and output's chunk i is what
  // rank i sent this rank (MPI_Alltoall).
  virtual WorkPtr alltoall(const Tensor& output, const Tensor& input) = 0;
  // Sends `send` to rank `dst` and receives `recv` (same size and dtype) from rank `src`, as
  // one operation (nccl-tests' sendrecv: dst = rank + 1, src = rank - 1 around the ring).
  virtual WorkPtr sendrecv(const Tensor& send, int dst, const Tensor& recv, int src) = 0;
  virtual WorkPtr barrier() = 0;
  // In-place sum of each tensor over all ranks, as one operation: the Work completes when
  // every tensor is reduced. Every rank passes the same number of tensors with the same
  // sizes, in the same order. The default issues one allreduce per tensor (each taking a
  // sequence number); NCCL launches them in one ncclGroupStart/End. An empty list issues
  // nothing and returns a completed Work with sequence -1.
  virtual WorkPtr allreduce_coalesced(const std::vector<Tensor>& tensors);
  // PyTorch's reduce_scatter_tensor_coalesced (c10d Backend): reduce_scatter(outputs[k],
  // inputs[k]) for every k, as one operation, with op Sum or Avg (the sum divided by size()).
  // Avg divides each input in place first: the inputs are scratch (as DDP's buckets are).
  // The default issues one reduce_scatter per pair; NCCL launches them in one group.
  virtual WorkPtr reduce_scatter_tensor_coalesced(const std::vector<Tensor>& outputs,
                                                  const std::vector<Tensor>& inputs,
                                                  ReduceOp op = ReduceOp::Sum);
  // PyTorch's allgather_into_tensor_coalesced: allgather(outputs[k], inputs[k]) for every k,
  // as one operation (in place where an input is its rank's chunk of the output). The default
  // issues one allgather per pair; NCCL launches them in one group.
  virtual WorkPtr allgather_into_tensor_coalesced(const std::vector<Tensor>& outputs,
                                                  const std::vector<Tensor>& inputs);

  // Note [Issue bursts]
  // A caller that issues many collectives back to back and only then waits for them (the
  // timed loop of `ddpbench collectives`, as nccl-tests launches its iterations) brackets the
  // loop with begin_burst() and end_burst(), on the issuing thread. A GPU launch never
  // competes with its collective for the host. A backend that runs its collectives on a host
  // thread of its own (gloo, mpi) shares a core with the issuing thread where the launcher
  // binds each rank to one (mpirun does): woken, that thread takes the core from its issuer,
  // which lets DDP's allreduces overlap the backward pass but makes a loop of collectives
  // hand the core back and forth once per collective, two context switches and two system
  // calls that a bare loop of the library's calls does not make. In a burst, such a backend
  // runs a collective on host memory issued while its thread is idle (nothing queued or
  // running) on the issuing thread, before issue returns: the loop is then the library's
  // calls back to back, plus ddpbench's bookkeeping. Otherwise, and for CUDA tensors, it
  // queues the collective as outside a burst; order, sequence numbers, the flight recorder
  // and failures are as outside a burst. The default does nothing.
  virtual void begin_burst() {}
  virtual void end_burst() {}

 protected:
  ProcessGroup(int rank, int size) : rank_(rank), size_(size) {}
  int rank_, size_;
};

// ReduceOp::Avg where a backend has no average of its own: each tensor (f32) divided by `size`
// in place, on the current stream, before the Sum.
void divide_for_average(const std::vector<Tensor>& tensors, int size);

// begin_burst() for the lifetime of the object (Note [Issue bursts]).
class IssueBurst {
 public:
  explicit IssueBurst(ProcessGroup& pg) : pg_(pg) { pg_.begin_burst(); }
  ~IssueBurst() { pg_.end_burst(); }
  IssueBurst(const IssueBurst&) = delete;
  IssueBurst& operator=(const IssueBurst&) = delete;

 private:
  ProcessGroup& pg_;
};

// The collective libraries a ProcessGroup runs on (`--backend`).
enum class CommBackend { Gloo, Nccl, Mpi };
constexpr NameTable<CommBackend, 3> enum_names(CommBackend) {
  return {{{"gloo", CommBackend::Gloo}, {"nccl", CommBackend::Nccl}, {"mpi", CommBackend::Mpi}}};
}

struct ProcessGroupOptions {
  CommBackend backend = CommBackend::Gloo;
  Device device;  // this rank's device (tensors live here)
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};  // every collective
  // The group's own rendezvous (pairs, communicator); empty: `timeout`. init_process_group
  // gives what is left of the rendezvous's --timeout.
  std::optional<std::chrono::milliseconds> connect_timeout;
  std::string hostname = "127.0.0.1";  // interface gloo binds to (MASTER_ADDR's for one node)
  // Which of the flight recorder's rings its collectives go into: "" the world's, else a
  // sub-group's, named by its world ranks (Note [Sub-groups]).
  std::string flight_group;
};

// Creates the group and performs its rendezvous through `store` (throws on timeout). An mpi
// group meets through MPI_COMM_WORLD instead and leaves the store alone.
std::shared_ptr<ProcessGroup> make_process_group(std::shared_ptr<Store> store, int rank, int size,
                                                 const ProcessGroupOptions& options);

// Note [Sub-groups]
// ~~~~~~~~~~~~~~~~~
// PyTorch's dist.new_group(ranks): a group of some of the world's ranks, as the hybrid designs
// need (a shard group inside a node, a replicate group across nodes). Every rank of the world
// calls it, in the same order as its other groups, with the same `ranks` (distinct world
// ranks): a member gets a group in which it is rank i where ranks[i] is its world rank, the
// others nullptr. Gloo and NCCL meet under the group's own store prefix (Note [Process group
// store prefix], counted by every world rank so that later groups stay in step); MPI splits
// MPI_COMM_WORLD, which every world rank takes part in. The same call with every rank makes a
// second queue over the same store: its collectives never wait behind the first group's.
// A sub-group counts its collectives from 0 as every group does, so the flight recorder keeps
// its entries in a ring of their own, named by the group's world ranks ("ranks 0-3,8"), and a
// dump lists them under "groups"; the doctor compares the members of each group by that
// group's numbers. They count as in flight while they run (the step watchdog leaves a rank
// waiting in one to the collective's timeout), and a failed one as trouble. UsageError for
// ranks out of the world, repeated or empty.
std::shared_ptr<ProcessGroup> new_group(std::shared_ptr<Store> store, int world_rank,
                                        int world_size, const std::vector<int>& ranks,
                                        const ProcessGroupOptions& options);

}  // namespace ddpb::comm
