// PhaseTimer: named phases of a step, timed on a stream by events (device time) and on the
// host clock (when the host issued them), without index arrays of events.
//
//   PhaseTimer t(stream);
//   t.begin("forward");  ...  t.begin("backward");  ...  t.end();
//   t.synchronize();  t.ms("forward"), t.total_ms()
//
// begin() ends the phase that is open and starts the next one; end() closes the last. A
// phase can be begun again (its times add up). Events are recorded on the stream given at
// construction, so the times are that stream's; on CPU, where an inline stream runs the work
// as it is issued, they are the host's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/stream.h"

namespace ddpb {

class PhaseTimer {
 public:
  // Records the anchor of device_end_ns on `stream`.
  explicit PhaseTimer(Stream& stream);

  void begin(const std::string& phase);
  void end();
  // Blocks until every recorded boundary has completed; the accessors below need it.
  void synchronize() const;

  // Whether `phase` was ever begun.
  bool has(const std::string& phase) const;
  // Milliseconds of `phase` (its intervals added up); 0 when it never ran.
  double ms(const std::string& phase) const;
  // From the first begin() to the last end().
  double total_ms() const;
  // Host steady-clock times (ns) when `phase` was first begun and last ended; 0 if never.
  int64_t host_start_ns(const std::string& phase) const;
  int64_t host_end_ns(const std::string& phase) const;
  // When `phase` last ended on the stream, on the host's steady clock (ns; 0 if never): the
  // construction's host time plus the stream's time from the event recorded then. The stream
  // must be idle at construction (a step timed after the last one synchronized, before it
  // enqueues anything: its data's copies included), so that the event ran when the host
  // recorded it. Needs synchronize().
  int64_t device_end_ns(const std::string& phase) const;

 private:
  struct Interval {
    std::string phase;
    Event start, stop;
    int64_t start_ns = 0, stop_ns = 0;
  };
  Stream* stream_;
  Event anchor_;
  int64_t anchor_ns_ = 0;
  std::vector<Interval> intervals_;
  bool open_ = false;
};

}  // namespace ddpb
