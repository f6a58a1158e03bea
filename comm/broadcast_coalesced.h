// One broadcast for many tensors (PyTorch's _broadcast_coalesced): DDP's and FSDP's module
// states and buffers go out as one flat tensor rather than one collective each.
#pragma once

#include <vector>

#include "comm/process_group.h"
#include "core/tensor.h"

namespace ddpb::comm {

// Collective over `pg`: every rank's `tensors` (one dtype, on the group's device) become
// `root`'s. The flat copy counts as communication memory. A no-op for an empty list.
void broadcast_coalesced(ProcessGroup& pg, const std::vector<Tensor>& tensors, int root = 0);

}  // namespace ddpb::comm
