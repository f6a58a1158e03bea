// The projection onto another device class (Note [Compute rate]), its efficiency (Note
// [Projected efficiency]), the refusal without a rate, the one duration format, and DP's
// projection marked unvalidated where its validation missed (Note [Validation tolerance]).
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>

#include "bench/project/compute_rate.h"
#include "bench/project/projection.h"
#include "bench/project/suite_projection.h"
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

// The toy workload with DP's replica at 16 ms and some data and loss time.
ProjectionBasis basis() {
  ProjectionBasis b = testing::toy_basis();
  b.ddp->data_ms = 0.5;
  b.dp->replica_ms = 16, b.dp->loss_ms = 0.1;
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
  const ComputeRate r = ddp_compute_rate(b, t, {});
  const double achieved = 32 * kFlopsPerSample / 12e-3;
  ASSERT_TRUE(r.info.fraction && r.info.flops_per_s);
  EXPECT_NEAR(*r.info.fraction, achieved / kMeasuredPeak, 1e-12);
  EXPECT_NEAR(*r.info.flops_per_s, h100_bf16() * achieved / kMeasuredPeak, 1);
  // The same fraction of a faster device: compute shrinks by the ratio of the peaks.
  const double c = kMeasuredPeak / h100_bf16();
  EXPECT_NEAR(r.scale, c, 1e-12);
  const DesignPoint one = project_ddp(b, t, 1, {});
  EXPECT_NEAR(one.step_ms, 0.5 + (4 + 8 + 1) * c, 1e-9);
  // Negative control: on the measured device class, the measured times stay.
  EXPECT_DOUBLE_EQ(project_ddp(b, measured_class(), 1, {}).step_ms, 0.5 + 13);
  EXPECT_EQ(ddp_compute_rate(b, measured_class(), {}).info.source, "as measured");
}

TEST(ComputeRate, DeviceFlopsPutsForwardAndBackwardAtThatRate) {
  ProjectionBasis b = basis();
  b.measured_peak.reset();  // a run record alone: no peak, yet --device-flops works
  const Topology t = topology_preset("nvlink+ib-ndr");
  // 32 GFLOP at 3.2 TFLOP/s: 10 ms of forward and backward; the optimizer scales alike.
  const DesignPoint one = project_ddp(b, t, 1, {0, 3.2e12});
  EXPECT_NEAR(one.step_ms, 0.5 + 10 + 1 * 10.0 / 12, 1e-9);
  // Twice the rate, half the compute.
  const DesignPoint fast = project_ddp(b, t, 1, {0, 6.4e12});
  EXPECT_NEAR(fast.step_ms - 0.5, (one.step_ms - 0.5) / 2, 1e-9);
  const auto dp = project_dp(b, t, 1, {0, 3.2e12});
  ASSERT_TRUE(dp.has_value());
  EXPECT_NEAR(dp->step_ms, 10 + (0.1 + 1) * 10.0 / 16, 1e-9) << "DP's replica at 10 ms";
  const ComputeRate r = ddp_compute_rate(b, t, {0, 3.2e12});
  EXPECT_EQ(r.info.source, "--device-flops");
  EXPECT_DOUBLE_EQ(*r.info.flops_per_s, 3.2e12);
}

TEST(ComputeRate, AFractionAboveOneMeansTheMeasuredPeakWasLow) {
  ProjectionBasis b = basis();
  b.measured_peak = PeakRate{1e12, "a low peak"};  // the run reached 2.67 TFLOP/s
  const ComputeRate r = ddp_compute_rate(b, topology_preset("nvlink"), {});
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
      EXPECT_EQ(w.points.front().ddp->efficiency, 1.0) << t.name;
      EXPECT_EQ(w.points.front().dp->efficiency, 1.0) << t.name;
      for (const auto& p : w.points) {
        EXPECT_LE(p.ddp->efficiency, 1.0) << t.name << " at " << p.devices;
        if (p.dp) {
          EXPECT_LE(p.dp->efficiency, 1.0) << t.name << " at " << p.devices;
        }
      }
      // It is the design's own one-device step over its step at N.
      const auto& last = w.points.back();
      EXPECT_NEAR(last.ddp->efficiency, w.points.front().ddp->step_ms / last.ddp->step_ms, 1e-12);
    }
  }
  // On a slow network DDP's 50 MB a step shows: efficiency well below 1 at 64 devices.
  const auto slow = project_workload(b, topology_preset("pcie4+25gbe"), {64}, {0, 4e14}, {});
  EXPECT_LT(slow.points.back().ddp->efficiency, 0.5);
}

TEST(ProjectionRecordOut, CarriesTheRateAndMatchesTheSchema) {
  ProjectionSource source;
  source.name = "toy.json";
  source.bases = {basis()};
  source.measured = {{}};
  const auto p = make_projection(source, topology_preset("nvlink+ib-ndr"), {8, 64}, {});
  ASSERT_TRUE(p.topology.device.has_value());
  EXPECT_EQ(p.topology.device->name, "H100 SXM");
  ASSERT_TRUE(p.workloads[0].compute_rate && p.workloads[0].compute_rate->ddp);
  const nlohmann::json j = p.to_json();
  EXPECT_TRUE(reports::validate_projection_record(j).empty())
      << reports::format_errors(reports::validate_projection_record(j));
  EXPECT_EQ(reports::ProjectionRecord::from_json(j), p);
  const std::string line = reports::compute_rate_line(p.workloads[0]);
  EXPECT_NE(line.find("DDP compute at 263.8 TFLOP/s per device (NVIDIA H100 SXM"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("NVIDIA H100 SXM datasheet, dense bf16 (989.4"), std::string::npos) << line;
}

// One basis serves both designs, so the DP record read after the DDP one must describe the same
// work; a DP run in another precision is refused rather than projected at DDP's rate.
TEST(ComputeBasis, TheDesignsRecordsMustAgreeOnPrecisionAndFlops) {
  reports::RunRecord ddp_record, dp_record;
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
  EXPECT_NE(reports::unvalidated_line(p.workloads[0], p.validation)
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
  EXPECT_EQ(reports::unvalidated_line(fine.workloads[0], fine.validation), "");
}

}  // namespace projection_test
}  // namespace ddpb::bench
