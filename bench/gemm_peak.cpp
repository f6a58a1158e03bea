#include "bench/gemm_peak.h"

#include <algorithm>

#include "core/ops.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "workloads/model.h"

namespace ddpb::bench {

std::vector<GemmShape> workload_gemm_shapes(
    const std::map<std::string, int64_t>& per_device_batch) {
  std::vector<GemmShape> shapes;
  for (const auto& [name, batch] : per_device_batch) {
    const WorkloadSpec& w = find_workload(name);
    switch (w.family) {
      case Family::Mlp:
        shapes.push_back(
            {name, batch, w.hidden.empty() ? w.classes : w.hidden.front(), w.in_features});
        if (w.hidden.size() > 1) shapes.push_back({name, batch, w.hidden[1], w.hidden[0]});
        break;
      case Family::Gpt:
        // The MLP's c_fc and the tied LM head: the two largest GEMMs of a block and of the model.
        shapes.push_back({name, batch * w.seq_len, 4 * w.n_embd, w.n_embd});
        shapes.push_back({name, batch * w.seq_len, w.vocab, w.n_embd});
        break;
      case Family::Embed:
        // head.0 reads the sample's concatenated embeddings: ids_per_sample x n_embd features.
        shapes.push_back({name, batch, w.hidden.empty() ? w.classes : w.hidden.front(),
                          w.ids_per_sample * w.n_embd});
        break;
    }
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
