// torch.randperm on the CPU, as PyTorch 1.13 computes it, so that ddpbench's DistributedSampler
// reads the very samples torch.utils.data.DistributedSampler reads for the same seed and epoch.
//
// Note [torch.randperm on the CPU]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A CPU torch.Generator is a 32-bit Mersenne Twister (mt19937); manual_seed(s) seeds it with
// s's low 32 bits, as std::mt19937 seeds itself. randperm(n) fills 0..n-1 and then, for
// i = 0 .. n-2, swaps position i with position i + (random() % (n - i)), where random() is the
// generator's next 32-bit output (aten/src/ATen/native/TensorFactories.cpp, randperm_cpu).
// PyTorch 2.x does the same for n < 2^32 / 20 (214,748,364) and, above, an inside-out
// Fisher-Yates with 64-bit draws; 1.13, the version this project is tested against, uses the
// 32-bit path for every n, and so does this function.
#pragma once

#include <cstdint>
#include <vector>

namespace ddpb {

// torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist() (PyTorch 1.13).
std::vector<int64_t> torch_randperm(int64_t n, uint64_t seed);

}  // namespace ddpb
