#include "core/phase_timer.h"

#include <cmath>

#include "core/check.h"
#include "core/clock.h"
#include "core/progress.h"

namespace ddpb {

PhaseTimer::PhaseTimer(Stream& stream) : stream_(&stream), anchor_(Event::create(stream.device())) {
  anchor_.record(stream);
  anchor_ns_ = steady_now_ns();
}

void PhaseTimer::begin(const std::string& phase) {
  progress::note_phase(phase);  // Note [Step watchdog]
  end();
  Interval i{phase, Event::create(stream_->device()), Event::create(stream_->device())};
  i.start.record(*stream_);
  i.start_ns = steady_now_ns();
  intervals_.push_back(std::move(i));
  open_ = true;
}

void PhaseTimer::end() {
  if (!open_) return;
  Interval& i = intervals_.back();
  i.stop_ns = steady_now_ns();
  i.stop.record(*stream_);
  open_ = false;
}

void PhaseTimer::synchronize() const {
  DDPB_CHECK(!open_) << "PhaseTimer: phase '" << intervals_.back().phase << "' is still open";
  for (const auto& i : intervals_) i.stop.synchronize();
}

bool PhaseTimer::has(const std::string& phase) const {
  for (const auto& i : intervals_) {
    if (i.phase == phase) return true;
  }
  return false;
}

double PhaseTimer::ms(const std::string& phase) const {
  double total = 0;
  for (const auto& i : intervals_) {
    if (i.phase == phase) total += i.start.elapsed_ms(i.stop);
  }
  return total;
}

double PhaseTimer::total_ms() const {
  if (intervals_.empty()) return 0;
  return intervals_.front().start.elapsed_ms(intervals_.back().stop);
}

int64_t PhaseTimer::host_start_ns(const std::string& phase) const {
  for (const auto& i : intervals_) {
    if (i.phase == phase) return i.start_ns;
  }
  return 0;
}

int64_t PhaseTimer::host_end_ns(const std::string& phase) const {
  for (auto it = intervals_.rbegin(); it != intervals_.rend(); ++it) {
    if (it->phase == phase) return it->stop_ns;
  }
  return 0;
}

int64_t PhaseTimer::device_end_ns(const std::string& phase) const {
  for (auto it = intervals_.rbegin(); it != intervals_.rend(); ++it) {
    if (it->phase != phase) continue;
    return anchor_ns_ + std::llround(anchor_.elapsed_ms(it->stop) * 1e6);
  }
  return 0;
}

}  // namespace ddpb
