// The family table (Note [Workload families]): mlp, gpt, embed and resnet, each everything
// that differs by family, in one place.
#include "core/check.h"
#include "data/synthetic.h"
#include "workloads/embed.h"
#include "workloads/family.h"
#include "workloads/gpt.h"
#include "workloads/mlp.h"
#include "workloads/resnet.h"

namespace ddpb {
namespace {

using ops::Activation;

int32_t as_int(int64_t v) {
  return static_cast<int32_t>(v);
}

// in -> hidden... (ReLU) -> classes, plus mlp-skip's conditional `skip` Linear.
WorkloadFamily mlp_family() {
  WorkloadFamily f;
  f.name = "mlp";
  f.default_batch = 64;
  f.make_model = make_model_of<MlpModel>();
  f.make_dataset = [](const WorkloadSpec& s, uint64_t seed) {
    return std::shared_ptr<const Dataset>(std::make_shared<ClassificationDataset>(
        s.dataset_size, as_int(s.in_features), as_int(s.classes), seed));
  };
  f.parameter_count = [](const WorkloadSpec& s) {
    std::vector<int64_t> widths{s.in_features};
    widths.insert(widths.end(), s.hidden.begin(), s.hidden.end());
    widths.push_back(s.classes);
    int64_t n = s.conditional_branch ? s.in_features * s.classes + s.classes : 0;
    for (size_t i = 0; i + 1 < widths.size(); ++i) n += widths[i] * widths[i + 1] + widths[i + 1];
    return n;
  };
  f.training_gemms = [](const WorkloadSpec& s, int64_t batch) {
    // The input needs no gradient: no dx for layer 0.
    std::vector<TrainingGemm> out;
    std::vector<int64_t> widths = {s.in_features};
    widths.insert(widths.end(), s.hidden.begin(), s.hidden.end());
    widths.push_back(s.classes);
    const size_t layers = widths.size() - 1;
    for (size_t i = 0; i < layers; ++i) {
      const bool last = i + 1 == layers;
      // Hidden layers share the name "hidden" (and merge) unless the first differs in shape.
      std::string name = last ? "head" : "hidden";
      if (i == 0 && !last && layers > 2 && widths[0] != widths[1]) name = "in";
      add_linear_gemms(out, s.name, name, batch, widths[i], widths[i + 1], true,
                       last ? Activation::None : Activation::ReLU, 1, /*needs_dx=*/i > 0);
    }
    return out;
  };
  f.batch_shapes = [](const WorkloadSpec& s, int64_t b) {
    return BatchShapes{{b, s.in_features}, DType::F32, {b, s.classes}};
  };
  // Each Linear of the chain; mlp-skip's `skip` runs on some batches only, so it stays in the
  // root, which every forward gathers (a unit must run on every rank at every step).
  f.blocks = [](const WorkloadSpec& s) {
    std::vector<std::vector<std::string>> out;
    for (size_t i = 0; i <= s.hidden.size(); ++i) out.push_back({"layers." + std::to_string(i)});
    return out;
  };
  return f;
}

// GPT-2 with pre-LN blocks, the LM head tied to the token embedding.
WorkloadFamily gpt_family() {
  WorkloadFamily f;
  f.name = "gpt";
  f.default_batch = 8;
  f.traits.files = DataFormat::Tokens;
  f.make_model = make_model_of<GptModel>();
  f.make_dataset = [](const WorkloadSpec& s, uint64_t seed) {
    return std::shared_ptr<const Dataset>(std::make_shared<MarkovTokenDataset>(
        s.dataset_size, as_int(s.seq_len), as_int(s.vocab), seed));
  };
  f.parameter_count = [](const WorkloadSpec& s) {
    // Per block: two LayerNorms, c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj.
    const int64_t c = s.n_embd;
    return s.n_layer * (12 * c * c + 13 * c) + (s.vocab + s.seq_len) * c + 2 * c;
  };
  f.training_gemms = [](const WorkloadSpec& s, int64_t batch) {
    std::vector<TrainingGemm> out;
    const int64_t tokens = batch * s.seq_len, c = s.n_embd;
    const int layers = static_cast<int>(s.n_layer);
    add_linear_gemms(out, s.name, "c_attn", tokens, c, 3 * c, true, Activation::None, layers, true);
    add_linear_gemms(out, s.name, "attn_proj", tokens, c, c, true, Activation::None, layers, true);
    add_linear_gemms(out, s.name, "c_fc", tokens, c, 4 * c, true, Activation::None, layers, true);
    add_linear_gemms(out, s.name, "mlp_proj", tokens, 4 * c, c, true, Activation::None, layers,
                     true);
    // The LM head is tied to the token embedding: no bias.
    add_linear_gemms(out, s.name, "lm_head", tokens, c, s.vocab, false, Activation::None, 1, true);
    return out;
  };
  f.batch_shapes = [](const WorkloadSpec& s, int64_t b) {
    return BatchShapes{{b, s.seq_len}, DType::I32, {b * s.seq_len, s.vocab}};
  };
  // Each transformer block; wte (tied to the LM head), wpe and ln_f stay in the root.
  f.blocks = [](const WorkloadSpec& s) {
    std::vector<std::vector<std::string>> out;
    for (int64_t i = 0; i < s.n_layer; ++i) out.push_back({"h." + std::to_string(i)});
    return out;
  };
  return f;
}

// An embedding table read by bags of ids, the rows concatenated into an MLP head.
WorkloadFamily embed_family() {
  WorkloadFamily f;
  f.name = "embed";
  f.default_batch = 64;
  f.make_model = make_model_of<EmbedModel>();
  f.make_dataset = [](const WorkloadSpec& s, uint64_t seed) {
    return std::shared_ptr<const Dataset>(std::make_shared<BagOfIdsDataset>(
        s.dataset_size, as_int(s.ids_per_sample), as_int(s.vocab), as_int(s.classes), seed));
  };
  f.parameter_count = [](const WorkloadSpec& s) {
    const int64_t c = s.n_embd, hidden = s.hidden.at(0);
    return s.vocab * c + s.ids_per_sample * c * hidden + hidden + hidden * s.classes + s.classes;
  };
  f.training_gemms = [](const WorkloadSpec& s, int64_t batch) {
    // The head reads the concatenated embeddings, whose table needs a gradient: dx for both.
    std::vector<TrainingGemm> out;
    const int64_t concat = s.ids_per_sample * s.n_embd;
    const int64_t hidden = s.hidden.empty() ? s.classes : s.hidden.front();
    add_linear_gemms(out, s.name, "head0", batch, concat, hidden, true,
                     s.hidden.empty() ? Activation::None : Activation::ReLU, 1, true);
    if (!s.hidden.empty()) {
      add_linear_gemms(out, s.name, "head1", batch, hidden, s.classes, true, Activation::None, 1,
                       true);
    }
    return out;
  };
  f.batch_shapes = [](const WorkloadSpec& s, int64_t b) {
    return BatchShapes{{b, s.ids_per_sample}, DType::I32, {b, s.classes}};
  };
  // The table, which holds almost every parameter, and the MLP head after it.
  f.blocks = [](const WorkloadSpec&) {
    return std::vector<std::vector<std::string>>{{"emb"}, {"head.0", "head.1"}};
  };
  return f;
}

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

// torchvision's ResNet: BatchNorm everywhere, square RGB images. Graph capture is refused:
// a replay would update the running statistics and num_batches_tracked unchecked.
WorkloadFamily resnet_family() {
  WorkloadFamily f;
  f.name = "resnet";
  f.default_batch = 32;
  f.traits = {.batch_norm = true,
              .images = true,
              .graph_capturable = false,
              .files = DataFormat::ImageFolder};
  f.make_model = make_model_of<ResNetModel>();
  f.make_dataset = [](const WorkloadSpec& s, uint64_t seed) {
    return std::shared_ptr<const Dataset>(std::make_shared<ImageDataset>(
        s.dataset_size, 3, as_int(s.image_size), as_int(s.classes), seed));
  };
  f.parameter_count = resnet_parameter_count;
  f.training_gemms = [](const WorkloadSpec& s, int64_t batch) {
    // Only fc is a GEMM: the convolutions go through oneDNN or cuDNN, not ops::gemm.
    std::vector<TrainingGemm> out;
    const int64_t features = (s.bottleneck ? 4 : 1) * 512;
    add_linear_gemms(out, s.name, "fc", batch, features, s.classes, true, Activation::None, 1,
                     true);
    return out;
  };
  f.batch_shapes = [](const WorkloadSpec& s, int64_t b) {
    return BatchShapes{{b, 3, s.image_size, s.image_size}, DType::F32, {b, s.classes}};
  };
  // Each stage's blocks (layer1.0, layer1.1, ...) as one unit; the stem and fc stay in the root.
  f.blocks = [](const WorkloadSpec& s) {
    std::vector<std::vector<std::string>> out;
    for (size_t stage = 0; stage < s.blocks.size(); ++stage) {
      std::vector<std::string> unit;
      for (int64_t j = 0; j < s.blocks[stage]; ++j)
        unit.push_back("layer" + std::to_string(stage + 1) + "." + std::to_string(j));
      out.push_back(std::move(unit));
    }
    return out;
  };
  return f;
}

}  // namespace

std::vector<WorkloadFamily> builtin_families() {
  return {mlp_family(), gpt_family(), embed_family(), resnet_family()};
}

}  // namespace ddpb
