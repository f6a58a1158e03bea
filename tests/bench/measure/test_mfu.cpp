// bench/measure/mfu.h: the datasheet table lookup and the MFU arithmetic (no GPU needed).
#include <gtest/gtest.h>

#include "bench/measure/mfu.h"

namespace ddpb::bench {
namespace {

TEST(Mfu, DatasheetPeaksByNameAndPrecision) {
  // cudaGetDeviceProperties names, as the drivers report them.
  auto h200 = datasheet_peak("NVIDIA H200", ops::MathMode::BF16);
  ASSERT_TRUE(h200);
  EXPECT_DOUBLE_EQ(h200->flops_per_s, 989.4e12);
  EXPECT_NE(h200->source.find("H200 SXM"), std::string::npos) << h200->source;
  EXPECT_DOUBLE_EQ(datasheet_peak("NVIDIA H200", ops::MathMode::FP32)->flops_per_s, 67e12);
  EXPECT_DOUBLE_EQ(datasheet_peak("NVIDIA H200", ops::MathMode::TF32)->flops_per_s, 494.7e12);
  // More specific names win over their prefixes.
  EXPECT_DOUBLE_EQ(datasheet_peak("NVIDIA H200 NVL", ops::MathMode::BF16)->flops_per_s, 835.5e12);
  EXPECT_DOUBLE_EQ(datasheet_peak("NVIDIA H100 PCIe", ops::MathMode::BF16)->flops_per_s, 756e12);
  EXPECT_DOUBLE_EQ(datasheet_peak("NVIDIA H100 80GB HBM3", ops::MathMode::BF16)->flops_per_s,
                   989.4e12);
  EXPECT_DOUBLE_EQ(datasheet_peak("NVIDIA A100-SXM4-80GB", ops::MathMode::TF32)->flops_per_s,
                   156e12);
  EXPECT_DOUBLE_EQ(datasheet_peak("NVIDIA L40S", ops::MathMode::FP32)->flops_per_s, 91.6e12);
  EXPECT_FALSE(datasheet_peak("NVIDIA GeForce GTX 1080", ops::MathMode::FP32));
}

TEST(Mfu, SharesTheFlopsOverTheGpus) {
  const auto one = run_mfu(98.94e12, 1, "NVIDIA H200", ops::MathMode::BF16);
  ASSERT_TRUE(one.has_value());
  EXPECT_NEAR(one->mfu, 0.1, 1e-12);
  EXPECT_EQ(one->gpus, 1);
  const auto two = run_mfu(98.94e12, 2, "NVIDIA H200", ops::MathMode::BF16);
  EXPECT_NEAR(two->mfu, 0.05, 1e-12);
  EXPECT_FALSE(run_mfu(1e12, 1, "Unknown GPU", ops::MathMode::FP32).has_value());
  EXPECT_FALSE(run_mfu(1e12, 0, "NVIDIA H200", ops::MathMode::FP32).has_value());
}

}  // namespace
}  // namespace ddpb::bench
