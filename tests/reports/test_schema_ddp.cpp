// A real DDP record (launcher + 2 rank processes over Gloo) matches the run-record schema,
// including the merged ranks[] and summary.straggler_skew only rank 0 adds, and reads back
// through reports::RunRecord unchanged.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "../util/run_cli.h"
#include "reports/json_io.h"
#include "reports/run_record.h"
#include "reports/schema_validator.h"

namespace {

TEST(DdpRecord, Validates) {
  ddpb::testing::TempDir dir("schema_ddp");
  const std::string out = dir / "ddp.json";
  auto r = ddpb::testing::run_cli(
      "run --mode ddp --world-size 2 --workload mlp-small --steps 2 --warmup 1 --global-batch 8 "
      "--quiet --out " +
      out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NO_THROW(ddpb::reports::validate_report_file(out));
  nlohmann::json rec = ddpb::reports::read_json(out);
  EXPECT_EQ(rec["ranks"].size(), 2u);
  // One host (Note [Hosts in records]): both ranks on it, node 0.
  char name[256] = {};
  ASSERT_EQ(::gethostname(name, sizeof(name) - 1), 0);
  const std::string host = name;
  EXPECT_EQ(rec["hosts"],
            nlohmann::json::parse(R"([{"name": ")" + host + R"(", "node": 0, "ranks": [0, 1]}])"));
  for (const auto& rank : rec["ranks"]) {
    EXPECT_EQ(rank["host"], host);
    EXPECT_EQ(rank["node"], 0);
  }
  EXPECT_TRUE(rec["summary"].contains("straggler_skew"));
  EXPECT_TRUE(rec["steps"][0]["mode"].contains("buckets"));
  // The typed record names or keeps every field rank 0 wrote.
  EXPECT_EQ(ddpb::reports::RunRecord::from_json(rec).to_json(), rec);

  auto v = ddpb::testing::run_cli("validate " + out);
  EXPECT_EQ(v.code, 0) << v.output;

  // The rank-level blocks are checked too.
  rec["ranks"][1]["step_time_ms"]["count"] = 0;
  rec["steps"][2]["mode"]["buckets"][0].erase("bytes");
  std::vector<std::string> got;
  for (const auto& e : ddpb::reports::validate_run_record(rec)) got.push_back(e.str());
  EXPECT_EQ(got,
            (std::vector<std::string>{"/ranks/1/step_time_ms/count: 0 is below the minimum 1",
                                      "/steps/2/mode/buckets/0: missing required key 'bytes'"}));
}

}  // namespace
