// Element types. Compute is fp32 everywhere; bf16 and fp16 are for storage and
// communication (gradient compression hooks); i32 holds token ids and class labels; u8 holds
// image bytes shipped to the device before normalization (--normalize-on-device).
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ddpb {

enum class DType : uint8_t { F32, BF16, F16, I32, I64, U8 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
      return 4;
    case DType::BF16:
      return 2;
    case DType::F16:
      return 2;
    case DType::I32:
      return 4;
    case DType::I64:
      return 8;
    case DType::U8:
      return 1;
  }
  return 0;
}

// Lower-case name, as printed in errors and reports ("f32", "bf16", ...).
std::string_view dtype_name(DType t);
// The safetensors spelling ("F32", "BF16", "F16", "I32", "I64", "U8").
std::string_view dtype_safetensors_name(DType t);
// Parses the safetensors spelling; returns false for an unsupported type.
bool dtype_from_safetensors_name(std::string_view name, DType* out);

// Host conversions used by the CPU kernels and tests. bf16 rounds to nearest even. Inline,
// so that the CPU cast and the Gloo 16-bit sums compile them into their loops.
inline uint16_t float_to_bf16(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float bf16_to_float(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

inline uint16_t float_to_f16(float f) {
  // IEEE 754 binary16 with round-to-nearest-even, including subnormals and overflow to inf.
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t mant = x & 0x007FFFFF;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xFF);
  if (exp == 0xFF) return static_cast<uint16_t>(sign | 0x7C00 | (mant ? 0x200 : 0));
  int32_t e = exp - 127 + 15;
  if (e >= 0x1F) return static_cast<uint16_t>(sign | 0x7C00);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x00800000;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;  // may carry into the exponent
  return static_cast<uint16_t>(half);
}

inline float f16_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000 | (mant << 13));
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

// Bulk host conversions between f32 and f16 (the F16C instructions where the CPU has them,
// else the scalar functions above; identical results for finite values and infinities).
void f32_to_f16(const float* in, uint16_t* out, int64_t n);
void f16_to_f32(const uint16_t* in, float* out, int64_t n);

// dst[i] = src[i] rounded to the nearest bf16 value (ties to even), kept as f32: exactly
// what a bf16 GEMM operand holds. NaN stays NaN (quiet); overflow rounds to infinity.
// src and dst may be the same buffer.
void round_to_bf16(const float* src, float* dst, int64_t n);

}  // namespace ddpb
