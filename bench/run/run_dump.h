// `--dump DIR`: everything needed to replay a run elsewhere (e.g. in PyTorch).
//   meta.json            the resolved config, the workload, the parameter and buffer names
//   init.safetensors     parameters and buffers before step 1
//   final.safetensors    parameters and buffers after the last step
//   batches.safetensors  step{k}.x and step{k}.y for k = 1..steps, exactly as used
//                        (DDP rank r writes batches.rank{r}.safetensors; with
//                        --accumulate, micro-batch j > 0 of step k is step{k}.{j}.x)
//   powersgd_q.safetensors  with --comm-hook powersgd: every random Q drawn, as
//                        iter{i}.{parameter} [cols, rank], before orthogonalisation
// Every file is written atomically, and meta.json last, so a directory with meta.json
// holds a complete dump.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/nn.h"
#include "data/dataset.h"
#include "workloads/safetensors.h"

namespace ddpb::bench {

class RunDump {
 public:
  // Creates `dir` if needed. `batches_file` is the file name for the inputs.
  RunDump(std::string dir, std::string batches_file = "batches.safetensors");
  void save_init(const std::vector<NamedTensor>& state);
  // Keeps a host copy of micro-batch `micro` of step `step` (1-based): "step{k}.x" when a
  // step has one batch, "step{k}.{micro}.x" for the later micro-batches of --accumulate.
  void add_batch(int64_t step, int micro, const Batch& batch);
  // Writes `tensors` as DIR/file (before finish(), whose meta.json marks the dump complete).
  void save_extra(const std::string& file, const std::vector<NamedTensor>& tensors);
  // Writes the batches and, given the model (rank 0 only), final.safetensors (the design's full
  // state dict, `state`) and meta.json (the model's parameter and buffer names).
  void finish(const nn::Module* model, const std::vector<NamedTensor>& state,
              const nlohmann::json& meta);

 private:
  std::string dir_;
  std::string batches_file_;
  std::vector<NamedTensor> batches_;
};

}  // namespace ddpb::bench
