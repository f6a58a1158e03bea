// The `ddpbench` command line: one parser for every subcommand. Exit codes: 0 success,
// 1 runtime failure, 2 usage error (bad flag, bad value, unknown workload, missing GPU).
#pragma once

namespace ddpb::bench {

int ddpbench_main(int argc, char** argv);

}  // namespace ddpb::bench
