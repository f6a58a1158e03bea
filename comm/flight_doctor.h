// `ddpbench doctor`, and the launcher's verdict after a failed run: which rank is behind,
// read from the ranks' flight-recorder dumps (comm/flight_recorder.h).
//
// The rank that issued the fewest collectives is behind: the others wait for it in the next
// one and time out, so the first rank to *fail* is usually a bystander. A rank without a
// dump (killed, stopped, never started) is the prime suspect. Sub-groups (Note [Sub-groups])
// are judged the same way among their members, by each group's own numbers; a member behind
// in one group while it waits in another's collective is named after the ranks that wait in
// nothing.
//
// The dumps are untrusted input: every field is type-checked (a malformed file is a
// UsageError naming it), and the world size a dump claims is only checked for sense; the
// ranks without a dump are kept as ranges, so time, memory and output are proportional to
// the dumps themselves, whatever world size a file claims.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace ddpb::comm {

struct FlightDiagnosis {
  int64_t world = 0;
  int64_t other_jobs = 0;           // dumps of another job, or older than it, ignored
  bool collective_trouble = false;  // some rank has a collective it did not complete
  // The first verdict names a culprit: a mismatch, a rank stopped from outside or by its
  // launcher's death, or a rank behind (not "none is behind").
  bool culprit_named = false;
  std::vector<std::pair<int64_t, int64_t>> missing;  // [first, last] runs without a dump
  std::vector<int64_t> behind;                       // dumped ranks that issued fewer
  std::vector<std::string> verdicts;                 // one line each
  std::string report;                                // everything, as `doctor` prints it
};

// Reads every rank<r>.json in `dir` (only those of `job`, a flight_job_id, when given, and
// only those written since `written_since`); throws
// UsageError when there is none or one is malformed. The verdicts, most telling first: a
// collective mismatch (two ranks issued different collectives at one sequence number), a rank
// stopped by a signal from outside its launcher or by its launcher's death, then the ranks behind
// (the fewest collectives issued, or no dump), with the phase each was in.
FlightDiagnosis diagnose_flight_dir(
    const std::string& dir, const std::string& job = "",
    std::filesystem::file_time_type written_since = std::filesystem::file_time_type::min());
// The report text of diagnose_flight_dir.
std::string diagnose_flight_dumps(const std::string& dir);

}  // namespace ddpb::comm
