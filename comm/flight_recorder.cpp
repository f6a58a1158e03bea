#include "comm/flight_recorder.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "core/check.h"

namespace ddpb::comm {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const char* state_name(FlightRecorder::State s) {
  switch (s) {
    case FlightRecorder::State::Enqueued:
      return "enqueued";
    case FlightRecorder::State::Started:
      return "started";
    case FlightRecorder::State::Completed:
      return "completed";
    case FlightRecorder::State::Failed:
      return "failed";
  }
  return "?";
}

struct Identity {
  std::mutex mutex;
  int rank = 0;
  int world_size = 1;
  std::string dir;
};
Identity& identity() {
  static auto* id = new Identity();  // leaked: used from signal paths at exit
  return *id;
}

}  // namespace

FlightRecorder::FlightRecorder(size_t capacity) : ring_(std::max<size_t>(capacity, 1)) {}

FlightRecorder::Entry* FlightRecorder::slot(int64_t sequence) {
  Entry& e = ring_[static_cast<size_t>(sequence) % ring_.size()];
  return e.sequence == sequence ? &e : nullptr;
}

void FlightRecorder::enqueued(int64_t sequence, const std::string& op, int64_t bytes,
                              const std::string& dtype) {
  std::lock_guard lock(mutex_);
  Entry& e = ring_[static_cast<size_t>(sequence) % ring_.size()];
  e = Entry{};
  e.sequence = sequence;
  e.op = op;
  e.bytes = bytes;
  e.dtype = dtype;
  e.enqueue_ns = now_ns();
  newest_ = std::max(newest_, sequence);
}

void FlightRecorder::started(int64_t sequence) {
  std::lock_guard lock(mutex_);
  if (Entry* e = slot(sequence)) {
    e->state = State::Started;
    e->start_ns = now_ns();
  }
}

void FlightRecorder::finished(int64_t sequence, bool failed) {
  std::lock_guard lock(mutex_);
  if (Entry* e = slot(sequence)) {
    e->state = failed ? State::Failed : State::Completed;
    e->end_ns = now_ns();
  }
}

void FlightRecorder::tag(int64_t sequence, const std::string& tag) {
  std::lock_guard lock(mutex_);
  if (Entry* e = slot(sequence)) e->tag = tag;
}

nlohmann::json FlightRecorder::to_json() const {
  std::lock_guard lock(mutex_);
  nlohmann::json out = nlohmann::json::array();
  if (newest_ < 0) return out;
  const int64_t oldest = std::max<int64_t>(0, newest_ - static_cast<int64_t>(ring_.size()) + 1);
  for (int64_t s = oldest; s <= newest_; ++s) {
    const Entry& e = ring_[static_cast<size_t>(s) % ring_.size()];
    if (e.sequence != s) continue;
    out.push_back({{"seq", e.sequence},
                   {"op", e.op},
                   {"tag", e.tag},
                   {"bytes", e.bytes},
                   {"dtype", e.dtype},
                   {"state", state_name(e.state)},
                   {"enqueue_ns", e.enqueue_ns},
                   {"start_ns", e.start_ns},
                   {"end_ns", e.end_ns}});
  }
  return out;
}

FlightRecorder& flight_recorder() {
  static auto* recorder = new FlightRecorder();  // leaked on purpose, like identity()
  return *recorder;
}

void set_flight_identity(int rank, int world_size, std::string dump_dir) {
  Identity& id = identity();
  std::lock_guard lock(id.mutex);
  id.rank = rank;
  id.world_size = world_size;
  id.dir = std::move(dump_dir);
}

std::string dump_flight_recorder(const std::string& reason) noexcept {
  try {
    Identity& id = identity();
    int rank, world;
    std::string dir;
    {
      std::lock_guard lock(id.mutex);
      rank = id.rank;
      world = id.world_size;
      dir = id.dir;
    }
    if (dir.empty()) return "";
    std::filesystem::create_directories(dir);
    nlohmann::json doc = {{"rank", rank},          {"world_size", world},
                          {"pid", ::getpid()},     {"reason", reason},
                          {"dumped_ns", now_ns()}, {"entries", flight_recorder().to_json()}};
    const std::string path = dir + "/rank" + std::to_string(rank) + ".json";
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    {
      std::ofstream out(tmp);
      out << doc.dump(1) << "\n";
      if (!out) return "";
    }
    std::filesystem::rename(tmp, path);
    return path;
  } catch (...) {
    return "";
  }
}

namespace {

std::atomic<int> g_dump_requested{0};

void on_fatal(int sig) {
  // Best effort: the process is going down anyway. Writing JSON here is not
  // async-signal-safe, but the alternative is losing the one record that explains the hang.
  dump_flight_recorder(std::string("signal ") + strsignal(sig));
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void on_usr1(int) {
  g_dump_requested = 1;
}

}  // namespace

void install_flight_recorder_signal_handlers() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  for (int sig : {SIGTERM, SIGSEGV, SIGABRT, SIGBUS, SIGFPE}) ::signal(sig, on_fatal);
  ::signal(SIGUSR1, on_usr1);
  // SIGUSR1 only sets a flag; this thread does the dump outside the signal handler.
  std::thread([] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (g_dump_requested.exchange(0)) dump_flight_recorder("SIGUSR1 (on request)");
    }
  }).detach();
}

std::string diagnose_flight_dumps(const std::string& dir) {
  std::map<int, nlohmann::json> dumps;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank", 0) != 0 || entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    try {
      nlohmann::json doc = nlohmann::json::parse(in);
      const int rank = doc.at("rank").get<int>();  // before the move below
      dumps[rank] = std::move(doc);
    } catch (const std::exception& e) {
      DDPB_USAGE_FAIL() << entry.path().string() << " is not a flight-recorder dump: " << e.what();
    }
  }
  DDPB_USAGE_CHECK(!ec && !dumps.empty()) << "no flight-recorder dumps (rank<r>.json) in " << dir;
  const int world = dumps.begin()->second.value("world_size", static_cast<int>(dumps.size()));

  // Per rank: the last collective it issued, and the last one it completed.
  struct Progress {
    int64_t issued = -1, completed = -1;
    nlohmann::json stuck;  // the first collective issued but not completed
    std::string reason;
  };
  std::map<int, Progress> progress;
  for (auto& [rank, doc] : dumps) {
    Progress p;
    p.reason = doc.value("reason", "");
    for (const auto& e : doc["entries"]) {
      int64_t seq = e["seq"].get<int64_t>();
      p.issued = std::max(p.issued, seq);
      if (e["state"] == "completed") {
        p.completed = std::max(p.completed, seq);
      } else if (p.stuck.is_null()) {
        p.stuck = e;
      }
    }
    progress[rank] = p;
  }
  auto describe = [](const nlohmann::json& e) {
    std::ostringstream s;
    s << "#" << e["seq"].get<int64_t>() << " " << e["op"].get<std::string>();
    if (!e["tag"].get<std::string>().empty()) s << " (" << e["tag"].get<std::string>() << ")";
    s << ", " << e["bytes"].get<int64_t>() << " bytes " << e["dtype"].get<std::string>();
    return s.str();
  };

  std::ostringstream out;
  out << "flight recorder: " << dumps.size() << " of " << world << " ranks dumped in " << dir
      << "\n";
  for (int r = 0; r < world; ++r) {
    if (!dumps.count(r)) {
      out << "  rank " << r << ": no dump (it died without one, or never started)\n";
      continue;
    }
    const Progress& p = progress[r];
    out << "  rank " << r << ": issued up to #" << p.issued << ", completed up to #" << p.completed;
    if (!p.stuck.is_null())
      out << ", waiting in " << describe(p.stuck) << " [" << p.stuck["state"].get<std::string>()
          << "]";
    out << "; dumped on " << p.reason << "\n";
  }
  // The rank that issued the fewest collectives is behind: the others wait for it in the
  // next one. A rank without a dump is the prime suspect.
  int64_t max_issued = -1;
  for (auto& [r, p] : progress) max_issued = std::max(max_issued, p.issued);
  std::vector<int> behind;
  for (int r = 0; r < world; ++r) {
    if (!progress.count(r) || progress[r].issued < max_issued) behind.push_back(r);
  }
  if (behind.empty()) {
    out << "verdict: every rank issued the same collectives (up to #" << max_issued
        << "); none is behind";
    for (auto& [r, p] : progress) {
      if (!p.stuck.is_null()) {
        out << "; rank " << r << " did not complete " << describe(p.stuck);
        break;
      }
    }
    out << "\n";
  } else {
    nlohmann::json waited_on;
    for (auto& [r, p] : progress) {
      if (p.issued == max_issued && !p.stuck.is_null()) waited_on = p.stuck;
    }
    for (int r : behind) {
      out << "verdict: rank " << r << " is behind: ";
      if (progress.count(r)) {
        out << "it issued collectives only up to #" << progress[r].issued;
      } else {
        out << "it left no dump";
      }
      if (!waited_on.is_null()) out << ", while other ranks wait in " << describe(waited_on);
      out << "\n";
    }
  }
  return out.str();
}

}  // namespace ddpb::comm
