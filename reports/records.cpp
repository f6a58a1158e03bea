#include <algorithm>

#include "reports/run_record.h"
#include "reports/suite_record.h"

namespace ddpb::reports {

int64_t peak_memory_bytes(const std::vector<MemoryUse>& memory) {
  int64_t peak = 0;
  for (const MemoryUse& m : memory) peak = std::max(peak, m.peak_bytes);
  return peak;
}

std::optional<std::string> SuiteRun::arg(std::string_view flag) const {
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == flag) return args[i + 1];
  }
  return std::nullopt;
}

bool SuiteRun::has_arg(std::string_view flag) const {
  return std::find(args.begin(), args.end(), flag) != args.end();
}

const SuiteRun* SuiteRecord::find_run(std::string_view id) const {
  for (const SuiteRun& r : runs) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

DesignInfo SuiteRecord::design_named(std::string_view name) const {
  if (const DesignInfo* d = find_design(designs, name)) return *d;
  DesignInfo unknown;
  unknown.name = unknown.label = std::string(name);
  unknown.noun = "device";
  return unknown;
}

std::vector<const DesignInfo*> SuiteRecord::parallel_designs() const {
  std::vector<const DesignInfo*> out;
  for (const DesignInfo& d : designs)
    if (d.parallel) out.push_back(&d);
  return out;
}

std::vector<std::string> SuiteRecord::workloads() const {
  std::vector<std::string> out;
  const auto add = [&](const std::string& w) {
    if (!w.empty() && std::find(out.begin(), out.end(), w) == out.end()) out.push_back(w);
  };
  for (const std::string& w : suite.workloads) add(w);
  for (const SuiteRun& r : runs) add(r.workload);
  return out;
}

}  // namespace ddpb::reports
