// `ddpbench validate FILE...`: checks report files against the run-record schema
// (reports/schema/run.schema.json). Prints "FILE: valid" or one "FILE: PATH: problem" line per
// problem; returns 0 when every file is valid and 1 otherwise (usage errors are the parser's).
#pragma once

#include <string>
#include <vector>

namespace ddpb::bench {

int validate_command(const std::vector<std::string>& files);

}  // namespace ddpb::bench
