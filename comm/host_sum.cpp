#include "comm/host_sum.h"

#include <algorithm>
#include <cstdint>

#include "core/dtype.h"

namespace ddpb::comm {
namespace {

template <typename T>
void sum_exact(void* out, const void* a, const void* b, size_t n) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
}

// Each partial sum is computed in f32 and rounded back to the 16-bit type, so the wire
// carries 16-bit payloads.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void sum_16bit(void* out, const void* a, const void* b, size_t n) {
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = FromFloat(ToFloat(x[i]) + ToFloat(y[i]));
}

// fp16 in blocks through the bulk conversions (F16C): the scalar conversion's branches made
// this sum, not the wire, the cost of an fp16-compressed AllReduce on CPU.
void sum_f16(void* out, const void* a, const void* b, size_t n) {
  constexpr size_t kBlock = 512;
  float fx[kBlock], fy[kBlock];
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  for (size_t start = 0; start < n; start += kBlock) {
    const auto len = static_cast<int64_t>(std::min(kBlock, n - start));
    f16_to_f32(x + start, fx, len);
    f16_to_f32(y + start, fy, len);
    for (int64_t i = 0; i < len; ++i) fx[i] += fy[i];
    f32_to_f16(fx, o + start, len);
  }
}

}  // namespace

SumFn sum_function(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return &sum_exact<float>;
    case DType::I32:
      return &sum_exact<int32_t>;
    case DType::I64:
      return &sum_exact<int64_t>;
    case DType::U8:
      return &sum_exact<uint8_t>;
    case DType::BF16:
      return &sum_16bit<bf16_to_float, float_to_bf16>;
    case DType::F16:
      return &sum_f16;
  }
  return nullptr;
}

}  // namespace ddpb::comm
