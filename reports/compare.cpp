#include "reports/compare.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "reports/json_io.h"
#include "reports/report_util.h"
#include "reports/run_record.h"
#include "reports/step_noise.h"
#include "reports/suite_record.h"

namespace ddpb::reports {
namespace {

using nlohmann::json;

// The compared numbers of one run, whatever record they came from, and what was run: two
// runs are compared only when that is the same (issue 25, M6).
struct Figures {
  std::string status;
  std::optional<double> samples_per_s, overlap, peak_bytes;
  std::optional<StepTimeStats> step;  // the median step and its spread (Note [Step-time noise])
  std::optional<double> exposed_ms;   // communication left on the step, per step
  std::string config;                 // "mlp-small ddp on 2 devices, global batch 64, fp32"
};
using Runs = std::vector<std::pair<std::string, Figures>>;  // in record order

// The median over the measured steps of one of their mode fields, nullopt when none has it.
std::optional<double> measured_median(const RunRecord& rec,
                                      std::optional<double> StepModeData::*field) {
  std::vector<double> values;
  for (const StepRecord& s : rec.steps) {
    if (s.measured && s.mode && (*s.mode).*field) values.push_back(*((*s.mode).*field));
  }
  return median(values);
}

// A single run record: summary and memory; DDP's overlap and exposed communication from
// summary.comm when the record has it, else the medians over the measured steps.
Figures run_record_figures(const RunRecord& rec) {
  const RunConfigInfo& c = rec.config;
  const std::string& hook = c.comm_hook;
  const auto& comm = rec.summary.comm;
  Figures f{"ok",
            rec.summary.samples_per_s,
            comm ? std::optional(comm->overlap_ratio)
                 : measured_median(rec, &StepModeData::overlap_ratio),
            std::nullopt,
            rec.summary.step_time_ms,
            comm ? std::optional(comm->comm_exposed_ms)
                 : measured_median(rec, &StepModeData::comm_exposed_ms),
            fmt::format("{} {} on {} {} device(s), global batch {}, {}{}", c.workload, c.mode,
                        c.world_size, c.device, c.global_batch, c.precision,
                        hook == "none" ? "" : ", comm hook " + hook)};
  // Peak over every device: top-level memory[], and each DDP rank's memory[].
  int64_t peak = peak_memory_bytes(rec.memory);
  if (rec.ranks) {
    for (const RankRecord& r : *rec.ranks) peak = std::max(peak, peak_memory_bytes(r.memory));
  }
  if (!rec.memory.empty() || rec.ranks) f.peak_bytes = static_cast<double>(peak);
  return f;
}

Figures suite_run_figures(const SuiteRun& r) {
  const RunMetrics* m = r.metrics ? &*r.metrics : nullptr;
  return {r.status ? std::string(enum_name(*r.status)) : "(no status)",
          m ? std::optional(m->samples_per_s) : std::nullopt,
          m ? m->overlap_ratio : std::nullopt,
          m ? run_peak_memory(r) : std::nullopt,
          m ? std::optional(m->step_time_ms) : std::nullopt,
          m ? m->comm_exposed_ms : std::nullopt,
          fmt::format("{} {} on {} device(s), global batch {}{}", r.workload, r.mode, r.world_size,
                      r.global_batch.value_or(0), r.variant.empty() ? "" : ", " + r.variant)};
}

Runs runs_of(const json& rec, const std::string& which) {
  const std::string kind = string_at(rec, {"kind"});
  Runs out;
  if (kind == "run") {
    out.push_back({"run", run_record_figures(RunRecord::from_json(rec))});
  } else if (kind == "suite") {
    for (const SuiteRun& r : SuiteRecord::from_json(rec).runs) {
      if (r.id.empty() ||
          std::any_of(out.begin(), out.end(), [&](auto& p) { return p.first == r.id; }))
        continue;  // the schema makes ids unique; a broken record keeps its first entry
      out.push_back({r.id, suite_run_figures(r)});
    }
  } else {
    throw ReportError("compare: the " + which + " record is neither a suite nor a run record " +
                      "(\"kind\" is \"" + kind + "\")");
  }
  return out;
}

const Figures* find(const Runs& runs, const std::string& id) {
  for (const auto& [rid, f] : runs) {
    if (rid == id) return &f;
  }
  return nullptr;
}

// How one metric moved: inside the threshold (Same), or past it and then beyond the noise
// (Better, Worse) or inside it (InNoise), Note [Step-time noise].
enum class Move { Same, Better, Worse, InNoise };

// One metric of one run: the table cell, how it moved, and for a move the wrong way past the
// threshold the line that says so (a regression when Worse, "inside the noise" when InNoise).
struct Delta {
  std::string cell;
  Move move = Move::Same;
  std::string line;
};

// A metric's change from base to new. `worse_by` is in the threshold's unit (percent, or
// percentage points for the overlap), > 0 the wrong way. `cost_ms` is the step time the change
// adds (< 0: saves); memory is deterministic and has none, so the threshold alone judges it.
struct Change {
  std::string name, base, now, shown;  // shown: "-10.0%" or "-6.7 pp"
  double worse_by = 0;
  std::optional<double> cost_ms;
};

Delta judge(const Change& c, double threshold, const char* unit, double band_ms) {
  Delta d{fmt::format("{} -> {} ({})", c.base, c.now, c.shown), Move::Same, ""};
  if (std::fabs(c.worse_by) <= threshold) return d;
  const bool worse = c.worse_by > 0;
  const bool beyond = !c.cost_ms || (worse ? *c.cost_ms > band_ms : -*c.cost_ms > band_ms);
  d.move = !beyond ? Move::InNoise : worse ? Move::Worse : Move::Better;
  if (!worse) return d;
  const std::string head = fmt::format("{} {} -> {} ({}, threshold {}{}", c.name, c.base, c.now,
                                       c.shown, threshold, unit);
  const std::string noise = fmt::format("noise ±{} ms", format_number(band_ms));
  if (!beyond) {
    d.line = head + fmt::format("): {:+.3g} ms a step, inside the ", *c.cost_ms) + noise;
  } else {
    d.line = head + (c.cost_ms && band_ms > 0 ? ", beyond the " + noise : "") + ")";
  }
  return d;
}

// Relative change in percent; nullopt when a side is missing or the base is not positive.
std::optional<Change> relative(const char* name, std::optional<double> base,
                               std::optional<double> now, bool higher_is_better,
                               std::string (*format)(std::optional<double>)) {
  if (!base || !now || *base <= 0) return std::nullopt;
  const double pct = (*now - *base) / *base * 100;
  return Change{name,
                format(base),
                format(now),
                fmt::format("{:+.1f}%", pct),
                higher_is_better ? -pct : pct,
                std::nullopt};
}

// The four metrics of a run ok in both records, judged against the threshold and the noise.
// samples/s is the global batch over the median step, so its change costs the step time it
// implies; the overlap ratio's costs the exposed communication it adds (Note [Step-time noise]).
std::vector<Delta> metric_deltas(const Figures& b, const Figures& n, double threshold,
                                 double band_ms) {
  const std::optional<double> base_ms = b.step ? std::optional(b.step->median) : std::nullopt;
  const std::optional<double> now_ms = n.step ? std::optional(n.step->median) : std::nullopt;
  std::vector<Delta> out;
  auto add = [&](std::optional<Change> c, std::string missing, const char* unit) {
    out.push_back(c ? judge(*c, threshold, unit, band_ms)
                    : Delta{std::move(missing), Move::Same, ""});
  };
  auto samples = relative("samples/s", b.samples_per_s, n.samples_per_s, true, format_number);
  if (samples && base_ms && *n.samples_per_s > 0)
    samples->cost_ms = *base_ms * (*b.samples_per_s / *n.samples_per_s - 1);
  add(samples, format_number(b.samples_per_s) + " -> " + format_number(n.samples_per_s), "%");
  auto step = relative("median step time (ms)", base_ms, now_ms, false, format_number);
  if (step) step->cost_ms = *now_ms - *base_ms;
  add(step, format_number(base_ms) + " -> " + format_number(now_ms), "%");
  std::optional<Change> overlap;
  if (b.overlap && n.overlap) {
    const double pp = (*n.overlap - *b.overlap) * 100;
    overlap = Change{"overlap ratio",
                     format_percent(b.overlap),
                     format_percent(n.overlap),
                     fmt::format("{:+.1f} pp", pp),
                     -pp,
                     std::nullopt};
    if (b.exposed_ms && n.exposed_ms) overlap->cost_ms = *n.exposed_ms - *b.exposed_ms;
  }
  add(overlap, format_percent(b.overlap) + " -> " + format_percent(n.overlap), " pp");
  add(relative("peak memory", b.peak_bytes, n.peak_bytes, false, format_bytes),
      format_bytes(b.peak_bytes) + " -> " + format_bytes(n.peak_bytes), "%");
  return out;
}

// The noise column: the band of the row and its share of the base's median step.
std::string noise_cell(const Figures& b, double band_ms) {
  if (!b.step) return "-";
  if (band_ms <= 0) return "none recorded";
  return fmt::format("±{} ms ({:.1f}%)", format_number(band_ms),
                     b.step->median > 0 ? band_ms / b.step->median * 100 : 0.0);
}

// The columns a cell takes in a terminal: its UTF-8 code points ("±" is two bytes, one column).
size_t display_width(const std::string& cell) {
  return static_cast<size_t>(
      std::count_if(cell.begin(), cell.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// Columns padded to a common width: readable in a terminal and valid Markdown.
std::string aligned_table(std::vector<std::vector<std::string>> rows) {
  for (auto& r : rows) {
    for (auto& cell : r) cell = printable(cell);  // record text reaches a terminal
  }
  std::vector<size_t> width(rows.front().size(), 3);
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], display_width(r[i]));
  }
  std::string out;
  for (size_t ri = 0; ri < rows.size(); ++ri) {
    out += "|";
    for (size_t i = 0; i < rows[ri].size(); ++i)
      out += " " + rows[ri][i] + std::string(width[i] - display_width(rows[ri][i]), ' ') + " |";
    out += "\n";
    if (ri == 0) {
      out += "|";
      for (size_t w : width) out += std::string(w + 2, '-') + "|";
      out += "\n";
    }
  }
  return out;
}

// The row of a run ok in both records: its cells, the noise band and the verdict; the lines
// of its regressions and of its moves inside the noise go to `result`.
std::vector<std::string> ok_row(const std::string& id, const std::string& status, const Figures& b,
                                const Figures& n, double threshold, CompareResult& result) {
  const double band_ms = b.step && n.step ? step_noise_ms(*b.step, *n.step) : 0;
  const std::vector<Delta> deltas = metric_deltas(b, n, threshold, band_ms);
  auto moved = [&](Move m) {
    return std::any_of(deltas.begin(), deltas.end(), [&](const Delta& d) { return d.move == m; });
  };
  for (const Delta& d : deltas) {
    if (d.move == Move::Worse) result.regressions.push_back(printable(id + ": " + d.line));
    if (d.move == Move::InNoise && !d.line.empty())
      result.within_noise.push_back(printable(id + ": " + d.line));
  }
  // samples/s, median step, its noise, overlap, peak memory.
  return {id,
          status,
          deltas[0].cell,
          deltas[1].cell,
          noise_cell(b, band_ms),
          deltas[2].cell,
          deltas[3].cell,
          moved(Move::Worse)     ? "REGRESSED"
          : moved(Move::Better)  ? "improved"
          : moved(Move::InNoise) ? "within noise"
                                 : "ok"};
}

}  // namespace

CompareResult compare_reports(const json& base, const json& now, double threshold_pct) {
  if (!std::isfinite(threshold_pct) || threshold_pct < 0) {
    throw ReportError(
        fmt::format("compare: the threshold must be a percentage >= 0, got {}", threshold_pct));
  }
  const Runs b = runs_of(base, "base"), n = runs_of(now, "new");
  if (string_at(base, {"kind"}) != string_at(now, {"kind"})) {
    throw ReportError("compare: cannot compare a " + string_at(base, {"kind"}) + " record with a " +
                      string_at(now, {"kind"}) + " record");
  }
  CompareResult result;
  std::vector<std::vector<std::string>> rows = {{"run", "status", "samples/s", "median step ms",
                                                 "step noise", "overlap", "peak memory",
                                                 "verdict"}};
  auto regress = [&](const std::string& id, const std::string& what) {
    result.regressions.push_back(printable(id + ": " + what));
  };

  int compared = 0;
  for (const auto& [id, bf] : b) {
    const Figures* nf = find(n, id);
    if (!nf) {
      rows.push_back({id, bf.status + " -> (missing)", "-", "-", "-", "-", "-", "REMOVED"});
      regress(id, "missing from the new record (was " + bf.status + ")");
      continue;
    }
    if (bf.config != nf->config) {
      rows.push_back({id, "-", "-", "-", "-", "-", "-", "NOT COMPARED"});
      result.warnings.push_back(printable(id + ": not compared, the runs differ: " + bf.config +
                                          " against " + nf->config));
      continue;
    }
    ++compared;
    const std::string status =
        bf.status == nf->status ? nf->status : bf.status + " -> " + nf->status;
    if (bf.status != "ok" || nf->status != "ok") {
      const bool lost = bf.status == "ok";
      rows.push_back({id, status, "-", "-", "-", "-", "-",
                      lost                 ? "REGRESSED"
                      : nf->status == "ok" ? "fixed"
                                           : "not ok in both"});
      if (lost) regress(id, "was ok, now " + nf->status);
      continue;
    }
    rows.push_back(ok_row(id, status, bf, *nf, threshold_pct, result));
  }
  for (const auto& [id, nf] : n) {
    if (!find(b, id))
      rows.push_back({id, "(new) " + nf.status, format_number(nf.samples_per_s),
                      format_number(nf.step ? std::optional(nf.step->median) : std::nullopt), "-",
                      format_percent(nf.overlap), format_bytes(nf.peak_bytes), "added"});
  }
  if (compared == 0 && !b.empty() && !n.empty()) {
    throw ReportError(printable(
        "compare: nothing to compare: no run of the base matches a run of the new record by "
        "workload, mode, world size and configuration (base: " +
        b.front().second.config + "; new: " + n.front().second.config + ")"));
  }
  result.table = aligned_table(rows);
  result.regressed = !result.regressions.empty();
  return result;
}

}  // namespace ddpb::reports
