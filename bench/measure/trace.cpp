#include "bench/measure/trace.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace ddpb::bench {

TraceWriter::TraceWriter(int rank, int64_t first_step, int64_t last_step)
    : rank_(rank), first_step_(first_step), last_step_(last_step) {
  tid("steps");  // tid 0
}

bool TraceWriter::wants(int64_t step) const {
  return step >= first_step_ && (last_step_ < 0 || step <= last_step_);
}

int TraceWriter::tid(const std::string& track) {
  auto it = tids_.find(track);
  if (it != tids_.end()) return it->second;
  int id = static_cast<int>(tids_.size());
  tids_.emplace(track, id);
  return id;
}

void TraceWriter::add_step(int64_t step, int64_t step_start_ns,
                           const std::vector<std::pair<std::string, double>>& phases,
                           const std::vector<TraceSpan>& spans) {
  if (!wants(step)) return;
  const std::lock_guard lock(mutex_);
  const double start_us = static_cast<double>(step_start_ns) / 1000.0;
  double t = start_us, total = 0;
  for (const auto& [name, ms] : phases) total += ms;
  events_.push_back({{"name", "step " + std::to_string(step)},
                     {"cat", "step"},
                     {"ph", "X"},
                     {"ts", start_us},
                     {"dur", total * 1000.0},
                     {"pid", rank_},
                     {"tid", 0},
                     {"args", {{"step", step}}}});
  for (const auto& [name, ms] : phases) {
    events_.push_back({{"name", name},
                       {"cat", "phase"},
                       {"ph", "X"},
                       {"ts", t},
                       {"dur", ms * 1000.0},
                       {"pid", rank_},
                       {"tid", 0},
                       {"args", {{"step", step}}}});
    t += ms * 1000.0;
  }
  for (const auto& s : spans) {
    nlohmann::json args = s.args;
    args["step"] = step;
    events_.push_back({{"name", s.name},
                       {"cat", s.track},
                       {"ph", "X"},
                       {"ts", static_cast<double>(s.start_ns) / 1000.0},
                       {"dur", std::max(0.0, s.dur_ms) * 1000.0},
                       {"pid", rank_},
                       {"tid", tid(s.track)},
                       {"args", args}});
  }
}

nlohmann::json TraceWriter::events() const {
  const std::lock_guard lock(mutex_);
  nlohmann::json out = events_;
  out.push_back({{"name", "process_name"},
                 {"ph", "M"},
                 {"pid", rank_},
                 {"tid", 0},
                 {"args", {{"name", "rank " + std::to_string(rank_)}}}});
  for (const auto& [track, id] : tids_) {
    out.push_back({{"name", "thread_name"},
                   {"ph", "M"},
                   {"pid", rank_},
                   {"tid", id},
                   {"args", {{"name", track}}}});
  }
  return out;
}

nlohmann::json TraceWriter::document(const std::vector<nlohmann::json>& per_rank_events,
                                     const std::vector<int64_t>& offsets_ns, int world_size) {
  double base = std::numeric_limits<double>::infinity();
  for (size_t r = 0; r < per_rank_events.size(); ++r) {
    for (const auto& e : per_rank_events[r]) {
      if (e.contains("ts")) base = std::min(base, e["ts"].get<double>() + offsets_ns[r] / 1000.0);
    }
  }
  if (!std::isfinite(base)) base = 0;
  nlohmann::json all = nlohmann::json::array();
  for (size_t r = 0; r < per_rank_events.size(); ++r) {
    for (auto e : per_rank_events[r]) {
      if (e.contains("ts")) e["ts"] = e["ts"].get<double>() + offsets_ns[r] / 1000.0 - base;
      all.push_back(std::move(e));
    }
  }
  return {{"traceEvents", all},
          {"displayTimeUnit", "ms"},
          {"distributedInfo", {{"rank", 0}, {"world_size", world_size}, {"backend", "ddpbench"}}},
          {"otherData", {{"clock", "steady clock of each rank, shifted onto rank 0's"}}}};
}

std::pair<int64_t, int64_t> parse_trace_steps(const std::string& text) {
  if (text.empty()) return {1, -1};
  auto colon = text.find(':');
  DDPB_USAGE_CHECK(colon != std::string::npos) << "--trace-steps '" << text << "': expected A:B";
  auto num = [&](const std::string& s, int64_t fallback) -> int64_t {
    if (s.empty()) return fallback;
    try {
      size_t used = 0;
      int64_t v = std::stoll(s, &used);
      DDPB_USAGE_CHECK(used == s.size() && v >= 1)
          << "--trace-steps '" << text << "': steps count from 1";
      return v;
    } catch (const std::logic_error&) {
      DDPB_USAGE_FAIL() << "--trace-steps '" << text << "': '" << s << "' is not a step number";
      return fallback;
    }
  };
  int64_t a = num(text.substr(0, colon), 1), b = num(text.substr(colon + 1), -1);
  DDPB_USAGE_CHECK(b < 0 || b >= a) << "--trace-steps '" << text << "': the window is empty";
  return {a, b};
}

}  // namespace ddpb::bench
