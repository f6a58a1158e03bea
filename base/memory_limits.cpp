#include "base/memory_limits.h"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>

namespace ddpb {
namespace {

std::optional<int64_t> soft_limit(int resource) {
  rlimit r{};
  if (::getrlimit(resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return std::nullopt;
  return static_cast<int64_t>(r.rlim_cur);
}

// The value of `key` (in kB) in a /proc file of "Key:   123 kB" lines, in bytes.
std::optional<int64_t> proc_kib(const char* path, const std::string& key) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) != 0) continue;
    try {
      return std::stoll(line.substr(key.size())) * 1024;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::string mib(int64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

}  // namespace

std::optional<int64_t> MemoryLimits::process_limit() const {
  if (address_space && data) return std::min(*address_space, *data);
  return address_space ? address_space : data;
}

std::string MemoryLimits::describe() const {
  std::string out;
  if (address_space) out += "address-space limit (ulimit -v) " + mib(*address_space);
  if (data) out += std::string(out.empty() ? "" : ", ") + "data limit (ulimit -d) " + mib(*data);
  if (!out.empty() && mapped > 0) out += ", " + mib(mapped) + " of it mapped";
  if (available)
    out += std::string(out.empty() ? "" : "; ") + mib(*available) + " available on this machine";
  return out.empty() ? "no memory limit known" : out;
}

MemoryLimits read_memory_limits() {
  MemoryLimits m;
  m.address_space = soft_limit(RLIMIT_AS);
  m.data = soft_limit(RLIMIT_DATA);
  m.available = proc_kib("/proc/meminfo", "MemAvailable:");
  m.mapped = proc_kib("/proc/self/status", "VmSize:").value_or(0);
  return m;
}

}  // namespace ddpb
