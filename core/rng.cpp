#include "core/rng.h"

#include <cmath>
#include <numbers>

namespace ddpb {
namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

uint64_t rng_bits(uint64_t seed, uint64_t stream, uint64_t index) {
  return splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ index);
}

double rng_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return static_cast<double>(rng_bits(seed, stream, index) >> 11) * 0x1.0p-53;
}

double rng_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  double u1 = rng_uniform(seed, stream, 2 * index);
  double u2 = rng_uniform(seed, stream, 2 * index + 1);
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

float rng_normal_fast(uint64_t key, uint64_t index) {
  const uint64_t bits = splitmix64(key ^ (index * 0xD1B54A32D192ED03ull));
  const uint32_t sum =
      static_cast<uint32_t>(bits & 0xFFFF) + static_cast<uint32_t>((bits >> 16) & 0xFFFF) +
      static_cast<uint32_t>((bits >> 32) & 0xFFFF) + static_cast<uint32_t>(bits >> 48);
  // Four U(0,1) sum to mean 2 and variance 1/3.
  constexpr float kScale = 1.7320508f / 65536.0f;
  return (static_cast<float>(sum) - 2.0f * 65536.0f) * kScale;
}

uint64_t rng_below(uint64_t seed, uint64_t stream, uint64_t index, uint64_t n) {
  // 128-bit multiply maps 64 random bits onto [0, n) with negligible bias.
  return static_cast<uint64_t>(
      (static_cast<unsigned __int128>(rng_bits(seed, stream, index)) * n) >> 64);
}

std::vector<int64_t> rng_permutation(uint64_t seed, uint64_t stream, int64_t n) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = i;
  for (int64_t i = n - 1; i > 0; --i) {
    auto j = static_cast<int64_t>(
        rng_below(seed, stream, static_cast<uint64_t>(i), static_cast<uint64_t>(i + 1)));
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
  }
  return perm;
}

uint64_t hash_name(const char* text) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (; *text; ++text) h = (h ^ static_cast<unsigned char>(*text)) * 1099511628211ull;
  return h;
}

}  // namespace ddpb
