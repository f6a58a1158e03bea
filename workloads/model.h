// The workloads: models with PyTorch-compatible parameter names, their presets and their
// synthetic datasets. Every model maps an input batch to logits [N, classes] whose rows are
// scored by softmax cross-entropy (mean) against the targets flattened to [N].
//
// A preset names its family, whose descriptor (workloads/family.h, Note [Workload families])
// builds its model and dataset; adding a preset is a row in workloads/presets.cpp, adding a
// family a descriptor in workloads/families.cpp. Nothing in impl_dp, impl_ddp or bench
// changes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/nn.h"
#include "data/dataset.h"

namespace ddpb {

// One preset: its family's descriptor reads the fields that family uses.
struct WorkloadSpec {
  std::string name;    // preset name, e.g. "mlp-small"
  std::string family;  // a WorkloadFamily's name: "mlp", "gpt", "embed", "resnet"
  std::string description{};
  int64_t dataset_size = 65536;
  // mlp: in_features -> hidden... -> classes
  int64_t in_features = 0;
  std::vector<int64_t> hidden{};
  int64_t classes = 0;
  // gpt
  int64_t n_layer = 0, n_embd = 0, n_head = 0, seq_len = 0, vocab = 0;
  // embed: vocab, n_embd (row width), ids_per_sample, hidden[0], classes
  int64_t ids_per_sample = 0;
  // mlp: a `skip` Linear (in -> classes) added to the logits only in steps whose first input
  // feature is positive: a conditionally unused branch, for DDP's find-unused-parameters.
  bool conditional_branch = false;
  // resnet: residual blocks per stage (4 stages), BasicBlock or Bottleneck, square RGB images
  // of image_size pixels, `classes` outputs
  std::vector<int64_t> blocks{};
  bool bottleneck = false;
  int64_t image_size = 0;
  bool gpu_size = false;  // too big for CPU tests
};

class Model : public nn::Module {
 public:
  // x: a batch from the workload's dataset ([B, features] f32, [B, T] i32 or [B, 3, H, W] f32).
  virtual autograd::Var forward(const Tensor& x) const = 0;
  // Tokens per sample (T for gpt, 1 otherwise), for tokens/s.
  virtual int64_t tokens_per_sample() const { return 1; }
  // Whether a sample is an image (resnet): the record then also gives images/s.
  virtual bool samples_are_images() const { return false; }
  // Training FLOPs per sample: 3x the forward GEMM and attention FLOPs (forward + backward).
  virtual double train_flops_per_sample() const = 0;
};

// Softmax cross-entropy (mean) of logits against targets of any shape with N elements.
autograd::Var model_loss(const autograd::Var& logits, const Tensor& targets);

// Throws UsageError naming the known presets. The reference stays valid for the process's
// life (presets are only ever added).
const WorkloadSpec& find_workload(const std::string& name);
std::vector<WorkloadSpec> workload_presets();
// The batch a workload runs at when none is given (--global-batch, a suite's per-device
// batch): its family's default_batch (64 samples for mlp and embed, 8 sequences for gpt,
// 32 images for resnet).
int64_t default_global_batch(const std::string& workload);
// The number of parameters make_model(spec) creates, from the spec alone (no allocation):
// what a run must hold per device, checked before any device is touched.
int64_t estimated_parameter_count(const WorkloadSpec& spec);

std::unique_ptr<Model> make_model(const WorkloadSpec& spec, const Device& device, uint64_t seed);
std::shared_ptr<const Dataset> make_dataset(const WorkloadSpec& spec, uint64_t seed);

}  // namespace ddpb
