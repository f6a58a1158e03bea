#include "workloads/state_dict.h"

#include <unordered_map>

#include "core/check.h"
#include "core/ops.h"

namespace ddpb {

std::vector<NamedTensor> state_dict(const nn::Module& module) {
  std::vector<NamedTensor> out;
  for (auto& p : module.named_parameters()) out.push_back({p.name, p.var.data()});
  for (auto& b : module.named_buffers()) out.push_back({b.name, b.tensor});
  return out;
}

void save_state_dict(const nn::Module& module, const std::string& path) {
  save_safetensors(path, state_dict(module), {{"format", "pt"}});
}

void load_state_dict(const nn::Module& module, const std::string& path) {
  auto loaded = load_safetensors(path, Device::cpu());
  std::unordered_map<std::string, Tensor> by_name;
  for (auto& t : loaded) by_name.emplace(t.name, t.tensor);
  const auto wanted = state_dict(module);  // parameters, then buffers
  for (auto& w : wanted) {
    auto it = by_name.find(w.name);
    DDPB_USAGE_CHECK(it != by_name.end())
        << path << " has no tensor '" << w.name << "' (it holds " << loaded.size() << " tensors)";
    const Tensor& src = it->second;
    DDPB_USAGE_CHECK(src.dtype() == w.tensor.dtype() && src.shape() == w.tensor.shape())
        << path << ": '" << w.name << "' is " << src.describe() << ", the model needs "
        << dtype_name(w.tensor.dtype()) << shape_str(w.tensor.shape());
  }
  DDPB_USAGE_CHECK(loaded.size() == wanted.size())
      << path << " holds " << loaded.size() << " tensors, the model has " << wanted.size()
      << " parameters and buffers";
  for (auto& w : wanted) ops::copy(by_name.at(w.name), w.tensor);
}

}  // namespace ddpb
