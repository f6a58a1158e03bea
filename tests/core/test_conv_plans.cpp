// The registry of cuDNN plans that the run record carries (core/conv_plans.h).
#include "core/conv_plans.h"

#include <gtest/gtest.h>

namespace ddpb {
namespace {

TEST(ConvPlans, OneRecordPerShapeAndTheJsonCarriesEveryField) {
  const size_t before = conv_plan_records().size();
  ConvPlanRecord r;
  r.device = 3;
  r.direction = "forward";
  r.dims = {64, 3, 224, 224, 64, 7, 2, 3};
  r.layout = "nhwc";
  r.engine = "engine 12 (heuristics A)";
  r.engine_index = 12;
  r.workspace_bytes = 1024;
  r.build_ms = 2.5;
  r.candidates = 20;
  r.allowed = 12;
  r.tried = 1;
  EXPECT_TRUE(record_conv_plan(r));
  EXPECT_FALSE(record_conv_plan(r)) << "the same shape is recorded once";
  ConvPlanRecord other = r;
  other.direction = "backward_filter";
  EXPECT_TRUE(record_conv_plan(other));
  ASSERT_EQ(conv_plan_records().size(), before + 2);
  const nlohmann::json j = conv_plans_json();
  const nlohmann::json& first = j[before];
  EXPECT_EQ(first["device"], 3);
  EXPECT_EQ(first["dims"], nlohmann::json({64, 3, 224, 224, 64, 7, 2, 3}));
  EXPECT_EQ(first["engine_index"], 12);
  EXPECT_EQ(first["workspace_bytes"], 1024);
  EXPECT_EQ(first["tried"], 1);
  EXPECT_EQ(j[before + 1]["direction"], "backward_filter");
}

}  // namespace
}  // namespace ddpb
