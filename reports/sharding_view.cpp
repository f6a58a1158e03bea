#include "reports/sharding_view.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/text.h"
#include "reports/memory_model.h"
#include "reports/report_util.h"
#include "reports/svg_chart.h"

namespace ddpb::reports {
namespace {

// The categories of Note [Memory categories], in the order the chart stacks them.
constexpr const char* kPeakCategories[] = {"parameters",    "gradients",   "optimizer_state",
                                           "communication", "activations", "other"};

// One design's medians over its sharding rounds.
struct DesignCost {
  std::string design;
  int world_size = 0;
  std::vector<double> step_ms = {}, exposed_ms = {}, bus_bytes = {}, peak_bytes = {},
                      model_state_ratio = {};
  std::map<std::string, std::vector<double>> at_peak = {};  // rank 0's peak, by category
  // What the design promises of the model state at world_size (the last round's; the same in
  // every round), and its sum.
  std::optional<NamedValues<int64_t>> expected = {};

  double median_of(const std::vector<double>& v) const { return median(v).value_or(0); }
  double category(const std::string& name) const {
    const auto it = at_peak.find(name);
    return it == at_peak.end() ? 0.0 : median_of(it->second);
  }
};

double peak_per_rank(const RunMetrics& m) {
  if (m.rank_peak_memory_bytes && !m.rank_peak_memory_bytes->empty())
    return static_cast<double>(
        *std::max_element(m.rank_peak_memory_bytes->begin(), m.rank_peak_memory_bytes->end()));
  return static_cast<double>(m.peak_memory_bytes.value_or(0));
}

void add_round(DesignCost& c, const SuiteRun& r) {
  const RunMetrics& m = *r.metrics;
  c.world_size = static_cast<int>(r.world_size);
  c.step_ms.push_back(m.step_time_ms.median);
  c.exposed_ms.push_back(m.comm_exposed_ms.value_or(0));
  c.bus_bytes.push_back(m.gradient_bus_bytes_per_step.value_or(0));
  c.peak_bytes.push_back(peak_per_rank(m));
  if (!m.memory || m.memory->empty()) return;
  const MemoryUse& rank0 = m.memory->front();
  if (rank0.by_category)  // absent in an older record
    for (const auto& [name, bytes] : *rank0.by_category)
      c.at_peak[name].push_back(static_cast<double>(bytes));
  if (rank0.expected_by_category) c.expected = rank0.expected_by_category;
  if (rank0.ratio_by_category)
    c.model_state_ratio.push_back(named_value(*rank0.ratio_by_category, "model_state"));
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
    add_round(*it, r);
  }
  return out;
}

// The busiest rank's peak moved to `world` ranks: its model state replaced by what the
// formulas give there (Note [Model-state memory]); the rest (activations, buffers) kept.
std::optional<double> peak_at_world(const DesignCost& c, const DesignInfo& design, int world) {
  if (!c.expected || c.world_size <= 0) return std::nullopt;
  const NamedValues<int64_t> there = model_state_at_world(design, *c.expected, c.world_size, world);
  return c.median_of(c.peak_bytes) - static_cast<double>(total_bytes(*c.expected)) +
         static_cast<double>(total_bytes(there));
}

// "saves 41%" or "uses 12% more" ("save", "use" after "would").
std::string saving(double base, double other, bool would = false) {
  const double fraction = base > 0 ? 1.0 - other / base : 0.0;
  return fraction >= 0 ? (would ? "save " : "saves ") + format_percent(fraction)
                       : (would ? "use " : "uses ") + format_percent(-fraction) + " more";
}

std::string sentence(const std::string& workload, const DesignCost& base,
                     const DesignInfo& base_design, const DesignCost& c, const DesignInfo& design) {
  const double base_step = base.median_of(base.step_ms),
               base_peak = base.median_of(base.peak_bytes);
  if (base_peak <= 0)  // an older record without memory
    return fmt::format("{}: {} steps in {:.2f}x {}'s time.", printable(workload), design.label,
                       base_step > 0 ? c.median_of(c.step_ms) / base_step : 0.0, base_design.label);
  // "saves 41.0% of memory" or "uses 12.0% more memory".
  const std::string memory = saving(base_peak, c.median_of(c.peak_bytes));
  std::string out =
      fmt::format("{}: {} {} memory per rank at {:.2f}x {}'s step", printable(workload),
                  design.label, memory.starts_with("saves") ? memory + " of" : memory,
                  base_step > 0 ? c.median_of(c.step_ms) / base_step : 0.0, base_design.label);
  const int world = c.world_size < 8 ? 8 : 64;
  const auto base_there = peak_at_world(base, base_design, world);
  const auto there = peak_at_world(c, design, world);
  if (base_there && there)
    out += fmt::format("; at {} ranks it would {}", world, saving(*base_there, *there, true));
  return out + ".";
}

std::vector<std::string> row_of(const std::string& workload, const DesignInfo& design,
                                const DesignCost& c, double base_step) {
  const double step = c.median_of(c.step_ms);
  const auto ratio = median(c.model_state_ratio);
  return {printable(workload),
          printable(design.label),
          format_number(step),
          format_number(base_step > 0 ? step / base_step : 0.0) + "x",
          format_number(c.median_of(c.exposed_ms)),
          format_bytes(c.median_of(c.bus_bytes)),
          format_bytes(c.median_of(c.peak_bytes)),
          format_bytes(c.category("parameters")),
          format_bytes(c.category("gradients")),
          format_bytes(c.category("optimizer_state")),
          ratio ? format_number(*ratio) + "x" : "n/a",
          std::to_string(c.step_ms.size())};
}

// Per workload, a bar per design: rank 0's peak stacked by category, in MiB.
ChartView memory_chart(const SuiteRecord& suite,
                       const std::map<std::string, std::vector<DesignCost>>& costs) {
  ChartView v{"sharding-memory",
              "sharding_memory",
              "Memory per rank by category",
              "Each bar is rank 0's peak memory (of the measured steps), stacked by what it "
              "held (docs/metrics.md, \"Memory by category\").",
              {},
              "No sharding runs."};
  for (const auto& [workload, designs] : costs) {
    svg::BarChart chart{workload + ": memory per rank at the peak",
                        "MiB",
                        {std::begin(kPeakCategories), std::end(kPeakCategories)},
                        {}};
    svg::BarGroup group{"", {}};
    for (const DesignCost& c : designs) {
      svg::Bar bar{suite.design_named(c.design).label, {}};
      for (size_t k = 0; k < std::size(kPeakCategories); ++k)
        bar.segments.emplace_back(k, c.category(kPeakCategories[k]) / (1 << 20));
      group.bars.push_back(std::move(bar));
    }
    chart.groups.push_back(std::move(group));
    v.svgs.push_back(svg::render_bar_chart(chart));
  }
  return v;
}

// Note [The three-way verdict]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Per workload, the sharding group answers three questions at once: which design is fastest,
// which needs the least memory per rank (and at what step), and how large a model each would
// fit on one device at scale. The last comes from the formulas alone (Note [Model-state
// memory]): the base design's promise gives Ψ (its unsharded parameters are 4Ψ) and the
// optimizer's K; each design's bytes per parameter at kFitRanks ranks divide kFitDevice. The
// model state only: activations and buffers come on top, so the figure is an upper bound,
// and the sentence says so.
constexpr int kFitRanks = 64;
constexpr double kFitDevice = 80.0 * (1 << 30);  // an 80 GiB device (H100, A100-80GB)

// Bytes of model state per parameter under `design` at `world` ranks, with K optimizer bytes.
double bytes_per_parameter(const DesignInfo& design, int world, double k) {
  const auto share = [&](bool sharded, double bytes) { return sharded ? bytes / world : bytes; };
  return share(design.shards_parameters, 4.0) + share(design.shards_gradients, 4.0) +
         share(design.shards_optimizer_state, k);
}

// "1.2B", "350M": a parameter count.
std::string parameter_count(double n) {
  if (n >= 1e9) return fmt::format("{:.1f}B", n / 1e9);
  return fmt::format("{:.0f}M", n / 1e6);
}

std::optional<std::string> fit_clause(const SuiteRecord& suite, const DesignCost& base,
                                      const DesignInfo& base_design,
                                      const std::vector<DesignCost>& designs) {
  if (!base.expected || base_design.shards_parameters) return std::nullopt;
  const double psi = static_cast<double>(named_value(*base.expected, "parameters")) / 4.0;
  if (psi <= 0) return std::nullopt;
  double k = static_cast<double>(named_value(*base.expected, "optimizer_state")) / psi;
  if (base_design.shards_optimizer_state) k *= base.world_size;
  std::vector<std::string> parts;
  for (const DesignCost& c : designs) {
    const DesignInfo d = suite.design_named(c.design);
    parts.push_back(parameter_count(kFitDevice / bytes_per_parameter(d, kFitRanks, k)) +
                    " parameters under " + d.label);
  }
  return fmt::format("on an 80 GiB device at {} ranks the model state alone leaves room for {}",
                     kFitRanks, join_list(parts, "and"));
}

// The lead sentence of Note [The three-way verdict].
std::optional<std::string> three_way(const SuiteRecord& suite, const std::string& workload,
                                     const std::vector<DesignCost>& designs) {
  if (designs.size() < 2) return std::nullopt;
  const auto by = [](auto key) {
    return [key](const DesignCost& a, const DesignCost& b) { return key(a) < key(b); };
  };
  const DesignCost& fastest =
      *std::min_element(designs.begin(), designs.end(),
                        by([](const DesignCost& c) { return c.median_of(c.step_ms); }));
  // A design whose record has no memory (an older one: peak 0) is never the leanest.
  const DesignCost& leanest =
      *std::min_element(designs.begin(), designs.end(), by([](const DesignCost& c) {
                          const double peak = c.median_of(c.peak_bytes);
                          return peak > 0 ? peak : std::numeric_limits<double>::infinity();
                        }));
  const DesignInfo fast = suite.design_named(fastest.design),
                   lean = suite.design_named(leanest.design);
  const double step = fastest.median_of(fastest.step_ms);
  std::string out = fmt::format("{} at {} ranks: {} is fastest ({} ms a step)", printable(workload),
                                fastest.world_size, fast.label, format_number(step));
  if (&leanest == &fastest) {
    out += " and needs the least memory per rank";
  } else if (leanest.median_of(leanest.peak_bytes) > 0) {
    out += fmt::format("; {} needs the least memory per rank, {} less than {}, at {:.2f}x the step",
                       lean.label,
                       format_percent(1.0 - leanest.median_of(leanest.peak_bytes) /
                                                fastest.median_of(fastest.peak_bytes)),
                       fast.label, step > 0 ? leanest.median_of(leanest.step_ms) / step : 0.0);
  }
  const DesignCost& base = designs.front();
  if (auto fit = fit_clause(suite, base, suite.design_named(base.design), designs))
    out += "; " + *fit + " (an upper bound: activations come on top)";
  return out + ".";
}

}  // namespace

std::vector<std::string> sharding_sentences(const SuiteRecord& suite, const std::string& workload) {
  std::vector<std::string> out;
  const auto costs = costs_of(suite);
  const auto it = costs.find(workload);
  if (it == costs.end()) return out;
  if (auto lead = three_way(suite, workload, it->second)) out.push_back(std::move(*lead));
  const DesignCost& base = it->second.front();
  const DesignInfo base_design = suite.design_named(base.design);
  for (const DesignCost& c : it->second)
    if (&c != &base)
      out.push_back(sentence(workload, base, base_design, c, suite.design_named(c.design)));
  return out;
}

ReportSection build_sharding_section(const SuiteRecord& suite) {
  ReportSection s;
  s.id = "sharding";
  s.heading = "Sharding";
  SectionTable t{"sharding-table",
                 "DDP, its ZeRO stages and FSDP's strategies on one workload at the largest world "
                 "size, medians "
                 "over alternated rounds: the step, the communication left exposed, the bytes "
                 "the gradients' collectives put on the wire a step (docs/metrics.md), the "
                 "peak memory of the busiest rank, and what rank 0's peak held of the model "
                 "state against its design's formula.",
                 {}};
  t.table.header = {"workload",
                    "design",
                    "step ms",
                    "vs first",
                    "exposed comm ms",
                    "gradient bytes on the wire",
                    "peak memory per rank",
                    "of it parameters",
                    "of it gradients",
                    "of it optimizer state",
                    "model state vs formula",
                    "rounds"};
  const auto costs = costs_of(suite);
  for (const auto& [workload, designs] : costs) {
    const double base_step = designs.front().median_of(designs.front().step_ms);
    for (const DesignCost& c : designs) {
      t.table.rows.push_back(row_of(workload, suite.design_named(c.design), c, base_step));
      t.table.bad.push_back(false);
    }
    for (std::string& p : sharding_sentences(suite, workload)) s.paragraphs.push_back(std::move(p));
  }
  if (t.table.rows.empty()) {
    s.notes.push_back(
        "No sharding runs (group \"sharding\": a suite's sharding_rounds, with DDP in its modes "
        "and a largest world size above 1) in this record.");
    return s;
  }
  s.notes.push_back(
      "Peak memory is the busiest rank's, over the measured steps; the categories are what "
      "rank 0's peak held (docs/metrics.md, \"Memory by category\"). \"Model state vs formula\" "
      "is its parameters, gradients and optimizer state over what the design promises "
      "(Note [Model-state memory]): above 1 under ZeRO-2 by the buckets in flight. The "
      "projection to more ranks keeps the measured activations and moves the model state by "
      "the formulas.");
  s.tables.push_back(std::move(t));
  s.charts.push_back(memory_chart(suite, costs));
  return s;
}

}  // namespace ddpb::reports
