// `--bucket-cap-mb auto`: the DDP bucket cap chosen during the warm-up, as Horovod's autotuner
// chooses its fusion buffer. A golden-section search over log(cap): each candidate is measured
// as the median step time of a few steps (after one step that settles the rebuilt buckets),
// the interval shrinks towards the faster side, and the fastest candidate measured is kept
// for the measured steps.
//
// Note [Bucket autotune range]
// The search spans 1-100 MB, cut to what can differ for the model: every cap at or above its
// gradient bytes gives the same buckets (one beyond the first), so the top is at most those
// bytes, and the bottom at most a sixteenth of the top (small models search below 1 MB). Two
// caps that give the same bucket layout are one candidate: the second is not measured again
// but takes the first one's time, so the warm-up is spent only on layouts that differ.
//
// Note [Bucket autotune ties]
// After the golden section the search measures the top of its range (golden section alone
// never measures an end, and one bucket beyond the first is often best on a fast link), and
// then keeps the largest cap among the candidates within kTie (5%) of the fastest: fewer,
// larger collectives when the step times cannot tell the caps apart, which on a noisy
// machine they often cannot. The search starts after kLeadSteps warm-up steps, which run
// slower than later ones and would count against whichever candidate came first.
//
// Note [Bucket autotune agreement]
// Every rank must use the same cap, or the ranks would issue different collectives. The
// tuner is deterministic in the times it is given, and every rank gives it rank 0's medians
// (broadcast by the DDP runner), so every rank walks the same candidates and ends on the same
// cap: rank 0 decides.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddpb::bench {

class BucketCapTuner {
 public:
  struct Candidate {
    double cap_mb = 0;
    double median_ms = 0;
    bool measured = true;  // false: the same layout as an earlier candidate, its time reused
  };
  static constexpr double kMinMb = 1.0, kMaxMb = 100.0;
  static constexpr int kLeadSteps = 3;      // before the search (step 1: DDP's rebuild)
  static constexpr int kEvaluations = 6;    // candidates: golden section, then the top
  static constexpr int kSettleSteps = 1;    // after a rebuild, not measured
  static constexpr int kMeasuredSteps = 5;  // per candidate, their median counts
  static constexpr double kTie = 0.05;      // Note [Bucket autotune ties]
  // Warm-up steps the search needs: the lead-in, then every candidate's steps.
  static constexpr int kStepsNeeded = kLeadSteps + kEvaluations * (kSettleSteps + kMeasuredSteps);

  // Note [Bucket autotune range]; `gradient_mb` 0: the full 1-100 MB.
  explicit BucketCapTuner(double gradient_mb = 0);
  // The cap to measure next, or nullopt once the search is over.
  std::optional<double> next() const;
  // The median step time of the candidate next() named (`measured` false: reused).
  void report(double median_ms, bool measured = true);
  double lo_mb() const { return lo_mb_; }
  double hi_mb() const { return hi_mb_; }
  bool done() const { return !next(); }
  // The candidate kept (Note [Bucket autotune ties]; the search must be over).
  double chosen_mb() const;
  const std::vector<Candidate>& candidates() const { return measured_; }
  nlohmann::json to_json() const;

 private:
  double at(double log_cap) const;  // a log-space point as a cap in MB, rounded
  // The golden-section interval [lo_, hi_] in log(MB), its two interior points, and which of
  // them waits to be measured.
  double lo_mb_, hi_mb_;
  double lo_, hi_, left_, right_;
  std::optional<double> left_ms_, right_ms_;
  std::vector<Candidate> measured_;
};

// The search driven by a DDP rank's steps: call after_step() after every step. It applies
// each candidate cap (and at the end the chosen one) through `apply_cap`, which answers with
// the bucket layout it produced; turns this rank's step times into the medians every rank
// agrees on through `agree` (rank 0's value, Note [Bucket autotune agreement]); and skips a
// candidate whose layout it measured already (Note [Bucket autotune range]).
class WarmupBucketSearch {
 public:
  using ApplyCap = std::function<std::string(double cap_mb)>;
  WarmupBucketSearch(double gradient_mb, ApplyCap apply_cap,
                     std::function<double(double value)> agree);
  void after_step(int64_t step, double step_ms);
  const BucketCapTuner& tuner() const { return tuner_; }

 private:
  // Applies the tuner's next candidate, reusing known layouts' times, or the choice at the end.
  void apply_next();

  ApplyCap apply_cap_;
  std::function<double(double)> agree_;
  BucketCapTuner tuner_;
  std::map<std::string, double> layout_ms_;  // measured layouts and their medians
  std::string layout_;                       // the layout being measured
  int settled_ = 0;
  std::vector<double> window_;
  bool finished_ = false;
};

}  // namespace ddpb::bench
