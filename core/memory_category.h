// What an allocation holds, for memory by category (docs/metrics.md "Memory by category").
//
// Note [Memory categories]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// The caching allocator files each live block under a category, and remembers what each held
// at the device's peak: memory[].by_category in a run record. The category of an allocation
// is the innermost MemoryCategoryScope on the allocating thread; a thread inside none (DP's
// replica workers, the loader's threads) takes the process-wide default, which the training
// loop sets to activations for the steps and leaves at other outside them. So:
//  - parameters: the model's tensors as the runner builds it (BatchNorm's buffers included);
//  - gradients: the parameters' gradients: DDP's buckets and ZeRO's shard, or the gradient a
//    leaf adopts from backward (retagged as it is adopted: tag_memory);
//  - optimizer_state: momentum and AdamW's moments;
//  - communication: what a collective stages (a comm hook's compressed bucket, the buffer
//    broadcast's flat copy);
//  - activations: everything else a step allocates (the input batch included);
//  - other: everything allocated outside a step, and the allocator's rounding of every block
//    (a category counts the bytes its tensors asked for; blocks round up to a quarter of a
//    power of two), so that the categories add up to the live bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "base/named_enum.h"

namespace ddpb {

class Tensor;

enum class MemoryCategory : uint8_t {
  Parameters,
  Gradients,
  OptimizerState,
  Activations,
  Communication,
  Other
};
inline constexpr size_t kNumMemoryCategories = 6;
constexpr NameTable<MemoryCategory, kNumMemoryCategories> enum_names(MemoryCategory) {
  return {{{"parameters", MemoryCategory::Parameters},
           {"gradients", MemoryCategory::Gradients},
           {"optimizer_state", MemoryCategory::OptimizerState},
           {"activations", MemoryCategory::Activations},
           {"communication", MemoryCategory::Communication},
           {"other", MemoryCategory::Other}}};
}
using MemoryByCategory = std::array<int64_t, kNumMemoryCategories>;
// Parameters, gradients and optimizer state together: the model state a design's formula
// promises (Note [Model-state memory] in reports/memory_model.h).
constexpr int64_t model_state_bytes(const MemoryByCategory& bytes) {
  return bytes[static_cast<size_t>(MemoryCategory::Parameters)] +
         bytes[static_cast<size_t>(MemoryCategory::Gradients)] +
         bytes[static_cast<size_t>(MemoryCategory::OptimizerState)];
}

// The category an allocation on this thread is filed under now.
MemoryCategory current_memory_category();
// The category of threads inside no scope (Note [Memory categories]).
void set_default_memory_category(MemoryCategory category);

// While it lives, this thread's allocations are filed under `category`.
class MemoryCategoryScope {
 public:
  explicit MemoryCategoryScope(MemoryCategory category);
  ~MemoryCategoryScope();
  MemoryCategoryScope(const MemoryCategoryScope&) = delete;
  MemoryCategoryScope& operator=(const MemoryCategoryScope&) = delete;

 private:
  int previous_;
};

// Files the storage of `t` (device memory from a device's allocator) under `category`.
void tag_memory(const Tensor& t, MemoryCategory category);

}  // namespace ddpb
