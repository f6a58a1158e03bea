// Host collectives on device tensors: staged through page-locked copies.
//
// Note [Staging buffers]
// A backend that reads host memory (Gloo; an MPI that is not CUDA-aware) runs a collective
// on CUDA tensors through page-locked copies: copy in on the group's stream, synchronize, run
// on the host, copy back on the stream. The staging buffers come from the page-locked pool,
// which hands a freed block to the next host caller at once (a `--pin-memory` loader worker
// filling its batch), not in stream order as the device pools do. So a staging buffer may go
// back only after the copy back out of it has completed: the stream is synchronized first.
// The stream-order sanitizer checks every page-locked release against the streams that used
// the block (sanitizer::forget), and the tests run this code on CPU tensors staged the same
// way, so a release before the synchronize shows without a GPU.
#pragma once

#include <functional>
#include <span>

#include "comm/host_process_group.h"
#include "core/stream.h"
#include "core/tensor.h"

namespace ddpb::comm {

// One operand of a staged collective: whether the collective reads it (copied in) and
// writes it (copied back).
struct StagedOperand {
  const Tensor* tensor = nullptr;
  bool read = false;
  bool write = false;
};

// Whether a tensor must be staged for a backend that reads host memory: a CUDA tensor.
bool needs_host_copy(const Tensor& t);

// Runs `run` on host tensors standing for `operands`, in order: the operands for which
// `stage` holds are copied into page-locked buffers on `stream` (the reads), `run` runs once
// the copies are done, its results are copied back on `stream` (the writes), and the
// function returns once those copies are done and the buffers are back in their pool. At
// most HostTensors::kMax operands. The caller orders `stream` after the operands' producers.
void run_staged_on_host(const StreamPtr& stream, std::span<const StagedOperand> operands,
                        const std::function<void(const HostTensors&)>& run,
                        bool (*stage)(const Tensor&) = needs_host_copy);

}  // namespace ddpb::comm
