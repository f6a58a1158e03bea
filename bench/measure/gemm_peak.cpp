#include "bench/measure/gemm_peak.h"

#include <algorithm>

#include "core/ops.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "workloads/model.h"
#include "workloads/training_gemms.h"

namespace ddpb::bench {

std::vector<GemmShape> workload_gemm_shapes(
    const std::map<std::string, int64_t>& per_device_batch) {
  std::vector<GemmShape> shapes;
  for (const auto& [name, batch] : per_device_batch) {
    // The two largest forward GEMMs of the workload's training step.
    std::vector<TrainingGemm> fwd;
    for (TrainingGemm& g : training_gemms(find_workload(name), batch)) {
      if (g.pass == "fwd") fwd.push_back(std::move(g));
    }
    std::stable_sort(fwd.begin(), fwd.end(), [](const TrainingGemm& a, const TrainingGemm& b) {
      return a.flops() > b.flops();
    });
    for (size_t i = 0; i < fwd.size() && i < 2; ++i)
      shapes.push_back({name, fwd[i].m, fwd[i].n, fwd[i].k});
  }
  // Identical shapes are timed once.
  std::sort(shapes.begin(), shapes.end(), [](const GemmShape& a, const GemmShape& b) {
    return std::tie(a.m, a.n, a.k, a.workload) < std::tie(b.m, b.n, b.k, b.workload);
  });
  shapes.erase(std::unique(shapes.begin(), shapes.end(),
                           [](const GemmShape& a, const GemmShape& b) {
                             return a.m == b.m && a.n == b.n && a.k == b.k;
                           }),
               shapes.end());
  return shapes;
}

nlohmann::json measure_gemm_peak(const Device& device, const std::vector<GemmShape>& shapes,
                                 double min_time_s) {
  DeviceGuard guard(device);
  Stream& s = current_stream(device);
  nlohmann::json rows = nlohmann::json::array();
  double best = 0;
  for (const auto& sh : shapes) {
    // y = x W^T, as a Linear layer's forward runs it.
    Tensor x = Tensor::empty({sh.m, sh.k}, DType::F32, device);
    Tensor w = Tensor::empty({sh.n, sh.k}, DType::F32, device);
    Tensor y = Tensor::empty({sh.m, sh.n}, DType::F32, device);
    ops::fill(x, 0.5f);
    ops::fill(w, 0.25f);
    const double flops = 2.0 * double(sh.m) * double(sh.n) * double(sh.k);
    for (int i = 0; i < 2; ++i)
      ops::gemm(x, false, w, true, y);  // warm-up (BLAS buffers, cuBLASLt plans)
    Event start = Event::create(device), end = Event::create(device);
    int64_t iters = 1;
    double ms = 0;
    // Double the batch of iterations until it lasts min_time_s: no timer read per GEMM.
    for (;;) {
      start.record(s);
      for (int64_t i = 0; i < iters; ++i) ops::gemm(x, false, w, true, y);
      end.record(s);
      end.synchronize();
      ms = start.elapsed_ms(end);
      if (ms / 1000.0 >= min_time_s || iters >= (int64_t{1} << 20)) break;
      iters *= 2;
    }
    const double rate = ms > 0 ? flops * double(iters) / (ms / 1000.0) : 0.0;
    best = std::max(best, rate);
    rows.push_back({{"workload", sh.workload},
                    {"m", sh.m},
                    {"n", sh.n},
                    {"k", sh.k},
                    {"iterations", iters},
                    {"flops_per_s", rate}});
  }
  return {{"device", device.str()},
          {"flops_per_s", best},
          {"min_time_s", min_time_s},
          {"shapes", rows}};
}

}  // namespace ddpb::bench
