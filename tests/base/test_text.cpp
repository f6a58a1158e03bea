// join_list (base/text.h): lists in prose, as every message and report sentence writes them.
#include <gtest/gtest.h>

#include "base/text.h"

namespace ddpb {
namespace {

TEST(JoinList, CommasThenTheConjunctionBeforeTheLast) {
  EXPECT_EQ(join_list({}), "");
  EXPECT_EQ(join_list({"ddp"}), "ddp");
  EXPECT_EQ(join_list({"dp", "ddp"}, "or"), "dp or ddp");
  EXPECT_EQ(join_list({"DP", "DDP", "ToyDDP"}), "DP, DDP and ToyDDP");
}

}  // namespace
}  // namespace ddpb
