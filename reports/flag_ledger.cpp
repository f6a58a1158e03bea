#include "reports/flag_ledger.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <map>

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

FlagCost price(DdpFlag flag, const std::vector<std::pair<const SuiteRun*, const SuiteRun*>>& pairs,
               double default_ms) {
  FlagCost c;
  c.flag = flag;
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
  c.why = flag_mechanism(flag);
  return c;
}

}  // namespace

std::string flag_mechanism(DdpFlag flag) {
  switch (flag) {
    case DdpFlag::Default:
      return "DDP's defaults: the A run of every pair";
    case DdpFlag::FindUnusedParameters:
      return "walks the autograd graph from the loss every step to mark the parameters that "
             "get no gradient";
    case DdpFlag::StaticGraph:
      return "the first step learns the graph; no search for unused parameters after it, "
             "buckets rebuilt once in the order gradients became ready";
    case DdpFlag::NoBroadcastBuffers:
      return "skips broadcasting rank 0's buffers (BatchNorm statistics) before every forward; "
             "nothing changes for a model without buffers";
    case DdpFlag::GradientAsBucketView:
      return "gradients live in the buckets: no copy into them, one copy of the gradients less "
             "in memory";
    case DdpFlag::SyncBatchNorm:
      return "BatchNorm statistics over the global batch: collectives in every BatchNorm "
             "layer's forward and backward, which wait for every rank";
    case DdpFlag::NoSyncK4:
      return "four micro-batches of a quarter each, the first three under no_sync: one "
             "AllReduce per step as before, smaller GEMMs";
    case DdpFlag::FirstBucketAtCap:
      return "no small first bucket: the first AllReduce waits for a whole bucket of "
             "gradients instead of 1 MB";
    case DdpFlag::OneBucket:
      return "every gradient in one bucket: nothing is sent until backward ends, so no "
             "communication overlaps it";
    case DdpFlag::Fp16Hook:
      return "gradients cast to fp16 before the AllReduce: half the bytes, two casts per bucket";
    case DdpFlag::Bf16Hook:
      return "gradients cast to bf16 before the AllReduce: half the bytes, two casts per bucket";
    case DdpFlag::PowerSgdHook:
      return "rank-1 PowerSGD: matrices sent as two thin factors, at the price of the "
             "factors' GEMMs and orthogonalisation";
    case DdpFlag::CpuThreadsAll:
      return "every core's worth of BLAS threads in each rank (PyTorch's default) against one: "
             "ranks that share cores oversubscribe them";
  }
  return "";
}

namespace {

// Group "flags" runs of one workload and world size: round -> default run, and flag -> (round
// -> run).
struct FlagRuns {
  std::map<int64_t, const SuiteRun*> defaults;
  std::map<DdpFlag, std::map<int64_t, const SuiteRun*>> variants;
};

FlagLedger ledger_of(const FlagRuns& runs) {
  FlagLedger ledger;
  const SuiteRun& first = *runs.defaults.begin()->second;
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
  std::vector<std::pair<std::string, int64_t>> order;  // (workload, world size), first seen
  std::map<std::pair<std::string, int64_t>, FlagRuns> groups;
  for (const SuiteRun& r : suite.runs) {
    if (r.group != RunGroup::Flags || !r.flag || !r.repeat || !r.measured()) continue;
    const auto key = std::pair{r.workload, r.world_size};
    if (!groups.count(key)) order.push_back(key);
    FlagRuns& g = groups[key];
    (*r.flag == DdpFlag::Default ? g.defaults[*r.repeat] : g.variants[*r.flag][*r.repeat]) = &r;
  }
  std::vector<FlagLedger> out;
  for (const auto& key : order) {
    const FlagRuns& g = groups.at(key);
    if (!g.defaults.empty()) out.push_back(ledger_of(g));
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

}  // namespace

ReportSection build_flag_ledger_section(const SuiteRecord& suite) {
  ReportSection s;
  s.id = "flag-ledger";
  s.heading = "What each DDP flag costs";
  const auto ledgers = flag_ledgers(suite);
  for (const FlagLedger& ledger : ledgers) {
    if (ledger.rows.empty()) continue;
    s.notes.push_back(fmt::format(
        "{} with DDP at {} ranks: each flag against DDP's defaults in {} alternated round{} "
        "(default step {} ms).",
        printable(ledger.workload), ledger.world_size, ledger.rounds, ledger.rounds == 1 ? "" : "s",
        format_number(ledger.default_ms)));
    SectionTable t{s.tables.empty() ? "flag-ledger-table"
                                    : fmt::format("flag-ledger-table-{}", s.tables.size() + 1),
                   fmt::format("{} at {} ranks. Δ step: the median over rounds of the flag's "
                               "median step minus its round's default, ± the noise; Δ peak "
                               "memory and Δ bytes per step from the same pairs.",
                               printable(ledger.workload), ledger.world_size),
                   {}};
    t.table.header = {"flag", "Δ step", "Δ peak memory", "Δ bytes/step", "why"};
    for (const FlagCost& c : ledger.rows) {
      t.table.rows.push_back({std::string(enum_name(c.flag)), step_cell(c),
                              signed_bytes(c.delta_peak_bytes), signed_bytes(c.delta_comm_bytes),
                              c.why});
      t.table.bad.push_back(false);
    }
    s.tables.push_back(std::move(t));
  }
  if (s.tables.empty()) {
    s.notes.push_back(
        "No flag pairs in this record (the suite's group \"flags\": a full suite with DDP at "
        "two or more ranks).");
    return s;
  }
  s.notes.push_back(
      "A flag whose difference is within its noise is shown as such and never ranked (Note "
      "[Flag ledger] in reports/flag_ledger.h).");
  return s;
}

}  // namespace ddpb::reports
