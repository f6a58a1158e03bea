// The typed records (reports/run_record.h, reports/suite_record.h, reports/projection_record.h): a
// fully populated instance of each matches its schema and reads back equal, reading is lenient as
// Note [One field list per record type] says, and open objects keep the keys their type does not
// name. Real records from the binary read back unchanged in test_schema and test_schema_ddp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "reports/projection_record.h"
#include "reports/run_record.h"
#include "reports/schema_validator.h"
#include "reports/suite_record.h"
#include "suite_fixture.h"

namespace {

using namespace ddpb::reports;
using nlohmann::json;

std::vector<std::string> problems(const std::vector<SchemaError>& errors) {
  std::vector<std::string> out;
  for (const auto& e : errors) out.push_back(e.str());
  return out;
}

StepTimeStats stats(double median) {
  return {median, median * 1.01, median * 1.1, median * 1.2, median * 0.9, median * 1.3, 0.2, 5};
}

BucketTiming bucket(int64_t index) {
  BucketTiming b;
  b.bucket = index, b.params = 3, b.bytes = 4096;
  b.ready_ms = 1.0 + index, b.launch_ms = 1.1 + index, b.start_ms = 1.2 + index;
  b.complete_ms = 2.0 + index, b.ready_to_launch_ms = 0.1, b.collective_ms = 0.8;
  b.algbw_GBps = 0.5, b.busbw_GBps = 0.5;
  b.collectives = std::vector<BucketCollective>{{"allreduce", 4096, 1.1, 1.2, 2.0}};
  b.hook_compute_ms = 0.01;
  return b;
}

RunContext context() {
  RunContext c;
  c.date = "2026-12-02T04:00:00Z", c.host = "ci", c.ddpbench_version = "0.1.0";
  c.build_type = "Release", c.compiler = "gcc 12.2", c.cuda_compiled = true;
  c.nvtx_compiled = true, c.cuda_devices = 0, c.cpu_cores = 2;
  c.git_commit = "abc123", c.cpu_model = "test cpu";
  c.extra.value = {{"system", {{"gpus", json::array()}}}, {"env", {{"OMP_NUM_THREADS", "1"}}}};
  return c;
}

// Every member set, every optional present.
BucketBlame blame() {
  BucketBlame b;
  b.steps = 3, b.buckets = 2, b.noise_ms = 0.25, b.holder_threshold_ms = 1.0;
  b.per_bucket = {{0, 1, 1.0, 12.0}, {1, std::nullopt, 0.0, 0.0}};
  b.per_rank = {{0, 0, 0.0, 0.0, 0.0}, {1, 3, 0.5, 12.0, 12.0}};
  b.holder = 1, b.holder_phase = "backward_compute", b.holder_phase_excess_ms = 11.8;
  b.finding = "rank 1 holds back 50% of buckets by a median 12.0 ms";
  return b;
}

CriticalPath critical() {
  CriticalPath c;
  c.step = 2, c.step_ms = 3.0, c.compute_ms = 1.6, c.communication_ms = 0.4, c.data_ms = 0.1;
  c.wait_ms = 0.8, c.host_ms = 0.1, c.waited_for = 1;
  c.path = {{0, "data", "data", 0, 0.1}, {0, "wait", "waits for rank 1", 1.7, 2.5}};
  c.lanes = {{1, "compute", "forward", 0.1, 0.9}};
  return c;
}

RunRecord full_run_record() {
  RunRecord r;
  r.context = context();
  r.config.mode = "ddp", r.config.workload = "mlp-small", r.config.device = "cpu";
  r.design = record_from_json<DesignInfo>(ddpb::testing::design_rows()[2]);
  r.config.precision = "fp32", r.config.world_size = 2, r.config.global_batch = 8;
  r.config.steps = 2, r.config.warmup = 1, r.config.seed = 7, r.config.cuda_graph = false;
  r.config.attention = "math", r.config.optimizer = {"sgd", 0.01, {}};
  r.config.extra.value = {{"bucket_cap_mb", 25}, {"comm_hook", "none"}};
  r.mode = {"ddp", "cpu:0,cpu:1", {{"backend", "gloo"}}};
  r.workload = {"mlp-small", "mlp", 1000, 1, 6000.0};
  for (int64_t s = 1; s <= 3; ++s) {
    StepModeData m;
    m.devices = std::vector<DpDeviceStep>{{"cpu:0", 4, 1.0, 0.1}};
    m.bytes = NamedValues<int64_t>{{"reduce", 4096}, {"scatter", 256}};
    m.unit_bytes = NamedValues<int64_t>{{"parameters", 4000}};
    m.rank = 0, m.buckets = std::vector<BucketTiming>{bucket(0), bucket(1)}, m.comm_bytes = 8192;
    m.comm_ms = 1.6, m.comm_exposed_ms = 0.4, m.overlap_ratio = 0.75;
    m.extra.value = {{"span_overlap_ratio", 0.8}};
    r.steps.push_back({s, s > 1, 2.5 - 0.1 * s, 3.0, {{"backward", 1.5}, {"data", 0.1}}, m});
  }
  RunSummary& sm = r.summary;
  sm.step_time_ms = stats(3.0),
  sm.phases_median_ms = {{"data", "data", 0.1}, {"backward", "compute", 1.5}};
  sm.samples_per_s = 2666.7, sm.tokens_per_s = 2666.7, sm.images_per_s = 2666.7;
  sm.achieved_flops_per_s = 1.6e7, sm.mfu = Mfu{0.01, 1e15, "datasheet", 1};
  sm.first_loss = 2.4, sm.last_loss = 2.2, sm.straggler_skew = 1.3;
  sm.stragglers = std::vector<StragglerRecord>{{1, 2.6, 1.3}};
  sm.bucket_blame = blame();
  sm.critical_path = critical();
  CommRecord c;
  c.op = "allreduce", c.comm_ms = 1.6, c.comm_exposed_ms = 0.4, c.overlap_ratio = 0.75;
  c.bytes_per_step = 8192, c.buckets_step = 2, c.buckets = std::vector<BucketTiming>{bucket(0)};
  c.bytes = 8192.0, c.algbw_GBps = 0.5, c.busbw_GBps = 0.5;
  c.busbw = {"allreduce", "2(n-1)/n", 1.0};
  sm.comm = c;
  r.memory = {{"cpu:0", 1 << 20, 1 << 21}};
  ConvPlanInfo plan;
  plan.direction = "forward", plan.layout = "nchw", plan.engine = "engine 0";
  plan.dims = {1, 2, 3, 4, 5, 6, 7, 8}, plan.tensor_cores = true, plan.candidates = 3;
  plan.allowed = 2, plan.tried = 2, plan.build_ms = 1.5, plan.workspace_bytes = 1024;
  r.conv_plans = std::vector<ConvPlanInfo>{plan};
  r.ranks = std::vector<RankRecord>{{0, "cpu:0", 2.0, stats(3.0), sm.phases_median_ms, r.memory},
                                    {1, "cpu:1", 2.6, stats(3.0), sm.phases_median_ms, r.memory}};
  return r;
}

SuiteRun full_suite_run() {
  SuiteRun run;
  run.id = "mlp-small/ddp/w2/bucket-1mb", run.group = RunGroup::BucketSweep;
  run.workload = "mlp-small", run.mode = "ddp", run.world_size = 2;
  run.global_batch = 16, run.variant = "bucket-1mb";
  run.args = {"run", "--mode", "ddp", "--bucket-cap-mb", "1"};
  run.config.emplace();
  run.config->mode = "ddp", run.config->workload = "mlp-small", run.config->device = "cpu";
  run.config->world_size = 2, run.config->global_batch = 64, run.config->bucket_cap_mb = 1;
  run.status = RunStatus::Ok, run.error = "none", run.duration_s = 3.5, run.exit_code = 0;
  run.log = "logs/x.log", run.record = "runs/x.json", run.params = "params/x.safetensors";
  run.trace = "traces/x.json";
  RunMetrics m;
  m.samples_per_s = 100, m.tokens_per_s = 100, m.step_time_ms = stats(160);
  m.per_rank_median_ms = std::vector<double>{160, 161}, m.straggler_skew = 1.01;
  m.phases_median_ms = std::vector<PhaseMedian>{{"forward", "compute", 50}};
  m.comm_ms = 20, m.comm_exposed_ms = 5, m.overlap_ratio = 0.75, m.comm_bytes_per_step = 4096;
  m.loss_per_step = std::vector<double>{2.5, 2.4};
  m.bucket_autotune = BucketAutotuneInfo{{{1, 160, true}, {25, 170, true}}, 1.0, {}};
  m.buckets = std::vector<BucketTiming>{bucket(0)}, m.busbw = BusBw{"allreduce", "f", 1.0};
  m.achieved_flops_per_s = 2e9, m.flop_fraction = 0.1, m.devices = 2;
  m.peak_memory_bytes = 1 << 20, m.rank_peak_memory_bytes = std::vector<int64_t>{1 << 20, 1 << 19};
  m.memory = std::vector<MemoryUse>{{"cpu:0", 1 << 20, 1 << 21}};
  m.bucket_blame = blame();
  m.critical_path = critical();
  m.speed_of_light = SpeedOfLight{6.2,       0.31, 5.0,
                                  1.2,       0.0,  {{"compute", 16, 5}, {"other", 1, 0}},
                                  "compute", 1e11, "allreduce (alpha 100 us, beta 1 GB/s)"};
  run.metrics = m;
  run.scaling = ScalingInfo{"mlp-small/single/w1", "mlp-small/single/w1/b16", 0.9, 1.8, 0.9};
  CorrectnessInfo c;
  c.reference = "mlp-small/single/w1/b16", c.max_rel_diff = 1e-6, c.rel_l2_diff = 1e-7;
  c.metric = "rel_l2_diff", c.worst_tensor = "fc1.weight", c.threshold = 1e-2, c.passed = true;
  c.skipped = "no", c.error = "none";
  run.correctness = c;
  run.pytorch = PytorchResult{"ok", "pytorch/x.json", "none", 90.0, 0.7, stats(170)};
  run.flag = FlagInfo{"static_graph", "no search for unused parameters"}, run.repeat = 1;
  return run;
}

SuiteRecord full_suite_record() {
  SuiteRecord s;
  s.complete = true, s.context = context();
  s.suite.name = "default-cpu", s.suite.device = "cpu", s.suite.quick = false;
  s.suite.workloads = {"mlp-small"}, s.suite.modes = {"single", "ddp"};
  s.designs = record_from_json<std::vector<DesignInfo>>(ddpb::testing::design_rows());
  s.suite.world_sizes = {1, 2}, s.suite.steps = 20, s.suite.warmup = 3, s.suite.seed = 0;
  s.suite.correctness_threshold = 1e-2, s.suite.hook_correctness_threshold = 5e-2;
  s.suite.extra.value = {{"comm_hooks", {"fp16"}}, {"precision", "fp32"}};
  s.gemm_peak = GemmPeakInfo{"cpu", 1e11, std::vector<GemmShapePeak>{{"mlp", 8, 8, 8, 1e9}}, {}};
  s.comm_fit = json{{"backend", "gloo"},
                    {"device", "cpu"},
                    {"allreduce", json::object()},
                    {"copy", json::object()},
                    {"reduce_add", json::object()}};
  s.runs = {full_suite_run()};
  return s;
}

// Every member set, every optional present, both designs at every point.
ProjectionRecord full_projection_record() {
  ProjectionRecord p;
  p.source = "results/suite-x", p.device = "cpu";
  for (const json& row : ddpb::testing::design_rows())
    if (row["parallel"].get<bool>()) p.designs.push_back(record_from_json<DesignInfo>(row));
  p.topology = {"measured",      "fitted on this machine", 8, {5, 10}, LinkInfo{20, 25},
                LinkInfo{3, 12}, LinkInfo{1, 6},           2, true,    1.4};
  p.devices = {2, 8}, p.scale = {64, 1e12};
  ProjectedWorkload w;
  w.workload = "mlp-small";
  w.basis = {{{"ddp", BasisRun{"mlp-small/ddp/w1", 32}}, {"dp", BasisRun{"mlp-small/dp/w1", 32}}},
             4.5};
  for (int64_t n : {1, 2, 4, 8}) {
    const ProjectedDesign d{4.0 + n, 1.0, 0.5, 0.5, 4.0 / (4.0 + n), 100.0 * n, 2.5};
    w.points.push_back({n, {{"ddp", d}, {"dp", d}}});
  }
  w.measured = {{"ddp", 2, "mlp-small/ddp/w2", 5.8, 0.8}};
  w.crossover.value = Crossover{4, "dp"};
  w.limits = {{"ddp", DesignLimits{2, std::nullopt, std::nullopt}},
              {"dp", DesignLimits{std::nullopt, Nullable<int64_t>{4}, 8}}};
  w.compute_rate = ComputeRates{{"ddp", ComputeRateInfo{"--device-flops", 4e14, 9.9e14, 0.4}},
                                {"dp", ComputeRateInfo{"--device-flops", 4e14, 9.9e14, 0.4}}};
  p.workloads = {w};
  p.validation =
      ProjectionValidation{"measured",
                           "each workload's world-size-1 runs",
                           "World sizes above 2 oversubscribe",
                           {{"mlp-small/ddp/w2", "ddp", 2, 5.8, 6.0, 0.034, "mlp-small"}},
                           {{"ddp", Nullable<double>{0.034}}, {"dp", Nullable<double>{0.1}}},
                           0.15};
  return p;
}

TEST(RunRecordType, AFullyPopulatedRecordMatchesTheSchemaAndReadsBackEqual) {
  const json j = full_run_record().to_json();
  EXPECT_EQ(problems(validate_run_record(j)), std::vector<std::string>{});
  EXPECT_EQ(RunRecord::from_json(j).to_json(), j);
  EXPECT_EQ(j["summary"]["comm"]["buckets"][0]["collectives"][0]["name"], "allreduce");
  EXPECT_EQ(j["config"]["mode"], "ddp");
  EXPECT_EQ(j["config"]["bucket_cap_mb"], 25) << "config keys beyond the named ones are kept";
}

TEST(SuiteRecordType, AFullyPopulatedRecordMatchesTheSchemaAndReadsBackEqual) {
  const json j = full_suite_record().to_json();
  EXPECT_EQ(problems(validate_suite_record(j)), std::vector<std::string>{});
  EXPECT_EQ(SuiteRecord::from_json(j).to_json(), j);
  EXPECT_EQ(j["runs"][0]["group"], "bucket_sweep");
  EXPECT_EQ(j["runs"][0]["status"], "ok");
}

TEST(ProjectionRecordType, AFullyPopulatedRecordMatchesTheSchemaAndReadsBackEqual) {
  const ProjectionRecord full = full_projection_record();
  const json j = full.to_json();
  EXPECT_EQ(problems(validate_projection_record(j)), std::vector<std::string>{});
  EXPECT_EQ(ProjectionRecord::from_json(j), full);
  EXPECT_EQ(ProjectionRecord::from_json(j).to_json(), j);
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["workloads"][0]["crossover"]["faster"], "dp");
  EXPECT_EQ(j["validation"]["runs"][0]["mode"], "ddp");
  // Designs keyed by name (Note [Designs keyed by name]), their rows beside them.
  EXPECT_EQ(j["designs"][1]["label"], "DDP");
  EXPECT_EQ(j["workloads"][0]["points"][0]["designs"]["dp"]["step_ms"], 5.0);
  EXPECT_EQ(j["workloads"][0]["basis"]["designs"]["ddp"]["run"], "mlp-small/ddp/w1");
  EXPECT_EQ(j["workloads"][0]["limits"]["dp"]["max_devices"], 8);
  EXPECT_EQ(j["workloads"][0]["compute_rate"]["ddp"]["source"], "--device-flops");
  EXPECT_EQ(j["validation"]["median_abs_error"]["dp"], 0.1);
  // And inside a suite record, which validates its projection with the projection schema.
  SuiteRecord s = full_suite_record();
  s.projection = full;
  EXPECT_EQ(problems(validate_suite_record(s.to_json())), std::vector<std::string>{});
  EXPECT_EQ(SuiteRecord::from_json(s.to_json()).projection, full);
}

TEST(ProjectionRecordType, NullableKeysAreWrittenAsNullAndReadBackEmpty) {
  ProjectionRecord p = full_projection_record();
  ProjectedWorkload& w = p.workloads[0];
  w.crossover.value.reset();
  put_named(w.limits, "dp", DesignLimits{std::nullopt, Nullable<int64_t>{}, 8});
  put_named(p.validation->median_abs_error, "dp", Nullable<double>{});
  const json j = p.to_json();
  EXPECT_EQ(problems(validate_projection_record(j)), std::vector<std::string>{});
  EXPECT_TRUE(j["workloads"][0]["crossover"].is_null()) << "a required key, null when none";
  EXPECT_TRUE(j["workloads"][0]["limits"]["dp"]["stops_gaining_at"].is_null());
  EXPECT_TRUE(j["validation"]["median_abs_error"]["dp"].is_null());
  EXPECT_EQ(ProjectionRecord::from_json(j), p);
  // A design absent at a point, or not projected at all, has no key, not a null.
  w.points[3].designs = {{"ddp", w.points[3].designs[0].second}};
  w.limits = {{"ddp", DesignLimits{2, std::nullopt, std::nullopt}}};
  const json ddp_only = p.to_json();
  EXPECT_EQ(problems(validate_projection_record(ddp_only)), std::vector<std::string>{});
  EXPECT_FALSE(ddp_only["workloads"][0]["points"][3]["designs"].contains("dp"));
  EXPECT_FALSE(ddp_only["workloads"][0]["limits"].contains("dp"));
  EXPECT_FALSE(ddp_only["workloads"][0]["limits"]["ddp"].contains("stops_gaining_at"));
  EXPECT_EQ(ProjectionRecord::from_json(ddp_only), p);
}

TEST(SuiteRecordType, TheReportFixtureReadsBackUnchanged) {
  const json fixture = ddpb::testing::make_suite();
  EXPECT_EQ(SuiteRecord::from_json(fixture).to_json(), fixture);
}

TEST(RecordReading, MissingAndMistypedFieldsReadAsAbsentAndBadElementsAreSkipped) {
  json j = full_suite_record().to_json();
  j["runs"][0]["status"] = "done";  // not a status
  j["runs"][0]["metrics"]["samples_per_s"] = "fast";
  j["runs"][0]["metrics"].erase("comm_ms");
  j["runs"][0]["world_size"] = "two";                    // not a number
  j["runs"][0]["metrics"]["peak_memory_bytes"] = 1.1e6;  // a number read rounded
  j["runs"].push_back("not a run");                      // an element that is not an object
  j["runs"].push_back({{"id", "bare"}});
  const SuiteRecord s = SuiteRecord::from_json(j);
  ASSERT_EQ(s.runs.size(), 2u);
  EXPECT_FALSE(s.runs[0].status.has_value());
  EXPECT_EQ(s.runs[0].metrics->samples_per_s, 0.0);
  EXPECT_FALSE(s.runs[0].metrics->comm_ms.has_value());
  EXPECT_EQ(s.runs[0].metrics->overlap_ratio, 0.75);
  EXPECT_EQ(s.runs[0].world_size, 0);
  EXPECT_EQ(s.runs[0].metrics->peak_memory_bytes, 1100000);
  EXPECT_EQ(s.runs[1].id, "bare");
  EXPECT_FALSE(s.runs[1].metrics.has_value());
  EXPECT_FALSE(s.runs[1].ok());
  EXPECT_NO_THROW(SuiteRecord::from_json(json("a string")));
  EXPECT_NO_THROW(RunRecord::from_json(json::array()));
}

TEST(RecordReading, NumbersOutOfTheMembersRangeAndNonFiniteValuesReadAsAbsent) {
  json j = full_run_record().to_json();
  j["steps"][0]["step"] = 18446744073709551615u;  // over int64
  j["summary"]["images_per_s"] = json::number_float_t(1) / 0.0;
  j["config"]["seed"] = 18446744073709551615u;  // a uint64 seed is fine
  const RunRecord r = RunRecord::from_json(j);
  EXPECT_EQ(r.steps[0].step, 0);
  EXPECT_FALSE(r.summary.images_per_s.has_value());
  EXPECT_EQ(r.config.seed, 18446744073709551615u);
}

TEST(RecordReading, OpenObjectsKeepUnnamedKeysAndNamedKeysWin) {
  json j = full_run_record().to_json();
  j["context"]["resumed"] = {"2026-12-01"};
  j["mode"]["details"]["transport"] = "gloo";
  RunRecord r = RunRecord::from_json(j);
  EXPECT_EQ(r.context.extra.value["resumed"], json({"2026-12-01"}));
  r.context.extra.value["host"] = "shadowed";  // a named key in extra does not override
  EXPECT_EQ(r.to_json()["context"]["host"], "ci");
  EXPECT_EQ(r.to_json()["mode"]["details"]["transport"], "gloo");
}

TEST(SuiteRunType, TheTypedConfigurationAndLookups) {
  const SuiteRecord s = full_suite_record();
  EXPECT_EQ(s.runs[0].run_config().bucket_cap_mb, 1.0);
  EXPECT_FALSE(s.runs[0].run_config().sync_bn);
  SuiteRun bare;  // a hand-made record without config reads the defaults
  EXPECT_EQ(bare.run_config().bucket_cap_mb, 25.0);
  EXPECT_EQ(bare.run_config().comm_hook, "none");
  EXPECT_EQ(s.find_run("mlp-small/ddp/w2/bucket-1mb"), &s.runs[0]);
  EXPECT_EQ(s.find_run("nope"), nullptr);
  EXPECT_EQ(s.workloads(), std::vector<std::string>{"mlp-small"});
  EXPECT_EQ(s.runs[0].correctness->verdict_difference(), 1e-7);
  const NamedValues<int64_t> bytes = {{"reduce", 1}, {"scatter", 2}, {"reduce", 3}};
  EXPECT_EQ(named_value(bytes, "reduce"), 3) << "the last, as JSON keeps the last key";
  EXPECT_EQ(named_value(bytes, "gather", int64_t{-1}), -1);
}

}  // namespace
