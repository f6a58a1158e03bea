#include "bench/project/suite_projection.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "core/check.h"
#include "reports/json_io.h"
#include "reports/run_record.h"
#include "reports/schema_validator.h"
#include "workloads/model.h"

namespace fs = std::filesystem;

namespace ddpb::bench {
namespace {

using nlohmann::json;

using reports::RunRecord;
using reports::SuiteRecord;
using reports::SuiteRun;

json read_input(const std::string& path) {
  try {
    return reports::read_json(path);
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
}

// The measured scaling runs of `mode` for `workload`, smallest world size first.
std::vector<const SuiteRun*> scaling_runs(const SuiteRecord& suite, const std::string& workload,
                                          const std::string& mode) {
  std::vector<const SuiteRun*> out;
  for (const SuiteRun& r : suite.runs) {
    if (r.measured() && r.group == reports::RunGroup::Scaling && r.workload == workload &&
        r.mode == mode && r.variant.empty())
      out.push_back(&r);
  }
  std::sort(out.begin(), out.end(),
            [](const SuiteRun* a, const SuiteRun* b) { return a->world_size < b->world_size; });
  return out;
}

// The designs of the suite the projection models (Note [Gradient models]), in its order.
std::vector<const reports::DesignInfo*> projected_designs(const SuiteRecord& suite) {
  std::vector<const reports::DesignInfo*> out;
  for (const reports::DesignInfo* d : suite.parallel_designs())
    if (gradient_model(*d)) out.push_back(d);
  return out;
}

RunRecord run_record(const std::string& dir, const SuiteRun& run) {
  DDPB_USAGE_CHECK(run.record.has_value()) << run.id << " has no run record";
  return RunRecord::from_json(read_input((fs::path(dir) / *run.record).string()));
}

std::vector<reports::MeasuredPoint> measured_points(const SuiteRecord& suite,
                                                    const std::string& workload) {
  std::vector<reports::MeasuredPoint> out;
  for (const reports::DesignInfo* design : projected_designs(suite)) {
    const std::string& mode = design->name;
    for (const SuiteRun* r : scaling_runs(suite, workload, mode)) {
      out.push_back({mode, r->world_size, r->id, r->metrics->step_time_ms.median,
                     r->scaling ? r->scaling->weak_efficiency : std::nullopt});
    }
  }
  return out;
}

void read_context(ProjectionSource& s, const reports::RunContext& context) {
  s.cpu_cores = static_cast<int>(context.cpu_cores);
  s.cuda_devices = static_cast<int>(context.cuda_devices);
}

ProjectionSource suite_source(const std::string& name, const SuiteRecord& suite,
                              const std::string& dir) {
  ProjectionSource s;
  s.name = name;
  s.device = suite.suite.device.empty() ? "cpu" : suite.suite.device;
  read_context(s, suite.context);
  if (suite.comm_fit) s.fit = CommFit::from_json(*suite.comm_fit, name);
  if (suite.projection) s.validation = suite.projection->validation;
  for (const std::string& w : suite.suite.workloads) {
    ProjectionBasis b = suite_basis(suite, dir, w, false);
    if (b.designs.empty()) continue;
    s.measured.push_back(measured_points(suite, b.workload));
    s.bases.push_back(std::move(b));
  }
  DDPB_USAGE_CHECK(!s.bases.empty())
      << name << ": no successful run of a design whose gradients meet in an AllReduce or a "
      << "reduce to project from";
  return s;
}

ProjectionSource load_run_source(const std::string& path, const RunRecord& record) {
  ProjectionSource s;
  s.name = path;
  s.device = record.config.device.empty() ? "cpu" : record.config.device;
  read_context(s, record.context);
  ProjectionBasis b;
  b.workload = record.config.workload.empty() ? "?" : record.config.workload;
  b.designs.push_back(design_basis(record, record.design, path));
  read_compute_basis(b, record, std::nullopt);  // a run alone has no GEMM peak beside it
  s.bases.push_back(std::move(b));
  s.measured.emplace_back();
  return s;
}

}  // namespace

ProjectionBasis suite_basis(const SuiteRecord& suite, const std::string& dir,
                            const std::string& workload, bool world_size_1_only) {
  ProjectionBasis b;
  b.workload = workload;
  std::optional<PeakRate> suite_peak;
  if (suite.gemm_peak && suite.gemm_peak->flops_per_s > 0) {
    suite_peak = PeakRate{suite.gemm_peak->flops_per_s,
                          "the suite's measured GEMM peak on " + suite.gemm_peak->device};
  }
  const auto pick = [&](const reports::DesignInfo* design) -> const SuiteRun* {
    if (!design) return nullptr;
    const auto runs = scaling_runs(suite, workload, design->name);
    if (runs.empty()) return nullptr;
    if (world_size_1_only && runs.front()->world_size != 1) return nullptr;
    return runs.front();
  };
  for (const reports::DesignInfo* design : projected_designs(suite)) {
    if (const SuiteRun* r = pick(design)) {
      const RunRecord record = run_record(dir, *r);
      b.designs.push_back(design_basis(record, *design, r->id));
      read_compute_basis(b, record, suite_peak);
    }
  }
  if (const SuiteRun* r = pick(suite.reference_design()); r && r->world_size == 1)
    b.single_step_ms = r->metrics->step_time_ms.median;
  return b;
}

ProjectionSource suite_projection_source(const SuiteRecord& suite, const std::string& dir) {
  return suite_source(dir, suite, dir);
}

// A record of another schema version, as a usage error (the CLI's exit 2).
static void refuse_other_version(const json& record, const std::string& name) {
  try {
    reports::check_schema_version(record, name);
  } catch (const reports::ReportError& e) {
    throw UsageError(e.what());
  }
}

ProjectionSource load_projection_source(const std::string& path) {
  if (fs::is_directory(path)) {
    const fs::path file = fs::path(path) / "suite.json";
    DDPB_USAGE_CHECK(fs::exists(file)) << path << " is a folder without a suite.json";
    const json suite = read_input(file.string());
    refuse_other_version(suite, file.string());
    return suite_source(path, SuiteRecord::from_json(suite), path);
  }
  DDPB_USAGE_CHECK(fs::exists(path)) << path << ": no such file or folder";
  const json record = read_input(path);
  refuse_other_version(record, path);
  const std::string kind = record.is_object() ? record.value("kind", "") : "";
  if (kind == "suite") {
    const std::string dir = fs::path(path).parent_path().string();
    return suite_source(path, SuiteRecord::from_json(record), dir.empty() ? "." : dir);
  }
  DDPB_USAGE_CHECK(kind == "run") << path << ": neither a suite.json nor a run record";
  return load_run_source(path, RunRecord::from_json(record));
}

int measured_compute_slots(const ProjectionSource& source) {
  return source.device == "cuda" ? source.cuda_devices : source.cpu_cores;
}

Topology resolve_topology(const std::string& spec, const ProjectionSource& source) {
  if (spec == "measured") {
    if (source.fit) return measured_topology(*source.fit, measured_compute_slots(source));
    const bool nccl = source.device == "cuda" && source.cuda_devices >= 2;
    const CommFit fit = measure_comm_fit(nccl ? "nccl" : "gloo", source.device, {2},
                                         measured_compute_slots(source));
    return measured_topology(fit, measured_compute_slots(source));
  }
  if (spec.size() > 5 && spec.ends_with(".json")) {
    DDPB_USAGE_CHECK(fs::exists(spec)) << "--topology " << spec << ": no such file";
    return topology_from_json(read_input(spec), spec);
  }
  return topology_preset(spec);
}

// The presets of `workload`'s family, the memory fit's candidates (Note [Projected memory]);
// none for a workload this build does not know.
std::vector<FamilyPreset> family_presets(const std::string& workload) {
  const std::vector<WorkloadSpec> presets = workload_presets();
  const auto it = std::find_if(presets.begin(), presets.end(),
                               [&](const WorkloadSpec& p) { return p.name == workload; });
  std::vector<FamilyPreset> out;
  if (it == presets.end()) return out;
  for (const WorkloadSpec& p : presets)
    if (p.family == it->family) out.push_back({p.name, estimated_parameter_count(p)});
  return out;
}

reports::ProjectionRecord make_projection(const ProjectionSource& source, const Topology& topo,
                                          const std::vector<int>& devices,
                                          const ProjectionScale& scale) {
  DDPB_USAGE_CHECK(!devices.empty()) << "--devices: give at least one device count";
  for (int n : devices) {
    DDPB_USAGE_CHECK(n >= 1 && n <= (1 << 20)) << "--devices: " << n << " is not in 1..1048576";
    DDPB_USAGE_CHECK(topo.inter || n <= topo.node_size)
        << "topology " << topo.name << " holds " << topo.node_size << " devices; " << n
        << " need an inter-node link (for example " << topo.name << "+ib-ndr)";
  }
  reports::ProjectionRecord out;
  out.source = source.name;
  out.device = source.device;
  out.topology = topo.to_record();
  out.devices.assign(devices.begin(), devices.end());
  out.scale = {scale.per_device_batch, scale.target_flops_per_s};
  if (scale.device_memory_bytes > 0) out.scale.device_memory_bytes = scale.device_memory_bytes;
  out.validation = source.validation;
  for (const ProjectionBasis& b : source.bases) {
    for (const DesignBasis& d : b.designs)
      if (!reports::find_design(out.designs, d.design.name)) out.designs.push_back(d.design);
  }
  for (size_t i = 0; i < source.bases.size(); ++i) {
    ProjectionBasis b = source.bases[i];
    b.family_presets = family_presets(b.workload);
    out.workloads.push_back(project_workload(b, topo, devices, scale, source.measured[i]));
  }
  return out;
}

namespace {

reports::Nullable<double> median_of(std::vector<double> e) {
  if (e.empty()) return {};
  std::sort(e.begin(), e.end());
  const size_t m = e.size() / 2;
  return {e.size() % 2 ? e[m] : (e[m - 1] + e[m]) / 2};
}

}  // namespace

reports::ProjectionValidation validate_projection(const SuiteRecord& suite, const std::string& dir,
                                                  const Topology& measured) {
  reports::ProjectionValidation v{
      measured.name, "each workload's world-size-1 runs", {}, {}, {}, kValidationTolerance};
  std::map<std::string, std::vector<double>> errors;  // |error| by design name
  for (const reports::DesignInfo* d : projected_designs(suite)) errors[d->name];
  for (const std::string& w : suite.suite.workloads) {
    const ProjectionBasis b = suite_basis(suite, dir, w, true);
    for (const DesignBasis& d : b.designs) {
      const std::string& mode = d.design.name;
      for (const SuiteRun* r : scaling_runs(suite, w, mode)) {
        const int n = static_cast<int>(r->world_size);
        if (n <= 1) continue;
        const auto p = project_design(b, d, measured, n, {});
        if (!p) continue;
        const double got = r->metrics->step_time_ms.median;
        const double error = got > 0 ? p->step_ms / got - 1 : 0;
        errors[mode].push_back(std::fabs(error));
        v.runs.push_back({r->id, mode, n, got, p->step_ms, error, w});
      }
    }
  }
  for (const auto& [name, e] : errors) reports::put_named(v.median_abs_error, name, median_of(e));
  return v;
}

}  // namespace ddpb::bench
