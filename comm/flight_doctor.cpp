#include "comm/flight_doctor.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/input_file.h"
#include "core/check.h"

namespace ddpb::comm {
namespace {

using Dumps = std::map<int64_t, nlohmann::json>;

// An entry as dump_flight_recorder writes it: what the doctor reads, with those types.
bool is_valid_entry(const nlohmann::json& e) {
  if (!e.is_object()) return false;
  for (const char* key : {"seq", "bytes"}) {
    if (!e.contains(key) || !e[key].is_number_integer()) return false;
  }
  for (const char* key : {"op", "tag", "dtype", "state"}) {
    if (!e.contains(key) || !e[key].is_string()) return false;
  }
  return true;
}

void check_entries(const nlohmann::json& entries, const std::string& path) {
  for (const auto& e : entries) {
    DDPB_USAGE_CHECK(is_valid_entry(e))
        << path << " holds a malformed entry: "
        << e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).substr(0, 200);
  }
}

// A dump's sub-groups (Note [Sub-groups]): [{"group": name, "entries": [...]}].
void check_groups(const nlohmann::json& groups, const std::string& path) {
  DDPB_USAGE_CHECK(groups.is_array()) << path << ": \"groups\" is not a list";
  for (const auto& g : groups) {
    DDPB_USAGE_CHECK(g.is_object() && g.contains("group") && g["group"].is_string() &&
                     g.contains("entries") && g["entries"].is_array())
        << path << " holds a malformed group: "
        << g.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).substr(0, 200);
    check_entries(g["entries"], path);
  }
}

// A dump's text: a regular file of bounded size (Note [User-named inputs]; a FIFO planted as
// rank0.json must not block the doctor).
std::string read_dump(const std::string& path) {
  constexpr size_t kMaxDumpBytes = size_t{256} << 20;
  try {
    return read_input_file(path, kMaxDumpBytes);
  } catch (const InputFileError& e) {
    DDPB_USAGE_FAIL() << "flight-recorder dump " << e.what();
  }
  return {};
}

// Note [Dumps of an earlier job]
// The folder of a port outlives its job, and a job across hosts shares one token
// (DDPBENCH_STORE_TOKEN) with every job before it on those hosts: a rank<r>.json left by an
// earlier job with that token reads as this job's. Had rank 1 of the earlier job dumped and
// this job's rank 1 died without a dump, the doctor would see every rank present and none
// behind. So the launcher also passes the time it started: a dump written before that is
// another job's, whatever its token. (The files written here are dated by this host's clock,
// rank 0's collected ones too, so no clock of another host enters.)
Dumps read_dumps(const std::string& dir, const std::string& job,
                 std::filesystem::file_time_type written_since, int64_t& other_jobs) {
  Dumps dumps;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank", 0) != 0 || entry.path().extension() != ".json") continue;
    try {
      nlohmann::json doc = nlohmann::json::parse(read_dump(entry.path().string()));
      const int64_t rank = doc.at("rank").get<int64_t>();  // before the move below
      DDPB_USAGE_CHECK(doc.contains("entries") && doc["entries"].is_array())
          << entry.path().string() << " has no entries list";
      check_entries(doc["entries"], entry.path().string());
      DDPB_USAGE_CHECK(!doc.contains("reason") || doc["reason"].is_string())
          << entry.path().string() << ": \"reason\" is not text";
      DDPB_USAGE_CHECK(!doc.contains("signal") || !doc["signal"].is_object() ||
                       !doc["signal"].contains("name") || doc["signal"]["name"].is_string())
          << entry.path().string() << ": the signal's \"name\" is not text";
      if (doc.contains("groups")) check_groups(doc["groups"], entry.path().string());
      std::error_code time_ec;
      const bool earlier = entry.last_write_time(time_ec) < written_since || time_ec;
      if ((!job.empty() && doc.value("job", std::string()) != job) || earlier) {
        ++other_jobs;  // an earlier job's dump on the same port (Note [Dumps of an earlier job])
        continue;
      }
      dumps[rank] = std::move(doc);
    } catch (const nlohmann::json::exception& e) {
      DDPB_USAGE_FAIL() << entry.path().string() << " is not a flight-recorder dump: " << e.what();
    }
  }
  DDPB_USAGE_CHECK(!ec && !dumps.empty()) << "no flight-recorder dumps (rank<r>.json)"
                                          << (job.empty() ? "" : " of this job") << " in " << dir;
  return dumps;
}

// Per rank: the last collective it issued, the last one it completed, and what its dump says
// of where it stood and how it stopped.
struct Progress {
  int64_t issued = -1, completed = -1;
  nlohmann::json stuck;  // the first collective issued but not completed
  std::string reason;
  std::map<int64_t, nlohmann::json> by_seq;  // every entry, by sequence number
  nlohmann::json step;                       // "progress": step, phase, in_phase_s
  nlohmann::json signal;  // "signal": name, sender_pid, from_parent, launcher_died
  std::string host;       // "host", hostname characters only
};

// Text from a dump as it may reach a terminal: printable ASCII, at most 200 characters (the
// dumps are untrusted, and since Note [Flight dumps across hosts] some came over the network;
// issue 48, P21).
std::string text_of(const nlohmann::json& v, size_t max_chars = 200) {
  std::string t = v.get<std::string>().substr(0, max_chars);
  for (char& c : t) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return t;
}

// A dump's host name, reduced to what a hostname may hold: the dump is untrusted, and the name
// reaches a terminal.
std::string host_of(const nlohmann::json& doc) {
  if (!doc.contains("host") || !doc["host"].is_string()) return "";
  std::string host = doc["host"].get<std::string>().substr(0, 253);
  for (char& c : host) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '?';
  }
  return host;
}

// A rank's progress through `entries` (the world's, or a sub-group's), with what its dump
// says of where it stood.
Progress progress_of(const nlohmann::json& doc, const nlohmann::json& entries) {
  Progress p;
  p.reason = doc.value("reason", "");
  if (doc.contains("progress") && doc["progress"].is_object()) p.step = doc["progress"];
  if (doc.contains("signal") && doc["signal"].is_object()) p.signal = doc["signal"];
  p.host = host_of(doc);
  for (const auto& e : entries) {
    const int64_t seq = e["seq"].get<int64_t>();
    p.by_seq[seq] = e;
    p.issued = std::max(p.issued, seq);
    if (e["state"] == "completed") {
      p.completed = std::max(p.completed, seq);
    } else if (p.stuck.is_null()) {
      p.stuck = e;
    }
  }
  return p;
}

int64_t dtype_bytes(const std::string& dtype) {
  if (dtype == "f64" || dtype == "i64") return 8;
  if (dtype == "f16" || dtype == "bf16") return 2;
  if (dtype == "u8" || dtype == "i8") return 1;
  return 4;
}

// "allreduce f32[1024]": the op and the tensor it carries.
std::string op_shape(const nlohmann::json& e) {
  const std::string dtype = text_of(e["dtype"]);
  return text_of(e["op"]) + " " + dtype + "[" +
         std::to_string(e["bytes"].get<int64_t>() / dtype_bytes(dtype)) + "]";
}

std::string describe(const nlohmann::json& e) {
  std::ostringstream s;
  s << "#" << e["seq"].get<int64_t>() << " " << text_of(e["op"]);
  if (!e["tag"].get<std::string>().empty()) s << " (" << text_of(e["tag"]) << ")";
  s << ", " << e["bytes"].get<int64_t>() << " bytes " << text_of(e["dtype"]);
  return s.str();
}

// " and was in phase forward of step 2 for 3.1 s" from a dump's progress, or "".
std::string where_it_stood(const Progress& p) {
  if (!p.step.is_object() || !p.step.contains("phase") || !p.step["phase"].is_string() ||
      p.step["phase"].get<std::string>().empty())
    return "";
  std::ostringstream s;
  s << " and was in phase " << text_of(p.step["phase"]);
  if (p.step.contains("step") && p.step["step"].is_number_integer())
    s << " of step " << p.step["step"].get<int64_t>();
  if (p.step.contains("in_phase_s") && p.step["in_phase_s"].is_number())
    s << " for " << std::fixed << std::setprecision(1) << p.step["in_phase_s"].get<double>()
      << " s";
  return s.str();
}

// A signal that did not come from the rank's own launcher (a user's kill, a scheduler's).
bool signalled_from_outside(const Progress& p) {
  return p.signal.is_object() && p.signal.contains("from_parent") &&
         p.signal["from_parent"].is_boolean() && !p.signal["from_parent"].get<bool>();
}

// A rank whose launcher died (killed with its host, or by the OOM killer): the kernel's
// SIGTERM on the launcher's death (PR_SET_PDEATHSIG) stopped it, not its launcher's choice.
bool launcher_died(const Progress& p) {
  return p.signal.is_object() && p.signal.contains("launcher_died") &&
         p.signal["launcher_died"].is_boolean() && p.signal["launcher_died"].get<bool>();
}

// The signal's sender pid as the dump claims it; "?" when absent or not a number.
std::string sender_of(const Progress& p) {
  if (!p.signal.is_object() || !p.signal.contains("sender_pid")) return "?";
  const nlohmann::json& pid = p.signal["sender_pid"];
  return pid.is_number_integer() ? std::to_string(pid.get<int64_t>()) : "?";
}

std::string ranks_text(const std::pair<int64_t, int64_t>& run) {
  return run.first == run.second
             ? "rank " + std::to_string(run.first)
             : "ranks " + std::to_string(run.first) + "-" + std::to_string(run.second);
}

std::vector<std::pair<int64_t, int64_t>> missing_ranks(const Dumps& dumps, int64_t world) {
  std::vector<std::pair<int64_t, int64_t>> missing;
  int64_t next = 0;
  for (const auto& [rank, doc] : dumps) {
    if (rank > next) missing.emplace_back(next, rank - 1);
    next = rank + 1;
  }
  if (next < world) missing.emplace_back(next, world - 1);
  return missing;
}

// The first sequence number at which two ranks issued different collectives (op, dtype or
// size): "collective mismatch at #23: rank 0 allreduce f32[N], rank 1 allgather f32[M]".
std::optional<std::string> find_mismatch(const std::map<int64_t, Progress>& progress) {
  std::map<int64_t, std::pair<int64_t, const nlohmann::json*>> first;  // seq -> (rank, entry)
  std::optional<std::pair<int64_t, std::string>> found;
  for (const auto& [r, p] : progress) {
    for (const auto& [seq, e] : p.by_seq) {
      const auto [it, fresh] = first.try_emplace(seq, r, &e);
      if (fresh || op_shape(*it->second.second) == op_shape(e)) continue;
      if (found && found->first <= seq) continue;
      found = {seq, "collective mismatch at #" + std::to_string(seq) + ": rank " +
                        std::to_string(it->second.first) + " " + op_shape(*it->second.second) +
                        ", rank " + std::to_string(r) + " " + op_shape(e)};
    }
  }
  if (!found) return std::nullopt;
  return found->second;
}

// What the other ranks wait in: the first collective that one of them did not complete. A
// rank stopped inside #81 has issued #81, and the others, having issued #82 behind it, still
// wait in #81 (issue 48, P30: under MPI, #82 only queued). Else `behind`'s next collective on
// a rank that issued it.
std::string waiting_text(const std::map<int64_t, Progress>& progress, int64_t behind,
                         int64_t behind_issued) {
  const nlohmann::json* first_stuck = nullptr;
  for (const auto& [r, p] : progress) {
    if (r == behind || p.stuck.is_null()) continue;
    if (!first_stuck || p.stuck["seq"].get<int64_t>() < (*first_stuck)["seq"].get<int64_t>())
      first_stuck = &p.stuck;
  }
  if (first_stuck) return ", while other ranks wait in " + describe(*first_stuck);
  for (const auto& [r, p] : progress) {
    const auto it = p.by_seq.find(behind_issued + 1);
    if (it != p.by_seq.end()) return ", while other ranks wait in " + describe(it->second);
  }
  return "";
}

// "rank 3", or "rank 3 on host b" once the dumps span hosts (Note [Flight dumps across hosts]).
std::string rank_name(const std::map<int64_t, Progress>& progress, int64_t r) {
  std::set<std::string> hosts;
  for (const auto& [rank, p] : progress) hosts.insert(p.host);
  const std::string& host = progress.at(r).host;
  return "rank " + std::to_string(r) +
         (hosts.size() > 1 && !host.empty() ? " on host " + host : std::string());
}

// The verdict lines, given each dumped rank's progress.
void add_verdicts(FlightDiagnosis& d, const std::map<int64_t, Progress>& progress) {
  const auto who = [&](int64_t r) { return rank_name(progress, r); };
  if (const auto mismatch = find_mismatch(progress)) d.verdicts.push_back(*mismatch);
  for (const auto& [r, p] : progress) {
    const std::string sender = sender_of(p);
    if (signalled_from_outside(p)) {
      d.verdicts.push_back(who(r) + " was stopped by " +
                           text_of(p.signal.value("name", std::string("a signal"))) + " from pid " +
                           sender + " (not its launcher) after issuing collectives up to #" +
                           std::to_string(p.issued) + where_it_stood(p));
    } else if (launcher_died(p)) {
      d.verdicts.push_back(who(r) + " was stopped as its launcher (pid " + sender +
                           ") died, after issuing collectives up to #" + std::to_string(p.issued) +
                           where_it_stood(p));
    }
  }
  d.culprit_named = !d.verdicts.empty();
  int64_t max_issued = -1;
  for (const auto& [r, p] : progress) max_issued = std::max(max_issued, p.issued);
  for (const auto& [r, p] : progress) {
    if (p.issued < max_issued) d.behind.push_back(r);
  }
  if (d.behind.empty() && d.missing.empty()) {
    if (!d.verdicts.empty()) return;
    std::string line = "every rank issued the same collectives (up to #" +
                       std::to_string(max_issued) + "); none is behind";
    for (const auto& [r, p] : progress) {
      if (p.stuck.is_null()) continue;
      line += "; " + who(r) + " did not complete " + describe(p.stuck);
      break;
    }
    d.verdicts.push_back(line);
    return;
  }
  // A rank without a dump is waited for in the first collective the others did not complete.
  const nlohmann::json* first_stuck = nullptr;
  for (const auto& [r, p] : progress) {
    if (!p.stuck.is_null() &&
        (!first_stuck || p.stuck["seq"].get<int64_t>() < (*first_stuck)["seq"].get<int64_t>()))
      first_stuck = &p.stuck;
  }
  const std::string waited =
      first_stuck ? ", while other ranks wait in " + describe(*first_stuck) : "";
  d.culprit_named = true;
  for (const auto& run : d.missing) {
    const bool one = run.first == run.second;
    d.verdicts.push_back(ranks_text(run) + (one ? " is behind: it" : " are behind: they") +
                         " left no dump" + waited);
  }
  for (int64_t r : d.behind) {
    const Progress& p = progress.at(r);
    if (signalled_from_outside(p) || launcher_died(p)) continue;  // said above
    d.verdicts.push_back(who(r) + " is behind: it issued collectives only up to #" +
                         std::to_string(p.issued) + where_it_stood(p) +
                         waiting_text(progress, r, p.issued));
  }
}

// The runs of world ranks a sub-group's name lists ("ranks 0-3,8", or "ranks 0-3,8 #2" for
// a second group over them, as flight_group_name writes it), or none when the name is not one
// (the dumps are untrusted); only ranks below `world`. Runs, not ranks: a name of a few bytes
// may claim two billion of them.
std::vector<std::pair<int64_t, int64_t>> member_runs(const std::string& name, int64_t world) {
  const std::string prefix = "ranks ";
  if (name.rfind(prefix, 0) != 0) return {};
  std::vector<std::pair<int64_t, int64_t>> members;
  std::istringstream runs(name.substr(prefix.size(), name.find(" #") - prefix.size()));
  std::string run;
  while (std::getline(runs, run, ',')) {
    int64_t first = -1, last = -1;
    char dash = 0;
    std::istringstream in(run);
    if (!(in >> first)) return {};
    last = (in >> dash >> last) && dash == '-' ? last : first;
    if (first < 0 || last < first || last >= world) return {};
    members.emplace_back(first, last);
  }
  return members;
}

// What the sub-groups' own numbers say (Note [Sub-groups]): per group, a collective mismatch
// among its members and the members behind in it, with report lines for those waiting in one.
// A member behind in one group may only be waiting in another's collective for a rank behind
// there (rank 0 of a hybrid job stuck in its shard group's all-gather has not reached the
// replicate group's all-reduce that rank 2 waits in): such a member is named after the ranks
// behind that wait in nothing, and says where it waits.
struct GroupFindings {
  std::vector<std::string> verdicts, lines;
  std::set<int64_t> behind;
};

// By group name (the dump's own text, whole), each member's progress in the group.
using GroupProgress = std::map<std::string, std::map<int64_t, Progress>>;

GroupProgress group_progress(const Dumps& dumps, int64_t world_size) {
  GroupProgress groups;
  for (const auto& [rank, doc] : dumps) {
    if (!doc.contains("groups")) continue;
    for (const auto& g : doc["groups"])
      groups[g["group"].get<std::string>()][rank] = progress_of(doc, g["entries"]);
  }
  // A member whose dump holds none of the group's collectives has issued none of them.
  for (auto& [name, members] : groups) {
    for (const auto& [first, last] : member_runs(name, world_size)) {
      for (auto it = dumps.lower_bound(first); it != dumps.end() && it->first <= last; ++it)
        members.try_emplace(it->first, progress_of(it->second, nlohmann::json::array()));
    }
  }
  return groups;
}

// Whether `r` waits for another rank in `p`'s numbers: it did not complete a collective that
// some other rank there has not issued.
bool waits_for_another(int64_t r, const std::map<int64_t, Progress>& progress) {
  const Progress& p = progress.at(r);
  if (p.stuck.is_null()) return false;
  const int64_t seq = p.stuck["seq"].get<int64_t>();
  for (const auto& [other, q] : progress) {
    if (other != r && q.issued < seq) return true;
  }
  return false;
}

// Where rank r waits for another rank, in the world's collectives or in a group other than
// `judged`: ", itself waiting in #4 allgather (...) of group ranks 0,1", or "". A rank stopped
// inside its own group's collective waits in it too, but for no one: that is not this.
std::string waits_in(int64_t r, const std::string& judged, const std::map<int64_t, Progress>& world,
                     const GroupProgress& groups) {
  if (waits_for_another(r, world)) return ", itself waiting in " + describe(world.at(r).stuck);
  for (const auto& [name, members] : groups) {
    if (name == judged || !members.count(r) || !waits_for_another(r, members)) continue;
    return ", itself waiting in " + describe(members.at(r).stuck) + " of group " + text_of(name);
  }
  return "";
}

GroupFindings group_findings(const Dumps& dumps, const std::map<int64_t, Progress>& world,
                             int64_t world_size) {
  const GroupProgress groups = group_progress(dumps, world_size);
  GroupFindings f;
  std::vector<std::string> bystanders;
  for (const auto& [raw_name, members] : groups) {
    const std::string name = text_of(raw_name);
    if (const auto mismatch = find_mismatch(members))
      f.verdicts.push_back("in group " + name + ", " + *mismatch);
    int64_t max_issued = -1;
    for (const auto& [r, p] : members) max_issued = std::max(max_issued, p.issued);
    for (const auto& [r, p] : members) {
      if (!p.stuck.is_null())
        f.lines.push_back("  rank " + std::to_string(r) + " in group " + name + ": waiting in " +
                          describe(p.stuck) + " [" + text_of(p.stuck["state"]) + "]");
      if (p.issued >= max_issued) continue;
      f.behind.insert(r);
      const std::string issued =
          p.issued < 0 ? "none of that group's collectives"
                       : "that group's collectives only up to #" + std::to_string(p.issued);
      const std::string waiting = waits_in(r, raw_name, world, groups);
      (waiting.empty() ? f.verdicts : bystanders)
          .push_back(rank_name(world, r) + " is behind in group " + name + ": it issued " + issued +
                     where_it_stood(p) + waiting_text(members, r, p.issued) + waiting);
    }
  }
  f.verdicts.insert(f.verdicts.end(), bystanders.begin(), bystanders.end());
  return f;
}

// The sub-groups' verdicts join the world's: after a culprit the world's numbers name, or
// instead of its "none is behind", which holds for the world's collectives only.
void add_group_findings(FlightDiagnosis& d, const GroupFindings& f) {
  if (f.verdicts.empty()) return;
  if (!d.culprit_named) d.verdicts.clear();
  d.verdicts.insert(d.verdicts.end(), f.verdicts.begin(), f.verdicts.end());
  d.culprit_named = true;
  for (int64_t r : f.behind) {
    if (std::find(d.behind.begin(), d.behind.end(), r) == d.behind.end()) d.behind.push_back(r);
  }
}

}  // namespace

FlightDiagnosis diagnose_flight_dir(const std::string& dir, const std::string& job,
                                    std::filesystem::file_time_type written_since) {
  FlightDiagnosis d;
  const Dumps dumps = read_dumps(dir, job, written_since, d.other_jobs);
  d.world = dumps.begin()->second.value("world_size", int64_t{1});
  DDPB_USAGE_CHECK(d.world >= 1 && d.world <= (int64_t{1} << 31) && dumps.begin()->first >= 0 &&
                   dumps.rbegin()->first < d.world)
      << dir << ": the dumps claim a world of " << d.world << " ranks, but hold ranks "
      << dumps.begin()->first << " to " << dumps.rbegin()->first;
  d.missing = missing_ranks(dumps, d.world);
  std::map<int64_t, Progress> progress;
  for (const auto& [rank, doc] : dumps) progress[rank] = progress_of(doc, doc["entries"]);
  for (const auto& [rank, p] : progress) d.collective_trouble |= !p.stuck.is_null();
  add_verdicts(d, progress);
  const GroupFindings in_groups = group_findings(dumps, progress, d.world);
  add_group_findings(d, in_groups);
  d.collective_trouble |= !in_groups.lines.empty();

  std::ostringstream out;
  out << "flight recorder: " << dumps.size() << " of " << d.world << " ranks dumped in " << dir;
  if (d.other_jobs > 0) out << " (" << d.other_jobs << " dump(s) of another job ignored)";
  out << "\n";
  for (const auto& run : d.missing)
    out << "  " << ranks_text(run) << ": no dump (it died without one, or never started)\n";
  for (const auto& [r, p] : progress) {
    out << "  rank " << r << ": issued up to #" << p.issued << ", completed up to #" << p.completed;
    if (!p.stuck.is_null())
      out << ", waiting in " << describe(p.stuck) << " [" << text_of(p.stuck["state"]) << "]";
    if (const std::string at = where_it_stood(p); !at.empty()) out << ";" << at.substr(4);
    out << "; dumped on " << text_of(p.reason, 1000) << "\n";
  }
  for (const std::string& line : in_groups.lines) out << line << "\n";
  for (const auto& v : d.verdicts) out << "verdict: " << v << "\n";
  d.report = out.str();
  return d;
}

std::string diagnose_flight_dumps(const std::string& dir) {
  return diagnose_flight_dir(dir).report;
}

}  // namespace ddpb::comm
