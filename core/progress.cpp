#include "core/progress.h"

#include <atomic>
#include <mutex>

#include "core/clock.h"

namespace ddpb::progress {
namespace {

std::atomic<uint64_t> g_count{0};
std::mutex g_phase_mutex;
std::string g_phase;           // guarded by g_phase_mutex
int64_t g_phase_start_ns = 0;  // guarded by g_phase_mutex
std::atomic<int64_t> g_step{0};

}  // namespace

void note_op() noexcept {
  g_count.fetch_add(1, std::memory_order_relaxed);
}

void note_phase(std::string_view phase) {
  {
    std::lock_guard lock(g_phase_mutex);
    g_phase.assign(phase);
    g_phase_start_ns = steady_now_ns();
  }
  g_count.fetch_add(1, std::memory_order_relaxed);
}

void note_step(int64_t step) {
  g_step.store(step, std::memory_order_relaxed);
  g_count.fetch_add(1, std::memory_order_relaxed);
}

Mark current() {
  Mark m;
  m.count = g_count.load(std::memory_order_relaxed);
  m.step = g_step.load(std::memory_order_relaxed);
  std::lock_guard lock(g_phase_mutex);
  m.phase = g_phase;
  m.phase_start_ns = g_phase_start_ns;
  return m;
}

}  // namespace ddpb::progress
