#include "reports/flag_ledger.h"

#include <fmt/core.h>
#include "base/text.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <tuple>

#include "reports/report_util.h"

namespace ddpb::reports {
namespace {

// The median, 0 for none.
double median_of(std::vector<double> v) {
  return median(std::move(v)).value_or(0);
}

// The standard error of one run's median step, from its own step-to-step spread.
double step_error_sq(const StepTimeStats& s) {
  return s.count > 0 ? s.stddev * s.stddev / static_cast<double>(s.count) : 0;
}

std::optional<double> comm_bytes(const SuiteRun& r) {
  const auto& b = r.metrics->comm_bytes_per_step;
  return b ? std::optional(static_cast<double>(*b)) : std::nullopt;
}

// The median of the paired differences of an optional quantity, when every pair has it.
std::optional<double> paired_delta(
    const std::vector<std::pair<const SuiteRun*, const SuiteRun*>>& p,
    std::optional<double> (*value)(const SuiteRun&)) {
  std::vector<double> d;
  for (const auto& [a, b] : p) {
    const auto va = value(*a), vb = value(*b);
    if (!va || !vb) return std::nullopt;
    d.push_back(*vb - *va);
  }
  return d.empty() ? std::nullopt : std::optional(median_of(d));
}

FlagCost price(const FlagInfo& flag,
               const std::vector<std::pair<const SuiteRun*, const SuiteRun*>>& pairs,
               double default_ms) {
  FlagCost c;
  c.flag = flag.name;
  c.pairs = static_cast<int64_t>(pairs.size());
  std::vector<double> d, error;
  for (const auto& [a, b] : pairs) {
    d.push_back(b->metrics->step_time_ms.median - a->metrics->step_time_ms.median);
    error.push_back(std::sqrt(step_error_sq(a->metrics->step_time_ms) +
                              step_error_sq(b->metrics->step_time_ms)));
  }
  c.delta_ms = median_of(d);
  const auto [lo, hi] = std::minmax_element(d.begin(), d.end());
  c.noise_ms = std::max((*hi - *lo) / 2, 2 * median_of(error));
  c.inside_noise = std::abs(c.delta_ms) <= c.noise_ms;
  c.delta_fraction = default_ms > 0 ? c.delta_ms / default_ms : 0;
  c.delta_peak_bytes = paired_delta(pairs, run_peak_memory);
  c.delta_comm_bytes = paired_delta(pairs, comm_bytes);
  c.why = flag.mechanism;
  return c;
}

// Group "flags" runs of one design, workload and world size: round -> default run, and per
// flag in the order of its first run, its record (name and mechanism) and round -> run.
struct FlagRuns {
  std::map<int64_t, const SuiteRun*> defaults;
  std::vector<std::pair<FlagInfo, std::map<int64_t, const SuiteRun*>>> variants;

  void add(const SuiteRun& r) {
    if (r.flag->is_default()) {
      defaults[*r.repeat] = &r;
      return;
    }
    auto it = std::find_if(variants.begin(), variants.end(),
                           [&](const auto& v) { return v.first.name == r.flag->name; });
    if (it == variants.end()) {
      variants.push_back({*r.flag, {}});
      it = std::prev(variants.end());
    }
    it->second[*r.repeat] = &r;
  }
};

FlagLedger ledger_of(const SuiteRecord& suite, const FlagRuns& runs) {
  FlagLedger ledger;
  const SuiteRun& first = *runs.defaults.begin()->second;
  ledger.design = suite.design_of(first);
  ledger.workload = first.workload;
  ledger.world_size = first.world_size;
  ledger.rounds = static_cast<int64_t>(runs.defaults.size());
  std::vector<double> default_ms;
  for (const auto& [round, run] : runs.defaults)
    default_ms.push_back(run->metrics->step_time_ms.median);
  ledger.default_ms = median_of(default_ms);
  for (const auto& [flag, rounds] : runs.variants) {
    std::vector<std::pair<const SuiteRun*, const SuiteRun*>> pairs;
    for (const auto& [round, run] : rounds) {
      if (const auto d = runs.defaults.find(round); d != runs.defaults.end())
        pairs.emplace_back(d->second, run);
    }
    if (!pairs.empty()) ledger.rows.push_back(price(flag, pairs, ledger.default_ms));
  }
  // Outside the noise first, by the size of the effect; inside it after, in flag order.
  std::stable_sort(ledger.rows.begin(), ledger.rows.end(),
                   [](const FlagCost& a, const FlagCost& b) {
                     if (a.inside_noise != b.inside_noise) return !a.inside_noise;
                     return !a.inside_noise && std::abs(a.delta_ms) > std::abs(b.delta_ms);
                   });
  return ledger;
}

}  // namespace

std::vector<FlagLedger> flag_ledgers(const SuiteRecord& suite) {
  using Key = std::tuple<std::string, std::string, int64_t>;  // design, workload, world size
  std::vector<Key> order;                                     // first seen
  std::map<Key, FlagRuns> groups;
  for (const SuiteRun& r : suite.runs) {
    if (r.group != RunGroup::Flags || !r.flag || !r.repeat || !r.measured()) continue;
    const Key key{r.mode, r.workload, r.world_size};
    if (!groups.count(key)) order.push_back(key);
    groups[key].add(r);
  }
  std::vector<FlagLedger> out;
  for (const Key& key : order) {
    const FlagRuns& g = groups.at(key);
    if (!g.defaults.empty()) out.push_back(ledger_of(suite, g));
  }
  return out;
}

namespace {

std::string signed_bytes(std::optional<double> delta) {
  if (!delta) return "-";
  if (*delta == 0) return "0";
  return fmt::format("{}{}", *delta > 0 ? "+" : "-", format_bytes(std::abs(*delta)));
}

std::string step_cell(const FlagCost& c) {
  if (c.inside_noise) return fmt::format("inside the noise (±{} ms)", format_number(c.noise_ms));
  return fmt::format("{}{} ± {} ms ({}{})", c.delta_ms > 0 ? "+" : "", format_number(c.delta_ms),
                     format_number(c.noise_ms), c.delta_fraction > 0 ? "+" : "",
                     format_percent(c.delta_fraction));
}

// "DDP", "DDP and ToyDDP": the labels of the designs whose flags the ledgers price.
std::string ledger_labels(const std::vector<FlagLedger>& ledgers) {
  std::vector<std::string> labels;
  for (const FlagLedger& l : ledgers) {
    const std::string label = printable(l.design.label);
    if (!l.rows.empty() && std::find(labels.begin(), labels.end(), label) == labels.end())
      labels.push_back(label);
  }
  return join_list(labels);
}

// One ledger's table, headed by its design's label; `index` from 0 makes the id unique.
SectionTable ledger_table(const FlagLedger& ledger, size_t index) {
  const std::string label = printable(ledger.design.label);
  const std::string at = fmt::format("{} {}{}", ledger.world_size, printable(ledger.design.noun),
                                     ledger.world_size == 1 ? "" : "s");
  SectionTable t{index == 0 ? "flag-ledger-table" : fmt::format("flag-ledger-table-{}", index + 1),
                 fmt::format("{}: {} at {}. Δ step: the median over rounds of the flag's median "
                             "step minus its round's default, ± the noise; Δ peak memory and Δ "
                             "bytes per step from the same pairs.",
                             label, printable(ledger.workload), at),
                 {}};
  t.table.header = {"flag", "Δ step", "Δ peak memory", "Δ bytes/step", "why"};
  for (const FlagCost& c : ledger.rows) {
    t.table.rows.push_back({printable(c.flag), step_cell(c), signed_bytes(c.delta_peak_bytes),
                            signed_bytes(c.delta_comm_bytes), printable(c.why)});
    t.table.bad.push_back(false);
  }
  return t;
}

}  // namespace

// Note [Flag ledger] prices; this section says which design each ledger is of, by the label
// its row in the record gives (Note [Designs in records]), so that a design's flags read under
// its own name and never under another's.
ReportSection build_flag_ledger_section(const SuiteRecord& suite) {
  ReportSection s;
  s.id = "flag-ledger";
  const auto ledgers = flag_ledgers(suite);
  const std::string labels = ledger_labels(ledgers);
  s.heading = labels.empty() ? "What each flag costs" : "What each " + labels + " flag costs";
  for (const FlagLedger& ledger : ledgers) {
    if (ledger.rows.empty()) continue;
    const std::string label = printable(ledger.design.label);
    s.notes.push_back(fmt::format(
        "{} with {} at {} {}{}: each flag against {}'s defaults in {} alternated round{} "
        "(default step {} ms).",
        printable(ledger.workload), label, ledger.world_size, printable(ledger.design.noun),
        ledger.world_size == 1 ? "" : "s", label, ledger.rounds, ledger.rounds == 1 ? "" : "s",
        format_number(ledger.default_ms)));
    s.tables.push_back(ledger_table(ledger, s.tables.size()));
  }
  if (s.tables.empty()) {
    s.notes.push_back(
        "No flag pairs in this record (the suite's group \"flags\", which a full suite runs at "
        "two or more ranks).");
    return s;
  }
  s.notes.push_back(
      "A flag whose difference is within its noise is shown as such and never ranked (Note "
      "[Flag ledger] in reports/flag_ledger.h).");
  return s;
}

}  // namespace ddpb::reports
