#include "comm/flight_recorder.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "base/atomic_file.h"
#include "core/check.h"
#include "core/clock.h"

namespace ddpb::comm {
namespace {

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
  e.enqueue_ns = steady_now_ns();
  newest_ = std::max(newest_, sequence);
}

void FlightRecorder::started(int64_t sequence) {
  std::lock_guard lock(mutex_);
  if (Entry* e = slot(sequence)) {
    e->state = State::Started;
    e->start_ns = steady_now_ns();
  }
}

void FlightRecorder::finished(int64_t sequence, bool failed) {
  std::lock_guard lock(mutex_);
  if (Entry* e = slot(sequence)) {
    e->state = failed ? State::Failed : State::Completed;
    e->end_ns = steady_now_ns();
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

namespace {

// Why `dir` may not hold dumps ("" when it may, or when it does not exist).
std::string unsafe_flight_dir(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return "";
  if (S_ISLNK(st.st_mode)) return "is a symbolic link";
  if (!S_ISDIR(st.st_mode)) return "is not a directory";
  if (st.st_uid != ::geteuid())
    return "belongs to another user (uid " + std::to_string(st.st_uid) + ")";
  return "";
}

// Creates `dir` with mode 0700 and checks what is there. Only `dir` itself: never the folders
// above it (TMPDIR=/nonexistent/x must not create /nonexistent; issue 25, M10).
bool make_flight_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return false;
  return unsafe_flight_dir(dir).empty();
}

}  // namespace

std::string default_flight_dir(int master_port) {
  const char* base = std::getenv("XDG_RUNTIME_DIR");
  if (base == nullptr || *base == '\0') base = std::getenv("TMPDIR");
  if (base == nullptr || *base == '\0') base = "/tmp";
  return std::string(base) + "/ddpbench-flight-" + std::to_string(master_port);
}

void check_flight_dir(const std::string& dir) {
  const std::string why = unsafe_flight_dir(dir);
  DDPB_USAGE_CHECK(why.empty()) << "the flight-recorder directory " << dir << " " << why
                                << ": refusing to write dumps there (choose one with --flight-dir)";
}

void set_flight_identity(int rank, int world_size, std::string dump_dir) {
  if (!dump_dir.empty()) check_flight_dir(dump_dir);
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
    if (dir.empty() || !make_flight_dir(dir)) return "";
    nlohmann::json doc = {{"rank", rank},
                          {"world_size", world},
                          {"pid", ::getpid()},
                          {"reason", reason},
                          {"dumped_ns", steady_now_ns()},
                          {"entries", flight_recorder().to_json()}};
    const std::string path = dir + "/rank" + std::to_string(rank) + ".json";
    // Note [Atomic file writes]: the doctor never reads half a dump.
    write_file_atomic(path,
                      doc.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                      "flight-recorder dump");
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

}  // namespace ddpb::comm
