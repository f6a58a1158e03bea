// Summary statistics over step samples.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "reports/run_record.h"

namespace ddpb::bench {

struct Summary {
  double median = 0, mean = 0, p90 = 0, p99 = 0, min = 0, max = 0, stddev = 0;
  size_t count = 0;
  reports::StepTimeStats to_record() const;
};

// Percentiles by linear interpolation between closest ranks (numpy's default).
double percentile(std::vector<double> values, double q);
Summary summarize(const std::vector<double>& values);

// The key counted most often (the smallest such key on a tie) and its count; nullopt when empty.
template <class K>
std::optional<std::pair<K, int64_t>> most_counted(const std::map<K, int64_t>& counts) {
  const auto most =
      std::max_element(counts.begin(), counts.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  if (most == counts.end()) return std::nullopt;
  return std::pair<K, int64_t>{most->first, most->second};
}

}  // namespace ddpb::bench
