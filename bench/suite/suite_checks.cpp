#include "bench/suite/suite_checks.h"

#include <algorithm>

#include "bench/project/suite_projection.h"
#include "bench/run/run_flags.h"
#include "core/check.h"

namespace ddpb::bench {
namespace {

// A projection topology that is a preset or a file must be one, and hold the projected device
// counts (issue 25, E2: a bad one ran the whole suite, then said "no projection", exit 0).
// "measured" is fitted after the runs.
void validate_projection_topology(const SuiteSpec& s) {
  if (s.workloads.empty() || s.projection_topology == "measured") return;
  Topology topo;
  try {
    topo = resolve_topology(s.projection_topology, ProjectionSource{});
  } catch (const UsageError& e) {
    DDPB_USAGE_FAIL() << "suite: \"projection_topology\": " << e.what();
  }
  for (int n : s.projection_devices) {
    DDPB_USAGE_CHECK(n >= 1 && (topo.inter || n <= topo.node_size))
        << "suite: \"projection_devices\" " << n << " does not fit topology " << topo.name << " ("
        << topo.node_size << " devices a node and no inter-node link)";
  }
}

}  // namespace

void check_suite_runs(const SuiteSpec& s) {
  validate_projection_topology(s);
  // Every run as `ddpbench run` would check it (issue 25, E3): a value it would refuse fails the
  // suite before the first run, not the run when its turn comes. The image folder the suite
  // makes itself does not exist yet: its format is given, so that nothing looks for it.
  for (const SuiteRun& run : expand_suite(s)) {
    std::vector<std::string> args = run.args;
    if (run.run_config().data == kSuiteImageFolder && run.run_config().data_format.empty())
      args.insert(args.end(), {"--data-format", "imagefolder"});
    try {
      parse_run_args(args);
    } catch (const UsageError& e) {
      DDPB_USAGE_FAIL() << "suite: run " << run.id << ": " << e.what();
    }
  }
}

}  // namespace ddpb::bench
