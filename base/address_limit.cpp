// See Note [OpenBLAS under an address-space limit] in base/address_limit.h.
#include "base/address_limit.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "base/memory_limits.h"
#include "base/subprocess.h"

namespace ddpb {

void restart_without_blas_workers(char** argv) {
  if (std::getenv("OPENBLAS_NUM_THREADS") != nullptr) return;
  if (!read_memory_limits().address_space) return;
  if (::setenv("OPENBLAS_NUM_THREADS", "1", 1) != 0) return;
  std::vector<std::string> command;
  try {
    command = self_command();
  } catch (const std::exception&) {
    return;
  }
  for (char** a = argv + 1; *a != nullptr; ++a) command.emplace_back(*a);
  std::vector<char*> args;
  for (std::string& s : command) args.push_back(s.data());
  args.push_back(nullptr);
  ::execv(args[0], args.data());  // returns only when it failed: go on as we are
}

std::optional<std::string> address_limit_problem(std::optional<int64_t> limit_bytes,
                                                 int64_t mapped_bytes) {
  if (!limit_bytes || *limit_bytes - mapped_bytes >= kAddressHeadroomBytes) return std::nullopt;
  const auto mib = [](int64_t b) { return std::to_string(b >> 20); };
  return "the address-space limit (ulimit -v) of " + mib(*limit_bytes) +
         " MiB is too low: ddpbench maps " + mib(mapped_bytes) +
         " MiB as it starts (its libraries) and needs at least " +
         mib(mapped_bytes + kAddressHeadroomBytes) + " MiB; raise the limit or lift it";
}

}  // namespace ddpb
