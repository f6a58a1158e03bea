// DataParallel: one process, one worker thread per device, faithful to
// torch.nn.DataParallel's design. Every step:
//   1. scatter   the batch is split along dim 0 (torch.chunk) and copied to the devices on
//                side streams that the compute streams wait on;
//   2. replicate parameters and buffers are broadcast from device 0 to the other replicas,
//                coalesced in flat chunks of at most `broadcast_bytes` (NCCL for distinct
//                GPUs, copies otherwise); Note [DP buffers] in data_parallel.cpp;
//   3. forward   each worker runs its replica's forward on its own stream (parallel_apply);
//   4. gather    the outputs are copied to device 0;
//   5. loss      on device 0 over the whole global batch;
//      backward  the output gradient is scattered back and the replicas run backward in
//                parallel on their threads;
//   6. reduce    replica gradients are reduce-added, coalesced, into device 0's parameters;
//   7. optimizer steps on device 0 only; the next replicate sends the new parameters out.
// Replica 0 *is* the master module on device 0, as in PyTorch, where device 0's replica
// shares the original parameters. Replicas 1..n-1 are persistent modules whose parameters
// are overwritten every step (the copy is the cost being measured, the allocation is not).
//
// Note [DP in PyTorch's terms]
// ours                                   torch.nn.DataParallel / torch.nn.parallel
// -------------------------------------  --------------------------------------------------
// scatter (impl_dp/scatter_gather.h)     scatter / Scatter.apply (torch.chunk semantics)
// replicate -> broadcast_coalesced       replicate -> comm.broadcast_coalesced
// parallel_apply on the WorkerPool       parallel_apply (a thread per device)
// gather (impl_dp/scatter_gather.h)      gather / Gather.apply (outputs to device 0)
// reduce_add -> reduce_add_coalesced     the backward of Broadcast: comm.reduce_add_coalesced
// Transport (copy | nccl)                comm's copies or NCCL (torch.cuda.nccl)
// module() is replica 0                  module: device 0's replica is the original module
//
// Threads: step() is called from one driver thread; it uses the worker pool for the
// per-replica work and rethrows a worker's exception with its device.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/autograd.h"
#include "core/nn.h"
#include "core/optim.h"
#include "core/phase_timer.h"
#include "core/step_phase.h"
#include "core/step_stats.h"
#include "impl_dp/transport.h"
#include "impl_dp/worker_pool.h"

namespace ddpb::dp {

// DP's phases, in order (Note [One phase vocabulary], core/step_phase.h).
using Phase = StepPhase;
inline constexpr StepPhase kPhases[] = {Phase::Scatter, Phase::Replicate, Phase::Forward,
                                        Phase::Gather,  Phase::Loss,      Phase::Backward,
                                        Phase::Reduce,  Phase::Optimizer};

// What DataParallel needs of a model, without knowing which one (impl_dp/ does not include
// workloads/): how to build a replica on a device (every call the same initial parameters),
// how a replica runs its part of the batch, and the loss over the gathered outputs.
struct ReplicaSpec {
  std::function<std::unique_ptr<nn::Module>(const Device& device)> make;
  std::function<autograd::Var(nn::Module& replica, const Tensor& x)> forward;
  std::function<autograd::Var(const autograd::Var& outputs, const Tensor& targets)> loss;
};

struct DpOptions {
  size_t broadcast_bytes = size_t{10} << 20;  // --dp-broadcast-mb
};

struct DeviceStepStats {
  double busy_ms = 0;  // forward + backward work of this replica (its critical path)
  double idle_ms = 0;  // step time minus busy: waiting on device 0 and the transfers
  int64_t rows = 0;    // samples this replica processed
  // Host steady-clock times (ns) when the worker issued its forward and backward: the work
  // itself on CPU, the enqueueing on CUDA (for timelines; durations above are device time).
  int64_t forward_start_ns = 0, forward_end_ns = 0, backward_start_ns = 0, backward_end_ns = 0;
};

// What one step did (Note [Step stats] in core/step_stats.h): kPhases in order, the four
// transfers as collectives on device 0's stream laid end to end, and what only DP has.
struct DpStepStats : StepStats {
  std::vector<DeviceStepStats> devices;
  int64_t scatter_bytes = 0;  // input rows sent to devices other than device 0
  int64_t replicate_bytes = 0, gather_bytes = 0, reduce_bytes = 0;
  // What the byte counts above are made of, for a what-if model at another device count
  // (bench/project/projection.h): per-step sizes that do not depend on the number of devices.
  int64_t parameter_bytes = 0, buffer_bytes = 0;
  int64_t input_bytes_per_sample = 0, output_bytes_per_sample = 0;
};

class DataParallel {
 public:
  DataParallel(ReplicaSpec model, std::vector<Device> devices, DpOptions options = {});
  ~DataParallel();

  // The master module (replica 0, on devices()[0]): its parameters are the trained ones.
  nn::Module& module() { return *replicas_[0]; }
  const std::vector<Device>& devices() const { return devices_; }
  const char* transport_name() const { return transport_->name(); }

  // One full training step (zero_grad, the phases above, optimizer.step()) on a host batch
  // of inputs x and targets y. `optimizer` must own module()'s parameters. Synchronises at
  // the end to read the loss.
  DpStepStats step(const Tensor& x, const Tensor& y, optim::Optimizer& optimizer);

 private:
  struct StepState;
  void scatter_batch(StepState& st, const Tensor& x, const Tensor& y);
  void forward_replicas(StepState& st);
  int64_t gather_outputs(StepState& st);
  void backward_replicas(StepState& st);
  void fill_timings(DpStepStats& stats, const StepState& st, const PhaseTimer& timer) const;
  static void add_transfers(DpStepStats& stats, const PhaseTimer& timer);
  void replicate(size_t used);
  void reduce_add(size_t used);
  // Makes the driver's streams on device 0 and on each replica's device wait for that
  // replica stream's work so far (Note [DP replica join]).
  void join_replicas(size_t used);
  // Makes every replica stream wait for the driver's work so far on its device.
  void fork_replicas(size_t used);

  ReplicaSpec model_;
  std::vector<Device> devices_;
  DpOptions options_;
  std::vector<std::unique_ptr<nn::Module>> replicas_;
  std::vector<std::vector<Tensor>> params_;   // params_[r][k]: parameter k of replica r
  std::vector<std::vector<size_t>> groups_;   // coalesced chunks over parameter indices
  std::vector<std::vector<Tensor>> buffers_;  // buffers_[r][k]: buffer k of replica r
  std::vector<std::vector<size_t>> buffer_groups_;
  std::vector<StreamPtr> compute_streams_, side_streams_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<WorkerPool> pool_;
};

// `--device cpu|cuda --world-size N` or an explicit `--devices cuda:0,cuda:0` list.
std::vector<Device> resolve_dp_devices(const std::string& device, int world_size,
                                       const std::string& devices_list);
// True when two replicas share one GPU ("logical replicas": mechanics, not scaling).
bool has_logical_replicas(const std::vector<Device>& devices);

}  // namespace ddpb::dp
