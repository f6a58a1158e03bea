#include "core/memory_category.h"

#include <atomic>

#include "core/allocator.h"
#include "core/tensor.h"

namespace ddpb {
namespace {

constexpr int kNoScope = -1;
thread_local int t_category = kNoScope;
std::atomic<int> g_default{static_cast<int>(MemoryCategory::Other)};

}  // namespace

MemoryCategory current_memory_category() {
  return static_cast<MemoryCategory>(t_category == kNoScope ? g_default.load() : t_category);
}

void set_default_memory_category(MemoryCategory category) {
  g_default.store(static_cast<int>(category));
}

MemoryCategoryScope::MemoryCategoryScope(MemoryCategory category) : previous_(t_category) {
  t_category = static_cast<int>(category);
}

MemoryCategoryScope::~MemoryCategoryScope() {
  t_category = previous_;
}

void tag_memory(const Tensor& t, MemoryCategory category) {
  if (!t.defined() || !t.storage() || t.storage()->pinned()) return;
  device_allocator(t.storage()->device()).set_category(t.storage()->data(), category);
}

}  // namespace ddpb
