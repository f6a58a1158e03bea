#include "bench/cli/project_command.h"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "bench/project/comm_fit.h"
#include "bench/project/suite_projection.h"
#include "bench/run/cli_flags.h"
#include "core/check.h"
#include "reports/html_report.h"
#include "reports/json_io.h"
#include "reports/projection_view.h"
#include "reports/report_util.h"
#include "reports/schema_validator.h"

namespace ddpb::bench {
namespace {

using D = reports::ProjectedDesign;

// Steps through the report's one duration format (never an exponent), efficiencies in %.
std::string time_cell(const D* design, double D::*field) {
  return reports::format_duration(design ? std::optional(design->*field) : std::nullopt);
}

std::string percent_cell(const D* design) {
  return design ? fmt::format("{:.1f}%", design->efficiency * 100) : "-";
}

// One design's columns: its step, what of its communication is exposed when it overlaps
// backward, and its efficiency.
std::vector<std::string> design_headers(const reports::DesignInfo& d) {
  std::vector<std::string> h = {d.label + " step"};
  if (d.overlaps_backward) h.push_back(d.label + " exposed");
  h.push_back(d.label + " eff");
  return h;
}

std::vector<std::string> design_cells(const D* point, const reports::DesignInfo& d) {
  std::vector<std::string> c = {time_cell(point, &D::step_ms)};
  if (d.overlaps_backward) c.push_back(time_cell(point, &D::exposed_ms));
  c.push_back(percent_cell(point));
  return c;
}

void print_row(const std::vector<std::string>& cells, const std::vector<size_t>& widths) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i)
    line += fmt::format("{}{:>{}}", i ? " " : "", cells[i], widths[i]);
  fmt::print("{}\n", line);
}

void print_points(const reports::ProjectedWorkload& w,
                  const std::vector<reports::DesignInfo>& designs) {
  std::vector<std::string> header = {"devices"};
  for (const auto& d : designs)
    for (std::string& h : design_headers(d)) header.push_back(std::move(h));
  std::vector<size_t> widths = {8};
  for (size_t i = 1; i < header.size(); ++i)
    widths.push_back(std::max<size_t>(12, header[i].size()));
  print_row(header, widths);
  for (const auto& pt : w.points) {
    std::vector<std::string> row = {fmt::format("{}", pt.devices)};
    for (const auto& d : designs)
      for (std::string& c : design_cells(pt.design(d.name), d)) row.push_back(std::move(c));
    print_row(row, widths);
  }
}

void print_projection(const reports::ProjectionRecord& p) {
  const auto& device = p.topology.device;
  // A topology file's name and source reach the terminal escaped (issue 48, P21).
  fmt::print("topology {}{}: {}\n", reports::printable(p.topology.name),
             device ? " (devices: " + reports::printable(device->name) + ")" : std::string(),
             reports::printable(p.topology.source));
  const std::vector<reports::DesignInfo> designs = reports::designs_shown(p);
  for (const auto& w : p.workloads) {
    fmt::print("\n{}: {}\n", w.workload, reports::compute_rate_line(p, w));
    if (const std::string u = reports::unvalidated_line(p, w); !u.empty()) fmt::print("{}\n", u);
    print_points(w, designs);
    if (const std::string fits = reports::memory_fit_line(p, w); !fits.empty())
      fmt::print("{}\n", fits);
  }
}

// One count of --devices, in make_projection's range. P28: CLI11 converted them itself and
// said "Could not convert: --devices = 2147483648", neither what was wrong nor what it takes.
int device_count(const std::string& text) {
  constexpr int kMaxDevices = 1 << 20;  // make_projection's own bound
  int value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  DDPB_USAGE_CHECK(!text.empty() && ec == std::errc() && ptr == end && value >= 1 &&
                   value <= kMaxDevices)
      << "--devices: '" << text << "' is not in 1.." << kMaxDevices
      << " (device counts such as 8,64,512)";
  return value;
}

}  // namespace

CLI::App* add_project_command(CLI::App& app, ProjectOptions& o) {
  auto* cmd = app.add_subcommand("project",
                                 "predict the designs at other device counts from measured runs");
  cmd->add_option("results", o.input,
                  "a results folder of ddpbench suite, its suite.json, or a run record of a "
                  "design whose gradients meet in an AllReduce or a reduce (DDP, DP)")
      ->required();
  cmd->add_option_function<std::vector<std::string>>(
         "--devices",
         [&o](const std::vector<std::string>& counts) {
           o.devices.clear();
           for (const std::string& n : counts) o.devices.push_back(device_count(n));
         },
         "device counts to project, e.g. 8,64,512")
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
                "the projected device's sustained training FLOP/s, e.g. 400e12 (default: the "
                "topology's device, its datasheet peak at the fraction the measured run reached "
                "of its own)");
  cmd->add_option("--inter", o.inter,
                  "a collectives record measured across hosts: the network between nodes is "
                  "fitted on it (with --node-size K for a sweep of one rank a host; a "
                  "collectives --node-size sweep gives both links)");
  add_int_flag(*cmd, "--node-size", o.node_size, 1, 1 << 16,
               "devices a node holds, with --inter (default: the sweep's own)");
  cmd->add_option("--device-memory", o.device_memory,
                  "the projected device's memory, e.g. 80GiB: the largest model of each "
                  "workload's family each design fits at the largest --devices");
  return cmd;
}

int project_command(const ProjectOptions& o) {
  const std::string& report = o.report_out;
  const std::string& json_out = o.json_out;
  DDPB_USAGE_CHECK(report.empty() || report.ends_with(".html") || report.ends_with(".htm") ||
                   report.ends_with(".md"))
      << "-o " << o.report_out << ": the report is .html or .md";
  const double device_memory =
      o.device_memory.empty() ? 0.0 : parse_memory_size_flag("--device-memory", o.device_memory);
  const ProjectionSource source = load_projection_source(o.input);
  DDPB_USAGE_CHECK(!o.inter.empty() || o.node_size == 0)
      << "--node-size goes with --inter: the sweep gives the link between nodes";
  Topology topo = resolve_topology(o.topology, source);
  if (!o.inter.empty()) {
    DDPB_USAGE_CHECK(std::filesystem::is_regular_file(o.inter))
        << "--inter " << o.inter << ": no such file";
    const nlohmann::json sweep = reports::read_json(o.inter);
    DDPB_USAGE_CHECK(sweep.is_object() && sweep.value("kind", "") == "collectives")
        << "--inter " << o.inter << ": not a collectives record (ddpbench collectives -J)";
    topo = with_inter_link(std::move(topo), reports::CollectivesRecord::from_json(sweep), o.inter,
                           o.node_size);
  }
  const reports::ProjectionRecord p =
      make_projection(source, topo, o.devices, {o.per_device_batch, o.target_flops, device_memory});
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
