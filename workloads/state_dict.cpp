#include "workloads/state_dict.h"

#include <unordered_map>

#include "core/check.h"
#include "core/ops.h"

namespace ddpb {

std::vector<NamedTensor> state_dict(const nn::Module& module) {
  std::vector<NamedTensor> out;
  for (auto& p : module.named_parameters()) out.push_back({p.name, p.var.data()});
  return out;
}

void save_state_dict(const nn::Module& module, const std::string& path) {
  save_safetensors(path, state_dict(module), {{"format", "pt"}});
}

void load_state_dict(const nn::Module& module, const std::string& path) {
  auto loaded = load_safetensors(path, Device::cpu());
  std::unordered_map<std::string, Tensor> by_name;
  for (auto& t : loaded) by_name.emplace(t.name, t.tensor);
  auto params = module.named_parameters();
  for (auto& p : params) {
    auto it = by_name.find(p.name);
    DDPB_USAGE_CHECK(it != by_name.end()) << path << " has no parameter '" << p.name
                                          << "' (it holds " << loaded.size() << " tensors)";
    const Tensor& src = it->second;
    const Tensor& dst = p.var.data();
    DDPB_USAGE_CHECK(src.dtype() == dst.dtype() && src.shape() == dst.shape())
        << path << ": parameter '" << p.name << "' is " << src.describe() << ", the model needs "
        << dtype_name(dst.dtype()) << shape_str(dst.shape());
  }
  DDPB_USAGE_CHECK(loaded.size() == params.size())
      << path << " holds " << loaded.size() << " tensors, the model has " << params.size()
      << " parameters";
  for (auto& p : params) ops::copy(by_name.at(p.name), p.var.data());
}

}  // namespace ddpb
