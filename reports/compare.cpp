#include "reports/compare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

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

// A run's typed configuration as its leaves ("/optimizer/lr" -> 0.01), less the fields that do
// not make another experiment (Note [Runs matched by configuration]).
using Experiment = std::map<std::string, json>;

struct Run {
  std::string id;
  Figures figures;
  std::optional<Experiment> experiment;  // none in a record older than the typed configuration
};
using Runs = std::vector<Run>;  // in record order

// Note [Runs matched by configuration]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An id is a name the suite gave a run, and two suites may name one experiment differently or
// give one name to two experiments (another default, a variant renamed). So compare pairs runs
// by their typed configuration (Note [Typed run configuration]): two runs are the same experiment
// when every field both records hold is equal, except those that say where a run writes or how
// it is supervised rather than what it runs (kNotTheExperiment). A field only one record holds
// is one the older ddpbench did not write, and is passed over. Pairs are made in three passes:
// the same id and the same experiment; then the same experiment under another id (the row says
// "base id -> new id"); then, for a run without a typed configuration on either side, the same
// id, checked by its workload, mode, world size and batch as before (said once in a warning).
// A run whose id the other record gives to another experiment is NOT COMPARED, and a warning
// names the fields that differ.
const std::set<std::string> kNotTheExperiment = {
    "/out", "/dump", "/save_params", "/trace", "/trace_steps",  // where it writes
    "/flight_dir", "/rendezvous", "/timeout_s",                 // how the ranks are supervised
    // How long it ran: a step's time and the step's memory are the same experiment's over 50
    // steps or 500, which is how a quick run is checked against a long baseline.
    "/steps", "/warmup",
    // Where its input comes from: a baseline from another machine keeps its data and initial
    // parameters elsewhere, and still ran the same experiment.
    "/data", "/init_from",
    // An injected fault stands for a regression of the same experiment: what compare must
    // catch (tests/bench/cli/test_compare_runs.cpp), not another experiment.
    "/inject_fault"};

void add_leaves(const json& value, const std::string& path, Experiment& out) {
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) add_leaves(child, path + "/" + key, out);
  } else if (!kNotTheExperiment.count(path)) {
    out[path] = value;
  }
}

std::optional<Experiment> experiment_of(const json& run) {
  const auto config = run.find("config");
  if (config == run.end() || !config->is_object()) return std::nullopt;
  Experiment out;
  add_leaves(*config, "", out);
  return out;
}

// "steps 20 against 40, optimizer/lr 0.01 against 0.1": the fields both hold that differ.
std::string differences(const Experiment& a, const Experiment& b) {
  std::vector<std::string> out;
  for (const auto& [key, value] : a) {
    const auto other = b.find(key);
    if (other != b.end() && other->second != value)
      out.push_back(key.substr(1) + " " + value.dump() + " against " + other->second.dump());
  }
  std::string text;
  for (size_t i = 0; i < out.size() && i < 3; ++i) text += (i ? ", " : "") + out[i];
  if (out.size() > 3) text += fmt::format(" and {} more", out.size() - 3);
  return text;
}

bool same_experiment(const Experiment& a, const Experiment& b) {
  for (const auto& [key, value] : a) {
    const auto other = b.find(key);
    if (other != b.end() && other->second != value) return false;
  }
  return true;
}

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

// The run `id` of a suite record as written (with the fields an older ddpbench lacks), found
// by its id: the typed record skips entries that are not objects, so positions can differ.
json raw_run(const json& rec, const std::string& id) {
  if (!rec.contains("runs") || !rec["runs"].is_array()) return json();
  for (const json& r : rec["runs"]) {
    if (r.is_object() && r.contains("id") && r["id"].is_string() && r["id"] == id) return r;
  }
  return json();
}

const Run* find(const Runs& runs, const std::string& id) {
  for (const Run& r : runs) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

Runs runs_of(const json& rec, const std::string& which) {
  const std::string kind = string_at(rec, {"kind"});
  Runs out;
  if (kind == "run") {
    out.push_back({"run", run_record_figures(RunRecord::from_json(rec)), experiment_of(rec)});
  } else if (kind == "suite") {
    const std::vector<SuiteRun> runs = SuiteRecord::from_json(rec).runs;
    for (const SuiteRun& r : runs) {
      if (r.id.empty() || find(out, r.id))
        continue;  // the schema makes ids unique; a broken record keeps its first entry
      out.push_back({r.id, suite_run_figures(r), experiment_of(raw_run(rec, r.id))});
    }
  } else {
    throw ReportError("compare: the " + which + " record is neither a suite nor a run record " +
                      "(\"kind\" is \"" + kind + "\")");
  }
  return out;
}

// Which run of the new record each base run is compared with (Note [Runs matched by
// configuration]).
struct Pairing {
  std::vector<std::optional<size_t>> now_of;  // by base index
  std::vector<bool> refused;                  // by base index: its id holds another experiment
  std::vector<bool> used;                     // by new index: paired or refused
  int by_id = 0;                              // pairs made by id, without a configuration
};

Pairing pair_runs(const Runs& b, const Runs& n) {
  Pairing p{std::vector<std::optional<size_t>>(b.size()), std::vector<bool>(b.size()),
            std::vector<bool>(n.size()), 0};
  auto index_of = [&](const std::string& id) -> std::optional<size_t> {
    for (size_t j = 0; j < n.size(); ++j)
      if (n[j].id == id && !p.used[j]) return j;
    return std::nullopt;
  };
  auto pair = [&](size_t i, size_t j) { p.now_of[i] = j, p.used[j] = true; };
  auto same = [&](size_t i, size_t j) {
    return b[i].experiment && n[j].experiment &&
           same_experiment(*b[i].experiment, *n[j].experiment);
  };
  for (size_t i = 0; i < b.size(); ++i) {
    if (const auto j = index_of(b[i].id); j && same(i, *j)) pair(i, *j);
  }
  for (size_t i = 0; i < b.size(); ++i) {
    for (size_t j = 0; j < n.size() && !p.now_of[i] && b[i].experiment; ++j)
      if (!p.used[j] && same(i, j)) pair(i, j);
  }
  for (size_t i = 0; i < b.size(); ++i) {
    const auto j = p.now_of[i] ? std::nullopt : index_of(b[i].id);
    if (!j) continue;
    if (b[i].experiment && n[*j].experiment) {
      p.refused[i] = true, p.used[*j] = true;
    } else {
      pair(i, *j);
      ++p.by_id;
    }
  }
  return p;
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

// The row of a base run and the new run it is paired with; its regressions go to `result`.
std::vector<std::string> paired_row(const std::string& label, const Figures& bf, const Figures& nf,
                                    double threshold, CompareResult& result) {
  const std::string status = bf.status == nf.status ? nf.status : bf.status + " -> " + nf.status;
  if (bf.status == "ok" && nf.status == "ok")
    return ok_row(label, status, bf, nf, threshold, result);
  const bool lost = bf.status == "ok";
  if (lost) result.regressions.push_back(printable(label + ": was ok, now " + nf.status));
  const char* verdict = lost ? "REGRESSED" : nf.status == "ok" ? "fixed" : "not ok in both";
  return {label, status, "-", "-", "-", "-", "-", verdict};
}

// What the pairing did that the table alone would not say: a base run compared with another
// id while its own id names another experiment in the new record, and the pairs made by id
// alone for want of a typed configuration (said once).
void pairing_warnings(const Runs& b, const Runs& n, const Pairing& p, CompareResult& result) {
  for (size_t i = 0; i < b.size(); ++i) {
    if (!p.now_of[i]) continue;
    const Run& other = n[*p.now_of[i]];
    const Run* same_id = find(n, b[i].id);
    if (other.id == b[i].id || !same_id || !same_id->experiment || !b[i].experiment) continue;
    result.warnings.push_back(
        printable(b[i].id + ": the new record gives this id to another configuration (" +
                  differences(*b[i].experiment, *same_id->experiment) + "); compared with " +
                  other.id + ", which has this one"));
  }
  if (p.by_id > 0) {
    result.warnings.push_back(fmt::format(
        "{} run(s) matched by id alone: a record without the typed configuration (\"config\") "
        "is checked by its workload, mode, world size and batch instead",
        p.by_id));
  }
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
  const Pairing pairing = pair_runs(b, n);
  int compared = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    const Run& br = b[i];
    const Run* nr = pairing.now_of[i] ? &n[*pairing.now_of[i]] : nullptr;
    const Run* refused = pairing.refused[i] ? find(n, br.id) : nullptr;
    if (!nr && !refused) {
      rows.push_back(
          {br.id, br.figures.status + " -> (missing)", "-", "-", "-", "-", "-", "REMOVED"});
      result.regressions.push_back(
          printable(br.id + ": missing from the new record (was " + br.figures.status + ")"));
      continue;
    }
    // Runs paired by id alone are checked by what the records say of them beside the id.
    const bool unlike =
        nr && (!br.experiment || !nr->experiment) && br.figures.config != nr->figures.config;
    if (refused || unlike) {
      const Run& other = refused ? *refused : *nr;
      rows.push_back({br.id, "-", "-", "-", "-", "-", "-", "NOT COMPARED"});
      result.warnings.push_back(
          printable(br.id + ": not compared, the runs differ: " +
                    (refused ? differences(*br.experiment, *other.experiment)
                             : br.figures.config + " against " + other.figures.config)));
      continue;
    }
    ++compared;
    const std::string label = br.id == nr->id ? br.id : br.id + " -> " + nr->id;
    rows.push_back(paired_row(label, br.figures, nr->figures, threshold_pct, result));
  }
  for (size_t j = 0; j < n.size(); ++j) {
    if (pairing.used[j]) continue;
    const Figures& nf = n[j].figures;
    rows.push_back({n[j].id, "(new) " + nf.status, format_number(nf.samples_per_s),
                    format_number(nf.step ? std::optional(nf.step->median) : std::nullopt), "-",
                    format_percent(nf.overlap), format_bytes(nf.peak_bytes), "added"});
  }
  pairing_warnings(b, n, pairing, result);
  if (compared == 0 && !b.empty() && !n.empty()) {
    // The first warning names the fields that differ, which the two summaries may not show.
    throw ReportError(printable(
        "compare: nothing to compare: no run of the base ran the configuration of a run of the "
        "new record (base: " +
        b.front().figures.config + "; new: " + n.front().figures.config + ")" +
        (result.warnings.empty() ? "" : "; " + result.warnings.front())));
  }
  result.table = aligned_table(rows);
  result.regressed = !result.regressions.empty();
  return result;
}

}  // namespace ddpb::reports
