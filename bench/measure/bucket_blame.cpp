#include "bench/measure/bucket_blame.h"

#include "reports/report_util.h"

#include <fmt/core.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "bench/measure/stats.h"
#include "core/check.h"
#include "core/step_phase.h"

namespace ddpb::bench {

namespace {

using ReadyTimes = std::vector<std::vector<std::vector<double>>>;

// One (step, bucket): the rank that held it back beyond the noise (-1: none) and by how long.
struct Held {
  int rank = -1;
  double delay_ms = 0;
};

double median_of(const std::vector<double>& values) {
  return values.empty() ? 0.0 : percentile(values, 50);
}

Held last_rank(const ReadyTimes& ready, size_t step, size_t bucket, double noise_ms) {
  int last = 0;
  for (int r = 1; r < static_cast<int>(ready.size()); ++r) {
    if (ready[static_cast<size_t>(r)][step][bucket] >
        ready[static_cast<size_t>(last)][step][bucket])
      last = r;
  }
  double second = -std::numeric_limits<double>::infinity();
  for (int r = 0; r < static_cast<int>(ready.size()); ++r) {
    if (r != last) second = std::max(second, ready[static_cast<size_t>(r)][step][bucket]);
  }
  const double delay = ready[static_cast<size_t>(last)][step][bucket] - second;
  return delay >= noise_ms ? Held{last, delay} : Held{};
}

bool same_bucket_count(const ReadyTimes& ready, size_t step) {
  return std::all_of(ready.begin(), ready.end(),
                     [&](const auto& rank) { return rank[step].size() == ready[0][step].size(); });
}

reports::BlamedBucket blamed_bucket(int64_t bucket, const std::vector<Held>& held, int ranks) {
  std::vector<std::vector<double>> delays(static_cast<size_t>(ranks));
  for (const Held& h : held) {
    if (h.rank >= 0) delays[static_cast<size_t>(h.rank)].push_back(h.delay_ms);
  }
  const auto most =
      std::max_element(delays.begin(), delays.end(),
                       [](const auto& a, const auto& b) { return a.size() < b.size(); });
  reports::BlamedBucket out;
  out.bucket = bucket;
  if (most->empty()) return out;
  out.last_rank = most - delays.begin();
  out.held_fraction = static_cast<double>(most->size()) / static_cast<double>(held.size());
  out.delay_ms_median = median_of(*most);
  return out;
}

// The phase (waits excluded) whose median on `holder` most exceeds the other ranks' median.
void attribute_phase(const std::vector<reports::RankRecord>& ranks, int64_t holder,
                     reports::BucketBlame& out) {
  std::string best;
  double best_excess = 0;
  for (const reports::PhaseMedian& mine : ranks[static_cast<size_t>(holder)].phases_median_ms) {
    if (mine.phase == step_phase_name(StepPhase::CommExposed)) continue;
    std::vector<double> others;
    for (const reports::RankRecord& r : ranks) {
      if (r.rank == holder) continue;
      double ms = 0;  // a phase another rank does not have took it no time
      for (const reports::PhaseMedian& p : r.phases_median_ms) {
        if (p.phase == mine.phase) ms = p.median_ms;
      }
      others.push_back(ms);
    }
    const double excess = mine.median_ms - median_of(others);
    if (excess > best_excess) best = mine.phase, best_excess = excess;
  }
  if (best.empty() || best_excess < out.noise_ms) return;
  out.holder_phase = best;
  out.holder_phase_excess_ms = best_excess;
}

// Whether `most` held kHolderDominance times as many pairs as every other rank.
bool dominates(const std::vector<reports::RankBlame>& per_rank, const reports::RankBlame& most) {
  return std::all_of(per_rank.begin(), per_rank.end(), [&](const reports::RankBlame& r) {
    return r.rank == most.rank || most.held_fraction >= kHolderDominance * r.held_fraction;
  });
}

std::string finding(const reports::BucketBlame& b, const std::vector<reports::RankRecord>& ranks,
                    const std::string& groups) {
  const auto name = [&](int64_t r) { return reports::rank_name(ranks, r); };
  const auto most = std::max_element(
      b.per_rank.begin(), b.per_rank.end(),
      [](const auto& x, const auto& y) { return x.held_fraction < y.held_fraction; });
  if (!b.holder && b.steps < kHolderMinSteps) {
    return fmt::format(
        "{} measured steps are too few to name a rank that holds {} back (at "
        "least {})",
        b.steps, groups, kHolderMinSteps);
  }
  if (!b.holder) {
    if (most == b.per_rank.end() || most->buckets_held == 0)
      return fmt::format("no rank holds {} back beyond the noise ({:.2f} ms)", groups, b.noise_ms);
    if (!dominates(b.per_rank, *most)) {
      return fmt::format(
          "no rank holds the step back: the ranks take turns being last ({} held {:.0f}% of "
          "{} back, not {:.0f} times any other rank's share)",
          name(most->rank), 100 * most->held_fraction, groups, kHolderDominance);
    }
    return fmt::format(
        "no rank holds the step back: the most, {}, held {:.0f}% of {} back by a "
        "median {:.2f} ms, under the {:.2f} ms the steps' own jitter allows",
        name(most->rank), 100 * most->held_fraction, groups, most->delay_ms_median,
        b.holder_threshold_ms);
  }
  const reports::RankBlame& h = b.per_rank[static_cast<size_t>(*b.holder)];
  std::string s = fmt::format("{} holds back {:.0f}% of {} by a median {:.1f} ms", name(h.rank),
                              100 * h.held_fraction, groups, h.delay_ms_median);
  if (b.holder_phase) {
    return s + fmt::format(": its {} is {:.1f} ms slower than the other ranks'", *b.holder_phase,
                           *b.holder_phase_excess_ms);
  }
  return s +
         ": none of its phases is slower than the other ranks' beyond the noise (the delay "
         "is outside the timed phases)";
}

}  // namespace

reports::BucketBlame bucket_blame(const ReadyTimes& ready_ms,
                                  const std::vector<reports::RankRecord>& ranks,
                                  const reports::StepTimeStats& step, const std::string& groups) {
  const double median_step_ms = step.median;
  const int n = static_cast<int>(ready_ms.size());
  DDPB_CHECK(n >= 2) << "bucket blame needs two ranks or more, got " << n;
  DDPB_CHECK(ranks.size() == ready_ms.size())
      << "bucket blame: " << ranks.size() << " rank records for " << n << " ranks";
  const size_t steps = ready_ms[0].size();
  for (int r = 1; r < n; ++r) {
    DDPB_CHECK(ready_ms[static_cast<size_t>(r)].size() == steps)
        << "bucket blame: rank " << r << " measured " << ready_ms[static_cast<size_t>(r)].size()
        << " steps, rank 0 " << steps;
  }
  reports::BucketBlame out;
  out.noise_ms = std::max(kBlameNoiseFloorMs, kBlameNoiseShare * median_step_ms);
  std::vector<std::vector<Held>> by_bucket;
  std::vector<std::vector<double>> delays(static_cast<size_t>(n));
  int64_t pairs = 0;
  for (size_t s = 0; s < steps; ++s) {
    if (!same_bucket_count(ready_ms, s)) continue;
    ++out.steps;
    by_bucket.resize(std::max(by_bucket.size(), ready_ms[0][s].size()));
    for (size_t b = 0; b < ready_ms[0][s].size(); ++b, ++pairs) {
      const Held h = last_rank(ready_ms, s, b, out.noise_ms);
      by_bucket[b].push_back(h);
      if (h.rank >= 0) delays[static_cast<size_t>(h.rank)].push_back(h.delay_ms);
    }
  }
  out.buckets = static_cast<int64_t>(by_bucket.size());
  for (size_t b = 0; b < by_bucket.size(); ++b)
    out.per_bucket.push_back(blamed_bucket(static_cast<int64_t>(b), by_bucket[b], n));
  for (int r = 0; r < n; ++r) {
    const auto& d = delays[static_cast<size_t>(r)];
    const double total = std::accumulate(d.begin(), d.end(), 0.0);
    out.per_rank.push_back({r, static_cast<int64_t>(d.size()),
                            pairs ? static_cast<double>(d.size()) / static_cast<double>(pairs) : 0,
                            out.steps ? total / static_cast<double>(out.steps) : 0, median_of(d)});
  }
  const auto most = std::max_element(
      out.per_rank.begin(), out.per_rank.end(),
      [](const auto& x, const auto& y) { return x.held_fraction < y.held_fraction; });
  out.holder_threshold_ms =
      std::max({kHolderMinDelayMs, kHolderStepShare * median_step_ms, step.stddev});
  if (out.steps >= kHolderMinSteps && most->held_fraction >= kHolderShare &&
      dominates(out.per_rank, *most) && most->delay_ms_median >= out.holder_threshold_ms) {
    out.holder = most->rank;
    attribute_phase(ranks, most->rank, out);
  }
  out.finding = finding(out, ranks, groups);
  return out;
}

}  // namespace ddpb::bench
