// RankTeam: the ranks of a multi-rank benchmark or test as threads of this process.
//
// Rank 0 is the thread that constructs the team and calls run(): in a benchmark that is
// Google Benchmark's thread, so the benchmark loop drives every rank; in a test, the test's.
// Ranks 1..size-1 are helper threads owned by the team, parked on a barrier between calls.
// run(fn)
//   1. releases every rank through one barrier (the "start" barrier),
//   2. runs fn(rank) on each rank's own thread (rank 0's inline),
//   3. returns once every rank has finished (the "done" barrier), with each rank's result.
// A rank's exception is caught on its thread; run() throws one error naming every rank that
// failed, lowest first (a rank's own error usually explains its peers' timeouts), only after
// every rank has passed the done barrier, so no rank is left waiting there.
// (A rank blocked inside a collective because a peer failed is released by the collective's
// own timeout, not by the team.)
//
// Because every rank leaves the start barrier at the same moment, timing fn from its first
// statement measures one iteration per rank with a common start; the benchmarks report the
// maximum over ranks, as nccl-tests does.
//
// Thread-safety: construct, run() and destroy from one thread (rank 0's). fn runs on every
// rank thread at once; what it touches per rank must be indexed by the rank.
//
// Free of the runtime (the standard library only), like all of base/.
#pragma once

#include <barrier>
#include <cstddef>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace ddpb {

class RankTeam {
 public:
  explicit RankTeam(int size)
      : size_(checked_size(size)),
        start_(size_),
        done_(size_),
        results_(static_cast<size_t>(size_)),
        errors_(static_cast<size_t>(size_)) {
    helpers_.reserve(static_cast<size_t>(size - 1));
    for (int r = 1; r < size; ++r) {
      try {
        helpers_.emplace_back([this, r] { helper_loop(r); });
      } catch (const std::system_error& e) {
        // Out of threads: the helpers started so far are released and joined (the ranks that
        // never started arrive as dropped), not left to terminate the program.
        for (int missing = r; missing < size; ++missing) start_.arrive_and_drop();
        stop_helpers();
        throw std::runtime_error("cannot start rank " + std::to_string(r) + " of " +
                                 std::to_string(size) + " as a thread: " + e.what());
      }
    }
  }

  ~RankTeam() { stop_helpers(); }

  RankTeam(const RankTeam&) = delete;
  RankTeam& operator=(const RankTeam&) = delete;

  int size() const { return size_; }

  // Runs fn(rank) on every rank at once and returns the results, indexed by rank. Throws
  // std::runtime_error("rank R of N: ...; rank S of N: ...") for every rank that threw.
  std::vector<double> run(const std::function<double(int)>& fn) {
    fn_ = &fn;
    start_.arrive_and_wait();
    run_rank(0);
    done_.arrive_and_wait();
    fn_ = nullptr;
    std::string failures;
    for (int r = 0; r < size_; ++r) {
      const std::string& e = errors_[static_cast<size_t>(r)];
      if (e.empty()) continue;
      failures += (failures.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) +
                  " of " + std::to_string(size_) + ": " + e;
    }
    if (!failures.empty()) throw std::runtime_error(failures);
    return results_;
  }

  // run() for work without a result.
  void run_void(const std::function<void(int)>& fn) {
    run([&](int r) {
      fn(r);
      return 0.0;
    });
  }

 private:
  static int checked_size(int size) {
    if (size < 1) throw std::invalid_argument("RankTeam needs at least one rank");
    return size;
  }

  void run_rank(int r) {
    const auto i = static_cast<size_t>(r);
    errors_[i].clear();
    results_[i] = 0;
    try {
      results_[i] = (*fn_)(r);
    } catch (const std::exception& e) {
      errors_[i] = e.what();
      if (errors_[i].empty()) errors_[i] = "exception with an empty message";
    } catch (...) {
      errors_[i] = "unknown exception";
    }
  }

  void stop_helpers() {
    stopping_ = true;  // published to the helpers by the barrier
    start_.arrive_and_wait();
    for (auto& t : helpers_) t.join();
  }

  void helper_loop(int r) {
    for (;;) {
      start_.arrive_and_wait();
      if (stopping_) return;
      run_rank(r);
      done_.arrive_and_wait();
    }
  }

  const int size_;
  std::barrier<> start_, done_;
  // Written by rank 0 before the start barrier, read by the helpers after it.
  const std::function<double(int)>* fn_ = nullptr;
  bool stopping_ = false;
  std::vector<double> results_;      // [rank], written by that rank between the barriers
  std::vector<std::string> errors_;  // [rank], likewise
  std::vector<std::thread> helpers_;
};

}  // namespace ddpb
