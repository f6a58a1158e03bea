#include "reports/sharding_view.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "reports/report_util.h"

namespace ddpb::reports {
namespace {

// One design's medians over its sharding rounds.
struct DesignCost {
  std::string design;
  std::vector<double> step_ms = {}, exposed_ms = {}, bus_bytes = {}, peak_bytes = {},
                      gradients = {}, optimizer_state = {};
};

// What rank 0's peak held in `category` (Note [Memory categories]); 0 in an older record.
double at_peak(const RunMetrics& m, const char* category) {
  if (!m.memory || m.memory->empty() || !m.memory->front().by_category) return 0;
  return static_cast<double>(named_value(*m.memory->front().by_category, category));
}

double peak_per_rank(const RunMetrics& m) {
  if (m.rank_peak_memory_bytes && !m.rank_peak_memory_bytes->empty())
    return static_cast<double>(
        *std::max_element(m.rank_peak_memory_bytes->begin(), m.rank_peak_memory_bytes->end()));
  return static_cast<double>(m.peak_memory_bytes.value_or(0));
}

// Per workload, the designs in the order their first round ran (the suite's DDP first).
std::map<std::string, std::vector<DesignCost>> costs_of(const SuiteRecord& suite) {
  std::map<std::string, std::vector<DesignCost>> out;
  for (const SuiteRun& r : suite.runs) {
    if (r.group != RunGroup::Sharding || !r.measured()) continue;
    std::vector<DesignCost>& designs = out[r.workload];
    auto it = std::find_if(designs.begin(), designs.end(),
                           [&](const DesignCost& c) { return c.design == r.mode; });
    if (it == designs.end()) it = designs.insert(designs.end(), DesignCost{r.mode});
    const RunMetrics& m = *r.metrics;
    it->step_ms.push_back(m.step_time_ms.median);
    it->exposed_ms.push_back(m.comm_exposed_ms.value_or(0));
    it->bus_bytes.push_back(m.gradient_bus_bytes_per_step.value_or(0));
    it->peak_bytes.push_back(peak_per_rank(m));
    it->gradients.push_back(at_peak(m, "gradients"));
    it->optimizer_state.push_back(at_peak(m, "optimizer_state"));
  }
  return out;
}

// "ZeRO-2 steps in 1.08x DDP's time with 59% of its peak memory per rank."
std::string sentence(const std::string& workload, const DesignInfo& base, double base_step,
                     double base_peak, const DesignInfo& design, double step, double peak) {
  return fmt::format("{}: {} steps in {:.2f}x {}'s time with {} of its peak memory per rank.",
                     printable(workload), design.label, step / base_step, base.label,
                     format_percent(base_peak > 0 ? peak / base_peak : 0.0));
}

}  // namespace

ReportSection build_sharding_section(const SuiteRecord& suite) {
  ReportSection s;
  s.id = "sharding";
  s.heading = "Sharding";
  SectionTable t{"sharding-table",
                 "DDP and its ZeRO stages on one workload at the largest world size, medians "
                 "over alternated rounds: the step, the communication left exposed, the bytes "
                 "the gradients' collectives put on the wire a step (docs/metrics.md), and the "
                 "peak memory of the busiest rank.",
                 {}};
  t.table.header = {"workload",
                    "design",
                    "step ms",
                    "vs first",
                    "exposed comm ms",
                    "gradient bytes on the wire",
                    "peak memory per rank",
                    "of it gradients",
                    "of it optimizer state",
                    "rounds"};
  const auto costs = costs_of(suite);
  for (const auto& [workload, designs] : costs) {
    const DesignCost& base = designs.front();
    const double base_step = median(base.step_ms).value_or(0);
    const double base_peak = median(base.peak_bytes).value_or(0);
    for (const DesignCost& c : designs) {
      const double step = median(c.step_ms).value_or(0);
      const double peak = median(c.peak_bytes).value_or(0);
      const DesignInfo design = suite.design_named(c.design);
      t.table.rows.push_back(
          {printable(workload), printable(design.label), format_number(step),
           format_number(base_step > 0 ? step / base_step : 0.0) + "x",
           format_number(median(c.exposed_ms)), format_bytes(median(c.bus_bytes)),
           format_bytes(peak), format_bytes(median(c.gradients)),
           format_bytes(median(c.optimizer_state)), std::to_string(c.step_ms.size())});
      t.table.bad.push_back(false);
      if (&c != &base)
        s.paragraphs.push_back(sentence(workload, suite.design_named(base.design), base_step,
                                        base_peak, design, step, peak));
    }
  }
  if (t.table.rows.empty()) {
    s.notes.push_back(
        "No sharding runs (group \"sharding\": a suite's sharding_rounds, with DDP in its modes "
        "and a largest world size above 1) in this record.");
    return s;
  }
  s.notes.push_back(
      "Peak memory is the busiest rank's; the gradients and optimizer state are what rank 0's "
      "peak held of them (docs/metrics.md, \"Memory by category\"). The stages keep DDP's "
      "full gradient buckets, so only the optimizer state is sharded yet.");
  s.tables.push_back(std::move(t));
  return s;
}

}  // namespace ddpb::reports
