// PowerSGD's decisions that do not need a process group.
#include <gtest/gtest.h>

#include "core/check.h"
#include "impl_ddp/powersgd_hook.h"

namespace ddpb::ddp {
namespace {

// PyTorch's _should_compress: (rows + cols) * rank * rate < rows * cols, strictly.
TEST(PowerSgd, ShouldCompressFollowsPyTorch) {
  EXPECT_TRUE(powersgd_should_compress(1024, 1024, 1, 2.0));
  EXPECT_TRUE(powersgd_should_compress(10, 1024, 1, 2.0));  // 2068 < 10240
  EXPECT_FALSE(powersgd_should_compress(1024, 1, 1, 2.0));  // a bias as [1024, 1]
  EXPECT_FALSE(powersgd_should_compress(4, 4, 1, 2.0));     // 16 is not < 16
  EXPECT_TRUE(powersgd_should_compress(4, 4, 1, 1.9));
  EXPECT_FALSE(powersgd_should_compress(64, 64, 32, 1.0));  // no saving at all
  // Issue 25, P1: a rate below 1 made PyTorch's rule "compress" a 1024 x 1024 matrix at rank
  // 1024 into P and Q of twice its size, with a 50 s orthogonalisation per step; a matrix is
  // never compressed into more values than it has.
  EXPECT_FALSE(powersgd_should_compress(1024, 1024, 1024, 0.0));
  EXPECT_FALSE(powersgd_should_compress(1024, 1024, 512, 0.5));  // 1048576 is not < 1048576
  EXPECT_TRUE(powersgd_should_compress(1024, 1024, 511, 0.0));
}

TEST(PowerSgd, StateNeedsTheRebuiltBucketsAsInPyTorch) {
  PowerSgdOptions o;
  o.start_iter = 1;
  EXPECT_THROW(validate_powersgd_options(o), UsageError);
  o.error_feedback = false;
  EXPECT_THROW(validate_powersgd_options(o), UsageError);  // warm start still keeps Q
  o.warm_start = false;
  o.start_iter = 0;
  EXPECT_NO_THROW(validate_powersgd_options(o));
  o.rank = 0;
  EXPECT_THROW(validate_powersgd_options(o), UsageError);
}

}  // namespace
}  // namespace ddpb::ddp
