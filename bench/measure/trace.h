// `--trace FILE.json`: a Chrome trace of the run, for Perfetto and chrome://tracing.
//
// One process per rank (pid = rank, process_name "rank k"), one track per thread or
// stream-like lane (tid, with thread_name): "steps" holds each step's phases laid end to end
// from the step's start; DP adds a track per replica (its forward and backward), DDP a track
// per bucket (its collective), so overlapping events never break nesting. Timestamps are
// microseconds from the earliest event. DDP ranks send their events to rank 0, which shifts
// them by the clock offsets measured at start-up (DdpRunner::sync_clock in
// bench/run/runner_ddp.cpp) and writes the one file.
// The file is written atomically, and also when the run fails (with the steps done so far).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddpb::bench {

// A span inside a step on its own track; start is this rank's steady clock (ns).
struct TraceSpan {
  std::string name;
  std::string track;
  int64_t start_ns = 0;
  double dur_ms = 0;
  nlohmann::json args = nlohmann::json::object();
};

class TraceWriter {
 public:
  // Steps in [first_step, last_step] are recorded (last_step < 0: to the end).
  TraceWriter(int rank, int64_t first_step, int64_t last_step);
  bool wants(int64_t step) const;
  // `step_start_ns`: steady-clock time of the step's start on this rank.
  void add_step(int64_t step, int64_t step_start_ns,
                const std::vector<std::pair<std::string, double>>& phases,
                const std::vector<TraceSpan>& spans);
  // This rank's events (ts still in absolute steady-clock microseconds), with the
  // process/thread name metadata. Thread-safe with add_step (a SIGTERM's partial trace is
  // written from another thread while the loop runs).
  nlohmann::json events() const;
  // The whole document from every rank's events, each shifted by offsets_ns[rank] (added to
  // its timestamps to move them onto rank 0's clock).
  static nlohmann::json document(const std::vector<nlohmann::json>& per_rank_events,
                                 const std::vector<int64_t>& offsets_ns, int world_size);

 private:
  int tid(const std::string& track);
  int rank_;
  int64_t first_step_, last_step_;
  mutable std::mutex mutex_;  // guards tids_ and events_
  std::map<std::string, int> tids_;
  nlohmann::json events_ = nlohmann::json::array();
};

// Parses --trace-steps "A:B" (either side may be empty). Throws UsageError.
std::pair<int64_t, int64_t> parse_trace_steps(const std::string& text);

}  // namespace ddpb::bench
