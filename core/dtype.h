// Element types. Compute is fp32 everywhere; bf16 and fp16 are for storage and
// communication (gradient compression hooks); i32 holds token ids and class labels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ddpb {

enum class DType : uint8_t { F32, BF16, F16, I32, I64 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
  }
  return 0;
}

// Lower-case name, as printed in errors and reports ("f32", "bf16", ...).
std::string_view dtype_name(DType t);
// The safetensors spelling ("F32", "BF16", "F16", "I32", "I64").
std::string_view dtype_safetensors_name(DType t);
// Parses the safetensors spelling; returns false for an unsupported type.
bool dtype_from_safetensors_name(std::string_view name, DType* out);

// Host conversions used by the CPU kernels and tests. bf16 rounds to nearest even.
uint16_t float_to_bf16(float f);
float bf16_to_float(uint16_t h);
uint16_t float_to_f16(float f);
float f16_to_float(uint16_t h);

}  // namespace ddpb
