#include "workloads/training_gemms.h"

#include "workloads/family.h"

namespace ddpb {

void add_linear_gemms(std::vector<TrainingGemm>& out, const std::string& workload,
                      const std::string& layer, int64_t rows, int64_t in, int64_t features,
                      bool bias, ops::Activation act, int calls, bool needs_dx) {
  auto add = [&](const char* pass, int64_t m, int64_t n, int64_t k, bool ta, bool tb, bool b,
                 ops::Activation a) {
    for (TrainingGemm& g : out) {
      if (g.layer == layer && g.pass == pass && g.m == m && g.n == n && g.k == k) {
        g.calls += calls;
        return;
      }
    }
    out.push_back({workload, layer, pass, m, n, k, ta, tb, b, a, calls});
  };
  add("fwd", rows, features, in, false, true, bias, act);
  if (needs_dx) add("dx", rows, in, features, false, false, false, ops::Activation::None);
  add("dw", features, in, rows, true, false, false, ops::Activation::None);
}

std::vector<TrainingGemm> training_gemms(const WorkloadSpec& spec, int64_t batch) {
  return family_of(spec).training_gemms(spec, batch);
}

}  // namespace ddpb
