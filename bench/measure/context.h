// The `context` block of every report: when, where and how the numbers were produced.
#pragma once

#include <nlohmann/json.hpp>

namespace ddpb::bench {

nlohmann::json build_context();
// "Release", "Debug", ...; a Debug build's numbers are not worth comparing.
const char* build_type();
const char* ddpbench_version();
const char* git_commit();  // "-dirty" when built from uncommitted changes

}  // namespace ddpb::bench
