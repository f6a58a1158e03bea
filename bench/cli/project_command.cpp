#include "bench/cli/project_command.h"

#include <fmt/core.h>

#include <filesystem>

#include "bench/project/suite_projection.h"
#include "bench/run/cli_flags.h"
#include "core/check.h"
#include "reports/html_report.h"
#include "reports/json_io.h"
#include "reports/projection_view.h"
#include "reports/schema_validator.h"

namespace ddpb::bench {
namespace {

std::string cell(const std::optional<reports::ProjectedDesign>& design,
                 double reports::ProjectedDesign::*field, double scale = 1) {
  return design ? fmt::format("{:.4g}", *design.*field * scale) : "-";
}

void print_projection(const reports::ProjectionRecord& p) {
  using D = reports::ProjectedDesign;
  fmt::print("topology {}: {}\n", p.topology.name, p.topology.source);
  for (const auto& w : p.workloads) {
    fmt::print("\n{}\n{:>8} {:>12} {:>12} {:>9} {:>12} {:>9}\n", w.workload, "devices",
               "DDP step ms", "exposed ms", "DDP eff", "DP step ms", "DP eff");
    for (const auto& pt : w.points) {
      fmt::print("{:>8} {:>12} {:>12} {:>8}% {:>12} {:>8}%\n", pt.devices,
                 cell(pt.ddp, &D::step_ms), cell(pt.ddp, &D::exposed_ms),
                 cell(pt.ddp, &D::efficiency, 100), cell(pt.dp, &D::step_ms),
                 cell(pt.dp, &D::efficiency, 100));
    }
  }
}

}  // namespace

CLI::App* add_project_command(CLI::App& app, ProjectOptions& o) {
  auto* cmd =
      app.add_subcommand("project", "predict DP and DDP at other device counts from measured runs");
  cmd->add_option("results", o.input,
                  "a results folder of ddpbench suite, its suite.json, or a "
                  "DP/DDP run record")
      ->required();
  cmd->add_option("--devices", o.devices, "device counts to project, e.g. 8,64,512")
      ->delimiter(',')
      ->required();
  cmd->add_option("--topology", o.topology,
                  "measured (default), a preset (pcie4, pcie5, nvlink, ib-ndr, roce-200, 25gbe, "
                  "NODE+NETWORK such as nvlink+ib-ndr) or a topology JSON file");
  cmd->add_option("--json", o.json_out, "write the projection record here");
  cmd->add_option("-o,--out", o.report_out, "write a report: .html or .md");
  add_int_flag(*cmd, "--per-device-batch", o.per_device_batch, 1, int64_t{1} << 30,
               "project at this per-device batch (default: as measured)");
  add_real_flag(*cmd, "--device-flops", o.target_flops, 1, 1e20,
                "the projected device's GEMM FLOP/s (default: the measured device's)");
  return cmd;
}

int project_command(const ProjectOptions& o) {
  const std::string& report = o.report_out;
  const std::string& json_out = o.json_out;
  DDPB_USAGE_CHECK(report.empty() || report.ends_with(".html") || report.ends_with(".htm") ||
                   report.ends_with(".md"))
      << "-o " << o.report_out << ": the report is .html or .md";
  const ProjectionSource source = load_projection_source(o.input);
  DDPB_USAGE_CHECK(o.target_flops == 0 ||
                   std::any_of(source.bases.begin(), source.bases.end(),
                               [](const ProjectionBasis& b) { return b.gemm_flops_per_s > 0; }))
      << "--device-flops needs the measured GEMM rate of a suite (gemm_peak); " << o.input
      << " has none";
  const Topology topo = resolve_topology(o.topology, source);
  const reports::ProjectionRecord p =
      make_projection(source, topo, o.devices, {o.per_device_batch, o.target_flops});
  const nlohmann::json record = p.to_json();
  const auto errors = reports::validate_projection_record(record);
  DDPB_CHECK(errors.empty()) << "the projection does not match its schema: "
                             << reports::format_errors(errors);
  print_projection(p);
  if (!json_out.empty()) {
    reports::write_json_atomic(json_out, record);
    fmt::print("\nwrote {}\n", json_out);
  }
  if (!report.empty()) {
    reports::write_sections_report("ddpbench projection: " + o.input,
                                   {reports::build_projection_section(p)}, report);
    fmt::print("wrote {}\n", report);
  }
  return 0;
}

}  // namespace ddpb::bench
