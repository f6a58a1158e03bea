#include "reports/verdict.h"

#include <fmt/core.h>
#include "base/text.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string_view>

#include "reports/critical_path_view.h"
#include "reports/loader_view.h"
#include "reports/report_util.h"
#include "reports/sharding_view.h"

namespace ddpb::reports {
namespace {

// Note [Verdict shares]
// The bottleneck rules compare a phase kind's share of its run's median step with one
// threshold, kShare: a fifth of the step is where removing the kind entirely would speed the
// step up by 25%, large enough to name and small enough that the named kind is the one worth
// attacking first. The machine rule is about efficiency instead: below kMachineEfficiency of
// ideal weak scaling, with at least as many CPU ranks as cores, no design can scale.
constexpr double kShare = 0.2;
constexpr double kMachineEfficiency = 0.8;

// Note [Input-bound rule]
// A run is input-bound on rank R when R's median wait for its next batch (the data phase:
// the training thread blocked in the loader's next()) is at least kInputShare of its median
// step, the share the TensorBoard profiler's "DataLoader" rule used. The counterfactual "step
// time if input were free" is the step minus that exposed wait: what the step would take with
// a loader that always had the batch ready. The advice names what the record says could help:
// more workers when fewer than the cores, page-locked memory on CUDA, u8 images normalized on
// the device for image folders on CUDA, and the loader's own capacity against what training
// asks of it.
constexpr double kInputShare = 0.05;

// The kinds of Note [Phase kinds], in the order the verdict states them; a record's kind
// outside them follows in its own order.
constexpr std::string_view kKindOrder[] = {"data", "compute", "communication", "wait", "host"};

// The runs here are ok with metrics (scaling_run and the sweep's candidates check it); a run
// without metrics reads as a zero step.
double median_ms(const SuiteRun& run) {
  return run.metrics ? run.metrics->step_time_ms.median : 0;
}
double stddev_ms(const SuiteRun& run) {
  return run.metrics ? run.metrics->step_time_ms.stddev : 0;
}
template <typename T>
std::optional<T> metric(const SuiteRun* run, std::optional<T> RunMetrics::*field) {
  return run && run->metrics ? (*run->metrics).*field : std::nullopt;
}
double weak_efficiency(const SuiteRun* run) {
  return run && run->scaling ? run->scaling->weak_efficiency.value_or(0) : 0;
}

// The phase medians of `run` whose record gives them `kind`, in step order.
std::vector<PhaseMedian> phases_of_kind(const SuiteRun& run, std::string_view kind) {
  std::vector<PhaseMedian> out;
  if (!run.metrics || !run.metrics->phases_median_ms) return out;
  for (const PhaseMedian& p : *run.metrics->phases_median_ms)
    if (p.kind == kind) out.push_back(p);
  return out;
}

double kind_ms(const SuiteRun& run, std::string_view kind) {
  double sum = 0;
  for (const PhaseMedian& p : phases_of_kind(run, kind)) sum += p.median_ms;
  return sum;
}

// "scatter, replicate and reduce".
std::string listed_phases(const std::vector<PhaseMedian>& phases) {
  std::vector<std::string> names;
  for (const PhaseMedian& p : phases) names.push_back(p.phase);
  return join_list(names);
}

// "DP and DDP", "DP, DDP and ToyDDP" (or "or").
std::string labels_of(const std::vector<Contender>& designs, std::string_view conjunction = "and") {
  std::vector<std::string> labels;
  for (const Contender& c : designs) labels.push_back(c.design.label);
  return join_list(labels, conjunction);
}

// The ok scaling-group run of `mode` for workload `w` at world size `n` (no variant).
const SuiteRun* scaling_run(const SuiteRecord& suite, const std::string& w, const std::string& mode,
                            int n) {
  for (const SuiteRun& r : suite.runs) {
    if (r.measured() && r.group == RunGroup::Scaling && r.workload == w && r.mode == mode &&
        r.world_size == n && r.variant.empty())
      return &r;
  }
  return nullptr;
}

// Note [The verdict's designs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The verdict compares the parallel designs the record describes (suite.designs, trait
// parallel) that have a scaling run above one device, failed or not, in the record's order:
// those are its columns, and a design's label, traits and phase kinds come from its row, never
// from its name. At one workload and world size the contenders are those designs with their
// measured run there; ranked by median step, the first is the best and the second the
// runner-up (Note [Factors from rounds] decides whether the gap between them is one).
std::vector<DesignInfo> verdict_designs(const SuiteRecord& suite) {
  std::vector<DesignInfo> out;
  for (const DesignInfo* d : suite.parallel_designs()) {
    for (const SuiteRun& r : suite.runs) {
      if (r.group == RunGroup::Scaling && r.mode == d->name && r.world_size > 1) {
        out.push_back(*d);
        break;
      }
    }
  }
  return out;
}

// Every verdict design at (w, n), with its measured scaling run there or null.
std::vector<Contender> contenders_at(const SuiteRecord& suite, const std::string& w, int n) {
  std::vector<Contender> out;
  for (DesignInfo& d : verdict_designs(suite)) {
    const SuiteRun* run = scaling_run(suite, w, d.name, n);
    out.push_back({std::move(d), run});
  }
  return out;
}

// The contenders with a measured step, shortest median first (record order on equal medians).
std::vector<Contender> by_median_step(std::vector<Contender> designs) {
  std::erase_if(designs, [](const Contender& c) { return !c.run || median_ms(*c.run) <= 0; });
  std::stable_sort(designs.begin(), designs.end(), [](const Contender& a, const Contender& b) {
    return median_ms(*a.run) < median_ms(*b.run);
  });
  return designs;
}

// Same workload, world size and design as `run`, in `group`, ok.
std::vector<const SuiteRun*> companions(const SuiteRecord& suite, const SuiteRun& run,
                                        RunGroup group) {
  std::vector<const SuiteRun*> out;
  for (const SuiteRun& r : suite.runs) {
    if (r.measured() && r.group == group && r.workload == run.workload &&
        r.world_size == run.world_size && r.mode == run.mode)
      out.push_back(&r);
  }
  return out;
}

std::string ms(double v) {
  return format_number(v) + " ms";
}

// "12.3 ± 0.4 ms".
std::string step_cell(const SuiteRun* run) {
  if (!run) return "did not run";
  return format_number(median_ms(*run)) + " ± " + format_number(stddev_ms(*run)) + " ms";
}

enum class Outcome { Missing, Ranked, Tie, CannotRank };

// The best design against the runner-up at one workload and world size.
struct Comparison {
  Outcome outcome = Outcome::Missing;  // Missing: fewer than two designs measured
  Contender best = {}, runner_up = {};
  size_t measured = 0;  // how many designs were measured there
  std::string by;       // the gap, or why there is none
  // The best design's factor (the runner-up's step over the best's): the median over the
  // rounds and their range; `rounds` is how many rounds had both designs measured.
  double factor = 1, factor_lo = 1, factor_hi = 1;
  size_t rounds = 0;
  // "DP and DDP": the two, in the record's order, for a tie (neither is ahead).
  std::string pair;
};

// Note [Factors from rounds]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A design factor is the ratio of two median steps, each measured once in its own process on
// a machine other processes share: one draw. The suite runs the parallel designs again in
// alternated rounds (Note [Design rounds], bench/suite/suite_spec.cpp). The verdict ranks the
// designs by the matrix's median steps (round 0) and takes, per round, the runner-up's median
// step over the best's. The best design is the one faster than the runner-up in every round,
// by the median factor, shown with the rounds' range ("1.25x (1.22-1.46x over 3 rounds)");
// when the rounds disagree on which of the two is faster, or the median factor is inside the
// runs' own relative noise, it is a tie and the row says why. A suite of one round (quick, or
// design_rounds 1) falls back to the one pair and says it has no spread; a quick one cannot
// rank a difference inside the noise and says so.

// Round `round` (0: the matrix) of `mode` at (w, n), measured, or null.
const SuiteRun* round_run(const SuiteRecord& suite, const std::string& w, const std::string& mode,
                          int n, int64_t round) {
  if (round == 0) return scaling_run(suite, w, mode, n);
  for (const SuiteRun& r : suite.runs) {
    if (r.measured() && r.group == RunGroup::Rounds && r.workload == w && r.mode == mode &&
        r.world_size == n && r.repeat == round)
      return &r;
  }
  return nullptr;
}

// `over`'s median step over `under`'s in each round with both measured, round 0 first.
std::vector<double> round_factors(const SuiteRecord& suite, const std::string& w, int n,
                                  const std::string& over, const std::string& under) {
  std::vector<double> out;
  int64_t last_round = 0;
  for (const SuiteRun& r : suite.runs)
    if (r.group == RunGroup::Rounds && r.workload == w && r.world_size == n && r.repeat)
      last_round = std::max(last_round, *r.repeat);
  for (int64_t k = 0; k <= last_round; ++k) {
    const SuiteRun* a = round_run(suite, w, over, n, k);
    const SuiteRun* b = round_run(suite, w, under, n, k);
    if (a && b && median_ms(*a) > 0 && median_ms(*b) > 0)
      out.push_back(median_ms(*a) / median_ms(*b));
  }
  return out;
}

double median_of(std::vector<double> v) {
  return median(std::move(v)).value_or(0);
}

// Note [Factors from rounds]: the comparison over two or more rounds; `factors` are the
// runner-up's step over the best's.
void compare_rounds(Comparison& c, const std::vector<double>& factors) {
  c.rounds = factors.size();
  const auto [lo, hi] = std::minmax_element(factors.begin(), factors.end());
  const double med = median_of(factors);
  const SuiteRun &b = *c.best.run, &r = *c.runner_up.run;
  // The runs' own relative noise (round 0's): a factor closer to 1 than this is no factor.
  const double noise = std::max(stddev_ms(b) / median_ms(b), stddev_ms(r) / median_ms(r));
  if (*lo < 1 && *hi > 1) {
    c.outcome = Outcome::Tie;
    c.by = fmt::format("the rounds disagree: {}'s step over {}'s {:.2f}-{:.2f} over {} rounds",
                       c.runner_up.design.label, c.best.design.label, *lo, *hi, c.rounds);
    return;
  }
  if (std::fabs(med - 1) <= noise) {
    c.outcome = Outcome::Tie;
    c.by = fmt::format("{:.1f}% apart over {} rounds, inside the noise ({:.1f}%)",
                       (std::max(med, 1 / med) - 1) * 100, c.rounds, noise * 100);
    return;
  }
  c.outcome = Outcome::Ranked;
  const bool kept = med > 1;  // the runner-up's step is the longer one, as in round 0
  if (!kept) std::swap(c.best, c.runner_up);
  c.factor = kept ? med : 1 / med;
  c.factor_lo = kept ? *lo : 1 / *hi;
  c.factor_hi = kept ? *hi : 1 / *lo;
  c.by = fmt::format("{:.2f}x ({:.2f}-{:.2f}x over {} rounds)", c.factor, c.factor_lo, c.factor_hi,
                     c.rounds);
}

// The comparison of round 0's pair alone.
void compare_one_round(Comparison& c, std::optional<double> quick_steps) {
  const double a = median_ms(*c.best.run), b = median_ms(*c.runner_up.run);
  const double sa = stddev_ms(*c.best.run), sb = stddev_ms(*c.runner_up.run);
  const double pct = (b / a - 1) * 100;
  c.rounds = 1;
  if (within_noise(a, sa, b, sb) && quick_steps) {
    c.outcome = Outcome::CannotRank;
    c.by = fmt::format("{:.1f}% apart, inside the noise ({:.3g} ms) of {:g} steps", pct,
                       std::max(sa, sb), *quick_steps);
  } else if (within_noise(a, sa, b, sb)) {
    c.outcome = Outcome::Tie;
    c.by = fmt::format("{:.1f}% apart, inside the noise ({:.3g} ms)", pct, std::max(sa, sb));
  } else {
    c.outcome = Outcome::Ranked;
    c.factor = c.factor_lo = c.factor_hi = b / a;
    c.by = fmt::format("{:.2f}x ({:.1f}% apart, one round: no spread)", c.factor, pct);
  }
}

// A suite of fewer measured steps than this is quick: its ties are "cannot rank".
constexpr double kRankingSteps = 10;

// The suite's measured steps per run when it is too short to rank designs inside its noise.
std::optional<double> quick_steps(const SuiteRecord& suite) {
  const auto steps = suite.suite.steps;
  if (suite.suite.quick.value_or(false) || (steps && *steps < kRankingSteps))
    return static_cast<double>(steps.value_or(0));
  return std::nullopt;
}

// Note [The verdict's designs], Note [Factors from rounds]: the best of `designs` (one
// workload and world size) against the runner-up.
Comparison compare_designs(const SuiteRecord& suite, const std::vector<Contender>& designs,
                           const std::string& w, int n) {
  const std::vector<Contender> order = by_median_step(designs);
  Comparison c;
  c.measured = order.size();
  if (order.size() < 2) return c;
  c.best = order[0];
  c.runner_up = order[1];
  // The pair in the record's order: `designs` is in it.
  std::vector<Contender> pair;
  for (const Contender& d : designs)
    if (d.design.name == c.best.design.name || d.design.name == c.runner_up.design.name)
      pair.push_back(d);
  c.pair = labels_of(pair);
  const std::vector<double> factors =
      round_factors(suite, w, n, c.runner_up.design.name, c.best.design.name);
  if (factors.size() >= 2)
    compare_rounds(c, factors);
  else
    compare_one_round(c, quick_steps(suite));
  return c;
}

// The table's "best" cell: the best design's label, "tie", "cannot rank", or "-".
std::string best_cell(const Comparison& c) {
  switch (c.outcome) {
    case Outcome::Ranked:
      return c.best.design.label;
    case Outcome::Tie:
      return "tie";
    case Outcome::CannotRank:
      return "cannot rank";
    case Outcome::Missing:
      break;
  }
  return "-";
}

// The table's "gap" cell; a tie names the two designs it is between.
std::string gap_cell(const Comparison& c) {
  if (c.outcome == Outcome::Missing) return "-";
  return c.outcome == Outcome::Ranked ? c.by : c.pair + ", " + c.by;
}

// Note [Memory by traits]
// A design whose one process drives every device (no process per rank, DP) does what is
// shared on device 0, so its cell is device 0's peak over the largest other device's: its
// premium. A design of one process per rank holds the same on every rank: its cell is the
// ranks' peaks, smallest to largest.
std::string device0_premium_cell(const SuiteRun& run) {
  const auto memory = metric(&run, &RunMetrics::memory);
  if (!memory || memory->size() < 2) return "n/a (one shared allocator)";
  const double first = static_cast<double>(memory->front().peak_bytes);
  double others = 0;
  for (size_t i = 1; i < memory->size(); ++i)
    others = std::max(others, static_cast<double>((*memory)[i].peak_bytes));
  return "+" + format_bytes(std::max(0.0, first - others)) + " on device 0 (" +
         format_bytes(first) + " vs " + format_bytes(others) + ")";
}

std::string per_rank_memory_cell(const SuiteRun& run, const std::string& noun) {
  const auto ranks = metric(&run, &RunMetrics::rank_peak_memory_bytes);
  if (ranks && !ranks->empty()) {
    const auto [lo, hi] = std::minmax_element(ranks->begin(), ranks->end());
    const double l = static_cast<double>(*lo), h = static_cast<double>(*hi);
    return format_bytes(l) + (h > l ? " to " + format_bytes(h) : "") + " per " + noun;
  }
  return format_bytes(run_peak_memory(run)) + " per " + noun;
}

// Note [Memory by traits].
std::string memory_cell(const Contender& c) {
  if (!c.run) return "-";
  return c.design.processes_per_rank ? per_rank_memory_cell(*c.run, c.design.noun)
                                     : device0_premium_cell(*c.run);
}

// Of a design whose gradient communication overlaps backward.
std::string overlap_cell(const SuiteRun* run) {
  if (!run) return "-";
  return format_percent(metric(run, &RunMetrics::overlap_ratio)) + " of " +
         ms(metric(run, &RunMetrics::comm_ms).value_or(0)) + " hidden";
}

double bucket_cap_mb(const SuiteRun& run) {
  return run_bucket_cap_mb(run).value_or(25.0);
}

// "; auto chose 8.8 MB (45.1 ms)" when the suite has a --bucket-cap-mb auto run there.
std::string autotune_note(const SuiteRecord& suite, const SuiteRun& run) {
  for (const SuiteRun* r : companions(suite, run, RunGroup::BucketAutotune)) {
    const auto& tuned = r->metrics->bucket_autotune;
    if (tuned && tuned->chosen_mb)
      return fmt::format("; auto chose {:g} MB ({})", *tuned->chosen_mb, ms(median_ms(*r)));
  }
  return "";
}

// Of a design with buckets: the measured cap with the shortest median step among its bucket
// sweep and its default run.
std::string best_bucket_cell(const SuiteRecord& suite, const SuiteRun* run) {
  if (!run) return "-";
  std::vector<const SuiteRun*> candidates = {run};
  for (const SuiteRun* r : companions(suite, *run, RunGroup::BucketSweep)) candidates.push_back(r);
  const std::string tuned = autotune_note(suite, *run);
  if (candidates.size() == 1) return "not swept" + tuned;
  const SuiteRun* best = *std::min_element(
      candidates.begin(), candidates.end(),
      [](const SuiteRun* a, const SuiteRun* b) { return median_ms(*a) < median_ms(*b); });
  if (best == run)
    return fmt::format("{:g} MB, the default ({})", bucket_cap_mb(*run), ms(median_ms(*run))) +
           tuned;
  return fmt::format("{:g} MB ({} vs {} at {:g} MB)", bucket_cap_mb(*best), ms(median_ms(*best)),
                     ms(median_ms(*run)), bucket_cap_mb(*run)) +
         tuned;
}

}  // namespace

std::map<std::string, double> phase_time_by_kind(const SuiteRun& run) {
  std::map<std::string, double> out;
  if (!run.metrics || !run.metrics->phases_median_ms) return out;
  for (const PhaseMedian& p : *run.metrics->phases_median_ms) out[p.kind] += p.median_ms;
  return out;
}

bool within_noise(double median_a, double stddev_a, double median_b, double stddev_b) {
  return std::fabs(median_a - median_b) <= std::max(stddev_a, stddev_b);
}

Bottleneck find_bottleneck(const BottleneckInputs& in) {
  const std::vector<Contender> order = by_median_step(in.designs);
  if (order.empty()) return {};
  const auto share = [](const Contender& c, std::string_view kind) {
    const double step = median_ms(*c.run);
    return step > 0 ? kind_ms(*c.run, kind) / step : 0.0;
  };
  const Contender& winner = order.front();
  if (share(winner, "data") >= kShare) return {"data", winner};
  double best_eff = 0;
  for (const Contender& c : order) best_eff = std::max(best_eff, weak_efficiency(c.run));
  if (in.device == "cpu" && in.cpu_cores > 0 && in.world_size >= in.cpu_cores &&
      in.world_size > 1 && best_eff < kMachineEfficiency)
    return {"machine", {}};
  // The fastest design first: the communication that limits the answer.
  for (const Contender& c : order)
    if (share(c, "communication") >= kShare) return {"communication", c};
  return {"compute", winner};
}

namespace {

// One phase kind's difference between the runner-up and the best design, with the sentence
// that states it.
struct KindDiff {
  double delta_ms = 0;
  std::string text;
};

// "DDP 1.1 ms (buffer_broadcast 0.1 ms, comm_exposed 1 ms; the rest of its 3.3 ms of
// allreduce ran under backward)": a design's time in the phases of one kind, each named.
std::string kind_part(const Contender& c, std::string_view kind) {
  const std::vector<PhaseMedian> phases = phases_of_kind(*c.run, kind);
  std::string list;
  // A kind of one phase of its own name ("data") needs no list.
  if (phases.size() > 1 || (phases.size() == 1 && phases[0].phase != kind))
    for (const PhaseMedian& p : phases)
      list += (list.empty() ? "" : ", ") + p.phase + " " + ms(p.median_ms);
  const auto comm = metric(c.run, &RunMetrics::comm_ms);
  if (kind == "communication" && c.design.overlaps_backward && comm && *comm > 0)
    list += (list.empty() ? "" : "; ") +
            fmt::format("the rest of its {} of {} ran under backward", ms(*comm),
                        c.design.gradient_op.empty() ? "communication" : c.design.gradient_op);
  return c.design.label + " " + ms(kind_ms(*c.run, kind)) + (list.empty() ? "" : " (" + list + ")");
}

// The kinds either run times a phase in: those of Note [Phase kinds] in their order, then any
// other a record names.
std::vector<std::string> kinds_of(const SuiteRun& a, const SuiteRun& b) {
  std::set<std::string> seen;
  for (const SuiteRun* r : {&a, &b})
    for (const auto& [kind, time] : phase_time_by_kind(*r)) seen.insert(kind);
  std::vector<std::string> out;
  for (std::string_view k : kKindOrder)
    if (seen.erase(std::string(k))) out.emplace_back(k);
  out.insert(out.end(), seen.begin(), seen.end());
  return out;
}

// The three phase kinds whose runner-up - best difference is largest, largest first.
std::vector<KindDiff> kind_diffs(const Contender& runner_up, const Contender& best) {
  std::vector<KindDiff> d;
  for (const std::string& kind : kinds_of(*runner_up.run, *best.run))
    d.push_back({kind_ms(*runner_up.run, kind) - kind_ms(*best.run, kind),
                 kind + ": " + kind_part(runner_up, kind) + ", " + kind_part(best, kind)});
  std::stable_sort(d.begin(), d.end(), [](const KindDiff& x, const KindDiff& y) {
    return std::fabs(x.delta_ms) > std::fabs(y.delta_ms);
  });
  if (d.size() > 3) d.resize(3);
  return d;
}

// "mlp-small at world size 4, DDP faster than DP: ...": the kinds behind a row's answer.
std::string why_note(const std::string& w, int n, const Comparison& c) {
  const std::string answer =
      c.outcome == Outcome::Ranked
          ? c.best.design.label + " faster than " + c.runner_up.design.label
          : c.pair + (c.outcome == Outcome::Tie ? " tie" : " cannot be ranked");
  std::string why = fmt::format("{} at world size {}, {}: ", w, n, answer);
  const auto diffs = kind_diffs(c.runner_up, c.best);
  for (size_t i = 0; i < diffs.size(); ++i)
    why += (i ? "; " : "") + diffs[i].text +
           fmt::format(" ({} - {} = {:+.3g} ms)", c.runner_up.design.label, c.best.design.label,
                       diffs[i].delta_ms);
  return why + ".";
}

// Sorted world sizes > 1 at which the workload has a scaling run of a parallel design.
std::vector<int> parallel_world_sizes(const SuiteRecord& suite, const std::string& w) {
  std::set<int> sizes;
  for (const SuiteRun& r : suite.runs) {
    if (r.group == RunGroup::Scaling && r.workload == w && suite.design_of(r).parallel &&
        r.world_size > 1)
      sizes.insert(static_cast<int>(r.world_size));
  }
  return {sizes.begin(), sizes.end()};
}

// The communication finding of `c`, from its traits and its phases of kind communication.
std::string communication_finding(const Contender& c) {
  const DesignInfo& d = c.design;
  const std::vector<PhaseMedian> phases = phases_of_kind(*c.run, "communication");
  const std::string took = fmt::format("Its {} take{} {} of its {} step", listed_phases(phases),
                                       phases.size() == 1 ? "s" : "",
                                       ms(kind_ms(*c.run, "communication")), ms(median_ms(*c.run)));
  if (d.overlaps_backward) {
    const std::string op = d.gradient_op.empty() ? "communication" : d.gradient_op;
    return fmt::format(
        "{}'s exposed communication. {} after its overlap with backward ({} of its {} "
        "hidden); {}",
        d.label, took, format_percent(metric(c.run, &RunMetrics::overlap_ratio)), op,
        d.has_buckets ? "more compute per bucket or fewer bytes (a comm hook) would hide it."
                      : "more compute to hide it under or fewer bytes would shorten it.");
  }
  // One process driving every device moves everything through the device it runs on.
  if (!d.processes_per_rank)
    return fmt::format(
        "{}'s communication. {}, all of it through device 0 (one process drives every "
        "device), so it grows with the device count.",
        d.label, took);
  return fmt::format("{}'s communication. {}, none of it under backward.", d.label, took);
}

std::string bottleneck_paragraph(const std::string& w, const BottleneckInputs& in) {
  const Bottleneck b = find_bottleneck(in);
  const std::string at = fmt::format("{} at world size {}: ", w, in.world_size);
  if (b.kind.empty())
    return at + fmt::format("no run of {} succeeded, so there is nothing to explain.",
                            labels_of(in.designs, "or"));
  if (b.kind == "machine") {
    double best_eff = 0;
    for (const Contender& c : in.designs) best_eff = std::max(best_eff, weak_efficiency(c.run));
    return at + fmt::format(
                    "the machine. {} ranks on {} CPU cores leave no core for communication: "
                    "every collective and every copy competes with compute for the same cores, "
                    "so {} design gets near linear scaling (best weak-scaling efficiency {}).",
                    in.world_size, in.cpu_cores, in.designs.size() == 2 ? "neither" : "no",
                    format_percent(best_eff));
  }
  const SuiteRun& r = *b.in.run;
  const std::string& label = b.in.design.label;
  if (b.kind == "data") {
    return at + fmt::format("data loading. Waiting for the next batch takes {} of {}'s {} step.",
                            ms(kind_ms(r, "data")), label, ms(median_ms(r)));
  }
  if (b.kind == "communication") return at + communication_finding(b.in);
  return at + fmt::format(
                  "compute. {}'s {} take {} of its {} step; communication is not what limits "
                  "it.",
                  label, listed_phases(phases_of_kind(r, "compute")), ms(kind_ms(r, "compute")),
                  ms(median_ms(r)));
}

// What might help an input-bound run, from its loader's record.
std::string input_advice(const SuiteRun& run, int cores) {
  const RunMetrics& m = *run.metrics;
  if (!m.loader) return "";
  const LoaderSummary& l = *m.loader;
  std::vector<std::string> help;
  if (cores > 0 && l.workers < cores)
    help.push_back(
        fmt::format("more loader workers (--num-workers, now {} of {} cores)", l.workers, cores));
  if (l.pin_memory == "off") help.push_back("--pin-memory (page-locked, asynchronous copies)");
  if (l.source == "imagefolder" && !l.normalize_on_device && l.pin_memory != "off" &&
      l.pin_memory.rfind("not applicable", 0) != 0)
    help.push_back("--normalize-on-device (4x fewer bytes to copy)");
  std::string out = help.empty() ? "" : " What may help: " + fmt::format("{}", help.front());
  for (size_t i = 1; i < help.size(); ++i) out += (i + 1 == help.size() ? " or " : ", ") + help[i];
  if (!out.empty()) out += ".";
  if (l.samples_per_s > 0)
    out += fmt::format(" The loader can give {:.0f} samples/s; training asks for {:.0f}.",
                       l.samples_per_s, m.samples_per_s);
  return out;
}

// Note [Input-bound rule]: the paragraph of a run that is input-bound on some rank, else "".
std::string input_bound_paragraph(const SuiteRun& run, int cores) {
  if (!run.ok() || !run.metrics || !run.metrics->per_rank_data_wait_ms) return "";
  const std::vector<double>& waits = *run.metrics->per_rank_data_wait_ms;
  if (waits.empty()) return "";
  const auto worst = std::max_element(waits.begin(), waits.end());
  const double step = median_ms(run), wait = *worst;
  if (step <= 0 || wait / step < kInputShare) return "";
  return fmt::format(
      "{} is input-bound on {}: it waits {} for its next batch in its {} step ({}); with "
      "input free the step would take {}.{}",
      printable(run.id), rank_name(run.metrics->hosts, worst - waits.begin()), ms(wait), ms(step),
      format_percent(wait / step), ms(step - wait), input_advice(run, cores));
}

// Note [Speed of light]: per workload at its largest world size, how much of its bound each
// design achieves and where the largest gap is, the best design first.
std::string speed_of_light_paragraph(const std::vector<Contender>& designs, const std::string& w,
                                     int n) {
  std::vector<std::string> parts;
  for (const Contender& c : by_median_step(designs)) {
    if (!c.run->metrics->speed_of_light) continue;
    const SpeedOfLight& s = *c.run->metrics->speed_of_light;
    const auto gap = std::find_if(s.phases.begin(), s.phases.end(),
                                  [&](const BoundPhase& p) { return p.group == s.largest_gap; });
    // A record whose phases do not hold the largest gap's group says the group alone.
    const std::string gap_times =
        gap == s.phases.end()
            ? ""
            : fmt::format(" ({} measured, {} bound)", ms(gap->measured_ms), ms(gap->bound_ms));
    parts.push_back(fmt::format("{} reaches {} of its bound ({} of {}); its largest gap is {}{}",
                                c.design.label, format_percent(s.achieved), ms(s.bound_ms),
                                ms(median_ms(*c.run)), s.largest_gap, gap_times));
  }
  if (parts.empty()) return "";
  std::string out = fmt::format("{} at world size {}: ", w, n);
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? "; " : "") + parts[i];
  return out + " (the bound: docs/metrics.md, \"Speed of light\").";
}

// Note [Load is not a design property]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A data-parallel design's ranks run the same model on equal shares of the batch, so a rank
// that holds the buckets back (Note [Bucket blame]) in a run with no --inject-fault was slowed
// by the machine: another process, a shared or throttled core, a slower disk for its shard.
// That is a finding about the box, not about the design: the verdict says so wherever it names
// the rank, and a design factor measured beside it carries that load.
// "load on the machine, not DDP (its backward_compute ran 3.2 ms slower than the other ranks'
// with no fault injected)" for such a run of the design labelled `label`, else "".
std::string outside_load(const SuiteRun& run, const std::string& label) {
  if (!run.ok() || !run.metrics || !run.metrics->bucket_blame) return "";
  const BucketBlame& b = *run.metrics->bucket_blame;
  if (!b.holder || !run.run_config().inject_fault.empty()) return "";
  const std::string what =
      b.holder_phase ? fmt::format("its {} ran {} slower than the other ranks'", *b.holder_phase,
                                   ms(b.holder_phase_excess_ms.value_or(0)))
                     : std::string("it was late outside its timed phases");
  return fmt::format("load on the machine, not {} ({} with no fault injected)", label, what);
}

// Note [Bucket blame]: the paragraph of a run in which a rank holds the step back, else "".
std::string bucket_blame_paragraph(const SuiteRun& run, const std::string& label) {
  if (!run.ok() || !run.metrics || !run.metrics->bucket_blame) return "";
  const BucketBlame& b = *run.metrics->bucket_blame;
  if (!b.holder) return "";
  const std::string load = outside_load(run, label);
  return fmt::format("{}: {}.{}", printable(run.id), printable(b.finding),
                     load.empty() ? "" : " Every rank does the same work: " + load + ".");
}

// Note [Verdict findings]
// ~~~~~~~~~~~~~~~~~~~~~~~
// The verdict's prose is read per workload, the question a reader brings, so it is grouped
// under a heading per workload in the suite's order (suite.workloads, then any other workload
// a run names), and inside a group always in one order, from the answer to its evidence: the
// bottleneck, the speed of light, what each sharded design saves (reports/sharding_view.h),
// then per run (in record order) input-bound, then bucket blame, and last the critical path
// of each design. A workload with nothing to say has no
// heading.
std::vector<ParagraphGroup> findings_by_workload(const SuiteRecord& suite) {
  const std::string& device = suite.suite.device;
  const int cores = static_cast<int>(suite.context.cpu_cores);
  std::vector<ParagraphGroup> groups;
  for (const std::string& w : suite.workloads()) {
    ParagraphGroup g{w, {}};
    const auto add = [&g](std::string p) {
      if (!p.empty()) g.paragraphs.push_back(std::move(p));
    };
    if (const auto sizes = parallel_world_sizes(suite, w); !sizes.empty()) {
      const int n = sizes.back();
      const std::vector<Contender> designs = contenders_at(suite, w, n);
      add(bottleneck_paragraph(w, {designs, n, device, cores}));
      add(speed_of_light_paragraph(designs, w, n));
    }
    for (std::string& p : sharding_sentences(suite, w)) add(std::move(p));
    for (const SuiteRun& run : suite.runs)
      if (run.workload == w) add(input_bound_paragraph(run, cores));
    for (const SuiteRun& run : suite.runs)
      if (run.workload == w) add(bucket_blame_paragraph(run, suite.design_of(run).label));
    for (std::string& p : critical_path_paragraphs(suite, w)) add(std::move(p));
    if (!g.paragraphs.empty()) groups.push_back(std::move(g));
  }
  return groups;
}

std::vector<std::string> verdict_notes(const SuiteRecord& suite) {
  std::vector<std::string> notes;
  if (const auto steps = quick_steps(suite)) {
    notes.push_back(fmt::format(
        "Quick suite: {:g} measured steps per run, too few to rank designs whose difference is "
        "inside their noise: those rows say \"cannot rank\" rather than a tie. Run the full "
        "suite (at least {:g} steps) before drawing conclusions.",
        *steps, kRankingSteps));
  }
  notes.push_back(
      "The best design has the shortest median step, the runner-up the next; the best is ahead "
      "when it is faster than the runner-up in every alternated round (suite key "
      "design_rounds), by the median factor over the rounds and their range; rounds that "
      "disagree, or a factor inside the runs' own step-time noise, make a tie. With one round, a "
      "difference no larger than the larger step-time standard deviation of the two runs is a "
      "tie (docs/metrics.md, \"Verdict\").");
  return notes;
}

// "Data: mlp-small on synthetic data; gpt-tiny on /d/shakespeare (...)": what each workload's
// scaling runs trained on, so that every answer below names its dataset.
std::string data_note(const SuiteRecord& suite) {
  std::vector<std::pair<std::string, std::set<std::string>>> by_workload;
  bool all_synthetic = true;
  for (const std::string& w : suite.workloads()) {
    std::set<std::string> datasets;
    for (const SuiteRun& r : suite.runs)
      if (r.group == RunGroup::Scaling && r.workload == w && r.measured())
        datasets.insert(run_dataset(r));
    if (datasets.empty()) continue;
    all_synthetic = all_synthetic && datasets == std::set<std::string>{"synthetic data"};
    by_workload.emplace_back(w, std::move(datasets));
  }
  if (by_workload.empty()) return "";
  if (all_synthetic) return "Data: every workload on synthetic data.";
  std::string out;
  for (const auto& [w, datasets] : by_workload) {
    std::string joined;
    for (const std::string& d : datasets) joined += (joined.empty() ? "" : " and ") + d;
    out += (out.empty() ? "" : "; ") + printable(w + " on " + joined);
  }
  return "Data: " + out + ".";
}

// The verdict table's header: the answer, then per design its step and samples/s, its memory
// (Note [Memory by traits]), and the overlap and best bucket cap of the designs they apply to.
std::vector<std::string> verdict_header(const std::vector<DesignInfo>& designs) {
  std::vector<std::string> h = {"workload", "world size", "best", "runner-up", "gap"};
  for (const char* what : {"step", "samples/s", "memory"})
    for (const DesignInfo& d : designs) h.push_back(d.label + " " + what);
  for (const DesignInfo& d : designs)
    if (d.overlaps_backward) h.push_back(d.label + " overlap");
  for (const DesignInfo& d : designs)
    if (d.has_buckets) h.push_back(d.label + " best bucket cap");
  return h;
}

// One row of the verdict table, its cells in verdict_header's order.
std::vector<std::string> verdict_row(const SuiteRecord& suite, const std::string& w, int n,
                                     const std::vector<Contender>& designs, const Comparison& c) {
  std::vector<std::string> row = {w, std::to_string(n), best_cell(c),
                                  c.outcome == Outcome::Ranked ? c.runner_up.design.label : "-",
                                  gap_cell(c)};
  for (const Contender& d : designs) row.push_back(step_cell(d.run));
  for (const Contender& d : designs)
    row.push_back(
        format_number(d.run ? std::optional(d.run->metrics->samples_per_s) : std::nullopt));
  for (const Contender& d : designs) row.push_back(memory_cell(d));
  for (const Contender& d : designs)
    if (d.design.overlaps_backward) row.push_back(overlap_cell(d.run));
  for (const Contender& d : designs)
    if (d.design.has_buckets) row.push_back(best_bucket_cell(suite, d.run));
  return row;
}

}  // namespace

ReportSection build_verdict(const SuiteRecord& suite) {
  ReportSection s;
  s.id = "verdict";
  s.heading = "Verdict";
  s.notes = verdict_notes(suite);
  if (std::string data = data_note(suite); !data.empty()) s.notes.insert(s.notes.begin(), data);
  const std::vector<DesignInfo> designs = verdict_designs(suite);
  std::vector<Contender> named;
  for (const DesignInfo& d : designs) named.push_back({d, nullptr});
  SectionTable t{"verdict-table",
                 fmt::format("{}, scaling runs at each world size: the best design, the "
                             "runner-up and the gap",
                             labels_of(named)),
                 {}};
  t.table.header = verdict_header(designs);
  for (const std::string& w : suite.workloads()) {
    for (int n : parallel_world_sizes(suite, w)) {
      const std::vector<Contender> at = contenders_at(suite, w, n);
      const Comparison c = compare_designs(suite, at, w, n);
      if (c.measured == 0) continue;
      t.table.rows.push_back(verdict_row(suite, w, n, at, c));
      t.table.bad.push_back(false);
      if (c.outcome != Outcome::Missing) s.notes.push_back(why_note(w, n, c));
    }
  }
  if (t.table.rows.empty())
    s.notes.push_back("No run of a parallel design at world size > 1 succeeded.");
  s.groups = findings_by_workload(suite);
  s.charts.push_back(build_critical_path_chart(suite));
  s.tables.push_back(std::move(t));
  return s;
}

namespace {

// " of 3 designs" when more than two were measured, else "".
std::string among(const Comparison& c) {
  return c.measured > 2 ? fmt::format(" of {} designs", c.measured) : "";
}

// "DDP is 1.22-1.46x faster than DP at 8 devices (median 1.25x over 3 alternated rounds)",
// or the tie or "cannot rank" it is (Note [Factors from rounds]); with more than two designs
// measured it says how many and calls the second the runner-up.
std::string design_clause(const Comparison& c, int n, std::optional<double> quick) {
  if (c.outcome == Outcome::Tie)
    return fmt::format("{} tie{} at {} devices ({})", c.pair,
                       c.measured > 2 ? " for the best" + among(c) : "", n,
                       c.rounds >= 2 ? c.by : "inside the noise");
  if (c.outcome == Outcome::CannotRank)
    return fmt::format("{}{} cannot be ranked at {} devices in {:g} steps", c.pair,
                       c.measured > 2 ? ", the best two" + among(c) + "," : "", n,
                       quick.value_or(0));
  const std::string& best = c.best.design.label;
  const std::string& other = c.runner_up.design.label;
  std::string factor = fmt::format("{:.2f}x", c.factor);
  std::string how = "one round, no spread";
  if (c.rounds >= 2) {
    const std::string range = fmt::format("{:.2f}-{:.2f}x", c.factor_lo, c.factor_hi);
    if (range != fmt::format("{0:.2f}-{0:.2f}x", c.factor_lo)) factor = range;
    how = fmt::format("median {:.2f}x over {} alternated rounds", c.factor, c.rounds);
  }
  if (c.measured > 2)
    return fmt::format("{} is the fastest{} at {} devices, {} faster than the runner-up {} ({})",
                       best, among(c), n, factor, other, how);
  return fmt::format("{} is {} faster than {} at {} devices ({})", best, factor, other, n, how);
}

// "; rank 3 holds DDP's buckets back: load on the machine, not DDP (...)" for each of the two
// designs compared whose run names a rank that holds its buckets back (Note [Load is not a
// design property]); a load on the runner-up's side is part of the best design's lead.
std::string blame_clauses(const Comparison& c) {
  std::string out;
  for (const Contender* d : {&c.best, &c.runner_up}) {
    const auto blame = metric(d->run, &RunMetrics::bucket_blame);
    if (!blame || !blame->holder) continue;
    out +=
        fmt::format("; {} holds {}'s buckets back",
                    rank_name(metric(d->run, &RunMetrics::hosts), *blame->holder), d->design.label);
    if (const std::string load = outside_load(*d->run, d->design.label); !load.empty()) {
      out += ": " + load;
      // The factor was measured with that load on the runner-up's side.
      if (c.outcome == Outcome::Ranked && d == &c.runner_up)
        out += fmt::format(", so part of {}'s lead is the machine's", c.best.design.label);
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> first_screen_sentences(const SuiteRecord& suite) {
  std::vector<std::string> out;
  const auto quick = quick_steps(suite);
  for (const std::string& w : suite.workloads()) {
    const auto sizes = parallel_world_sizes(suite, w);
    if (sizes.empty()) continue;
    const int n = sizes.back();
    const Comparison c = compare_designs(suite, contenders_at(suite, w, n), w, n);
    if (c.outcome == Outcome::Missing) continue;
    std::string sentence = printable(w) + ": " + design_clause(c, n, quick);
    if (const auto sol = metric(c.best.run, &RunMetrics::speed_of_light)) {
      sentence += fmt::format("; {} reaches {} of its bound, the largest gap in {}",
                              c.best.design.label, format_percent(sol->achieved), sol->largest_gap);
    }
    out.push_back(sentence + blame_clauses(c) + ".");
  }
  return out;
}

std::string cpu_box_sentence(const SuiteRecord& suite) {
  if (suite.suite.device != "cpu") return "";
  int64_t devices = 1;
  for (const int64_t n : suite.suite.world_sizes) devices = std::max(devices, n);
  const int64_t cores = suite.context.cpu_cores;
  const std::string share =
      cores > 0 ? fmt::format("{} logical devices share {} CPU core{}", devices, cores,
                              cores == 1 ? "" : "s")
                : fmt::format("{} logical devices share this machine's CPU cores", devices);
  return fmt::format(
      "This box: {}. What this suite measures is each design's own work on them: its compute, "
      "its copies and its collectives, all competing for the same cores. What carries over to "
      "GPUs: each design's phases, the bytes it moves and how they grow with the device count, "
      "what a flag or hook changes in bytes and memory, and that every design computes what one "
      "device does. What does not: the winner and its factor, and overlap, which depend on "
      "compute speed against link speed, a ratio GPUs change by orders of magnitude "
      "(docs/metrics.md, \"What a CPU run tells about GPUs\"; `ddpbench project` projects to "
      "GPUs).",
      share);
}

}  // namespace ddpb::reports
