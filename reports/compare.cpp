#include "reports/compare.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "reports/json_io.h"
#include "reports/report_util.h"
#include "reports/run_record.h"
#include "reports/suite_record.h"

namespace ddpb::reports {
namespace {

using nlohmann::json;

// The four compared numbers of one run, whatever record they came from, and what was run: two
// runs are compared only when that is the same (issue 25, M6).
struct Figures {
  std::string status;
  std::optional<double> samples_per_s, median_ms, overlap, peak_bytes;
  std::string config;  // "mlp-small ddp on 2 devices, global batch 64, fp32"
};
using Runs = std::vector<std::pair<std::string, Figures>>;  // in record order

// A single run record: summary and memory; DDP's overlap from summary.comm when the record
// has it, else the median of the measured steps' overlap ratios.
Figures run_record_figures(const RunRecord& rec) {
  const RunConfigInfo& c = rec.config;
  const std::string hook = c.extra.value.value("comm_hook", std::string("none"));
  Figures f{"ok",
            rec.summary.samples_per_s,
            rec.summary.step_time_ms.median,
            rec.summary.comm ? std::optional(rec.summary.comm->overlap_ratio) : std::nullopt,
            std::nullopt,
            fmt::format("{} {} on {} {} device(s), global batch {}, {}{}", c.workload,
                        enum_name(c.mode), c.world_size, c.device, c.global_batch, c.precision,
                        hook == "none" ? "" : ", comm hook " + hook)};
  if (!f.overlap) {
    std::vector<double> ratios;
    for (const StepRecord& s : rec.steps) {
      if (s.measured && s.mode && s.mode->overlap_ratio) ratios.push_back(*s.mode->overlap_ratio);
    }
    f.overlap = median(ratios);
  }
  // Peak over every device: top-level memory[], and each DDP rank's memory[].
  int64_t peak = peak_memory_bytes(rec.memory);
  if (rec.ranks) {
    for (const RankRecord& r : *rec.ranks) peak = std::max(peak, peak_memory_bytes(r.memory));
  }
  if (!rec.memory.empty() || rec.ranks) f.peak_bytes = static_cast<double>(peak);
  return f;
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
      const RunMetrics* m = r.metrics ? &*r.metrics : nullptr;
      out.push_back({r.id,
                     {r.status ? std::string(enum_name(*r.status)) : "(no status)",
                      m ? std::optional(m->samples_per_s) : std::nullopt,
                      m ? std::optional(m->step_time_ms.median) : std::nullopt,
                      m ? m->overlap_ratio : std::nullopt, m ? run_peak_memory(r) : std::nullopt,
                      fmt::format("{} {} on {} device(s), global batch {}{}", r.workload,
                                  enum_name(r.mode), r.world_size, r.global_batch.value_or(0),
                                  r.variant.empty() ? "" : ", " + r.variant)}});
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

// One metric of one run: the table cell, and a regression line when it moved the wrong way.
struct Delta {
  std::string cell;
  std::optional<std::string> regression;
};

enum class Better { Higher, Lower };

// Relative change in percent.
Delta relative(const char* name, std::optional<double> base, std::optional<double> now,
               Better better, double threshold, std::string (*format)(std::optional<double>)) {
  if (!base || !now) return {format(base) + " -> " + format(now), std::nullopt};
  if (*base <= 0) return {format(base) + " -> " + format(now), std::nullopt};
  const double pct = (*now - *base) / *base * 100;
  Delta d{fmt::format("{} -> {} ({:+.1f}%)", format(base), format(now), pct), std::nullopt};
  const bool worse = better == Better::Higher ? pct < -threshold : pct > threshold;
  if (worse) {
    d.regression = fmt::format("{} {} -> {} ({:+.1f}%, threshold {}%)", name, format(base),
                               format(now), pct, threshold);
  }
  return d;
}

// Overlap is already a fraction: its change is in percentage points.
Delta points(std::optional<double> base, std::optional<double> now, double threshold) {
  if (!base || !now) return {format_percent(base) + " -> " + format_percent(now), std::nullopt};
  const double pp = (*now - *base) * 100;
  Delta d{fmt::format("{} -> {} ({:+.1f} pp)", format_percent(base), format_percent(now), pp),
          std::nullopt};
  if (pp < -threshold) {
    d.regression = fmt::format("overlap ratio {} -> {} ({:+.1f} pp, threshold {} pp)",
                               format_percent(base), format_percent(now), pp, threshold);
  }
  return d;
}

// Columns padded to a common width: readable in a terminal and valid Markdown.
std::string aligned_table(std::vector<std::vector<std::string>> rows) {
  for (auto& r : rows) {
    for (auto& cell : r) cell = printable(cell);  // record text reaches a terminal
  }
  std::vector<size_t> width(rows.front().size(), 3);
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  for (size_t ri = 0; ri < rows.size(); ++ri) {
    out += "|";
    for (size_t i = 0; i < rows[ri].size(); ++i)
      out += " " + rows[ri][i] + std::string(width[i] - rows[ri][i].size(), ' ') + " |";
    out += "\n";
    if (ri == 0) {
      out += "|";
      for (size_t w : width) out += std::string(w + 2, '-') + "|";
      out += "\n";
    }
  }
  return out;
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
  std::vector<std::vector<std::string>> rows = {
      {"run", "status", "samples/s", "median step ms", "overlap", "peak memory", "verdict"}};
  auto regress = [&](const std::string& id, const std::string& what) {
    result.regressions.push_back(printable(id + ": " + what));
  };

  int compared = 0;
  for (const auto& [id, bf] : b) {
    const Figures* nf = find(n, id);
    if (!nf) {
      rows.push_back({id, bf.status + " -> (missing)", "-", "-", "-", "-", "REMOVED"});
      regress(id, "missing from the new record (was " + bf.status + ")");
      continue;
    }
    if (bf.config != nf->config) {
      rows.push_back({id, "-", "-", "-", "-", "-", "NOT COMPARED"});
      result.warnings.push_back(printable(id + ": not compared, the runs differ: " + bf.config +
                                          " against " + nf->config));
      continue;
    }
    ++compared;
    const std::string status =
        bf.status == nf->status ? nf->status : bf.status + " -> " + nf->status;
    if (bf.status != "ok" || nf->status != "ok") {
      const bool lost = bf.status == "ok";
      rows.push_back({id, status, "-", "-", "-", "-",
                      lost                 ? "REGRESSED"
                      : nf->status == "ok" ? "fixed"
                                           : "not ok in both"});
      if (lost) regress(id, "was ok, now " + nf->status);
      continue;
    }
    const Delta deltas[] = {relative("samples/s", bf.samples_per_s, nf->samples_per_s,
                                     Better::Higher, threshold_pct, format_number),
                            relative("median step time (ms)", bf.median_ms, nf->median_ms,
                                     Better::Lower, threshold_pct, format_number),
                            points(bf.overlap, nf->overlap, threshold_pct),
                            relative("peak memory", bf.peak_bytes, nf->peak_bytes, Better::Lower,
                                     threshold_pct, format_bytes)};
    bool worse = false;
    std::vector<std::string> row = {id, status};
    for (const Delta& d : deltas) {
      row.push_back(d.cell);
      if (d.regression) {
        regress(id, *d.regression);
        worse = true;
      }
    }
    row.push_back(worse ? "REGRESSED" : "ok");
    rows.push_back(std::move(row));
  }
  for (const auto& [id, nf] : n) {
    if (!find(b, id))
      rows.push_back({id, "(new) " + nf.status, format_number(nf.samples_per_s),
                      format_number(nf.median_ms), format_percent(nf.overlap),
                      format_bytes(nf.peak_bytes), "added"});
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
