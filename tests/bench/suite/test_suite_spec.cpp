// The suite matrix: defaults, suite-file overrides with one-line errors naming the key, and
// the expansion into runs (ids, groups, batches, the sweep).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "bench/suite/suite_collectives.h"
#include "bench/suite/suite_spec.h"
#include "core/check.h"

namespace ddpb::bench {
namespace {

// Whether the arguments a run's child is given hold `flag`.
bool has_flag(const SuiteRun& r, const std::string& flag) {
  return std::find(r.args.begin(), r.args.end(), flag) != r.args.end();
}

std::string usage_error(SuiteSpec& spec, const std::string& text, int gpus = 0) {
  try {
    apply_suite_text(spec, text, "my-suite.json");
    validate_suite(spec, gpus);
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

// Named runs (key "runs") come after the matrix, with their own flags, and round-trip
// through suite.json; a suite of named runs alone needs no matrix.
// docs/suite-input.md: a file's "quick": true is --quick (4 steps, no flag ledger, one design
// round, one bucket cap), with the file's other keys over it.
TEST(SuiteSpec, AFilesQuickKeyStartsFromTheQuickDefaults) {
  const SuiteSpec quick = suite_from_text(
      DeviceType::CPU, 0, false, R"({"quick": true, "workloads": ["mlp-small"]})", "q.json");
  EXPECT_TRUE(quick.quick);
  EXPECT_EQ(quick.steps, 4);
  EXPECT_TRUE(quick.flags.empty());
  EXPECT_EQ(quick.design_rounds, 1);
  EXPECT_EQ(quick.bucket_sweep_mb.size(), 1u);
  EXPECT_EQ(quick.workloads, std::vector<std::string>{"mlp-small"});
  const SuiteSpec steps =
      suite_from_text(DeviceType::CPU, 0, false, R"({"quick": true, "steps": 7})", "q.json");
  EXPECT_EQ(steps.steps, 7) << "the file's own keys win";
  const SuiteSpec full = suite_from_text(DeviceType::CPU, 0, false, R"({"steps": 7})", "f.json");
  EXPECT_FALSE(full.quick);
  EXPECT_FALSE(full.flags.empty());
}

TEST(SuiteSpec, ExplicitRunsExpandAfterTheMatrixWithTheirOwnFlags) {
  SuiteSpec spec = default_suite(DeviceType::CPU, 0, false);
  apply_suite_text(spec, R"({"workloads": ["mlp-small"], "world_sizes": [1], "runs": [
      {"name": "graph", "workload": "gpt-tiny", "mode": "single", "cuda_graph": true,
       "precision": "tf32", "attention": "flash", "global_batch": 4},
      {"name": "gloo-2", "workload": "mlp-small", "mode": "ddp", "world_size": 2,
       "devices": "cpu:0,cpu:0", "backend": "gloo", "comm_hook": "powersgd",
       "powersgd_rank": 2, "powersgd_start_iter": 3, "bucket_cap_mb": 0.5},
      {"name": "files", "workload": "resnet-tiny", "mode": "single", "data": "data/imagefolder",
       "num_workers": 3, "pin_memory": true, "normalize_on_device": true}]})",
                   "s.json");
  validate_suite(spec, 0);
  const auto runs = expand_suite(spec);
  ASSERT_GE(runs.size(), 4u);
  const SuiteRun& graph = runs[runs.size() - 3];
  const SuiteRun& gloo = runs[runs.size() - 2];
  const SuiteRun& files = runs.back();
  EXPECT_EQ(graph.id, "graph");
  EXPECT_EQ(graph.group, reports::RunGroup::Explicit);
  EXPECT_EQ(graph.global_batch, 4);
  auto value_of = [](const SuiteRun& r, const std::string& flag) {
    const auto at = std::find(r.args.begin(), r.args.end(), flag);
    EXPECT_EQ(std::count(r.args.begin(), r.args.end(), flag), 1) << flag << " given once";
    return at == r.args.end() || at + 1 == r.args.end() ? std::string("(none)") : at[1];
  };
  EXPECT_EQ(value_of(graph, "--precision"), "tf32") << "the run's own, not the suite's fp32";
  EXPECT_EQ(value_of(graph, "--attention"), "flash");
  EXPECT_NE(std::find(graph.args.begin(), graph.args.end(), "--cuda-graph"), graph.args.end());
  EXPECT_EQ(gloo.id, "gloo-2");
  EXPECT_EQ(gloo.global_batch, 2 * spec.per_device_batch.at("mlp-small"));
  EXPECT_EQ(value_of(gloo, "--devices"), "cpu:0,cpu:0");
  EXPECT_EQ(value_of(gloo, "--comm-hook"), "powersgd");
  EXPECT_EQ(value_of(gloo, "--powersgd-rank"), "2");
  EXPECT_EQ(value_of(gloo, "--powersgd-start-iter"), "3");
  EXPECT_EQ(value_of(gloo, "--bucket-cap-mb"), "0.5");
  EXPECT_EQ(value_of(gloo, "--world-size"), "2");
  EXPECT_EQ(value_of(files, "--data"), "data/imagefolder");
  EXPECT_EQ(value_of(files, "--num-workers"), "3");
  for (const char* flag : {"--pin-memory", "--normalize-on-device"})
    EXPECT_NE(std::find(files.args.begin(), files.args.end(), flag), files.args.end()) << flag;
  const SuiteSpec again = SuiteSpec::from_json(spec.to_json());
  EXPECT_EQ(again.to_json(), spec.to_json());
  EXPECT_EQ(spec.batches_per_device().at("gpt-tiny"), 4) << "its GEMM shapes join the peak's";

  SuiteSpec alone = default_suite(DeviceType::CPU, 0, false);
  apply_suite_text(alone,
                   R"({"workloads": [], "runs": [{"name": "a", "workload": "mlp-small",
                       "mode": "single"}]})",
                   "s.json");
  validate_suite(alone, 0);
  const auto only = expand_suite(alone);
  ASSERT_EQ(only.size(), 1u) << "no matrix, no sweep, no hooks";
  EXPECT_EQ(only[0].id, "a");
}

// The collectives sweep runs once per backend of the suite's DDP runs (issue 28, section 2).
TEST(SuiteSpec, TheCollectivesSweepCoversEveryDdpBackend) {
  SuiteSpec spec = default_suite(DeviceType::CPU, 0, false);
  EXPECT_EQ(suite_ddp_backends(spec), std::vector<std::string>{"gloo"});
  apply_suite_text(spec, R"({"runs": [
      {"name": "mpi-2", "workload": "mlp-small", "mode": "ddp", "world_size": 2, "backend": "mpi"},
      {"name": "gloo-2", "workload": "mlp-small", "mode": "ddp", "world_size": 2, "backend": "gloo"},
      {"name": "mpi-1", "workload": "mlp-small", "mode": "ddp", "world_size": 1, "backend": "mpi"}]})",
                   "s.json");
  EXPECT_EQ(suite_ddp_backends(spec), (std::vector<std::string>{"gloo", "mpi"}));
}

TEST(SuiteSpec, BadExplicitRunsAreRefusedNamingTheRun) {
  struct Case {
    const char* runs;
    const char* expect;
  } cases[] = {
      {R"([{"name": "a", "workload": "mlp-small", "mode": "single", "precison": "bf16"}])",
       "unknown key \"runs[0].precison\""},
      {R"([{"workload": "mlp-small", "mode": "single"}])", "needs a \"name\""},
      {R"(["mlp-small"])", "key \"runs[0]\": expected an object"},
      {R"([{"name": "a/b", "workload": "mlp-small", "mode": "single"}])", "run \"a/b\": a name"},
      {R"([{"name": "a", "workload": "mlp-small", "mode": "single"},
           {"name": "a", "workload": "gpt-tiny", "mode": "single"}])",
       "run \"a\" is listed twice"},
      {R"([{"name": "a", "workload": "mlp-huge", "mode": "single"}])", "mlp-huge"},
      {R"([{"name": "a", "workload": "mlp-small", "mode": "ddp", "world_size": 2,
            "cuda_graph": true}])",
       "cuda_graph is for mode single"},
      {R"([{"name": "a", "workload": "mlp-small", "mode": "single", "backend": "gloo"}])",
       "backend is for a mode whose ranks are processes"},
      {R"([{"name": "a", "workload": "mlp-small", "mode": "fsdp", "world_size": 2,
            "bucket_cap_mb": 1}])",
       "bucket_cap_mb and powersgd_* are for a mode with buckets"},
      {R"([{"name": "a", "workload": "mlp-small", "mode": "ddp", "world_size": 2,
            "powersgd_rank": 2}])",
       "need \"comm_hook\": \"powersgd\""},
      {R"([{"name": "a", "workload": "mlp-small", "mode": "dp", "world_size": 2,
            "devices": "cpu:0"}])",
       "lists 1 devices for world_size 2"},
      {R"([{"name": "a", "workload": "mlp-small", "mode": "dp", "world_size": 2,
            "devices": "cpu:0,tpu:1"}])",
       "tpu"},
      {R"([{"name": "a", "workload": "mlp-small", "mode": "ddp", "world_size": 3,
            "global_batch": 8}])",
       "does not divide into 3 ranks"},
  };
  for (const auto& c : cases) {
    SuiteSpec spec = default_suite(DeviceType::CPU, 0, false);
    const std::string text = std::string(R"({"workloads": ["mlp-small"], "runs": )") + c.runs + "}";
    try {
      apply_suite_text(spec, text, "s.json");
      validate_suite(spec, 0);
      ADD_FAILURE() << "accepted: " << c.runs;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos)
          << "got: " << e.what() << "\nexpected: " << c.expect;
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  }
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
      {R"({"modes": ["single", "fsdp2"]})", "mode \"fsdp2\""},
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
      // Issue 48, P19: every list refuses a repeat (it would repeat a run id and lose a record).
      {R"({"flags": ["static_graph", "static_graph"]})",
       "key \"flags\": \"static_graph\" is listed twice"},
      {R"({"comm_hooks": ["fp16", "fp16"]})", "key \"comm_hooks\": \"fp16\" is listed twice"},
      {R"({"projection_devices": [8, 8.0]})", "key \"projection_devices\": 8.0 is listed twice"},
      // P31: a repeated key, and NUL in a string.
      {R"({"steps": 3, "steps": 30})", "key \"steps\" appears twice in one object"},
      {R"({"name": "a\u0000b"})", "key \"name\": a string holds a NUL character"},
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
  EXPECT_NE(usage_error(spec, std::string("{\"steps\": 3}\0{\"steps\": 4}", 25))
                .find("a NUL byte at offset 12"),
            std::string::npos);
}

TEST(SuiteSpec, QuickIsShort) {
  const SuiteSpec spec = default_suite(DeviceType::CPU, 0, true);
  EXPECT_LE(spec.steps, 5);
  EXPECT_EQ(spec.bucket_sweep_mb.size(), 1u);
  EXPECT_TRUE(spec.flags.empty()) << "4 steps cannot price a flag";
}

// Group "flags" (Note [Flag pairs]): per round the default and each flag once, odd rounds in
// reverse order, every run DDP at the largest world size on the flags workload; sync_bn on the
// suite's workload with BatchNorm, against that workload's own default; no_sync at K=4 keeps
// the samples per step.
TEST(SuiteSpec, FlagPairsAlternateAroundTheDefault) {
  SuiteSpec spec = default_suite(DeviceType::CPU, 0, false);
  apply_suite_text(spec,
                   R"({"flags": ["static_graph", "no_sync_k4", "sync_bn", "cpu_threads_all"],
                       "flags_repeats": 2})",
                   "s.json");
  validate_suite(spec, 0);
  std::vector<const SuiteRun*> flags;
  const auto runs = expand_suite(spec);
  for (const auto& r : runs)
    if (r.group == reports::RunGroup::Flags) flags.push_back(&r);
  std::vector<std::string> order;
  for (const SuiteRun* r : flags) order.push_back(r->id);
  EXPECT_EQ(order,
            (std::vector<std::string>{
                "mlp-small/ddp/w2/flags-default-r0", "mlp-small/ddp/w2/flags-static-graph-r0",
                "mlp-small/ddp/w2/flags-no-sync-k4-r0", "mlp-small/ddp/w2/flags-cpu-threads-all-r0",
                "resnet-tiny/ddp/w2/flags-default-r0", "resnet-tiny/ddp/w2/flags-sync-bn-r0",
                "mlp-small/ddp/w2/flags-cpu-threads-all-r1", "mlp-small/ddp/w2/flags-no-sync-k4-r1",
                "mlp-small/ddp/w2/flags-static-graph-r1", "mlp-small/ddp/w2/flags-default-r1",
                "resnet-tiny/ddp/w2/flags-sync-bn-r1", "resnet-tiny/ddp/w2/flags-default-r1"}))
      << "mlp-small has no BatchNorm: sync_bn runs on resnet-tiny";
  for (const SuiteRun* r : flags) {
    ASSERT_TRUE(r->flag && r->repeat) << r->id;
    // The record says which row it is and what the row does (Note [Design flags]).
    const DesignFlag* row = find_design_flag(r->flag->name);
    ASSERT_NE(row, nullptr) << r->id;
    EXPECT_EQ(*r->flag, row->info()) << r->id;
    EXPECT_FALSE(r->flag->mechanism.empty()) << r->id;
    EXPECT_EQ(flag_of(*r), row);
    const int64_t g = r->workload == "mlp-small" ? 128 : 2 * spec.per_device_batch.at(r->workload);
    if (r->flag->name == "no_sync_k4") {
      EXPECT_EQ(r->run_config().accumulate, 4);
      EXPECT_EQ(r->global_batch, 32) << "a quarter of 128 per micro-step";
    } else {
      EXPECT_EQ(r->global_batch, g) << r->id;
    }
    if (r->flag->name == "static_graph") EXPECT_TRUE(has_flag(*r, "--static-graph"));
    if (r->flag->name == "cpu_threads_all") EXPECT_TRUE(has_flag(*r, "--cpu-threads"));
    if (r->flag->name == "sync_bn") EXPECT_TRUE(has_flag(*r, "--sync-bn"));
    // The default row adds no flag: its arguments are the single run's and the design's
    // --world-size and --timeout.
    if (r->flag->is_default()) EXPECT_EQ(r->args.size(), runs.front().args.size() + 4);
  }
  // Without a BatchNorm workload, sync_bn is left out and broadcast_buffers_off stays.
  apply_suite_text(spec,
                   R"({"workloads": ["mlp-small", "gpt-tiny"],
                       "flags": ["sync_bn", "broadcast_buffers_off"]})",
                   "s.json");
  int sync_bn = 0, no_broadcast = 0;
  for (const auto& r : expand_suite(spec)) {
    sync_bn += has_flag(r, "--sync-bn");
    no_broadcast += has_flag(r, "--no-broadcast-buffers") && r.workload == "mlp-small";
  }
  EXPECT_EQ(sync_bn, 0);
  EXPECT_EQ(no_broadcast, 2);
  SuiteSpec cpu = default_suite(DeviceType::CPU, 0, false);
  EXPECT_NE(usage_error(cpu, R"({"flags": ["default"]})").find("every pair's A run"),
            std::string::npos);
  EXPECT_EQ(usage_error(cpu, R"({"flags": ["jit"]})"),
            "my-suite.json: key \"flags\": flag \"jit\" is not " + design_flag_names());
  EXPECT_NE(design_flag_names().find("default, find_unused_parameters, static_graph"),
            std::string::npos);
  EXPECT_NE(usage_error(cpu, R"({"flags_workload": "gpt2-small"})").find("flags_workload"),
            std::string::npos);
  SuiteSpec cuda = default_suite(DeviceType::CUDA, 2, false);
  EXPECT_EQ(usage_error(cuda, R"({"flags": ["cpu_threads_all"]})", 2),
            "suite: flag cpu_threads_all prices CPU devices' BLAS threads; this suite runs on "
            "cuda");
  // The spec names its flags by their rows' names, and reads them back.
  SuiteSpec named = default_suite(DeviceType::CPU, 0, false);
  apply_suite_text(named, R"({"flags": ["static_graph", "sync_bn"]})", "s.json");
  EXPECT_EQ(named.to_json()["flags"], nlohmann::json({"static_graph", "sync_bn"}));
  EXPECT_EQ(SuiteSpec::from_json(named.to_json()).flags, named.flags);
}

// Note [Design flags]: every row but the default applies to the bucketed design alone, and
// says what it changes; the row traits the suite asks are on the rows that need them.
TEST(SuiteSpec, FlagsAreRowsOfTheBucketedDesign) {
  const reports::DesignInfo& ddp = design_named("ddp").info;
  const reports::DesignInfo& dp = design_named("dp").info;
  ASSERT_FALSE(design_flags().empty());
  EXPECT_TRUE(design_flags().front().is_default());
  EXPECT_EQ(&default_design_flag(), &design_flags().front());
  for (const DesignFlag& f : design_flags()) {
    EXPECT_NE(std::string(f.mechanism), "") << f.name;
    EXPECT_TRUE(f.applies_to(ddp)) << f.name;
    EXPECT_EQ(f.applies_to(dp), f.is_default()) << f.name << ": DP has no buckets";
    EXPECT_EQ(find_design_flag(f.name), &f);
  }
  EXPECT_EQ(find_design_flag("jit"), nullptr);
  EXPECT_TRUE(find_design_flag("sync_bn")->syncs_batch_norm);
  EXPECT_TRUE(find_design_flag("broadcast_buffers_off")->prices_batch_norm);
  EXPECT_FALSE(find_design_flag("broadcast_buffers_off")->syncs_batch_norm);
  const FlagArgs k4 = find_design_flag("no_sync_k4")->args({128, 2, 3});
  EXPECT_EQ(k4.args, (std::vector<std::string>{"--accumulate", "4"}));
  EXPECT_EQ(k4.global_batch, 32);
  EXPECT_EQ(find_design_flag("powersgd_hook")->args({128, 2, 1}).args.back(), "2")
      << "PyTorch's minimum start";
}

// Issue 43: the loader group measured the suite's own JPEGs although "data" named the user's
// image folder. It reads "loader_data", else the user's folder for its workload, else the JPEGs
// the suite makes; with no "loader_workload" it runs the image workload the user gave data for.
TEST(SuiteSpec, TheLoaderGroupReadsTheUsersImagesWhenThereAreAny) {
  const auto loader_paths = [](const std::string& text) {
    SuiteSpec spec = default_suite(DeviceType::CPU, 0, false);
    apply_suite_text(spec, text, "s.json");
    validate_suite(spec, 0);
    std::set<std::string> paths;
    for (const SuiteRun& r : expand_suite(spec)) {
      if (r.group == reports::RunGroup::Loader)
        paths.insert(r.run_config().data.empty() ? "(none)" : r.run_config().data);
    }
    return paths;
  };
  const std::string cwd = std::filesystem::current_path().string();
  EXPECT_EQ(loader_paths("{}"), std::set<std::string>{kSuiteImageFolder}) << "no user data";
  EXPECT_EQ(loader_paths(R"({"data": {"resnet-tiny": "imgs"}})"),
            std::set<std::string>{cwd + "/imgs"});
  EXPECT_EQ(loader_paths(R"({"data": {"resnet-tiny": "imgs"}, "loader_data": "./other"})"),
            std::set<std::string>{cwd + "/other"});
  EXPECT_EQ(loader_paths(R"({"data": {"gpt-tiny": "tokens"}})"),
            std::set<std::string>{kSuiteImageFolder})
      << "tokens do not feed the image workload";
  EXPECT_EQ(loader_paths(R"({"loader_data": "data/imagefolder"})"),
            std::set<std::string>{kSuiteImageFolder});
  SuiteSpec two;
  two.workloads = {"resnet-tiny", "resnet50"};
  EXPECT_EQ(two.resolved_loader_workload(), "resnet-tiny");
  EXPECT_EQ(two.resolved_loader_data(), kSuiteImageFolder);
  two.data["resnet50"] = "/mine";
  EXPECT_EQ(two.resolved_loader_workload(), "resnet50");
  EXPECT_EQ(two.resolved_loader_data(), "/mine");
}

// "data" puts whole workloads on files: every run the suite makes of gpt-tiny gets --data
// (made absolute: the runs start in the results folder), the others and the named runs do not;
// a workload the suite does not run, or a value that is no object of paths, is refused.
TEST(SuiteSpec, DataPutsWholeWorkloadsOnFiles) {
  SuiteSpec spec = default_suite(DeviceType::CPU, 0, false);
  apply_suite_text(spec, R"({"workloads": ["mlp-small", "gpt-tiny"], "world_sizes": [1, 2],
      "data": {"gpt-tiny": "shards/../tokens"},
      "runs": [{"name": "own", "workload": "gpt-tiny", "mode": "single"}]})",
                   "s.json");
  validate_suite(spec, 0);
  const std::string absolute = (std::filesystem::current_path() / "tokens").string();
  EXPECT_EQ(spec.data.at("gpt-tiny"), absolute);
  int on_files = 0;
  for (const SuiteRun& r : expand_suite(spec)) {
    const bool files = r.workload == "gpt-tiny" && r.group != reports::RunGroup::Explicit;
    EXPECT_EQ(r.run_config().data, files ? absolute : "") << r.id;
    on_files += files;
  }
  EXPECT_GE(on_files, 6) << "single, dp and ddp at 1 and 2, the reference at 2";
  EXPECT_EQ(SuiteSpec::from_json(spec.to_json()).to_json(), spec.to_json());

  SuiteSpec other = default_suite(DeviceType::CPU, 0, false);
  apply_suite_text(other, R"({"workloads": ["mlp-small"], "data": {"gpt-tiny": "/t"}})", "s.json");
  EXPECT_THROW(validate_suite(other, 0), UsageError);
  for (const char* bad :
       {R"({"data": ["/t"]})", R"({"data": {"gpt-tiny": 3}})", R"({"data": {"gpt-tiny": ""}})"}) {
    SuiteSpec s = default_suite(DeviceType::CPU, 0, false);
    EXPECT_THROW(apply_suite_text(s, bad, "s.json"), UsageError) << bad;
  }
}

// The keys the parser knows, from its unknown-key message: "... (known keys: a, b, c)".
std::set<std::string> known_keys(const std::string& suite_text) {
  SuiteSpec spec = default_suite(DeviceType::CPU, 0, false);
  const std::string error = usage_error(spec, suite_text);
  const auto open = error.find("(known keys: ");
  EXPECT_NE(open, std::string::npos) << error;
  std::set<std::string> keys;
  if (open == std::string::npos) return keys;
  std::stringstream list(error.substr(open + 13, error.rfind(')') - open - 13));
  for (std::string key; std::getline(list >> std::ws, key, ',');) keys.insert(key);
  return keys;
}

// The keys of the table of docs/suite-input.md that starts at `heading`: rows "| `key` | ...".
std::set<std::string> documented_keys(const std::string& heading) {
  std::ifstream doc(std::string(DDPB_SOURCE_DIR) + "/docs/suite-input.md");
  EXPECT_TRUE(doc.good());
  std::set<std::string> keys;
  bool in_section = false;
  const std::regex row(R"(^\| `([a-z_0-9]+)` \|)");
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("#", 0) == 0) in_section = line == heading;
    std::smatch m;
    if (in_section && std::regex_search(line, m, row)) keys.insert(m[1]);
  }
  return keys;
}

// docs/suite-input.md documents every key a suite file and a named run may hold, and no other.
TEST(SuiteSpec, EveryKeyOfTheSuiteFileIsDocumented) {
  const auto suite_keys = known_keys(R"({"no_such_key": 1})");
  EXPECT_GT(suite_keys.size(), 30u);
  EXPECT_EQ(documented_keys("## Every key"), suite_keys);
  const auto run_keys =
      known_keys(R"({"runs": [{"name": "a", "workload": "mlp-small", "no_such_key": 1}]})");
  EXPECT_GT(run_keys.size(), 15u);
  EXPECT_EQ(documented_keys("### The keys of a named run (`runs`)"), run_keys);
  // The parse is not vacuous: the two tables differ, and neither holds the other.
  EXPECT_NE(suite_keys, run_keys);
}

// Note [Sharding rounds]: DDP, its ZeRO stages and FSDP's strategies (hybrid_shard aside: one
// host) on the sweep workload at the largest world size, alternated round by round; none in a
// quick suite.
TEST(SuiteSpec, ShardingRoundsAlternateDdpItsZeroStagesAndFsdp) {
  const SuiteSpec spec = default_suite(DeviceType::CPU, 0, false);
  ASSERT_EQ(spec.sharding_rounds, 3);
  std::vector<std::string> order;
  for (const SuiteRun& r : expand_suite(spec)) {
    if (r.group != reports::RunGroup::Sharding) continue;
    EXPECT_EQ(r.workload, spec.sweep_workload);
    EXPECT_EQ(r.world_size, 2);
    const int stage = r.mode.starts_with("zero") ? (r.mode == "zero2" ? 2 : 1) : 0;
    EXPECT_EQ(r.run_config().zero_stage, stage);
    order.push_back(r.mode + "/" + std::to_string(r.repeat.value_or(-1)));
  }
  const std::vector<std::string> round = {"ddp",  "zero1",        "zero2",        "zero1-pytorch",
                                          "fsdp", "fsdp-grad-op", "fsdp-no-shard"};
  std::vector<std::string> want;
  for (int r = 0; r < 3; ++r) {
    std::vector<std::string> modes = round;
    if (r % 2) std::reverse(modes.begin(), modes.end());
    for (const std::string& m : modes) want.push_back(m + "/" + std::to_string(r));
  }
  EXPECT_EQ(order, want);
  for (const SuiteRun& r : expand_suite(default_suite(DeviceType::CPU, 0, true)))
    EXPECT_NE(r.group, reports::RunGroup::Sharding) << r.id;
}

// Note [Design rounds]: DP and DDP again at the largest world size, round after round, each
// round in the reverse order of the last; none in a quick suite or with one design.
TEST(SuiteSpec, DesignRoundsAlternateTheParallelDesigns) {
  SuiteSpec spec = default_suite(DeviceType::CPU, 0, false);
  ASSERT_EQ(spec.design_rounds, 3);
  std::vector<const SuiteRun*> rounds;
  const auto runs = expand_suite(spec);
  for (const SuiteRun& r : runs)
    if (r.group == reports::RunGroup::Rounds) rounds.push_back(&r);
  ASSERT_EQ(rounds.size(), 2 * spec.workloads.size() * 2);  // rounds 1, 2 x workloads x DP, DDP
  for (size_t i = 0; i < rounds.size(); ++i) {
    const SuiteRun& r = *rounds[i];
    const int64_t round = i < rounds.size() / 2 ? 1 : 2;
    EXPECT_EQ(r.repeat, round);
    EXPECT_EQ(r.world_size, 2);
    EXPECT_EQ(r.workload, spec.workloads[(i % (2 * spec.workloads.size())) / 2]);
    // Round 0 (the matrix) runs DP first; round 1 DDP first; round 2 DP first again.
    const bool first_of_pair = i % 2 == 0;
    const std::string first = round == 1 ? "ddp" : "dp";
    EXPECT_EQ(r.mode == first, first_of_pair) << r.id;
    EXPECT_EQ(r.id, r.workload + "/" + r.mode + "/w2/round-" + std::to_string(round));
    EXPECT_EQ(r.global_batch, 2 * spec.per_device_batch.at(r.workload));
  }
  const auto count_rounds = [](const SuiteSpec& s) {
    const auto all = expand_suite(s);
    return std::count_if(all.begin(), all.end(),
                         [](const SuiteRun& r) { return r.group == reports::RunGroup::Rounds; });
  };
  EXPECT_EQ(count_rounds(default_suite(DeviceType::CPU, 0, /*quick=*/true)), 0);
  SuiteSpec one = default_suite(DeviceType::CPU, 0, false);
  apply_suite_text(one, R"({"design_rounds": 1})", "s.json");
  EXPECT_EQ(count_rounds(one), 0);
  SuiteSpec ddp_only = default_suite(DeviceType::CPU, 0, false);
  apply_suite_text(ddp_only, R"({"modes": ["single", "ddp"]})", "s.json");
  EXPECT_EQ(count_rounds(ddp_only), 0);
  SuiteSpec bad = default_suite(DeviceType::CPU, 0, false);
  EXPECT_NE(usage_error(bad, R"({"design_rounds": 0})").find("design_rounds"), std::string::npos);
}

}  // namespace
// Note [JSON depth]: a suite file nested thousands deep is refused in one line before it is
// parsed (the report and --resume walk it recursively).
TEST(SuiteSpec, ASuiteFileNestedTooDeepIsAUsageError) {
  SuiteSpec spec = default_suite(DeviceType::CPU, 0, true);
  const std::string deep =
      R"({"workloads": )" + std::string(20000, '[') + std::string(20000, ']') + "}";
  const std::string msg = usage_error(spec, deep);
  EXPECT_NE(msg.find("my-suite.json: nests arrays and objects more than 100 levels deep"),
            std::string::npos)
      << msg;
  EXPECT_THROW(suite_from_text(DeviceType::CPU, 0, true, deep, "deep.json"), UsageError);
}

}  // namespace ddpb::bench
