#include "bench/run/bucket_tuner.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "bench/run/stats.h"
#include "core/check.h"

namespace ddpb::bench {
namespace {

const double kInvPhi = (std::sqrt(5.0) - 1.0) / 2.0;  // 0.618...

// Three significant digits: the cap a user would type to repeat the choice.
double round_cap(double mb) {
  const double scale = std::pow(10.0, 2 - std::floor(std::log10(mb)));
  return std::round(mb * scale) / scale;
}

}  // namespace

BucketCapTuner::BucketCapTuner()
    : lo_(std::log(kMinMb)),
      hi_(std::log(kMaxMb)),
      left_(hi_ - kInvPhi * (hi_ - lo_)),
      right_(lo_ + kInvPhi * (hi_ - lo_)) {}

double BucketCapTuner::at(double log_cap) const {
  return round_cap(std::exp(log_cap));
}

std::optional<double> BucketCapTuner::next() const {
  if (static_cast<int>(measured_.size()) >= kEvaluations) return std::nullopt;
  if (!left_ms_) return at(left_);
  if (!right_ms_) return at(right_);
  return std::nullopt;  // not reached: report() always leaves one side to measure
}

void BucketCapTuner::report(double median_ms) {
  const auto cap = next();
  DDPB_CHECK(cap) << "bucket autotune: a time reported after the search ended";
  measured_.push_back({*cap, median_ms});
  (left_ms_ ? right_ms_ : left_ms_) = median_ms;
  if (!left_ms_ || !right_ms_) return;
  // Keep the side of the faster point; the surviving interior point keeps its time.
  if (*left_ms_ <= *right_ms_) {
    hi_ = right_;
    right_ = left_;
    right_ms_ = left_ms_;
    left_ = hi_ - kInvPhi * (hi_ - lo_);
    left_ms_.reset();
  } else {
    lo_ = left_;
    left_ = right_;
    left_ms_ = right_ms_;
    right_ = lo_ + kInvPhi * (hi_ - lo_);
    right_ms_.reset();
  }
}

double BucketCapTuner::chosen_mb() const {
  DDPB_CHECK(!measured_.empty()) << "bucket autotune: nothing measured";
  return std::min_element(
             measured_.begin(), measured_.end(),
             [](const Candidate& a, const Candidate& b) { return a.median_ms < b.median_ms; })
      ->cap_mb;
}

nlohmann::json BucketCapTuner::to_json() const {
  nlohmann::json candidates = nlohmann::json::array();
  for (const auto& c : measured_)
    candidates.push_back({{"cap_mb", c.cap_mb}, {"median_ms", c.median_ms}});
  nlohmann::json out = {{"method", "golden-section search over log(cap)"},
                        {"range_mb", {kMinMb, kMaxMb}},
                        {"settle_steps", kSettleSteps},
                        {"measured_steps", kMeasuredSteps},
                        {"candidates", candidates}};
  if (!measured_.empty()) out["chosen_mb"] = chosen_mb();
  return out;
}

WarmupBucketSearch::WarmupBucketSearch(std::function<void(double)> apply_cap,
                                       std::function<double(double)> agree)
    : apply_cap_(std::move(apply_cap)), agree_(std::move(agree)) {}

void WarmupBucketSearch::after_step(int64_t step, double step_ms) {
  if (finished_) return;
  if (step == 1) {  // DDP rebuilt its buckets in the observed order: start from there
    apply_cap_(*tuner_.next());
    return;
  }
  if (settled_ < BucketCapTuner::kSettleSteps) {
    ++settled_;
    return;
  }
  window_.push_back(step_ms);
  if (static_cast<int>(window_.size()) < BucketCapTuner::kMeasuredSteps) return;
  tuner_.report(agree_(percentile(window_, 50)));
  window_.clear();
  settled_ = 0;
  const auto next = tuner_.next();
  finished_ = !next;
  apply_cap_(next ? *next : tuner_.chosen_mb());
}

}  // namespace ddpb::bench
