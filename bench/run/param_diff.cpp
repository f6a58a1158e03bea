#include "bench/run/param_diff.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "workloads/safetensors.h"

namespace ddpb::bench {
namespace {

bool is_count(const Tensor& t) {
  return t.dtype() == DType::I32 || t.dtype() == DType::I64;
}

// Integer tensors (counts) differ or not: there is no relative difference to speak of.
bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

}  // namespace

ParamDiff param_diff(const std::string& path, const std::string& reference_path) {
  const auto got = load_safetensors(path);
  const auto ref = load_safetensors(reference_path);
  DDPB_CHECK(got.size() == ref.size())
      << path << " holds " << got.size() << " tensors, " << reference_path << " " << ref.size();
  ParamDiff out;
  for (size_t i = 0; i < got.size(); ++i) {
    DDPB_CHECK(got[i].name == ref[i].name && got[i].tensor.shape() == ref[i].tensor.shape())
        << "tensor #" << i << " differs in name or shape: " << got[i].name << " vs " << ref[i].name;
    if (is_count(got[i].tensor) || is_count(ref[i].tensor)) {  // BatchNorm's num_batches_tracked
      if (!same_bytes(got[i].tensor, ref[i].tensor)) {
        out.max_rel = out.rel_l2 = INFINITY;
        out.worst_tensor = got[i].name;
      }
      continue;
    }
    const auto a = got[i].tensor.to_floats();
    const auto b = ref[i].tensor.to_floats();
    double scale = 1e-12, diff = 0, diff_sq = 0, ref_sq = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      scale = std::max(scale, std::fabs(double(b[k])));
      const double d = std::fabs(double(a[k]) - double(b[k]));
      diff = std::isnan(d) ? INFINITY : std::max(diff, d);
      diff_sq += std::isnan(d) ? INFINITY : d * d;
      ref_sq += double(b[k]) * double(b[k]);
    }
    out.max_rel = std::max(out.max_rel, diff / scale);
    const double l2 = std::sqrt(diff_sq) / std::max(std::sqrt(ref_sq), 1e-12);
    if (l2 > out.rel_l2 || out.worst_tensor.empty()) {
      out.rel_l2 = std::max(out.rel_l2, l2);
      out.worst_tensor = got[i].name;
    }
  }
  return out;
}

}  // namespace ddpb::bench
