// `--bucket-cap-mb auto`: the DDP bucket cap chosen during the warm-up, as Horovod's autotuner
// chooses its fusion buffer. A golden-section search over log(cap) in [1, 100] MB: each
// candidate is measured as the median step time of a few steps (after one step that settles
// the rebuilt buckets), the interval shrinks towards the faster side, and the fastest
// candidate measured is kept for the measured steps.
//
// Note [Bucket autotune agreement]
// Every rank must use the same cap, or the ranks would issue different collectives. The
// tuner is deterministic in the times it is given, and every rank gives it rank 0's medians
// (broadcast by the DDP runner), so every rank walks the same candidates and ends on the same
// cap: rank 0 decides.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddpb::bench {

class BucketCapTuner {
 public:
  struct Candidate {
    double cap_mb = 0;
    double median_ms = 0;
  };
  static constexpr double kMinMb = 1.0, kMaxMb = 100.0;
  static constexpr int kEvaluations = 6;    // candidates measured
  static constexpr int kSettleSteps = 1;    // after a rebuild, not measured
  static constexpr int kMeasuredSteps = 3;  // per candidate, their median counts
  // Warm-up steps the search needs: the first step (DDP's rebuild in the observed order),
  // then every candidate's steps.
  static constexpr int kStepsNeeded = 1 + kEvaluations * (kSettleSteps + kMeasuredSteps);

  BucketCapTuner();
  // The cap to measure next, or nullopt once the search is over.
  std::optional<double> next() const;
  // The median step time of the candidate next() named.
  void report(double median_ms);
  bool done() const { return !next(); }
  // The fastest candidate measured (the search must be over).
  double chosen_mb() const;
  const std::vector<Candidate>& candidates() const { return measured_; }
  nlohmann::json to_json() const;

 private:
  double at(double log_cap) const;  // a log-space point as a cap in MB, rounded
  // The golden-section interval [lo_, hi_] in log(MB), its two interior points, and which of
  // them waits to be measured.
  double lo_, hi_, left_, right_;
  std::optional<double> left_ms_, right_ms_;
  std::vector<Candidate> measured_;
};

// The search driven by a DDP rank's steps: call after_step() after every step; it applies
// each candidate cap (and at the end the chosen one) through `apply_cap`, and turns this
// rank's step times into the medians every rank agrees on through `agree` (rank 0's value,
// Note [Bucket autotune agreement]).
class WarmupBucketSearch {
 public:
  WarmupBucketSearch(std::function<void(double cap_mb)> apply_cap,
                     std::function<double(double value)> agree);
  void after_step(int64_t step, double step_ms);
  const BucketCapTuner& tuner() const { return tuner_; }

 private:
  std::function<void(double)> apply_cap_;
  std::function<double(double)> agree_;
  BucketCapTuner tuner_;
  int settled_ = 0;
  std::vector<double> window_;
  bool finished_ = false;
};

}  // namespace ddpb::bench
