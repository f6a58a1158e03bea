// Timing one collective (or any fn) on a device, for the collective benchmarks and the
// communication fit: GPU time between events on CUDA, the host's clock on CPU.
#pragma once

#include <chrono>
#include <functional>

#include "core/device.h"
#include "core/stream.h"

namespace ddpb::bench {

// Seconds that fn takes on `device`, measured from the calling thread:
//  - CUDA: between two events recorded on the device's current stream before and after fn,
//    then synchronised, so fn must leave its work ordered on that stream (Work::wait() of
//    the NCCL group does exactly that). This is GPU time, free of host launch jitter.
//  - CPU: the host's steady clock around fn, which must have finished its work on return
//    (Work::wait() of the Gloo group blocks until the collective is done).
inline double timed_seconds(const Device& device, const std::function<void()>& fn) {
  if (device.is_cuda()) {
    Stream& stream = current_stream(device);
    Event start = Event::create(device), end = Event::create(device);
    start.record(stream);
    fn();
    end.record(stream);
    end.synchronize();
    return start.elapsed_ms(end) / 1e3;
  }
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace ddpb::bench
