// `--dump DIR`: everything needed to replay a run elsewhere (e.g. in PyTorch).
//   meta.json            the resolved config, the workload and the parameter names
//   init.safetensors     parameters before step 1
//   final.safetensors    parameters after the last step
//   batches.safetensors  step{k}.x and step{k}.y for k = 1..steps, exactly as used
//                        (DDP rank r writes batches.rank{r}.safetensors)
// Every file is written atomically, and meta.json last, so a directory with meta.json
// holds a complete dump.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/nn.h"
#include "workloads/dataset.h"
#include "workloads/safetensors.h"

namespace ddpb::bench {

class RunDump {
 public:
  // Creates `dir` if needed. `batches_file` is the file name for the inputs.
  RunDump(std::string dir, std::string batches_file = "batches.safetensors");
  void save_init(const nn::Module& model);
  // Keeps a host copy of the batch of step `step` (1-based).
  void add_batch(int64_t step, const Batch& batch);
  // Writes final.safetensors, the batches and meta.json.
  void finish(const nn::Module& model, const nlohmann::json& meta);

 private:
  std::string dir_;
  std::string batches_file_;
  std::vector<NamedTensor> batches_;
};

}  // namespace ddpb::bench
