// Coalescing for DP's replicate and reduce_add: tensors are packed into flat chunks of at
// most cap_bytes (a tensor larger than the cap gets a chunk of its own), so that each chunk
// moves as one transfer instead of one per parameter.
#pragma once

#include <cstddef>
#include <vector>

#include "core/tensor.h"
#include "impl_dp/transport.h"

namespace ddpb::dp {

// Consecutive runs of tensor indices, each totalling at most cap_bytes unless it is a single
// tensor. All tensors in a chunk have the same dtype (a dtype change starts a new chunk).
std::vector<std::vector<size_t>> coalesce_groups(const std::vector<Tensor>& tensors,
                                                 size_t cap_bytes);

// Copies the tensors of `group` into one flat tensor on their device (current stream).
Tensor flatten(const std::vector<Tensor>& tensors, const std::vector<size_t>& group);
// Copies consecutive slices of `flat` back into the tensors of `group`.
void unflatten(const Tensor& flat, const std::vector<Tensor>& tensors,
               const std::vector<size_t>& group);

// DP's replicate and reduce_add over the first `used` devices, one transfer per chunk of
// `groups` (indices into each device's tensor list; from coalesce_groups):
// per_device[0]'s tensors are copied into per_device[1..used) ...
void broadcast_coalesced(Transport& transport, const std::vector<std::vector<Tensor>>& per_device,
                         const std::vector<std::vector<size_t>>& groups, size_t used);
// ... and per_device[1..used)'s tensors are summed into per_device[0]'s.
void reduce_add_coalesced(Transport& transport, const std::vector<std::vector<Tensor>>& per_device,
                          const std::vector<std::vector<size_t>>& groups, size_t used);

}  // namespace ddpb::dp
