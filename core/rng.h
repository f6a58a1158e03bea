// Counter-based random numbers: a value depends only on (seed, stream, index), never on
// call order or thread, so initialisation and synthetic data are identical on every device,
// rank and platform. Uses the splitmix64 finaliser as the mixing function.
#pragma once

#include <cstdint>
#include <vector>

namespace ddpb {

uint64_t rng_bits(uint64_t seed, uint64_t stream, uint64_t index);
// Uniform in [0, 1).
double rng_uniform(uint64_t seed, uint64_t stream, uint64_t index);
// Standard normal (Box-Muller on two counter values).
double rng_normal(uint64_t seed, uint64_t stream, uint64_t index);
// A cheap approximately standard normal value (Irwin-Hall: the sum of four 16-bit uniforms
// from one 64-bit hash, centred and scaled to unit variance; bounded by +-3.46). For bulk
// synthetic noise, where rng_normal's two logs and a cosine per value would make the data
// loader the bottleneck. `key` is a per-sample value, e.g. rng_bits(seed, stream, sample).
float rng_normal_fast(uint64_t key, uint64_t index);

// Uniform integer in [0, n).
uint64_t rng_below(uint64_t seed, uint64_t stream, uint64_t index, uint64_t n);

// A random permutation of [0, n) (Fisher-Yates driven by the counter generator).
std::vector<int64_t> rng_permutation(uint64_t seed, uint64_t stream, int64_t n);

// Stable 64-bit hash of a string, to derive per-parameter streams from names.
uint64_t hash_name(const char* text);

}  // namespace ddpb
