// ProcessGroupGloo: the collectives of comm/process_group.h over Gloo's TCP transport.
//
// Rendezvous (in the constructor): a TCP device bound to options.hostname, then a full mesh
// of connections whose addresses are exchanged through `store`. The constructor blocks until
// every rank has arrived, and throws CommTimeout when one has not within options.timeout.
// `store` is used as given: two groups on one store need different prefixes, which
// make_process_group provides (see Note [Process group store prefix] in process_group.cpp).
//
// Execution, staging of CUDA tensors, Works and destruction: comm/host_process_group.h. Gloo
// tags each collective with its sequence number, so ranks whose orders differ fail with a
// timeout rather than mixing data; a running collective ends within options.timeout.
//
// Reductions (sums): f32, i32 and i64 exactly; bf16 and f16 are reduced with their 16-bit
// payload on the wire (half the bytes of f32, which is the point of a compression hook):
// each partial sum is computed in f32 and rounded to the 16-bit type, as NCCL does.
// reduce_scatter is a ring (size-1 steps, each sending one chunk to the right neighbour), so
// every rank sends (n-1)/n of the input, the same as the reduce-scatter half of a ring
// allreduce; Gloo 0.5 has no unbound-buffer reduce_scatter of its own.
//
// Thread-safety: as ProcessGroup (issue from one thread; Works may be waited anywhere).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/host_process_group.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace ddpb::comm {

class ProcessGroupGloo final : public HostProcessGroup {
 public:
  ProcessGroupGloo(std::shared_ptr<Store> store, int rank, int size,
                   const ProcessGroupOptions& options);
  ~ProcessGroupGloo() override;

  std::string backend() const override { return "gloo"; }

 private:
  void run_host(const HostCollective& collective, const HostTensors& host,
                int64_t sequence) override;

  std::shared_ptr<gloo::Context> context_;
};

// The Gloo library version this binary was built against ("0.5.0").
std::string gloo_version();

}  // namespace ddpb::comm
