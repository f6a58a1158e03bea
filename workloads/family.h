// Workload families: one descriptor each (mlp, gpt, embed, resnet), and the preset table.
//
// Note [Workload families]
// Everything that differs from one family to another lives in its WorkloadFamily: how to
// build the model and its synthetic dataset, the batch it runs at when none is given, its
// parameter count and its training GEMMs from the spec alone, the shapes of one batch, and
// its traits. A preset (WorkloadSpec) is a row of one table that names its family. Code
// outside the table asks the descriptor (`family_of(spec).traits.batch_norm`), never the
// family's name: there is no switch on the family anywhere else.
//
// Adding a family: a Model (workloads/<family>.{h,cpp}), a WorkloadFamily in
// workloads/families.cpp's table, and its presets in workloads/presets.cpp; or, from a test
// or an extension, register_workload_family() and register_workload_preset() before the
// first lookup of that name (tests/workloads/test_families.cpp does exactly that).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/data_format.h"
#include "workloads/model.h"
#include "workloads/training_gemms.h"

namespace ddpb {

struct FamilyTraits {
  bool batch_norm =
      false;            // has BatchNorm layers: --sync-bn applies, DP/DDP statistics are per device
  bool images = false;  // samples are images: images/s, --channels-last
  bool graph_capturable = true;  // --cuda-graph may capture its step
  // The dataset on disk it can train on (`--data`): token shards for language models, image
  // folders for image models; none: synthetic data only.
  std::optional<DataFormat> files;
};

// The tensors of one batch of `batch` samples: the model's input and its logits.
struct BatchShapes {
  Shape input;
  DType input_dtype = DType::F32;
  Shape logits;
};

struct WorkloadFamily {
  std::string name;            // "mlp", the WorkloadSpec::family of its presets
  int64_t default_batch = 64;  // the global batch when none is given
  FamilyTraits traits;
  std::function<std::unique_ptr<Model>(const WorkloadSpec&, const Device&, uint64_t seed)>
      make_model;
  std::function<std::shared_ptr<const Dataset>(const WorkloadSpec&, uint64_t data_seed)>
      make_dataset;
  std::function<int64_t(const WorkloadSpec&)> parameter_count;  // what make_model creates
  std::function<std::vector<TrainingGemm>(const WorkloadSpec&, int64_t batch)> training_gemms;
  std::function<BatchShapes(const WorkloadSpec&, int64_t batch)> batch_shapes;
  // The model's blocks in forward order, each the names (Module::named_modules()) of modules
  // that run one after another: a transformer block, a ResNet stage's blocks. A sharded design
  // makes each block a unit (--fsdp-wrap block, Note [FSDP's step]); what no block holds stays
  // in its root. Only modules whose forward runs their hooks may be named (Note [Module forward
  // hooks]): core/nn.h's, and a workload's own that runs its body through with_forward_hooks.
  // Optional when registering: none (the whole model is the root).
  std::function<std::vector<std::vector<std::string>>(const WorkloadSpec&)> blocks;
};

// WorkloadFamily::make_model for a Model whose constructor takes (spec, device, seed).
template <class M>
auto make_model_of() {
  return [](const WorkloadSpec& spec, const Device& device, uint64_t seed) {
    return std::unique_ptr<Model>(std::make_unique<M>(spec, device, seed));
  };
}

// The family a spec names; throws ddpb::Error for a name no family has.
const WorkloadFamily& family_of(const WorkloadSpec& spec);
const WorkloadFamily& workload_family(const std::string& name);
std::vector<std::string> workload_family_names();

// Adds a family or a preset (thread-safe). Throws ddpb::Error for a name already taken, a
// preset whose family is unknown, or a descriptor missing one of its functions.
void register_workload_family(WorkloadFamily family);
void register_workload_preset(WorkloadSpec preset);

// One preset as `ddpbench workloads --json` lists it and the PyTorch peers read it
// (scripts/peer/models.py): every spec field, its family's default batch, traits and the
// batch's shapes at that batch, and its parameter count.
nlohmann::json preset_json(const WorkloadSpec& spec);
// Every preset's preset_json, in table order: `ddpbench workloads --json`.
nlohmann::json workload_table_json();

// The built-in families (workloads/families.cpp) and presets (workloads/presets.cpp).
std::vector<WorkloadFamily> builtin_families();
std::vector<WorkloadSpec> builtin_presets();

}  // namespace ddpb
