#include "core/allocator.h"

#include "base/memory_limits.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <memory>

#include "core/backend.h"
#include "core/check.h"
#include "core/stream.h"

namespace ddpb {

namespace {
std::atomic<int> g_live_communicators{0};
}  // namespace

CommunicatorLease::CommunicatorLease() {
  ++g_live_communicators;
}
CommunicatorLease::~CommunicatorLease() {
  --g_live_communicators;
}
bool CommunicatorLease::any_live() {
  return g_live_communicators.load() > 0;
}

std::string CachingAllocator::out_of_memory_message(size_t size, const std::string& cause) const {
  const MemoryStats s = stats();
  auto mib = [](int64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; };
  return "out of memory allocating " + mib(static_cast<int64_t>(size)) + " (" +
         std::to_string(size) + " bytes) while a communicator is live, so the cache is kept " +
         "(Note [Out of memory with NCCL live]): in use " + mib(s.current_bytes) + ", reserved " +
         mib(s.reserved_bytes) + ", cached " + mib(s.reserved_bytes - s.current_bytes) + ", peak " +
         mib(s.peak_bytes) + "; " + cause;
}

CachingAllocator::CachingAllocator(std::unique_ptr<MemoryBackend> backend)
    : backend_(std::move(backend)) {}

CachingAllocator::~CachingAllocator() {
  // Live blocks at exit belong to static tensors; only the cache is returned.
  try {
    empty_cache();
  } catch (...) {
  }
}

size_t CachingAllocator::round_size(size_t nbytes) {
  constexpr size_t kMinBlock = 512;
  if (nbytes <= kMinBlock) return kMinBlock;
  // Four steps per power of two: waste is below 25% and sizes repeat exactly across steps.
  size_t pow2 = std::bit_floor(nbytes);
  size_t step = pow2 / 4;
  return (nbytes + step - 1) / step * step;
}

void* CachingAllocator::allocate(size_t nbytes, uintptr_t pool) {
  size_t size = round_size(nbytes);
  std::unique_lock lock(mutex_);
  ++stats_.num_allocs;
  void* ptr = nullptr;
  auto& bins = cache_[pool];
  auto bin = bins.find(size);
  if (bin != bins.end() && !bin->second.empty()) {
    ptr = bin->second.back();
    bin->second.pop_back();
    ++stats_.num_cache_hits;
  } else {
    lock.unlock();
    try {
      ptr = backend_->raw_alloc(size);
    } catch (const Error& e) {
      // Out of memory: give the cache back and try once more before failing. Not while this
      // thread captures a graph: freeing device memory would end the capture.
      if (capture_detail::capturing_on_this_thread()) throw;
      if (CommunicatorLease::any_live()) throw Error(out_of_memory_message(size, e.what()));
      empty_cache();
      try {
        ptr = backend_->raw_alloc(size);
      } catch (const Error& again) {
        const MemoryStats s = stats();
        throw Error(std::string(again.what()) + "; this device's tensors hold " +
                    std::to_string(s.current_bytes >> 20) + " MiB (peak " +
                    std::to_string(s.peak_bytes >> 20) + " MiB)");
      }
    }
    lock.lock();
    ++stats_.num_backend_allocs;
    stats_.reserved_bytes += static_cast<int64_t>(size);
  }
  const MemoryCategory category = current_memory_category();
  const BlockInfo block{size, pool, category, nbytes};
  live_[ptr] = block;
  add_live(block, +1);
  return ptr;
}

// Under mutex_: a block comes (sign +1) or goes (-1), and a new peak remembers what each
// category held. A category counts the bytes its tensors asked for; the rounding up to the
// block's size is filed under other (Note [Memory categories]), so the categories still add
// up to the live bytes.
void CachingAllocator::add_live(const BlockInfo& block, int sign) {
  const auto requested = static_cast<int64_t>(block.requested);
  const auto rounding = static_cast<int64_t>(block.size) - requested;
  stats_.current_bytes += sign * static_cast<int64_t>(block.size);
  stats_.current_by_category[static_cast<size_t>(block.category)] += sign * requested;
  stats_.current_by_category[static_cast<size_t>(MemoryCategory::Other)] += sign * rounding;
  if (sign > 0 && stats_.current_bytes > stats_.peak_bytes) {
    stats_.peak_bytes = stats_.current_bytes;
    stats_.peak_by_category = stats_.current_by_category;
  }
  if (sign > 0) note_highest(stats_);
}

// Note [A category's own peak]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// peak_by_category is what each category held at the device's peak: one moment, so the
// categories add up to peak_bytes. A category can be larger at another moment: FSDP's
// gathered parameters peak while backward prefetches the next unit, its unsharded gradients
// while a reduce-scatter is in flight, and neither need coincide with the activations' peak,
// which sets the device's. A design's formula (Note [Model-state memory]) promises what a
// category holds at its most, so the allocator also keeps each category's own maximum, and
// that of the three model-state categories' sum, updated whenever one grows.
void CachingAllocator::note_highest(MemoryStats& s) {
  for (size_t c = 0; c < kNumMemoryCategories; ++c)
    s.highest_by_category[c] = std::max(s.highest_by_category[c], s.current_by_category[c]);
  s.highest_model_state = std::max(s.highest_model_state, model_state_bytes(s.current_by_category));
}

void CachingAllocator::set_category(void* ptr, MemoryCategory category) {
  std::lock_guard lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end() || it->second.category == category) return;
  const auto bytes = static_cast<int64_t>(it->second.requested);
  stats_.current_by_category[static_cast<size_t>(it->second.category)] -= bytes;
  stats_.current_by_category[static_cast<size_t>(category)] += bytes;
  it->second.category = category;
  note_highest(stats_);
}

void CachingAllocator::free(void* ptr) {
  if (!ptr) return;
  std::lock_guard lock(mutex_);
  auto it = live_.find(ptr);
  DDPB_CHECK(it != live_.end()) << "freeing a pointer this allocator does not own: " << ptr;
  add_live(it->second, -1);
  cache_[it->second.pool][it->second.size].push_back(ptr);
  live_.erase(it);
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_bytes = stats_.current_bytes;
  stats_.peak_by_category = stats_.current_by_category;
  stats_.highest_by_category = stats_.current_by_category;
  stats_.highest_model_state = model_state_bytes(stats_.current_by_category);
}

void CachingAllocator::empty_cache() {
  std::vector<std::pair<void*, size_t>> to_free;
  {
    std::lock_guard lock(mutex_);
    for (auto& [pool, bins] : cache_) {
      for (auto& [size, ptrs] : bins) {
        for (void* p : ptrs) to_free.emplace_back(p, size);
      }
    }
    cache_.clear();
    for (auto& [p, size] : to_free) stats_.reserved_bytes -= static_cast<int64_t>(size);
  }
  for (auto& [p, size] : to_free) backend_->raw_free(p);
}

CachingAllocator& device_allocator(const Device& device) {
  static std::mutex mutex;
  // Leaked on purpose: tensors in static objects may be freed during exit, after a
  // function-local static map would have been destroyed.
  static auto* allocators = new std::unordered_map<Device, std::unique_ptr<CachingAllocator>>();
  std::lock_guard lock(mutex);
  auto& a = (*allocators)[device];
  if (!a) a = std::make_unique<CachingAllocator>(backend_for(device.type).make_memory(device));
  return *a;
}

namespace {
class AlignedHostMemory : public MemoryBackend {
 public:
  void* raw_alloc(size_t nbytes) override {
    void* p = std::aligned_alloc(256, (nbytes + 255) / 256 * 256);
    if (!p) {
      throw Error("out of memory: host allocation of " + std::to_string(nbytes >> 20) + " MiB (" +
                  std::to_string(nbytes) + " bytes) failed; " + read_memory_limits().describe());
    }
    return p;
  }
  void raw_free(void* ptr) override { std::free(ptr); }
};
}  // namespace

std::unique_ptr<MemoryBackend> make_host_memory() {
  return std::make_unique<AlignedHostMemory>();
}

CachingAllocator& pinned_host_allocator() {
#ifdef DDPB_HAVE_CUDA
  static auto* allocator = new CachingAllocator(cuda_device_count() > 0 ? make_pinned_host_memory()
                                                                        : make_host_memory());
#else
  static auto* allocator = new CachingAllocator(make_host_memory());
#endif
  return *allocator;
}

}  // namespace ddpb
