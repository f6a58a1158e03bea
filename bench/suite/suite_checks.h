#pragma once
// The suite checks that need the runtime, after validate_suite (the file's own checks, which the
// fuzz target covers without linking the runtime).

#include "bench/suite/suite_spec.h"

namespace ddpb::bench {

// Refuses, with UsageError naming the run or key, a suite whose runs would fail one by one:
// the projection topology must resolve and hold the projected device counts, and every expanded
// run's flags must parse as `ddpbench run` would parse them.
void check_suite_runs(const SuiteSpec& spec);

}  // namespace ddpb::bench
