// `ddpbench report` and `ddpbench compare`: thin commands over reports/ (rendering and the
// regression check live there, independent of the runtime).
#pragma once

#include <string>

namespace ddpb::bench {

// Renders a suite record to `out`: HTML when it ends in .html/.htm, Markdown (with the charts
// as SVG files "<stem>-<chart>.svg" beside it) when it ends in .md. Returns the exit code.
int report_command(const std::string& results, const std::string& out);

// Prints the per-run delta table and the moves inside the noise; returns 1 when anything
// regressed past both `threshold_pct` and the runs' step-time noise (Note [Step-time noise]).
int compare_command(const std::string& base, const std::string& now, double threshold_pct);

}  // namespace ddpb::bench
