// Workload presets and the factories that build their models and datasets.
#include <sstream>

#include "core/check.h"
#include "workloads/embed.h"
#include "workloads/gpt.h"
#include "workloads/mlp.h"
#include "workloads/resnet.h"

namespace ddpb {
namespace {

// torchvision's ResNet shapes: resnet-tiny is ResNet(BasicBlock, [1, 1, 1, 1], num_classes=10)
// on 32x32 images, resnet18 and resnet50 the ImageNet models.
void add_resnets(std::vector<WorkloadSpec>& p) {
  struct Preset {
    const char* name;
    const char* description;
    std::vector<int64_t> blocks;
    bool bottleneck;
    int64_t image_size, classes;
    bool gpu_size;
  };
  const Preset presets[] = {
      {"resnet-tiny",
       "ResNet(BasicBlock, [1,1,1,1]), 10 classes, 3x32x32 images, 4.9M params",
       {1, 1, 1, 1},
       false,
       32,
       10,
       false},
      {"resnet18",
       "torchvision resnet18, 1000 classes, 3x224x224 images, 11.7M params (GPU size)",
       {2, 2, 2, 2},
       false,
       224,
       1000,
       true},
      {"resnet50",
       "torchvision resnet50 (Bottleneck), 3x224x224 images, 25.6M params (GPU size)",
       {3, 4, 6, 3},
       true,
       224,
       1000,
       true},
  };
  for (const Preset& r : presets) {
    WorkloadSpec s;
    s.name = r.name;
    s.family = Family::ResNet;
    s.description = r.description;
    s.blocks = r.blocks;
    s.bottleneck = r.bottleneck;
    s.image_size = r.image_size;
    s.classes = r.classes;
    s.gpu_size = r.gpu_size;
    s.dataset_size = 16384;
    p.push_back(s);
  }
}

std::vector<WorkloadSpec> build_presets() {
  std::vector<WorkloadSpec> p;
  {
    WorkloadSpec s;
    s.name = "mlp-small";
    s.family = Family::Mlp;
    s.description = "MLP 1024 -> 1024 x3 -> 10 (4 Linear layers), 3.1M params";
    s.in_features = 1024;
    s.hidden = {1024, 1024, 1024};
    s.classes = 10;
    p.push_back(s);
  }
  {
    WorkloadSpec s;
    s.name = "mlp-wide";
    s.family = Family::Mlp;
    s.description = "MLP 4096 -> 8192 x3 -> 1000, 201M params (GPU size)";
    s.in_features = 4096;
    s.hidden = {8192, 8192, 8192};
    s.classes = 1000;
    s.gpu_size = true;
    p.push_back(s);
  }
  {
    WorkloadSpec s;
    s.name = "gpt-tiny";
    s.family = Family::Gpt;
    s.description = "GPT-2 style, 2 layers, d=128, 4 heads, seq 64, vocab 512";
    s.n_layer = 2;
    s.n_embd = 128;
    s.n_head = 4;
    s.seq_len = 64;
    s.vocab = 512;
    s.dataset_size = 16384;
    p.push_back(s);
  }
  {
    WorkloadSpec s;
    s.name = "gpt2-small";
    s.family = Family::Gpt;
    s.description = "GPT-2 small, 124M params, 12 layers, d=768, seq 1024";
    s.n_layer = 12;
    s.n_embd = 768;
    s.n_head = 12;
    s.seq_len = 1024;
    s.vocab = 50257;
    s.dataset_size = 16384;
    s.gpu_size = true;
    p.push_back(s);
  }
  {
    WorkloadSpec s;
    s.name = "embed";
    s.family = Family::Embed;
    s.description = "embedding 262144 x 64 (64 MiB) + MLP head; communication-bound";
    s.vocab = 262144;
    s.n_embd = 64;
    s.ids_per_sample = 16;
    s.hidden = {256};
    s.classes = 16;
    p.push_back(s);
  }
  {
    WorkloadSpec s;
    s.name = "mlp-skip";
    s.family = Family::Mlp;
    s.description = "MLP 64 -> 64 x2 -> 4 with a conditionally skipped branch (find-unused tests)";
    s.in_features = 64;
    s.hidden = {64, 64};
    s.classes = 4;
    s.conditional_branch = true;
    p.push_back(s);
  }
  {
    WorkloadSpec s;
    s.name = "embed-tiny";
    s.family = Family::Embed;
    s.description = "embedding 4096 x 32 + MLP head (tests)";
    s.vocab = 4096;
    s.n_embd = 32;
    s.ids_per_sample = 8;
    s.hidden = {64};
    s.classes = 8;
    p.push_back(s);
  }
  add_resnets(p);
  return p;
}

}  // namespace

const std::vector<WorkloadSpec>& workload_presets() {
  static const std::vector<WorkloadSpec> presets = build_presets();
  return presets;
}

const WorkloadSpec& find_workload(const std::string& name) {
  for (const auto& s : workload_presets()) {
    if (s.name == name) return s;
  }
  std::ostringstream known;
  for (const auto& s : workload_presets()) known << (known.tellp() ? ", " : "") << s.name;
  DDPB_USAGE_FAIL() << "unknown workload '" << name << "' (known: " << known.str() << ")";
  return workload_presets().front();
}

namespace {

// Convolutions (no bias) and BatchNorm weights and biases, stage by stage, then fc.
int64_t resnet_parameter_count(const WorkloadSpec& spec) {
  int64_t n = 3 * 64 * 49 + 2 * 64, in = 64;
  for (size_t stage = 0; stage < spec.blocks.size(); ++stage) {
    const int64_t planes = int64_t{64} << stage;
    const int64_t out = spec.bottleneck ? 4 * planes : planes;
    for (int64_t j = 0; j < spec.blocks[stage]; ++j) {
      if (spec.bottleneck) {
        n += in * planes + 2 * planes + planes * planes * 9 + 2 * planes + planes * out + 2 * out;
      } else {
        n += in * planes * 9 + 2 * planes + planes * planes * 9 + 2 * planes;
      }
      if ((stage > 0 && j == 0) || in != out) n += in * out + 2 * out;
      in = out;
    }
  }
  return n + in * spec.classes + spec.classes;
}

}  // namespace

int64_t estimated_parameter_count(const WorkloadSpec& spec) {
  const int64_t c = spec.n_embd;
  switch (spec.family) {
    case Family::Mlp: {
      std::vector<int64_t> widths{spec.in_features};
      widths.insert(widths.end(), spec.hidden.begin(), spec.hidden.end());
      widths.push_back(spec.classes);
      int64_t n = spec.conditional_branch ? spec.in_features * spec.classes + spec.classes : 0;
      for (size_t i = 0; i + 1 < widths.size(); ++i) n += widths[i] * widths[i + 1] + widths[i + 1];
      return n;
    }
    case Family::Gpt:  // per block: two LayerNorms, c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj
      return spec.n_layer * (12 * c * c + 13 * c) + (spec.vocab + spec.seq_len) * c + 2 * c;
    case Family::Embed: {
      const int64_t hidden = spec.hidden.at(0);
      return spec.vocab * c + spec.ids_per_sample * c * hidden + hidden + hidden * spec.classes +
             spec.classes;
    }
    case Family::ResNet:
      return resnet_parameter_count(spec);
  }
  return 0;
}

std::string family_name(Family f) {
  switch (f) {
    case Family::Mlp:
      return "mlp";
    case Family::Gpt:
      return "gpt";
    case Family::Embed:
      return "embed";
    case Family::ResNet:
      return "resnet";
  }
  return "?";
}

autograd::Var model_loss(const autograd::Var& logits, const Tensor& targets) {
  return fn::cross_entropy(logits, targets.view({targets.numel()}));
}

std::unique_ptr<Model> make_model(const WorkloadSpec& spec, const Device& device, uint64_t seed) {
  switch (spec.family) {
    case Family::Mlp:
      return std::make_unique<MlpModel>(spec, device, seed);
    case Family::Gpt:
      return std::make_unique<GptModel>(spec, device, seed);
    case Family::Embed:
      return std::make_unique<EmbedModel>(spec, device, seed);
    case Family::ResNet:
      return std::make_unique<ResNetModel>(spec, device, seed);
  }
  return nullptr;
}

std::shared_ptr<const Dataset> make_dataset(const WorkloadSpec& spec, uint64_t seed) {
  // The data seed is derived from, but distinct from, the initialisation seed.
  const uint64_t data_seed = seed ^ 0xD47A5EEDull;
  switch (spec.family) {
    case Family::Mlp:
      return std::make_shared<ClassificationDataset>(spec.dataset_size,
                                                     static_cast<int>(spec.in_features),
                                                     static_cast<int>(spec.classes), data_seed);
    case Family::Gpt:
      return std::make_shared<MarkovTokenDataset>(spec.dataset_size, static_cast<int>(spec.seq_len),
                                                  static_cast<int>(spec.vocab), data_seed);
    case Family::Embed:
      return std::make_shared<BagOfIdsDataset>(
          spec.dataset_size, static_cast<int>(spec.ids_per_sample), static_cast<int>(spec.vocab),
          static_cast<int>(spec.classes), data_seed);
    case Family::ResNet:
      return std::make_shared<ImageDataset>(spec.dataset_size, 3, static_cast<int>(spec.image_size),
                                            static_cast<int>(spec.classes), data_seed);
  }
  return nullptr;
}

int64_t default_global_batch(const std::string& workload) {
  switch (find_workload(workload).family) {
    case Family::Mlp:
      return 64;
    case Family::Gpt:
      return 8;
    case Family::Embed:
      return 64;
    case Family::ResNet:
      return 32;
  }
  return 64;
}

}  // namespace ddpb
