// How DP moves flat chunks between its devices.
//
//  - CopyTransport: ops::copy. memcpy between logical CPU devices; peer or device-to-device
//    copies on CUDA (also for logical replicas that share one GPU, which NCCL refuses).
//  - NcclTransport: a single-process NCCL communicator over distinct GPUs (ncclCommInitAll);
//    broadcast and reduce are grouped so every device's part is one NCCL launch.
//
// Both are called from the DP driver thread; work is enqueued on each device's current
// stream for that thread (the caller sets the streams), and is complete on CPU at return.
#pragma once

#include <memory>
#include <vector>

#include "core/tensor.h"

namespace ddpb::dp {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // dst[i] = src for every i (dst[i] on device i+1; src on device 0).
  virtual void broadcast(const Tensor& src, const std::vector<Tensor>& dst) = 0;
  // parts[0] += parts[1] + ... + parts[n-1] (parts[i] on device i). parts[i>0] may be
  // clobbered.
  virtual void reduce_add(const std::vector<Tensor>& parts) = 0;
};

// Picks NCCL when built with it and `devices` are distinct GPUs; copies otherwise.
std::unique_ptr<Transport> make_transport(const std::vector<Device>& devices);

}  // namespace ddpb::dp
