// Which cuDNN engine configurations a convolution tries, and in what order, from the notes
// cuDNN gives each one. Host-only and free of cuDNN headers, so that CPU builds test the rule
// over fake notes (tests/core/test_conv_engines.cpp); core/cuda/cuda_conv.cpp reads the notes.
//
// Note [cuDNN engine choice]
// Candidates are heuristics mode A's list followed by the FALLBACK list, as PyTorch and
// cudnn-frontend do: mode A alone can leave a shape with no engine once the filter below has
// run. Then:
//  - never an engine that down-converts its inputs: our data is fp32, and the conversion
//    (to fp16) is a precision loss no math mode asks for;
//  - in fp32 math, never a tensor-core engine: on fp32 data it computes in TF32, which
//    --precision fp32 promises not to do (tf32 and bf16 allow them);
//  - the rest in heuristic order, demoted in this order of weight: a nondeterministic engine
//    only when nothing else is left (runs must reproduce), then one whose workspace exceeds
//    the bound (kConvWorkspaceBound), then one that compiles its kernel at run time when a
//    precompiled one exists (seconds per shape on the first step).
// The first candidate in that order that finalises into an execution plan is kept.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

namespace ddpb::gpu {

// cudnnGetVersion()'s number as "major.minor.patch" (cuDNN 9: major * 10000 + minor * 100 +
// patch).
inline std::string format_cudnn_version(size_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." +
         std::to_string(v % 100);
}
// The cuDNN that convolutions would use (libcudnn.so.9, opened here if no convolution has
// yet): its version, or "" when it cannot be opened. CUDA builds (core/cuda/cuda_conv.cpp).
std::string cudnn_version_string();

// An error from a convolution's cuDNN calls, naming the convolution (`shape`, as its plan's
// log line writes it): `what` as it is when it names the shape already.
inline std::string with_conv_shape(const std::string& what, const std::string& shape) {
  if (what.find(shape) != std::string::npos) return what;
  return what + " (in the convolution " + shape + ")";
}

// Past this a configuration's workspace is demoted (Note [cuDNN engine choice]).
constexpr int64_t kConvWorkspaceBound = int64_t{256} << 20;

struct EngineNotes {
  int64_t global_index = -1;   // cuDNN's engine id
  bool from_fallback = false;  // the FALLBACK list, not heuristics mode A
  bool tensor_core = false;
  bool down_convert_inputs = false;
  bool nondeterministic = false;
  bool runtime_compilation = false;
  int64_t workspace_bytes = -1;  // -1: cuDNN did not say before the plan was built
};

struct EngineFilter {
  bool allow_tensor_cores = false;
  int64_t max_workspace_bytes = kConvWorkspaceBound;
};

inline bool engine_allowed(const EngineNotes& e, const EngineFilter& f) {
  return !e.down_convert_inputs && (f.allow_tensor_cores || !e.tensor_core);
}

// Indices into `engines` of the allowed ones, best first (stable within a rank).
inline std::vector<size_t> engine_try_order(const std::vector<EngineNotes>& engines,
                                            const EngineFilter& f) {
  auto demotion = [&](const EngineNotes& e) {
    const bool oversized = e.workspace_bytes > f.max_workspace_bytes;
    return (e.nondeterministic ? 4 : 0) + (oversized ? 2 : 0) + (e.runtime_compilation ? 1 : 0);
  };
  std::vector<size_t> order;
  for (size_t i = 0; i < engines.size(); ++i) {
    if (engine_allowed(engines[i], f)) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return demotion(engines[a]) < demotion(engines[b]); });
  return order;
}

// "engine 12 (heuristics A; tensor cores, runtime-compiled)" for logs and run records.
inline std::string describe_engine(const EngineNotes& e) {
  std::string notes;
  auto add = [&](bool on, const char* what) {
    if (!on) return;
    notes += notes.empty() ? "; " : ", ";
    notes += what;
  };
  add(e.tensor_core, "tensor cores");
  add(e.nondeterministic, "nondeterministic");
  add(e.runtime_compilation, "runtime-compiled");
  add(e.down_convert_inputs, "down-converts inputs");
  return "engine " + std::to_string(e.global_index) + " (heuristics " +
         (e.from_fallback ? "fallback" : "A") + notes + ")";
}

}  // namespace ddpb::gpu
