// Elementwise sums on host memory for the host process groups' reductions (Gloo's reduce
// functions, MPI's user-defined operation for 16-bit floats).
//
// f32, i32, i64 and u8 are summed exactly in their type; bf16 and f16 partial sums are
// computed in f32 and rounded back to the 16-bit type, so the wire carries 16-bit payloads (as
// NCCL does).
#pragma once

#include <cstddef>

#include "core/dtype.h"

namespace ddpb::comm {

// out[i] = a[i] + b[i] for n elements; out may alias a or b.
using SumFn = void (*)(void* out, const void* a, const void* b, size_t n);
SumFn sum_function(DType dtype);

}  // namespace ddpb::comm
