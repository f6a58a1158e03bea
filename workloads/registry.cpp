// Workload presets and the factories that build their models and datasets.
#include <sstream>

#include "core/check.h"
#include "workloads/embed.h"
#include "workloads/gpt.h"
#include "workloads/mlp.h"

namespace ddpb {
namespace {

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
  }
  return 64;
}

}  // namespace ddpb
