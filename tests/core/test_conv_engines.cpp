// Note [cuDNN engine choice], tested over fake engine notes where there is no GPU.
#include "core/cuda/conv_engines.h"

#include <gtest/gtest.h>

#include <vector>

namespace ddpb::gpu {
namespace {

EngineNotes engine(int64_t id) {
  EngineNotes e;
  e.global_index = id;
  return e;
}

TEST(ConvEngines, Fp32NeverTakesTensorCoresOrDownConvertedInputs) {
  std::vector<EngineNotes> engines = {engine(0), engine(1), engine(2)};
  engines[0].tensor_core = true;
  engines[1].down_convert_inputs = true;
  EXPECT_EQ(engine_try_order(engines, {/*allow_tensor_cores=*/false}), (std::vector<size_t>{2}));
  // tf32 and bf16 allow tensor cores, never down-converted fp32 inputs.
  EXPECT_EQ(engine_try_order(engines, {/*allow_tensor_cores=*/true}), (std::vector<size_t>{0, 2}));
}

TEST(ConvEngines, TheFallbackListIsTriedAfterModeA) {
  // Mode A offers only tensor-core engines: in fp32 the fallback list must still give one.
  std::vector<EngineNotes> engines = {engine(10), engine(11), engine(3)};
  engines[0].tensor_core = engines[1].tensor_core = true;
  engines[2].from_fallback = true;
  EXPECT_EQ(engine_try_order(engines, {false}), (std::vector<size_t>{2}));
  engines[0].tensor_core = false;
  EXPECT_EQ(engine_try_order(engines, {false}), (std::vector<size_t>{0, 2}));
}

TEST(ConvEngines, NondeterministicOnlyWhenNothingElseIsLeft) {
  std::vector<EngineNotes> engines = {engine(0), engine(1), engine(2)};
  engines[0].nondeterministic = true;
  engines[1].runtime_compilation = true;
  engines[2].workspace_bytes = kConvWorkspaceBound + 1;
  // Deterministic first, however slow to build or large; the nondeterministic one last.
  EXPECT_EQ(engine_try_order(engines, {false}), (std::vector<size_t>{1, 2, 0}));
  std::vector<EngineNotes> only = {engine(7)};
  only[0].nondeterministic = true;
  EXPECT_EQ(engine_try_order(only, {false}), (std::vector<size_t>{0}));
}

TEST(ConvEngines, PrecompiledBeforeRuntimeCompiledAndWithinTheWorkspaceBound) {
  std::vector<EngineNotes> engines = {engine(0), engine(1), engine(2), engine(3)};
  engines[0].runtime_compilation = true;
  engines[1].workspace_bytes = int64_t{1} << 32;
  engines[2].workspace_bytes = int64_t{4} << 20;
  engines[3].workspace_bytes = -1;  // not known before the plan is built: not demoted
  EXPECT_EQ(engine_try_order(engines, {false}), (std::vector<size_t>{2, 3, 0, 1}));
  // A larger bound lets engine 1 keep its heuristic rank.
  EXPECT_EQ(engine_try_order(engines, {false, int64_t{1} << 33}),
            (std::vector<size_t>{1, 2, 3, 0}));
}

TEST(ConvEngines, NoneAllowedIsAnEmptyOrder) {
  std::vector<EngineNotes> engines = {engine(0)};
  engines[0].tensor_core = true;
  EXPECT_TRUE(engine_try_order(engines, {false}).empty());
  EXPECT_TRUE(engine_try_order({}, {true}).empty());
}

TEST(ConvEngines, DescriptionNamesTheEngineItsListAndItsNotes) {
  EngineNotes e = engine(12);
  EXPECT_EQ(describe_engine(e), "engine 12 (heuristics A)");
  e.from_fallback = true;
  e.tensor_core = true;
  e.runtime_compilation = true;
  EXPECT_EQ(describe_engine(e), "engine 12 (heuristics fallback; tensor cores, runtime-compiled)");
}

TEST(ConvErrors, NameTheConvolutionOnce) {
  const std::string shape = "forward N,C,H,W 8,3,32,32 K 16 R 3 stride 1 padding 1, nchw";
  EXPECT_EQ(with_conv_shape("cudnnBackendExecute failed: CUDNN_STATUS_BAD_PARAM (2000)", shape),
            "cudnnBackendExecute failed: CUDNN_STATUS_BAD_PARAM (2000) (in the convolution " +
                shape + ")");
  const std::string named = "cuDNN has no engine for the convolution " + shape + ": none";
  EXPECT_EQ(with_conv_shape(named, shape), named);
}

TEST(CudnnVersion, NumbersReadAsCudnn9WritesThem) {
  EXPECT_EQ(format_cudnn_version(91001), "9.10.1");
  EXPECT_EQ(format_cudnn_version(90300), "9.3.0");
}

}  // namespace
}  // namespace ddpb::gpu
