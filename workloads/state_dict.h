// A model's parameters and buffers as named tensors (PyTorch's state_dict), saved to and
// loaded from safetensors files.
#pragma once

#include <string>

#include "core/nn.h"
#include "workloads/safetensors.h"

namespace ddpb {

std::vector<NamedTensor> state_dict(const nn::Module& module);
void save_state_dict(const nn::Module& module, const std::string& path);
// Copies every parameter and buffer from the file. The file must hold exactly the module's
// names with matching shapes and dtypes; anything else throws UsageError naming the first
// offending tensor and the file.
void load_state_dict(const nn::Module& module, const std::string& path);

}  // namespace ddpb
