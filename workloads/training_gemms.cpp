#include "workloads/training_gemms.h"

namespace ddpb {
namespace {

using ops::Activation;

// The GEMMs of one Linear layer, merged into an earlier identical one when there is one.
void add_linear(std::vector<TrainingGemm>& out, const std::string& workload,
                const std::string& layer, int64_t rows, int64_t in, int64_t features, bool bias,
                Activation act, int calls, bool needs_dx) {
  auto add = [&](const char* pass, int64_t m, int64_t n, int64_t k, bool ta, bool tb, bool b,
                 Activation a) {
    for (TrainingGemm& g : out) {
      if (g.layer == layer && g.pass == pass && g.m == m && g.n == n && g.k == k) {
        g.calls += calls;
        return;
      }
    }
    out.push_back({workload, layer, pass, m, n, k, ta, tb, b, a, calls});
  };
  add("fwd", rows, features, in, false, true, bias, act);
  if (needs_dx) add("dx", rows, in, features, false, false, false, Activation::None);
  add("dw", features, in, rows, true, false, false, Activation::None);
}

}  // namespace

std::vector<TrainingGemm> training_gemms(const WorkloadSpec& s, int64_t batch) {
  std::vector<TrainingGemm> out;
  switch (s.family) {
    case Family::Mlp: {
      // in -> hidden... (ReLU) -> classes. The input needs no gradient: no dx for layer 0.
      std::vector<int64_t> widths = {s.in_features};
      widths.insert(widths.end(), s.hidden.begin(), s.hidden.end());
      widths.push_back(s.classes);
      const size_t layers = widths.size() - 1;
      for (size_t i = 0; i < layers; ++i) {
        const bool last = i + 1 == layers;
        // Hidden layers share the name "hidden" (and merge) unless the first differs in shape.
        std::string name = last ? "head" : "hidden";
        if (i == 0 && !last && layers > 2 && widths[0] != widths[1]) name = "in";
        add_linear(out, s.name, name, batch, widths[i], widths[i + 1], true,
                   last ? Activation::None : Activation::ReLU, 1, /*needs_dx=*/i > 0);
      }
      break;
    }
    case Family::Gpt: {
      const int64_t tokens = batch * s.seq_len, c = s.n_embd;
      const int layers = static_cast<int>(s.n_layer);
      add_linear(out, s.name, "c_attn", tokens, c, 3 * c, true, Activation::None, layers, true);
      add_linear(out, s.name, "attn_proj", tokens, c, c, true, Activation::None, layers, true);
      add_linear(out, s.name, "c_fc", tokens, c, 4 * c, true, Activation::None, layers, true);
      add_linear(out, s.name, "mlp_proj", tokens, 4 * c, c, true, Activation::None, layers, true);
      // The LM head is tied to the token embedding: no bias.
      add_linear(out, s.name, "lm_head", tokens, c, s.vocab, false, Activation::None, 1, true);
      break;
    }
    case Family::Embed: {
      // The head reads the sample's concatenated embeddings (ids_per_sample x n_embd), whose
      // table does need a gradient: dx for both layers.
      const int64_t concat = s.ids_per_sample * s.n_embd;
      const int64_t hidden = s.hidden.empty() ? s.classes : s.hidden.front();
      add_linear(out, s.name, "head0", batch, concat, hidden, true,
                 s.hidden.empty() ? Activation::None : Activation::ReLU, 1, true);
      if (!s.hidden.empty())
        add_linear(out, s.name, "head1", batch, hidden, s.classes, true, Activation::None, 1, true);
      break;
    }
    case Family::ResNet: {
      // Only fc is a GEMM: the convolutions go through oneDNN or cuDNN, not ops::gemm.
      const int64_t features = (s.bottleneck ? 4 : 1) * 512;
      add_linear(out, s.name, "fc", batch, features, s.classes, true, Activation::None, 1, true);
      break;
    }
  }
  return out;
}

}  // namespace ddpb
