#include <algorithm>

#include "reports/run_record.h"
#include "reports/suite_record.h"

namespace ddpb::reports {

int64_t peak_memory_bytes(const std::vector<MemoryUse>& memory) {
  int64_t peak = 0;
  for (const MemoryUse& m : memory) peak = std::max(peak, m.peak_bytes);
  return peak;
}

const RunConfigInfo& SuiteRun::run_config() const {
  static const RunConfigInfo defaults;
  return config ? *config : defaults;
}

const SuiteRun* SuiteRecord::find_run(std::string_view id) const {
  for (const SuiteRun& r : runs) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

DesignInfo SuiteRecord::design_named(std::string_view name) const {
  return design_or_name(designs, name);
}

std::vector<const DesignInfo*> SuiteRecord::parallel_designs() const {
  std::vector<const DesignInfo*> out;
  for (const DesignInfo& d : designs)
    if (d.parallel) out.push_back(&d);
  return out;
}

const DesignInfo* SuiteRecord::reference_design() const {
  for (const DesignInfo& d : designs)
    if (!d.parallel) return &d;
  return nullptr;
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
