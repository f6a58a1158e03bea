// How much memory this process may still take: the address-space and data limits (ulimit -v,
// ulimit -d) and the machine's available memory, read when asked. Used to refuse a run that
// cannot fit before it starts, and to say what was available when an allocation failed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ddpb {

struct MemoryLimits {
  std::optional<int64_t> address_space;  // RLIMIT_AS's soft limit; nullopt: unlimited
  std::optional<int64_t> data;           // RLIMIT_DATA's soft limit; nullopt: unlimited
  std::optional<int64_t> available;      // MemAvailable of /proc/meminfo; nullopt: unknown
  int64_t mapped = 0;                    // this process's VmSize now (0: unknown)

  // The tighter of the two limits, or nullopt when neither is set.
  std::optional<int64_t> process_limit() const;
  // "address-space limit (ulimit -v) 1024 MiB, 300 MiB of it mapped; 20480 MiB available".
  std::string describe() const;
};

MemoryLimits read_memory_limits();

}  // namespace ddpb
