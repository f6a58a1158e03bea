// A per-device caching allocator.
//
// Freed blocks go to a free list keyed by their rounded size and are handed out again
// without calling the backend (malloc, cudaMalloc, cudaHostAlloc). Sizes are rounded up to
// one of four steps per power of two, so waste is at most 25% and reuse is exact-match.
//
// Stream safety (CUDA): a block is cached in the pool of the stream that allocated it and
// only reused by allocations on that stream, so stream order alone protects it. A tensor
// used on a second stream must be kept alive by that user until an event recorded after the
// use has completed (the communication layer holds such references in its Work objects).
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/device.h"
#include "core/memory_category.h"

namespace ddpb {

struct MemoryStats {
  int64_t current_bytes = 0;   // bytes in live allocations (rounded sizes)
  int64_t peak_bytes = 0;      // maximum of current_bytes since the last reset_peak()
  int64_t reserved_bytes = 0;  // bytes held from the backend: live + cached
  int64_t num_allocs = 0;      // allocate() calls
  int64_t num_cache_hits = 0;  // allocate() calls served from the cache
  int64_t num_backend_allocs = 0;
  // Note [Memory categories]: live bytes by category now, and at the peak.
  MemoryByCategory current_by_category{}, peak_by_category{};
  // Each category's own maximum since the last reset_peak() (Note [A category's own peak]),
  // and that of the model state: parameters, gradients and optimizer state together.
  MemoryByCategory highest_by_category{};
  int64_t highest_model_state = 0;
};

// Raw memory source under the cache.
class MemoryBackend {
 public:
  virtual ~MemoryBackend() = default;
  virtual void* raw_alloc(size_t nbytes) = 0;  // throws on failure
  virtual void raw_free(void* ptr) = 0;
};

// Note [Out of memory with NCCL live]
// Giving cached blocks back on out-of-memory means cudaFree, which synchronises the device;
// with an NCCL kernel waiting on the comm stream for a peer that is itself blocked in the
// same situation, that never returns. So while a communicator is live an allocation that
// does not fit fails at once, with the allocator's statistics, instead of emptying the cache.
// Process groups and DP's NCCL transport hold a CommunicatorLease for their lifetime.
class CommunicatorLease {
 public:
  CommunicatorLease();
  ~CommunicatorLease();
  CommunicatorLease(const CommunicatorLease&) = delete;
  CommunicatorLease& operator=(const CommunicatorLease&) = delete;
  static bool any_live();
};

class CachingAllocator {
 public:
  explicit CachingAllocator(std::unique_ptr<MemoryBackend> backend);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Returns at least `nbytes` (256-byte aligned) from the pool of `pool` (a stream key).
  // When the backend is out of memory, the cache is emptied and the allocation retried,
  // except while a communicator is live (Note [Out of memory with NCCL live]).
  void* allocate(size_t nbytes, uintptr_t pool = 0);
  void free(void* ptr);
  MemoryStats stats() const;
  void reset_peak();
  // Returns every cached (free) block to the backend.
  void empty_cache();
  // Files the live block at `ptr` under `category` (Note [Memory categories]); a pointer
  // this allocator does not hold is left alone.
  void set_category(void* ptr, MemoryCategory category);

  static size_t round_size(size_t nbytes);

 private:
  std::string out_of_memory_message(size_t size, const std::string& cause) const;
  struct BlockInfo {
    size_t size;
    uintptr_t pool;
    MemoryCategory category;
    size_t requested;  // what was asked for; the rest of size is rounding, filed under other
  };
  void add_live(const BlockInfo& block, int sign);
  static void note_highest(MemoryStats& stats);
  std::unique_ptr<MemoryBackend> backend_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, BlockInfo> live_;
  // (pool, size) -> free blocks
  std::unordered_map<uintptr_t, std::unordered_map<size_t, std::vector<void*>>> cache_;
  MemoryStats stats_;
};

// The allocator of a device (created on first use, lives for the process).
CachingAllocator& device_allocator(const Device& device);
// Page-locked host memory for asynchronous copies (plain aligned memory without CUDA).
CachingAllocator& pinned_host_allocator();

}  // namespace ddpb
