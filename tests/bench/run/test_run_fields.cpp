// Note [One run field list]: every row's flag, record key and argv agree, for every row.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/run/run_fields.h"
#include "bench/run/run_flags.h"
#include "bench/suite/suite_spec.h"
#include "reports/record_fields.h"

namespace ddpb::bench {
namespace {

// A value other than the default for every flag (the flag alone for a switch). A row added
// without one here fails EveryFlagHasAnExampleHere, so no row escapes the round trip.
const std::map<std::string, std::vector<std::string>>& examples() {
  static const std::map<std::string, std::vector<std::string>> values = {
      {"--mode", {"ddp"}},
      {"--workload", {"gpt-tiny"}},
      {"--device", {"cpu:1"}},
      {"--world-size", {"3"}},
      {"--devices", {"cpu:0,cpu:0"}},
      {"--dp-broadcast-mb", {"0.25"}},
      {"--backend", {"mpi"}},
      {"--bucket-cap-mb", {"3.5"}},
      {"--first-bucket-mb", {"0.125"}},
      {"--grad-as-bucket-view", {}},
      {"--accumulate", {"4"}},
      {"--find-unused-params", {}},
      {"--static-graph", {}},
      {"--comm-hook", {"powersgd"}},
      {"--powersgd-rank", {"2"}},
      {"--powersgd-start-iter", {"3"}},
      {"--powersgd-min-compression-rate", {"1.5"}},
      {"--powersgd-epsilon", {"1e-08"}},
      {"--powersgd-no-error-feedback", {}},
      {"--powersgd-no-warm-start", {}},
      {"--no-overlap", {}},
      {"--no-broadcast-buffers", {}},
      {"--sync-bn", {}},
      {"--zero-stage", {"2"}},
      {"--zero-variant", {"pytorch"}},
      {"--sharding-strategy", {"shard_grad_op"}},
      {"--fsdp-wrap", {"model"}},
      {"--shard-group-size", {"2"}},
      {"--limit-all-gathers", {"0"}},
      {"--no-forward-prefetch", {}},
      {"--no-backward-prefetch", {}},
      {"--cpu-threads", {"2"}},
      {"--timeout", {"12.5"}},
      {"--inject-fault", {"crash@rank=1,step=2"}},
      {"--global-batch", {"96"}},
      {"--steps", {"7"}},
      {"--warmup", {"0"}},
      {"--seed", {"18446744073709551"}},
      {"--optimizer", {"adamw"}},
      {"--lr", {"0.003"}},
      {"--momentum", {"0.5"}},
      {"--weight-decay", {"0.01"}},
      {"--cuda-graph", {}},
      {"--attention", {"flash"}},
      {"--precision", {"bf16"}},
      {"--channels-last", {}},
      {"--data", {"/data/shards"}},
      {"--data-format", {"tokens"}},
      {"--data-split", {"val"}},
      {"--num-workers", {"0"}},
      {"--prefetch-factor", {"5"}},
      {"--pin-memory", {}},
      {"--on-bad-sample", {"skip"}},
      {"--normalize-on-device", {}},
      {"--epochs", {"2"}},
      {"--sampler", {"unpadded"}},
      {"--uneven-inputs", {"join"}},
      {"--no-divide-by-initial-world-size", {}},
      {"--out", {"run.json"}},
      {"--dump", {"dumps"}},
      {"--init-from", {"init.safetensors"}},
      {"--save-params", {"final.safetensors"}},
      {"--quiet", {}},
      {"--verbose", {}},
      {"--trace", {"trace.json"}},
      {"--trace-steps", {"2:3"}},
      {"--check-finite", {}},
      {"--nnodes", {"2"}},
      {"--node-rank", {"1"}},
      {"--master-addr", {"10.0.0.1"}},
      {"--master-port", {"29501"}},
      {"--rendezvous", {"file:///tmp/rdzv"}},
      {"--flight-dir", {"flight"}},
  };
  return values;
}

RunConfig with_example(const RunField& f) {
  RunConfig c;
  c.workload = "mlp-small";
  c.global_batch = 32;                             // else the run command fills in the workload's
  if (f.name() == "--zero-stage") c.mode = "ddp";  // a stage of DDP
  if (f.name() == "--zero-variant") c.mode = "ddp", c.zero_stage = 1;
  // FSDP's flags are FSDP's (--shard-group-size hybrid_shard's): --sharding-strategy names
  // the row (fsdp-grad-op), the others keep it.
  if (f.name() == "--sharding-strategy" || f.name() == "--fsdp-wrap" ||
      f.name() == "--limit-all-gathers" || f.name().ends_with("-prefetch"))
    c.mode = "fsdp";
  if (f.name() == "--shard-group-size") c.mode = "fsdp-hybrid";
  std::vector<std::string> flags = {f.name()};
  const std::vector<std::string>& value = examples().at(f.name());
  flags.insert(flags.end(), value.begin(), value.end());
  apply_run_flags(c, flags);
  return c;
}

TEST(RunFields, EveryFlagHasAnExampleHereAndEveryNameIsOneRow) {
  std::set<std::string> names, keys;
  for (const RunField& f : run_fields()) {
    if (!f.key.empty()) EXPECT_TRUE(keys.insert(f.key).second) << f.key;
    if (f.flag.empty()) continue;
    EXPECT_TRUE(names.insert(f.name()).second) << f.name();
    EXPECT_TRUE(examples().contains(f.name())) << f.name() << " needs an example value here";
  }
  EXPECT_EQ(names.size(), examples().size());
}

// The example changes the field (its argv is not empty), and the field's argv gives the same
// configuration back: the record's JSON, and the command-line-only fields' own argv.
TEST(RunFields, EveryFlagRoundTripsThroughTheArgvItGenerates) {
  for (const RunField& f : run_fields()) {
    if (f.flag.empty()) continue;
    SCOPED_TRACE(f.name());
    const RunConfig c = with_example(f);
    EXPECT_FALSE(f.argv(c, f, false).empty()) << "the example leaves the field at its default";
    const RunConfig back = parse_run_flags(run_argv(c));
    EXPECT_EQ(back.to_json(), c.to_json());
    EXPECT_EQ(f.argv(back, f, false), f.argv(c, f, false));
    EXPECT_EQ(run_argv(back), run_argv(c));
  }
}

TEST(RunFields, TheRecordReadsBackIntoTheSameConfiguration) {
  for (const RunField& f : run_fields()) {
    if (f.flag.empty() || f.key.empty()) continue;
    SCOPED_TRACE(f.name());
    const RunConfig c = with_example(f);
    const nlohmann::json record = c.to_json();
    EXPECT_NE(record.at(nlohmann::json::json_pointer(f.key)),
              RunConfig{}.to_json().at(nlohmann::json::json_pointer(f.key)));
    EXPECT_EQ(RunConfig::from_json(record).to_json(), record);
  }
}

TEST(RunFields, BucketCapAutoIsOneFlagAndTwoRecordFields) {
  RunConfig c;
  c.workload = "mlp-small";
  apply_run_flags(c, {"--bucket-cap-mb", "auto"});
  EXPECT_TRUE(c.bucket_cap_auto);
  const std::vector<std::string> argv = run_argv(c);
  EXPECT_EQ(argv, (std::vector<std::string>{"run", "--mode", "single", "--workload", "mlp-small",
                                            "--bucket-cap-mb", "auto"}));
  EXPECT_TRUE(RunConfig::from_json(c.to_json()).bucket_cap_auto);
}

// A flag given after another keeps the later value, and apply_run_flags leaves what it is not
// given: a suite variant's flags replace only theirs.
TEST(RunFields, ApplyingFlagsReplacesOnlyThoseGiven) {
  RunConfig c;
  c.workload = "gpt-tiny";
  c.steps = 9;
  apply_run_flags(c, {"--precision", "bf16", "--warmup", "1"});
  EXPECT_EQ(c.steps, 9);
  EXPECT_EQ(c.warmup, 1);
  EXPECT_EQ(c.precision, ops::MathMode::BF16);
  EXPECT_EQ(c.workload, "gpt-tiny");
}

// A pinned flag is written at its default too; a switch at its default has nothing to write.
TEST(RunFields, APinnedFlagIsWrittenAtItsDefault) {
  RunConfig c;
  c.workload = "mlp-small";
  const std::vector<std::string> pinned = {"--steps", "--precision", "--quiet"};
  EXPECT_EQ(run_argv(c, pinned),
            (std::vector<std::string>{"run", "--mode", "single", "--workload", "mlp-small",
                                      "--steps", "20", "--precision", "fp32"}));
}

// The suite writes its children's command lines from each run's typed configuration, with
// its own choices written out, and the run command reads back what the suite recorded.
TEST(RunFields, EverySuiteRunsArgvGivesItsRecordedConfigurationBack) {
  for (bool quick : {true, false}) {
    for (const reports::SuiteRun& run : expand_suite(default_suite(DeviceType::CPU, 0, quick))) {
      SCOPED_TRACE(run.id);
      const RunConfig back = parse_run_flags(run.args);
      EXPECT_EQ(reports::record_to_json(
                    reports::record_from_json<reports::RunConfigInfo>(back.to_json())),
                reports::record_to_json(run.run_config()));
      for (const char* pinned : {"--device", "--global-batch", "--steps", "--warmup", "--seed",
                                 "--precision", "--attention"})
        EXPECT_NE(std::find(run.args.begin(), run.args.end(), pinned), run.args.end()) << pinned;
    }
  }
}

}  // namespace
}  // namespace ddpb::bench
