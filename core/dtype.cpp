#include "core/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace ddpb {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::BF16:
      return "bf16";
    case DType::F16:
      return "f16";
    case DType::I32:
      return "i32";
    case DType::I64:
      return "i64";
    case DType::U8:
      return "u8";
  }
  return "?";
}

std::string_view dtype_safetensors_name(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::BF16:
      return "BF16";
    case DType::F16:
      return "F16";
    case DType::I32:
      return "I32";
    case DType::I64:
      return "I64";
    case DType::U8:
      return "U8";
  }
  return "?";
}

bool dtype_from_safetensors_name(std::string_view name, DType* out) {
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64, DType::U8}) {
    if (dtype_safetensors_name(t) == name) {
      *out = t;
      return true;
    }
  }
  return false;
}

namespace {

#if defined(__x86_64__)
__attribute__((target("avx,f16c"))) void f32_to_f16_f16c(const float* in, uint16_t* out,
                                                         int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(in + i);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) out[i] = float_to_f16(in[i]);
}

__attribute__((target("avx,f16c"))) void f16_to_f32_f16c(const uint16_t* in, float* out,
                                                         int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = f16_to_float(in[i]);
}

// CPUID leaf 1: ECX bit 29 F16C, bit 28 AVX, bit 27 OSXSAVE; and the OS must save the AVX
// state (XCR0 bits 1 and 2). Read directly: Clang's __builtin_cpu_supports knows no "f16c".
bool detect_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool f16c = c & (1u << 29), avx = c & (1u << 28), osxsave = c & (1u << 27);
  if (!(f16c && avx && osxsave)) return false;
  unsigned lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 0x6u) == 0x6u;
}

bool has_f16c() {
  static const bool yes = detect_f16c();
  return yes;
}
#endif

}  // namespace

void f32_to_f16(const float* in, uint16_t* out, int64_t n) {
#if defined(__x86_64__)
  if (has_f16c()) return f32_to_f16_f16c(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_f16(in[i]);
}

void round_to_bf16(const float* src, float* dst, int64_t n) {
  // Branch-free, so the loop vectorises: the rounded value and the quieted NaN are both
  // computed and one is selected.
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = std::bit_cast<uint32_t>(src[i]);
    const uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
    const uint32_t quiet_nan = (bits | 0x00400000u) & 0xFFFF0000u;
    const bool is_nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
    dst[i] = std::bit_cast<float>(is_nan ? quiet_nan : rounded);
  }
}

void f16_to_f32(const uint16_t* in, float* out, int64_t n) {
#if defined(__x86_64__)
  if (has_f16c()) return f16_to_f32_f16c(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = f16_to_float(in[i]);
}

}  // namespace ddpb
