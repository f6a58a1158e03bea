#include "comm/flight_doctor.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
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

Dumps read_dumps(const std::string& dir) {
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
      for (const auto& e : doc["entries"]) {
        DDPB_USAGE_CHECK(is_valid_entry(e))
            << entry.path().string() << " holds a malformed entry: "
            << e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).substr(0, 200);
      }
      dumps[rank] = std::move(doc);
    } catch (const nlohmann::json::exception& e) {
      DDPB_USAGE_FAIL() << entry.path().string() << " is not a flight-recorder dump: " << e.what();
    }
  }
  DDPB_USAGE_CHECK(!ec && !dumps.empty()) << "no flight-recorder dumps (rank<r>.json) in " << dir;
  return dumps;
}

// Per rank: the last collective it issued, and the last one it completed.
struct Progress {
  int64_t issued = -1, completed = -1;
  nlohmann::json stuck;  // the first collective issued but not completed
  std::string reason;
};

Progress progress_of(const nlohmann::json& doc) {
  Progress p;
  p.reason = doc.value("reason", "");
  for (const auto& e : doc["entries"]) {
    const int64_t seq = e["seq"].get<int64_t>();
    p.issued = std::max(p.issued, seq);
    if (e["state"] == "completed") {
      p.completed = std::max(p.completed, seq);
    } else if (p.stuck.is_null()) {
      p.stuck = e;
    }
  }
  return p;
}

std::string describe(const nlohmann::json& e) {
  std::ostringstream s;
  s << "#" << e["seq"].get<int64_t>() << " " << e["op"].get<std::string>();
  if (!e["tag"].get<std::string>().empty()) s << " (" << e["tag"].get<std::string>() << ")";
  s << ", " << e["bytes"].get<int64_t>() << " bytes " << e["dtype"].get<std::string>();
  return s.str();
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

// The verdict lines, given each dumped rank's progress.
void add_verdicts(FlightDiagnosis& d, const std::map<int64_t, Progress>& progress) {
  int64_t max_issued = -1;
  for (const auto& [r, p] : progress) max_issued = std::max(max_issued, p.issued);
  for (const auto& [r, p] : progress) {
    if (p.issued < max_issued) d.behind.push_back(r);
  }
  if (d.behind.empty() && d.missing.empty()) {
    std::string line = "every rank issued the same collectives (up to #" +
                       std::to_string(max_issued) + "); none is behind";
    for (const auto& [r, p] : progress) {
      if (p.stuck.is_null()) continue;
      line += "; rank " + std::to_string(r) + " did not complete " + describe(p.stuck);
      break;
    }
    d.verdicts.push_back(line);
    return;
  }
  nlohmann::json waited_on;
  for (const auto& [r, p] : progress) {
    if (p.issued == max_issued && !p.stuck.is_null()) waited_on = p.stuck;
  }
  const std::string waiting =
      waited_on.is_null() ? "" : ", while other ranks wait in " + describe(waited_on);
  for (const auto& run : d.missing) {
    const bool one = run.first == run.second;
    d.verdicts.push_back(ranks_text(run) + (one ? " is behind: it" : " are behind: they") +
                         " left no dump" + waiting);
  }
  for (int64_t r : d.behind) {
    d.verdicts.push_back("rank " + std::to_string(r) +
                         " is behind: it issued collectives only up to #" +
                         std::to_string(progress.at(r).issued) + waiting);
  }
}

}  // namespace

FlightDiagnosis diagnose_flight_dir(const std::string& dir) {
  const Dumps dumps = read_dumps(dir);
  FlightDiagnosis d;
  d.world = dumps.begin()->second.value("world_size", int64_t{1});
  DDPB_USAGE_CHECK(d.world >= 1 && d.world <= (int64_t{1} << 31) && dumps.begin()->first >= 0 &&
                   dumps.rbegin()->first < d.world)
      << dir << ": the dumps claim a world of " << d.world << " ranks, but hold ranks "
      << dumps.begin()->first << " to " << dumps.rbegin()->first;
  d.missing = missing_ranks(dumps, d.world);
  std::map<int64_t, Progress> progress;
  for (const auto& [rank, doc] : dumps) progress[rank] = progress_of(doc);
  add_verdicts(d, progress);

  std::ostringstream out;
  out << "flight recorder: " << dumps.size() << " of " << d.world << " ranks dumped in " << dir
      << "\n";
  for (const auto& run : d.missing)
    out << "  " << ranks_text(run) << ": no dump (it died without one, or never started)\n";
  for (const auto& [r, p] : progress) {
    out << "  rank " << r << ": issued up to #" << p.issued << ", completed up to #" << p.completed;
    if (!p.stuck.is_null())
      out << ", waiting in " << describe(p.stuck) << " [" << p.stuck["state"].get<std::string>()
          << "]";
    out << "; dumped on " << p.reason << "\n";
  }
  for (const auto& v : d.verdicts) out << "verdict: " << v << "\n";
  d.report = out.str();
  return d;
}

std::string diagnose_flight_dumps(const std::string& dir) {
  return diagnose_flight_dir(dir).report;
}

}  // namespace ddpb::comm
