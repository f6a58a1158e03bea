#include "base/open_files.h"

#include <sys/resource.h>

namespace ddpb {

int64_t open_files_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return -1;
  return static_cast<int64_t>(r.rlim_cur);
}

int64_t open_files_needed(int64_t world_size) {
  return 2 * world_size + 64;
}

std::string ensure_open_files(int64_t needed) {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return "";
  const auto want = static_cast<rlim_t>(needed);
  if (r.rlim_cur == RLIM_INFINITY || r.rlim_cur >= want) return "";
  if (r.rlim_max == RLIM_INFINITY || r.rlim_max >= want) {
    r.rlim_cur = want;
    if (::setrlimit(RLIMIT_NOFILE, &r) == 0) return "";
  }
  return "the limit (ulimit -n) is " + std::to_string(r.rlim_cur) + ", hard limit " +
         (r.rlim_max == RLIM_INFINITY ? std::string("unlimited") : std::to_string(r.rlim_max));
}

}  // namespace ddpb
