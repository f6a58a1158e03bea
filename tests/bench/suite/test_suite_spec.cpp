// The suite matrix: defaults, suite-file overrides with one-line errors naming the key, and
// the expansion into runs (ids, groups, batches, the sweep).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "bench/suite/suite_spec.h"
#include "core/check.h"

namespace ddpb::bench {
namespace {

std::string usage_error(SuiteSpec& spec, const std::string& text) {
  try {
    apply_suite_text(spec, text, "my-suite.json");
    validate_suite(spec, 0);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(SuiteSpec, DefaultCpuSuiteExpandsToTheMatrix) {
  const SuiteSpec spec = default_suite(DeviceType::CPU, 0, false);
  validate_suite(spec, 0);
  const auto runs = expand_suite(spec);
  std::set<std::string> ids;
  for (const auto& r : runs) EXPECT_TRUE(ids.insert(r.id).second) << "duplicate id " << r.id;
  for (const std::string w : {"mlp-small", "gpt-tiny", "embed", "resnet-tiny"}) {
    for (const std::string id : {"/single/w1", "/dp/w1", "/dp/w2", "/ddp/w1", "/ddp/w2"}) {
      EXPECT_TRUE(ids.count(w + id)) << w + id;
    }
  }
  EXPECT_TRUE(ids.count("mlp-small/single/w1/b128")) << "reference at the world-2 global batch";
  EXPECT_TRUE(ids.count("mlp-small/ddp/w2/bucket-1mb"));
  EXPECT_TRUE(ids.count("mlp-small/ddp/w2/no-overlap"));
  EXPECT_TRUE(ids.count("mlp-small/ddp/w2/fp16-hook"));
  // The hooks also run on embed, the communication-bound one; PowerSGD compresses from the
  // first measured step.
  for (const std::string id :
       {"mlp-small/ddp/w2/powersgd-hook", "embed/ddp/w2/fp16-hook", "embed/ddp/w2/powersgd-hook"})
    EXPECT_TRUE(ids.count(id)) << id;
  EXPECT_FALSE(ids.count("gpt-tiny/ddp/w2/fp16-hook"));
  // The autotuner next to the sweep, with the warm-up its search needs (one --warmup only).
  ASSERT_TRUE(ids.count("mlp-small/ddp/w2/bucket-auto"));
  for (const auto& r : runs) {
    if (r.id != "mlp-small/ddp/w2/bucket-auto") continue;
    EXPECT_EQ(r.group, reports::RunGroup::BucketAutotune);
    EXPECT_EQ(std::count(r.args.begin(), r.args.end(), "--warmup"), 1);
    const auto at = std::find(r.args.begin(), r.args.end(), "--warmup");
    EXPECT_EQ(*(at + 1), "39");
    EXPECT_NE(std::find(r.args.begin(), r.args.end(), "auto"), r.args.end());
  }
  for (const auto& r : runs) {
    if (r.id == "embed/ddp/w2/powersgd-hook") {
      const auto at = std::find(r.args.begin(), r.args.end(), "--powersgd-start-iter");
      ASSERT_NE(at, r.args.end());
      EXPECT_EQ(*(at + 1), std::to_string(spec.warmup));
    }
  }
  for (const auto& r : runs) {
    if (r.id == "mlp-small/ddp/w2") {
      EXPECT_EQ(r.global_batch, 128) << "weak scaling: per-device batch 64 on each of 2 ranks";
      EXPECT_EQ(r.group, reports::RunGroup::Scaling);
    }
    if (r.id == "mlp-small/ddp/w2/no-overlap") {
      EXPECT_NE(std::find(r.args.begin(), r.args.end(), "--no-overlap"), r.args.end());
      EXPECT_EQ(r.group, reports::RunGroup::Overlap);
    }
    EXPECT_EQ(r.args.front(), "run");
  }
}

TEST(SuiteSpec, GpuDefaultsFollowTheGpuCount) {
  const SuiteSpec spec = default_suite(DeviceType::CUDA, 8, false);
  EXPECT_EQ(spec.world_sizes, (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(spec.workloads,
            (std::vector<std::string>{"gpt2-small", "mlp-wide", "embed", "resnet50"}));
  EXPECT_EQ(spec.per_device_batch.at("resnet50"), 64);
  // ResNet-50 in bf16 too: single and DDP at the largest world size, one --precision each.
  for (const std::string id : {"resnet50/single/w1/bf16", "resnet50/ddp/w8/bf16"}) {
    const auto runs = expand_suite(spec);
    const auto it =
        std::find_if(runs.begin(), runs.end(), [&](const auto& r) { return r.id == id; });
    ASSERT_NE(it, runs.end()) << id;
    EXPECT_EQ(it->group, reports::RunGroup::Precision);
    EXPECT_EQ(std::count(it->args.begin(), it->args.end(), "--precision"), 1);
    EXPECT_NE(std::find(it->args.begin(), it->args.end(), "bf16"), it->args.end());
  }
  EXPECT_EQ(default_suite(DeviceType::CUDA, 3, false).world_sizes, (std::vector<int>{1, 2}));
  SuiteSpec too_big = default_suite(DeviceType::CUDA, 2, false);
  too_big.world_sizes = {1, 4};
  EXPECT_THROW(validate_suite(too_big, 2), UsageError);
  EXPECT_THROW(validate_suite(default_suite(DeviceType::CUDA, 0, false), 0), UsageError)
      << "no GPU";
}

TEST(SuiteSpec, FileOverridesAnyPart) {
  SuiteSpec spec = default_suite(DeviceType::CPU, 0, false);
  apply_suite_text(spec,
                   R"({"workloads": ["mlp-small"], "world_sizes": [1, 2, 3], "steps": 7,
                       "per_device_batch": {"mlp-small": 30}, "bucket_sweep_mb": [0.5],
                       "comm_hooks": [], "overlap_off": false})",
                   "s.json");
  validate_suite(spec, 0);
  EXPECT_EQ(spec.steps, 7);
  const auto runs = expand_suite(spec);
  std::set<std::string> ids;
  for (const auto& r : runs) ids.insert(r.id);
  EXPECT_TRUE(ids.count("mlp-small/ddp/w3"));
  EXPECT_TRUE(ids.count("mlp-small/single/w1/b90"));
  EXPECT_TRUE(ids.count("mlp-small/ddp/w3/bucket-0.5mb"));
  EXPECT_FALSE(ids.count("mlp-small/ddp/w3/no-overlap"));
  EXPECT_FALSE(ids.count("gpt-tiny/single/w1"));
  // SuiteSpec round-trips through suite.json for --resume.
  const SuiteSpec again = SuiteSpec::from_json(spec.to_json());
  EXPECT_EQ(again.to_json(), spec.to_json());
}

TEST(SuiteSpec, BadFilesGetOneLineErrorsNamingTheKey) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {R"({"wrokloads": ["mlp-small"]})", "unknown key \"wrokloads\""},
      {R"({"steps": "ten"})", "key \"steps\": expected an integer"},
      {R"({"steps": 0})", "key \"steps\": 0 is outside"},
      {R"({"world_sizes": [1, -2]})", "key \"world_sizes\""},
      {R"({"modes": ["single", "fsdp"]})", "mode \"fsdp\""},
      {R"({"comm_hooks": ["int8"]})", "hook \"int8\""},
      {R"({"comm_hook_workloads": ["mlp-wide"]})", "comm_hook_workloads"},
      {R"({"per_device_batch": {"mlp-small": 0}})", "per_device_batch.mlp-small"},
      {R"({"workloads": ["resnet"]})", "resnet"},
      {R"({"world_sizes": [2, 2]})", "listed twice"},
      {R"([1, 2])", "a suite file is a JSON object"},
      {R"({"steps": 3)", "not valid JSON"},
      {R"({"device": "tpu"})", "key \"device\""},
      {R"({"precision": "fp16"})",
       "key \"precision\": precision \"fp16\" is not fp32, tf32 or bf16"},
      {R"({"attention": "sparse"})",
       "key \"attention\": attention \"sparse\" is not math or flash"},
  };
  for (const auto& c : cases) {
    SuiteSpec spec = default_suite(DeviceType::CPU, 0, false);
    const std::string msg = usage_error(spec, c.text);
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.text << " -> " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  }
  SuiteSpec spec = default_suite(DeviceType::CPU, 0, false);
  EXPECT_NE(usage_error(spec, std::string(2 << 20, ' ')).find("at most"), std::string::npos)
      << "size limit";
}

TEST(SuiteSpec, QuickIsShort) {
  const SuiteSpec spec = default_suite(DeviceType::CPU, 0, true);
  EXPECT_LE(spec.steps, 5);
  EXPECT_EQ(spec.bucket_sweep_mb.size(), 1u);
}

}  // namespace
}  // namespace ddpb::bench
