// The time FSDP's waits hold the step back, by kind (Note [Exposed waits on the device]).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/clock.h"
#include "core/device.h"
#include "core/stream.h"

namespace ddpb::fsdp {

// Note [Exposed waits on the device]
// A wait is exposed for as long as the compute stream stands still in it. Where waiting
// blocks the host (Gloo and MPI on CPU devices) that is the host's time in the wait; NCCL's
// wait only orders the compute stream after the collective, returns at once, and the stream
// stalls later, on the device. So each wait is bracketed by two events on the compute
// stream, recorded just before and just after it, and the stall is the time between them,
// read after the step has synchronised. Nothing runs on the stream between the two but the
// wait, so on CUDA the second completes when the collective has and the stream has reached
// the first; on a CPU stream an event completes as it is recorded, so the stall is the host's
// wait. One code path measures both. The host's own time in the waits is kept as well: it is
// what delayed the host's later launches (UnitCollective::waited_before_ms).
class ExposedWaits {
 public:
  enum Kind : uint8_t {
    kGatherForward,          // an all-gather waited for in forward
    kGatherBackward,         // ... in backward
    kReduceScatterBackward,  // the previous unit's reduce-scatter, waited for in backward
    kReduceScatterAfter,     // reduce-scatters waited for after backward
    kKinds
  };

  // A new step on `device`: no waits yet.
  void start(const Device& device) {
    device_ = device;
    brackets_.clear();
    host_ms_ = 0;
  }

  // Runs wait() between two events on the device's current stream.
  template <typename Wait>
  void time(Kind kind, Wait&& wait) {
    Stream& stream = current_stream(device_);
    Bracket b{kind, Event::create(device_), Event::create(device_)};
    b.before.record(stream);
    const int64_t start = steady_now_ns();
    wait();
    host_ms_ += static_cast<double>(steady_now_ns() - start) / 1e6;
    b.after.record(stream);
    brackets_.push_back(std::move(b));
  }

  // The host's time in this step's waits so far.
  double host_ms() const { return host_ms_; }

  // Each kind's stall this step, in ms; only once the stream has passed every wait (the step
  // synchronised).
  std::array<double, kKinds> stalled_ms() const {
    std::array<double, kKinds> ms{};
    for (const Bracket& b : brackets_) ms[b.kind] += b.before.elapsed_ms(b.after);
    return ms;
  }

 private:
  struct Bracket {
    Kind kind;
    Event before, after;
  };
  Device device_;
  std::vector<Bracket> brackets_;
  double host_ms_ = 0;
};

}  // namespace ddpb::fsdp
