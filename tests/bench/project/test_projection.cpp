// The projection onto another device class (Note [Compute rate]), its efficiency (Note
// [Projected efficiency]), the refusal without a rate, the one duration format, DP's
// projection marked unvalidated where its validation missed (Note [Validation tolerance]), and
// designs keyed by name (Note [Designs keyed by name]): a third design of one collective
// projected beside the others, labelled from its row, and the crossover (Note [Crossover]).
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "bench/project/compute_rate.h"
#include "bench/project/projection.h"
#include "bench/project/suite_projection.h"
#include "bench/run/flag_values.h"
#include "core/check.h"
#include "reports/projection_view.h"
#include "reports/schema_validator.h"
#include "tests/bench/project/toy_basis.h"

namespace ddpb::bench {
// Named, not anonymous: the unity build joins this file with test_cost_model.cpp's helpers.
namespace projection_test {

// 1 GFLOP a sample at 32 a device: 32 GFLOP a step. DDP's forward and backward took 12 ms
// (2.67 TFLOP/s), DP's replica 16 ms (2 TFLOP/s), on a device whose peak is 10 TFLOP/s.
constexpr double kFlopsPerSample = 1e9, kMeasuredPeak = 1e13;

using testing::ddp_at;
using testing::dp_at;
using testing::kDdp;

// The toy workload with DP's replica at 16 ms and some data and loss time.
ProjectionBasis basis() {
  ProjectionBasis b = testing::toy_basis();
  testing::ddp_inputs(b).data_ms = 0.5;
  testing::dp_inputs(b).replica_ms = 16, testing::dp_inputs(b).loss_ms = 0.1;
  b.single_step_ms.reset();
  b.train_flops_per_sample = kFlopsPerSample;
  b.precision = ops::MathMode::BF16;
  b.measured_peak = PeakRate{kMeasuredPeak, "a measured GEMM peak"};
  return b;
}

// A topology whose devices are the measured ones (no device class): nvlink's links.
Topology measured_class() {
  Topology t = topology_preset("nvlink+ib-ndr");
  t.device.reset();
  return t;
}

double h100_bf16() {
  return device_peak(*topology_preset("nvlink").device, ops::MathMode::BF16)->flops_per_s;
}

TEST(ComputeRate, PresetsNameTheirDeviceAndItsDatasheetPeak) {
  for (const auto& name : topology_preset_names()) {
    const Topology t = topology_preset(name);
    ASSERT_TRUE(t.device.has_value()) << name;
    EXPECT_TRUE(device_peak(*t.device, ops::MathMode::BF16).has_value()) << name;
  }
  EXPECT_NEAR(h100_bf16(), 989.4e12, 1e9) << "H100 SXM: 989 TFLOP/s bf16 dense";
  EXPECT_EQ(topology_preset("nvlink+ib-ndr").device->name, "H100 SXM") << "the node's device";
  EXPECT_NE(
      device_peak(*topology_preset("nvlink").device, ops::MathMode::BF16)->source.find("datasheet"),
      std::string::npos);
  const Topology back = topology_from_json(topology_preset("pcie4").to_json(), "t.json");
  ASSERT_TRUE(back.device.has_value());
  EXPECT_EQ(back.device->name, "A100 PCIe") << "the device round-trips through a topology file";
}

TEST(ComputeRate, AnotherDeviceComputesAtItsPeakTimesTheMeasuredFraction) {
  const ProjectionBasis b = basis();
  const Topology t = topology_preset("nvlink+ib-ndr");
  const ComputeRate r = design_compute_rate(b, b.designs[kDdp], t, {});
  const double achieved = 32 * kFlopsPerSample / 12e-3;
  ASSERT_TRUE(r.info.fraction && r.info.flops_per_s);
  EXPECT_NEAR(*r.info.fraction, achieved / kMeasuredPeak, 1e-12);
  EXPECT_NEAR(*r.info.flops_per_s, h100_bf16() * achieved / kMeasuredPeak, 1);
  // The same fraction of a faster device: compute shrinks by the ratio of the peaks.
  const double c = kMeasuredPeak / h100_bf16();
  EXPECT_NEAR(r.scale, c, 1e-12);
  const DesignPoint one = ddp_at(b, t, 1, {});
  EXPECT_NEAR(one.step_ms, 0.5 + (4 + 8 + 1) * c, 1e-9);
  // Negative control: on the measured device class, the measured times stay.
  EXPECT_DOUBLE_EQ(ddp_at(b, measured_class(), 1, {}).step_ms, 0.5 + 13);
  EXPECT_EQ(design_compute_rate(b, b.designs[kDdp], measured_class(), {}).info.source,
            "as measured");
}

TEST(ComputeRate, DeviceFlopsPutsForwardAndBackwardAtThatRate) {
  ProjectionBasis b = basis();
  b.measured_peak.reset();  // a run record alone: no peak, yet --device-flops works
  const Topology t = topology_preset("nvlink+ib-ndr");
  // 32 GFLOP at 3.2 TFLOP/s: 10 ms of forward and backward; the optimizer scales alike.
  const DesignPoint one = ddp_at(b, t, 1, {0, 3.2e12});
  EXPECT_NEAR(one.step_ms, 0.5 + 10 + 1 * 10.0 / 12, 1e-9);
  // Twice the rate, half the compute.
  const DesignPoint fast = ddp_at(b, t, 1, {0, 6.4e12});
  EXPECT_NEAR(fast.step_ms - 0.5, (one.step_ms - 0.5) / 2, 1e-9);
  const auto dp = dp_at(b, t, 1, {0, 3.2e12});
  ASSERT_TRUE(dp.has_value());
  EXPECT_NEAR(dp->step_ms, 10 + (0.1 + 1) * 10.0 / 16, 1e-9) << "DP's replica at 10 ms";
  const ComputeRate r = design_compute_rate(b, b.designs[kDdp], t, {0, 3.2e12});
  EXPECT_EQ(r.info.source, "--device-flops");
  EXPECT_DOUBLE_EQ(*r.info.flops_per_s, 3.2e12);
}

TEST(ComputeRate, AFractionAboveOneMeansTheMeasuredPeakWasLow) {
  ProjectionBasis b = basis();
  b.measured_peak = PeakRate{1e12, "a low peak"};  // the run reached 2.67 TFLOP/s
  const ComputeRate r = design_compute_rate(b, b.designs[kDdp], topology_preset("nvlink"), {});
  EXPECT_DOUBLE_EQ(*r.info.fraction, 1);
  EXPECT_DOUBLE_EQ(*r.info.flops_per_s, h100_bf16()) << "never above the datasheet";
}

void expect_refused(const ProjectionBasis& b, const Topology& t, const std::string& needle) {
  try {
    project_workload(b, t, {8, 64}, {}, {});
    ADD_FAILURE() << "projected without a rate";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--device-flops"), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << "one line: " << what;
  }
}

TEST(ComputeRate, WithoutARateAGpuTopologyIsRefusedNamingDeviceFlops) {
  const Topology t = topology_preset("nvlink+ib-ndr");
  ProjectionBasis no_peak = basis();
  no_peak.measured_peak.reset();
  expect_refused(no_peak, t, "no known peak");
  ProjectionBasis no_flops = basis();
  no_flops.train_flops_per_sample = 0;
  expect_refused(no_flops, t, "no training FLOPs per sample");
  // Negative controls: the measured device needs no rate, and --device-flops gives one.
  EXPECT_NO_THROW(project_workload(no_peak, measured_class(), {8, 64}, {}, {}));
  EXPECT_NO_THROW(project_workload(no_peak, t, {8, 64}, {0, 4e14}, {}));
  EXPECT_THROW(project_workload(no_flops, t, {8}, {0, 4e14}, {}), UsageError)
      << "a rate needs FLOPs to divide";
}

TEST(ProjectedEfficiency, IsOneAtOneDeviceAndNeverAboveIt) {
  ProjectionBasis b = basis();
  b.single_step_ms = 1;  // a noisy single run far below the DDP run: no longer the baseline
  for (const ProjectionScale scale : {ProjectionScale{}, ProjectionScale{0, 4e14}}) {
    for (const Topology& t :
         {topology_preset("nvlink+ib-ndr"), topology_preset("pcie4+25gbe"), measured_class()}) {
      const auto w = project_workload(b, t, {8, 64}, scale, {});
      ASSERT_EQ(w.points.front().devices, 1);
      EXPECT_EQ(w.points.front().design("ddp")->efficiency, 1.0) << t.name;
      EXPECT_EQ(w.points.front().design("dp")->efficiency, 1.0) << t.name;
      for (const auto& p : w.points) {
        EXPECT_LE(p.design("ddp")->efficiency, 1.0) << t.name << " at " << p.devices;
        if (const auto* dp = p.design("dp")) {
          EXPECT_LE(dp->efficiency, 1.0) << t.name << " at " << p.devices;
        }
      }
      // It is the design's own one-device step over its step at N.
      const auto* last = w.points.back().design("ddp");
      EXPECT_NEAR(last->efficiency, w.points.front().design("ddp")->step_ms / last->step_ms, 1e-12);
    }
  }
  // On a slow network DDP's 50 MB a step shows: efficiency well below 1 at 64 devices.
  const auto slow = project_workload(b, topology_preset("pcie4+25gbe"), {64}, {0, 4e14}, {});
  EXPECT_LT(slow.points.back().design("ddp")->efficiency, 0.5);
}

TEST(ProjectionRecordOut, CarriesTheRateAndMatchesTheSchema) {
  ProjectionSource source;
  source.name = "toy.json";
  source.bases = {basis()};
  source.measured = {{}};
  const auto p = make_projection(source, topology_preset("nvlink+ib-ndr"), {8, 64}, {});
  ASSERT_TRUE(p.topology.device.has_value());
  EXPECT_EQ(p.topology.device->name, "H100 SXM");
  ASSERT_TRUE(p.workloads[0].compute_rate &&
              reports::find_named(*p.workloads[0].compute_rate, "ddp"));
  EXPECT_EQ(p.designs, (std::vector<reports::DesignInfo>{testing::dp_row(), testing::ddp_row()}))
      << "the rows of the designs it projects, in the basis's order";
  const nlohmann::json j = p.to_json();
  EXPECT_TRUE(reports::validate_projection_record(j).empty())
      << reports::format_errors(reports::validate_projection_record(j));
  EXPECT_EQ(reports::ProjectionRecord::from_json(j), p);
  const std::string line = reports::compute_rate_line(p, p.workloads[0]);
  EXPECT_NE(line.find("DDP compute at 263.8 TFLOP/s per device (NVIDIA H100 SXM"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("NVIDIA H100 SXM datasheet, dense bf16 (989.4"), std::string::npos) << line;
}

// One basis serves every design, so the DP record read after the DDP one must describe the same
// work; a DP run in another precision is refused rather than projected at DDP's rate.
TEST(ComputeBasis, TheDesignsRecordsMustAgreeOnPrecisionAndFlops) {
  reports::RunRecord ddp_record, dp_record;
  ddp_record.design = testing::ddp_row(), dp_record.design = testing::dp_row();
  ddp_record.config.precision = dp_record.config.precision = "bf16";
  ddp_record.workload.train_flops_per_sample = dp_record.workload.train_flops_per_sample = 1e9;
  ProjectionBasis b;
  b.workload = "toy";
  read_compute_basis(b, ddp_record, std::nullopt);
  read_compute_basis(b, dp_record, std::nullopt);  // the same work: accepted
  EXPECT_EQ(b.precision, ops::MathMode::BF16);
  dp_record.config.precision = "fp32";
  try {
    read_compute_basis(b, dp_record, std::nullopt);
    ADD_FAILURE() << "a DP run in fp32 beside a bf16 DDP run was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("toy: the DDP and DP runs differ in precision (bf16 "
                                         "against fp32)"),
              std::string::npos)
        << e.what();
  }
}

TEST(FormatDuration, MsOrSAndNeverAnExponent) {
  EXPECT_EQ(reports::format_duration(13270), "13.27 s");
  EXPECT_EQ(reports::format_duration(13.27), "13.27 ms");
  EXPECT_EQ(reports::format_duration(0.85), "850.0 µs");
  EXPECT_EQ(reports::format_duration(452.1), "452.1 ms");
  EXPECT_EQ(reports::format_duration(4.521e6), "4521 s");
  EXPECT_EQ(reports::format_duration(0), "0 ms");
  EXPECT_EQ(reports::format_duration(std::nullopt), "-");
  // The unit follows the value as printed: never "1000.0 ms" or "1000.0 µs".
  EXPECT_EQ(reports::format_duration(999.96), "1.00 s");
  EXPECT_EQ(reports::format_duration(999.94), "999.9 ms");
  EXPECT_EQ(reports::format_duration(0.99996), "1.00 ms");
  EXPECT_EQ(reports::format_duration(0.9994), "999.4 µs");
  const std::regex exponent("[0-9][eE][-+]?[0-9]");
  for (double ms = 1e-9; ms < 1e12; ms *= 3.7) {
    const std::string s = reports::format_duration(ms);
    EXPECT_FALSE(std::regex_search(s, exponent)) << ms << " -> " << s;
    EXPECT_EQ(s.find("inf"), std::string::npos) << s;
  }
  EXPECT_EQ(reports::format_flops(989.4e12), "989.4 TFLOP/s");
  EXPECT_EQ(reports::format_flops(61.2e9), "61.20 GFLOP/s");
}

reports::ProjectionValidation validation(double dp_error) {
  reports::ProjectionValidation v;
  v.topology = "measured";
  v.runs = {{"embed/ddp/w2", "ddp", 2, 10, 10.5, 0.05, "embed"},
            {"embed/dp/w2", "dp", 2, 10, 10 * (1 + dp_error), dp_error, "embed"},
            {"mlp-small/dp/w2", "dp", 2, 10, 11, 0.1, "mlp-small"}};
  v.tolerance = kValidationTolerance;
  return v;
}

reports::ProjectionRecord two_workloads(std::optional<reports::ProjectionValidation> v) {
  ProjectionSource source;
  source.name = "results";
  ProjectionBasis embed = basis(), mlp = basis();
  embed.workload = "embed", mlp.workload = "mlp-small";
  source.bases = {embed, mlp};
  source.measured = {{}, {}};
  source.validation = std::move(v);
  return make_projection(source, measured_class(), {2}, {});
}

std::string row_of(const reports::ReportSection& s, const std::string& workload, int devices) {
  for (const auto& row : s.tables[0].table.rows) {
    if (row[0] == workload && row[1] == std::to_string(devices)) {
      std::string all;
      for (const auto& c : row) all += c + " | ";
      return all;
    }
  }
  return "";
}

TEST(Validation, DpIsMarkedUnvalidatedWhereItMissedByMoreThanTheTolerance) {
  const auto p = two_workloads(validation(-0.51));
  const reports::ReportSection s = reports::build_projection_section(p);
  EXPECT_NE(row_of(s, "embed", 2).find("(unvalidated)"), std::string::npos)
      << row_of(s, "embed", 2);
  EXPECT_EQ(row_of(s, "mlp-small", 2).find("unvalidated"), std::string::npos)
      << "mlp-small's DP missed by 10%, within 15%";
  const nlohmann::json j = p.to_json();
  EXPECT_TRUE(reports::validate_projection_record(j).empty())
      << reports::format_errors(reports::validate_projection_record(j));
  EXPECT_EQ(reports::ProjectionRecord::from_json(j), p) << "tolerance and workloads round-trip";
  EXPECT_TRUE(reports::unvalidated("embed", "dp", p.validation));
  EXPECT_FALSE(reports::unvalidated("embed", "ddp", p.validation));
  EXPECT_NE(reports::unvalidated_line(p, p.workloads[0])
                .find("DP's projection is unvalidated (its validation missed by more than ±15%: 2 "
                      "devices -51.0%)"),
            std::string::npos);
  const auto& table = s.tables.at(1).table;  // the validation table
  EXPECT_EQ(table.header.back(), "within ±15%");
  EXPECT_EQ(table.rows[1].back(), "no: unvalidated");
  EXPECT_TRUE(table.bad[1]);
  EXPECT_EQ(table.rows[0].back(), "yes");
  // Negative control: within the tolerance, nothing is marked.
  const auto fine = two_workloads(validation(-0.12));
  EXPECT_EQ(row_of(reports::build_projection_section(fine), "embed", 2).find("unvalidated"),
            std::string::npos);
  EXPECT_EQ(reports::unvalidated_line(fine, fine.workloads[0]), "");
}

// A third design whose gradients meet in an AllReduce, after backward (as the toy design of
// tests/bench/designs does): the AllReduce model projects it beside DDP, under its own name.
ProjectionBasis three_designs() {
  ProjectionBasis b = basis();
  DesignBasis toy = b.designs[kDdp];
  toy.design.name = "toy-ddp", toy.design.label = "ToyDDP", toy.design.overlaps_backward = false;
  toy.run = "toy/toy-ddp/w1";
  b.designs.push_back(toy);
  return b;
}

reports::ProjectionRecord projected(const ProjectionBasis& b, const Topology& t,
                                    const std::vector<int>& devices) {
  ProjectionSource source;
  source.name = "results";
  source.bases = {b};
  source.measured = {{}};
  return make_projection(source, t, devices, {});
}

TEST(DesignsKeyedByName, TwoDesignsOfOneCollectiveAreBothProjected) {
  const auto p = projected(three_designs(), measured_class(), {2, 16});
  ASSERT_EQ(p.designs.size(), 3u);
  EXPECT_EQ(p.designs[2].label, "ToyDDP");
  const auto& w = p.workloads[0];
  for (const auto& point : w.points) {
    const auto* ddp = point.design("ddp");
    const auto* toy = point.design("toy-ddp");
    ASSERT_TRUE(ddp && toy) << point.devices;
    EXPECT_GE(toy->exposed_ms, ddp->exposed_ms) << "its AllReduces all wait for backward";
    EXPECT_EQ(point.design("dp") != nullptr, point.devices <= 8) << "DP runs on one node";
  }
  for (const char* name : {"dp", "ddp", "toy-ddp"}) {
    EXPECT_TRUE(reports::find_named(w.limits, name)) << name;
    EXPECT_TRUE(reports::find_named(*w.compute_rate, name)) << name;
    EXPECT_TRUE(reports::find_named(w.basis.designs, name)) << name;
  }
  EXPECT_TRUE(reports::find_named(w.limits, "toy-ddp")->max_devices_at_90pct.has_value());
  const nlohmann::json j = p.to_json();
  EXPECT_TRUE(reports::validate_projection_record(j).empty())
      << reports::format_errors(reports::validate_projection_record(j));
  EXPECT_EQ(reports::ProjectionRecord::from_json(j), p) << "read back equal, keys in any order";
  EXPECT_TRUE(j["workloads"][0]["points"][1]["designs"].contains("toy-ddp")) << j.dump();
  // The report: three columns a design, headed by its label; the communication a design
  // overlapping backward waits for is "exposed", any other design's all of it.
  const reports::ReportSection s = reports::build_projection_section(p);
  EXPECT_EQ(s.tables[0].table.header,
            (std::vector<std::string>{"workload", "devices", "DP step", "DP communication",
                                      "DP efficiency", "DDP step", "DDP exposed", "DDP efficiency",
                                      "ToyDDP step", "ToyDDP communication", "ToyDDP efficiency",
                                      "faster"}));
  EXPECT_NE(row_of(s, "toy", 16).find("| DDP (DP: one node only) |"), std::string::npos)
      << row_of(s, "toy", 16);
  EXPECT_NE(s.paragraphs[0].find("no crossover between DP, DDP and ToyDDP where they run"),
            std::string::npos)
      << s.paragraphs[0];
  EXPECT_NE(s.paragraphs[0].find("ToyDDP "), std::string::npos) << "its limit, by its label";
}

// Note [Crossover]: DP, faster at 2 devices, falls behind DDP at 4 as device 0's traffic grows.
// The record names the design; the table and the findings name its label.
TEST(DesignsKeyedByName, TheCrossoverNamesTheDesignAndTheReportItsLabel) {
  ProjectionBasis b = testing::toy_basis();
  testing::dp_inputs(b).replica_ms = 8;
  Topology t = topology_preset("pcie4");
  t.device.reset();
  const auto p = projected(b, t, {8});
  const auto& c = p.workloads[0].crossover.value;
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->devices, 4);
  EXPECT_EQ(c->faster, "ddp");
  const reports::ReportSection s = reports::build_projection_section(p);
  EXPECT_NE(s.paragraphs[0].find("toy: DDP becomes the faster design at 4 devices"),
            std::string::npos)
      << s.paragraphs[0];
  EXPECT_TRUE(row_of(s, "toy", 2).ends_with("| DP | ")) << row_of(s, "toy", 2);
  EXPECT_TRUE(row_of(s, "toy", 4).ends_with("| DDP | ")) << row_of(s, "toy", 4);
}

// A design that stops at its node hands the lead on without a crossover: DP, fastest on one
// node, is absent at 16 devices, where DDP leads ToyDDP.
TEST(DesignsKeyedByName, ADesignLeavingAtItsNodeIsNoCrossover) {
  ProjectionBasis b = three_designs();
  testing::dp_inputs(b).replica_ms = 1;
  const auto p = projected(b, measured_class(), {16});
  const auto& w = p.workloads[0];
  ASSERT_EQ(w.points.back().devices, 16);
  EXPECT_EQ(w.points.back().design("dp"), nullptr);
  EXPECT_LT(w.points.back().design("ddp")->step_ms, w.points.back().design("toy-ddp")->step_ms);
  EXPECT_LT(w.points[3].design("dp")->step_ms, w.points[3].design("ddp")->step_ms) << "at 8";
  EXPECT_FALSE(w.crossover.value.has_value()) << w.crossover.value->devices;
}

// Note [Sharded steps]: ZeRO's row (gradient_op reduce_scatter, the optimizer state sharded,
// the parameters all-gathered after the step), calibrated on the toy's DDP run as if measured
// at 2 devices: its buckets reduce-scattered after backward, its optimizer over 2/N of the
// measured one, then the gather, all of it exposed. PyTorch's variant keeps the AllReduce and
// broadcasts every share.
TEST(ShardedSteps, ZeroReduceScattersStepsItsShareAndGathersTheParameters) {
  ProjectionBasis b = basis();
  DesignBasis zero = b.designs[kDdp];
  zero.design.name = "zero1", zero.design.label = "ZeRO-1";
  zero.design.gradient_op = "reduce_scatter";
  zero.design.overlaps_backward = false;
  zero.design.shards_optimizer_state = true;
  auto& in = std::get<AllReduceInputs>(zero.inputs);
  in.optimizer_shards = 2, in.gather = ParameterGather::AllGather, in.parameter_bytes = 50e6;
  const Topology t = measured_class();
  const DesignPoint at8 = project_design(b, zero, t, 8, {}).value();
  const double gather = all_gather_ms(50e6, 8, t);
  EXPECT_NEAR(at8.comm_ms, 2 * reduce_scatter_ms(25e6, 8, t) + gather, 1e-9);
  EXPECT_NEAR(at8.exposed_ms, at8.comm_ms, 1e-9) << "after backward, then after the optimizer";
  const double compute = in.forward_ms + in.backward_ms;  // the measured class: unscaled
  EXPECT_NEAR(at8.step_ms, in.data_ms + compute + at8.exposed_ms + in.optimizer_ms * 2 / 8, 1e-9);
  // nccl-tests' reduce-scatter factor, (p-1)/p, over the buckets' collectives.
  EXPECT_NEAR(at8.busbw_GBps, 50e6 / (2 * reduce_scatter_ms(25e6, 8, t) * 1e6) * 7 / 8, 1e-9);
  // Measured at one device, the optimizer stepped everything: 1/8 of it at 8.
  in.optimizer_shards = 1;
  const DesignPoint from_one = project_design(b, zero, t, 8, {}).value();
  EXPECT_NEAR(at8.step_ms - from_one.step_ms, in.optimizer_ms * (2.0 / 8 - 1.0 / 8), 1e-9);
  in.optimizer_shards = 2;
  // PyTorch's ZeroRedundancyOptimizer: DDP's overlapped AllReduce, then the broadcasts.
  DesignBasis pytorch = b.designs[kDdp];
  pytorch.design.name = "zero1-pytorch";
  pytorch.design.shards_optimizer_state = true;
  auto& pin = std::get<AllReduceInputs>(pytorch.inputs);
  pin.optimizer_shards = 2, pin.gather = ParameterGather::Broadcast, pin.parameter_bytes = 50e6;
  const DesignPoint ddp8 = ddp_at(b, t, 8, {});
  const DesignPoint pt8 = project_design(b, pytorch, t, 8, {}).value();
  EXPECT_NEAR(pt8.comm_ms, ddp8.comm_ms + sharded_broadcast_ms(50e6, 8, t), 1e-9);
  EXPECT_NEAR(pt8.step_ms - ddp8.step_ms,
              sharded_broadcast_ms(50e6, 8, t) - in.optimizer_ms * (1 - 2.0 / 8), 1e-9);
}

// Note [Projected memory]: ZeRO-2 measured at 2 devices (Ψ = 1e6, AdamW: 4Ψ + 2Ψ + 4Ψ of model
// state in a 100 MB peak with 10 MB of activations) at 8 devices holds 4Ψ + 0.5Ψ + 1Ψ, the
// rest as measured; at twice the per-device batch twice the activations. On a 1 GB device the
// family's largest preset within 1e9 / 95.5 parameters fits.
TEST(ProjectedMemory, ModelStateMovesByTheFormulasAndTheFitNamesAPreset) {
  ProjectionBasis b = basis();
  DesignBasis& d = b.designs[kDdp];
  d.design.shards_gradients = d.design.shards_optimizer_state = true;
  d.memory =
      MemoryBasis{100e6,
                  10e6,
                  {{"parameters", 4000000}, {"gradients", 2000000}, {"optimizer_state", 4000000}},
                  2,
                  1000000};
  EXPECT_NEAR(*projected_memory(d, 8, {}), 95.5e6, 1);
  EXPECT_NEAR(*projected_memory(d, 2, {}), 100e6, 1) << "as measured";
  EXPECT_NEAR(*projected_memory(d, 8, {64, 0, 0}), 105.5e6, 1) << "per-device batch 32 -> 64";
  EXPECT_FALSE(projected_memory(b.designs[0], 8, {})) << "a record without a promise";
  b.family_presets = {{"toy-small", 1000000}, {"toy-big", 10000000}, {"toy-huge", 100000000}};
  const auto fit = memory_fit(b, d, 8, {0, 0, 1e9});
  ASSERT_TRUE(fit);
  EXPECT_NEAR(fit->bytes_per_parameter, 95.5, 1e-9);
  EXPECT_EQ(fit->max_parameters, static_cast<int64_t>(1e9 / 95.5));
  EXPECT_EQ(fit->largest_preset, "toy-big");
  const auto p = make_projection(
      ProjectionSource{.name = "toy", .bases = {b}, .measured = {{}}, .device = "cuda"},
      measured_class(), {8}, {0, 0, 1e9});
  EXPECT_TRUE(reports::validate_projection_record(p.to_json()).empty())
      << reports::format_errors(reports::validate_projection_record(p.to_json()));
  const std::string line = reports::memory_fit_line(p, p.workloads[0]);
  EXPECT_NE(line.find("memory per device at 8 devices: "), std::string::npos) << line;
  EXPECT_NE(line.find("DDP fits 10.5M parameters"), std::string::npos) << line;
}

TEST(DeviceMemoryFlag, SizesWithUnitsAndOneLineRefusals) {
  EXPECT_EQ(parse_memory_size_flag("--device-memory", "80GiB"), 80.0 * (1 << 30));
  EXPECT_EQ(parse_memory_size_flag("--device-memory", "141GB"), 141e9);
  EXPECT_EQ(parse_memory_size_flag("--device-memory", "1048576"), 1048576.0);
  for (const char* bad : {"", "80 GiB", "80gib", "-1GB", "0", "GiB", "1e30TB", "nan"})
    EXPECT_THROW(parse_memory_size_flag("--device-memory", bad), UsageError) << bad;
}

}  // namespace projection_test
}  // namespace ddpb::bench
