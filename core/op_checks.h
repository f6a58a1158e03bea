// The argument checks every op runs before it dispatches to a backend (core/ops.cpp and the
// ops split out of it), and the declaration of what it reads and writes for the stream-order
// sanitizer. Internal to core/ops*.cpp.
#pragma once

#include <initializer_list>
#include <utility>

#include "core/backend.h"
#include "core/nvtx.h"
#include "core/tensor.h"

namespace ddpb::ops::detail {

constexpr DType F = DType::F32;
constexpr DType I = DType::I32;

void require_defined(const Tensor& t, const char* what);
// All tensors defined, on one device, of the expected dtype; returns that device's backend.
Backend& same_device(const char* op, std::initializer_list<std::pair<const Tensor*, DType>> ts);
void same_numel(const char* op, const Tensor& a, const Tensor& b);
void require_shape(const char* op, const Tensor& t, const Shape& shape);
// Declares what an op reads and writes on the current stream of `device`, for the
// stream-order sanitizer (Note [Stream-order sanitizer]); one relaxed load when it is off.
void accesses(const char* op, const Device& device, std::initializer_list<const Tensor*> reads,
              std::initializer_list<const Tensor*> writes);

}  // namespace ddpb::ops::detail

// One NVTX range per heavy op (category "op"), nested in the phase ranges; registered once
// per call site. Element-wise ops are left out: their ranges would cost more than they show.
#define DDPB_OP_RANGE(name)                                        \
  static const ::ddpb::nvtx::RegisteredString kOpName("op." name); \
  ::ddpb::nvtx::Range op_range(kOpName, ::ddpb::nvtx::Category::Op)
