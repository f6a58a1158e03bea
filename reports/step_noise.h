// How far apart two runs' median steps must be before the difference is more than their own
// step-to-step noise: the one rule compare (reports/compare.h) judges every timing change by.
// A pure function of the step_time_ms statistics the run and suite records carry.
#pragma once

#include <cstdint>

#include "reports/run_record.h"

namespace ddpb::reports {

// Note [Step-time noise]
// ~~~~~~~~~~~~~~~~~~~~~~
// Two runs a and b of one configuration differ beyond their noise when their median steps
// differ by more than
//     band_ms = t(df) * sqrt(s_a^2 + s_b^2)
// s is a run's step-to-step spread (step_spread_ms), so sqrt(s_a^2 + s_b^2) is the standard
// deviation of the difference of one step of each run. t(df) is Student's two-sided 95%
// quantile with df = min(count_a, count_b) - 1 (1.96 with many steps, 3.18 with the quick
// suite's 4), because each spread is itself estimated from that few steps.
//
// The spread s is the step-time standard deviation (step_time_ms.stddev), unless a few outlier
// steps (a stall of the whole machine) make it wider than the body of the steps spreads:
//     s = min(stddev, max(p90 - median, median - min) / 1.2816)
// the standard deviation of a normal distribution whose p90 is that far from its median. The
// band compares medians, and an outlier step moves the median no more than any other slow
// step; with the stddev alone, a few stalls under load can widen the band to ±165 ms for 8 ms
// steps, so that a +780% slowdown reads as noise. median - min keeps a run whose steps alternate
// between two levels (its median on the upper one) as wide as its stddev says.
//
// Why the spread of a step and not the standard error of a median (s / sqrt(count)): the
// standard error holds when both runs draw from one distribution. Runs minutes apart on a
// shared machine do not (other processes, clock frequency, the caches), and their medians move
// by about as much as steps do within a run. Two runs of one 12-configuration suite, minutes
// apart, put 6 configurations past a 5% threshold with a fixed threshold alone; on a loaded
// 2-core machine, 20 of 22 pairs of unchanged 20-step runs and every row of two quick suites
// stayed inside this band.
// The flag ledger (Note [Flag ledger]) may use the standard error because it pairs runs of one
// round and measures the spread between rounds as well.
//
// What it cannot see: a load that lasts the whole of one run and none of the other moves the
// median without widening either spread (one of the other 2 of those 22 pairs: 7.2 ms against
// 9.8 ms, each with a stddev under 0.4 ms). compare prints the band of every row so that a reader
// sees it. A run of fewer than 2 measured steps has no spread; when neither run has one the band is
// 0 and the threshold alone judges.
double step_noise_ms(const StepTimeStats& a, const StepTimeStats& b);

// One run's step-to-step spread s, as above; 0 for fewer than 2 steps or a stddev that is not
// finite and positive.
double step_spread_ms(const StepTimeStats& s);

// Student's t two-sided 95% quantile for df >= 1 degrees of freedom: from a table, at the
// largest tabulated df not above df (never narrower than the exact quantile).
double student_t95(int64_t df);

}  // namespace ddpb::reports
