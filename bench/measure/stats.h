// Summary statistics over step samples.
#pragma once

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

}  // namespace ddpb::bench
