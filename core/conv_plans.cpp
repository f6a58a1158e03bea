#include "core/conv_plans.h"

#include <mutex>
#include <tuple>

namespace ddpb {
namespace {

std::mutex g_mutex;
std::vector<ConvPlanRecord> g_records;

bool same_plan(const ConvPlanRecord& a, const ConvPlanRecord& b) {
  return std::tie(a.device, a.direction, a.dims, a.layout, a.tensor_cores) ==
         std::tie(b.device, b.direction, b.dims, b.layout, b.tensor_cores);
}

}  // namespace

bool record_conv_plan(const ConvPlanRecord& r) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const auto& existing : g_records) {
    if (same_plan(existing, r)) return false;
  }
  g_records.push_back(r);
  return true;
}

std::vector<ConvPlanRecord> conv_plan_records() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_records;
}

nlohmann::json conv_plans_json() {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : conv_plan_records()) {
    out.push_back({{"device", r.device},
                   {"direction", r.direction},
                   {"dims", r.dims},
                   {"layout", r.layout},
                   {"tensor_cores", r.tensor_cores},
                   {"engine", r.engine},
                   {"engine_index", r.engine_index},
                   {"workspace_bytes", r.workspace_bytes},
                   {"build_ms", r.build_ms},
                   {"candidates", r.candidates},
                   {"allowed", r.allowed},
                   {"tried", r.tried}});
  }
  return out;
}

}  // namespace ddpb
