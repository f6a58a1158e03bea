#include "bench/run/bucket_tuner.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "bench/measure/stats.h"
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

BucketCapTuner::BucketCapTuner(double gradient_mb) : lo_mb_(kMinMb), hi_mb_(kMaxMb) {
  if (gradient_mb > 0) {
    hi_mb_ = round_cap(std::min(kMaxMb, gradient_mb));
    lo_mb_ = round_cap(std::min(kMinMb, hi_mb_ / 16.0));
  }
  lo_ = std::log(lo_mb_);
  hi_ = std::log(hi_mb_);
  left_ = hi_ - kInvPhi * (hi_ - lo_);
  right_ = lo_ + kInvPhi * (hi_ - lo_);
}

double BucketCapTuner::at(double log_cap) const {
  return round_cap(std::exp(log_cap));
}

std::optional<double> BucketCapTuner::next() const {
  if (static_cast<int>(measured_.size()) >= kEvaluations) return std::nullopt;
  // The top last: golden section never reaches an end (Note [Bucket autotune ties]).
  if (static_cast<int>(measured_.size()) == kEvaluations - 1) return hi_mb_;
  if (!left_ms_) return at(left_);
  if (!right_ms_) return at(right_);
  return std::nullopt;  // not reached: report() always leaves one side to measure
}

void BucketCapTuner::report(double median_ms, bool measured) {
  const auto cap = next();
  DDPB_CHECK(cap) << "bucket autotune: a time reported after the search ended";
  measured_.push_back({*cap, median_ms, measured});
  if (static_cast<int>(measured_.size()) == kEvaluations) return;  // the top
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

// Note [Bucket autotune ties]: of the candidates within kTie of the fastest, the largest cap.
double BucketCapTuner::chosen_mb() const {
  DDPB_CHECK(!measured_.empty()) << "bucket autotune: nothing measured";
  double fastest = measured_.front().median_ms;
  for (const auto& c : measured_) fastest = std::min(fastest, c.median_ms);
  double chosen = 0;
  for (const auto& c : measured_) {
    if (c.median_ms <= fastest * (1.0 + kTie)) chosen = std::max(chosen, c.cap_mb);
  }
  return chosen;
}

nlohmann::json BucketCapTuner::to_json() const {
  nlohmann::json candidates = nlohmann::json::array();
  for (const auto& c : measured_) {
    candidates.push_back(
        {{"cap_mb", c.cap_mb}, {"median_ms", c.median_ms}, {"measured", c.measured}});
  }
  nlohmann::json out = {{"method", "golden-section search over log(cap)"},
                        {"range_mb", {lo_mb_, hi_mb_}},
                        {"settle_steps", kSettleSteps},
                        {"measured_steps", kMeasuredSteps},
                        {"candidates", candidates}};
  if (!measured_.empty()) out["chosen_mb"] = chosen_mb();
  return out;
}

WarmupBucketSearch::WarmupBucketSearch(double gradient_mb, ApplyCap apply_cap,
                                       std::function<double(double)> agree)
    : apply_cap_(std::move(apply_cap)), agree_(std::move(agree)), tuner_(gradient_mb) {}

void WarmupBucketSearch::apply_next() {
  while (const auto cap = tuner_.next()) {
    layout_ = apply_cap_(*cap);
    const auto known = layout_ms_.find(layout_);
    if (known == layout_ms_.end()) return;  // a new layout: measure it
    tuner_.report(known->second, /*measured=*/false);
  }
  finished_ = true;
  apply_cap_(tuner_.chosen_mb());
}

void WarmupBucketSearch::after_step(int64_t step, double step_ms) {
  if (finished_) return;
  if (step <= BucketCapTuner::kLeadSteps) {
    // Step 1 rebuilt DDP's buckets in the observed order; the first steps are slower (caches,
    // the allocator), so the search starts after them.
    if (step == BucketCapTuner::kLeadSteps) apply_next();
    return;
  }
  if (settled_ < BucketCapTuner::kSettleSteps) {
    ++settled_;
    return;
  }
  window_.push_back(step_ms);
  if (static_cast<int>(window_.size()) < BucketCapTuner::kMeasuredSteps) return;
  const double median = agree_(percentile(window_, 50));
  layout_ms_[layout_] = median;
  tuner_.report(median);
  window_.clear();
  settled_ = 0;
  apply_next();
}

}  // namespace ddpb::bench
