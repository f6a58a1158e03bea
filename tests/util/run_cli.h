// Runs the ddpbench binary (DDPBENCH_BIN) as a real process and captures its output.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include "temp_dir.h"

namespace ddpb::testing {

struct CliResult {
  int code = -1;
  std::string output;  // stdout and stderr together
};

inline CliResult run_cli(const std::string& args, const std::string& env = "") {
  std::string cmd =
      env + (env.empty() ? "" : " ") + std::string(DDPBENCH_BIN) + " " + args + " 2>&1";
  CliResult r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  while (size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) r.output.append(buf.data(), n);
  int status = ::pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace ddpb::testing
