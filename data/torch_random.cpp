#include "data/torch_random.h"

#include <random>
#include <utility>

namespace ddpb {

std::vector<int64_t> torch_randperm(int64_t n, uint64_t seed) {
  std::vector<int64_t> r(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) r[static_cast<size_t>(i)] = i;
  std::mt19937 generator(static_cast<uint32_t>(seed));  // manual_seed: the low 32 bits
  for (int64_t i = 0; i + 1 < n; ++i) {
    const auto z = static_cast<int64_t>(generator() % static_cast<uint64_t>(n - i));
    std::swap(r[static_cast<size_t>(i)], r[static_cast<size_t>(z + i)]);
  }
  return r;
}

}  // namespace ddpb
