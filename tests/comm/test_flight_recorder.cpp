#include "comm/flight_recorder.h"

#include <gtest/gtest.h>

namespace ddpb::comm {
namespace {

TEST(FlightRecorder, KeepsTheLastNCollectivesWithTheirStates) {
  FlightRecorder r(4);
  for (int64_t s = 0; s < 6; ++s) r.enqueued(s, "allreduce", 100 * s, "f32");
  r.started(4);
  r.finished(4, /*failed=*/false);
  r.started(5);
  r.tag(5, "bucket 2");
  r.finished(0, false);  // overwritten: ignored
  auto j = r.to_json();
  ASSERT_EQ(j.size(), 4u) << j.dump();
  EXPECT_EQ(j[0]["seq"], 2);
  EXPECT_EQ(j[2]["seq"], 4);
  EXPECT_EQ(j[2]["state"], "completed");
  EXPECT_EQ(j[3]["state"], "started");
  EXPECT_EQ(j[3]["tag"], "bucket 2");
  EXPECT_EQ(j[3]["bytes"], 500);
  EXPECT_GT(j[2]["end_ns"].get<int64_t>(), 0);
}

TEST(FlightRecorder, FailedCollectivesAreMarked) {
  FlightRecorder r(8);
  r.enqueued(0, "broadcast", 4, "f32");
  r.started(0);
  r.finished(0, /*failed=*/true);
  EXPECT_EQ(r.to_json()[0]["state"], "failed");
}

}  // namespace
}  // namespace ddpb::comm
