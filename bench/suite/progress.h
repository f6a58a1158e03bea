// The suite's progress line: a bar redrawn in place on a terminal, one line per event
// otherwise (CI logs), with an ETA from the mean duration of the runs so far.
#pragma once

#include <fmt/core.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace ddpb::bench {

class Progress {
 public:
  Progress(size_t total, size_t already_done)
      : tty_(::isatty(STDOUT_FILENO) == 1), total_(total), done_(already_done) {}

  void start(const std::string& id) {
    id_ = id;
    run_start_ = Clock::now();
    if (tty_) {
      draw();
    } else {
      fmt::print("suite: [{}/{}] {} ...\n", done_ + 1, total_, id);
      std::fflush(stdout);
    }
  }
  void tick() {
    if (tty_) draw();
  }
  void finish(const std::string& line) {
    durations_.push_back(seconds_since(run_start_));
    ++done_;
    if (tty_) fmt::print("\r\033[K");
    fmt::print("suite: [{}/{}] {}{}\n", done_, total_, line, tty_ ? "" : "  ETA " + eta());
    std::fflush(stdout);
  }
  void end() {
    if (tty_) fmt::print("\r\033[K");
    std::fflush(stdout);
  }

 private:
  using Clock = std::chrono::steady_clock;
  static double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  }
  std::string eta() const {
    if (durations_.empty()) return "?";
    double mean = 0;
    for (double d : durations_) mean += d;
    mean /= static_cast<double>(durations_.size());
    const auto left = static_cast<long>(mean * static_cast<double>(total_ - done_));
    return fmt::format("{}m{:02d}s", left / 60, left % 60);
  }
  void draw() {
    constexpr int kWidth = 24;
    const int filled = total_ ? static_cast<int>(kWidth * done_ / total_) : 0;
    fmt::print("\r\033[K[{}{}] run {}/{} {} ({:.0f} s) ETA {}", std::string(filled, '#'),
               std::string(kWidth - filled, '.'), done_ + 1, total_, id_, seconds_since(run_start_),
               eta());
    std::fflush(stdout);
  }

  bool tty_;
  size_t total_, done_;
  std::string id_;
  Clock::time_point run_start_;
  std::vector<double> durations_;
};

}  // namespace ddpb::bench
