#include "comm/flight_recorder.h"

#include "comm/local_address.h"

#include <semaphore.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <fmt/core.h>

#include "base/atomic_file.h"
#include "base/process_guards.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/progress.h"
#include "core/rng.h"

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
  std::string job;   // flight_job_id of the store token: the launcher reads only its job's dumps
  std::string host;  // this host's name, in every dump (Note [Flight dumps across hosts])
  // The launcher that started this rank: getppid() at set_flight_identity. Once the launcher
  // dies, getppid() names the reaper, and the SIGTERM its death sends (PR_SET_PDEATHSIG)
  // still carries the launcher's pid.
  int launcher_pid = 0;
  std::function<void(int, const std::string&)> ship;  // set_flight_dump_shipper
};
Identity& identity() {
  static auto* id = new Identity();  // leaked: used from signal paths at exit
  return *id;
}

}  // namespace

FlightRecorder::FlightRecorder(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {
  rings_.push_back(std::make_unique<Entries>());
  rings_.back()->ring.resize(capacity_);
}

FlightRecorder::Ring FlightRecorder::ring(const std::string& group) {
  if (group.empty()) return kWorld;
  std::lock_guard lock(mutex_);
  for (size_t r = 1; r < rings_.size(); ++r) {
    if (rings_[r]->group == group) return r;
  }
  rings_.push_back(std::make_unique<Entries>());
  rings_.back()->group = group;
  rings_.back()->ring.resize(capacity_);
  return rings_.size() - 1;
}

FlightRecorder::Entry* FlightRecorder::slot(Ring ring, int64_t sequence) {
  std::vector<Entry>& entries = rings_.at(ring)->ring;
  Entry& e = entries[static_cast<size_t>(sequence) % entries.size()];
  return e.sequence == sequence ? &e : nullptr;
}

void FlightRecorder::enqueued(Ring ring, int64_t sequence, std::string_view op, int64_t bytes,
                              std::string_view dtype, int64_t enqueue_ns, bool started) {
  std::lock_guard lock(mutex_);
  Entries& entries = *rings_.at(ring);
  const size_t size = entries.ring.size();
  Entry& e = entries.ring[static_cast<size_t>(sequence) % size];
  // The next collective's slot, fetched while this one runs (it was last written a ring ago).
  const Entry& next = entries.ring[static_cast<size_t>(sequence + 1) % size];
  __builtin_prefetch(&next, 1);
  __builtin_prefetch(reinterpret_cast<const char*>(&next) + 64, 1);
  if (e.sequence >= 0 && (e.state == State::Enqueued || e.state == State::Started)) --in_flight_;
  ++in_flight_;
  // Field by field, so that the slot's tag keeps its buffer.
  e.sequence = sequence;
  e.op = op;
  e.tag.clear();
  e.dtype = dtype;
  e.bytes = bytes;
  e.state = started ? State::Started : State::Enqueued;
  e.enqueue_ns = enqueue_ns;
  e.start_ns = started ? enqueue_ns : 0;
  e.end_ns = 0;
  entries.newest = std::max(entries.newest, sequence);
}

void FlightRecorder::started(Ring ring, int64_t sequence, int64_t start_ns) {
  std::lock_guard lock(mutex_);
  if (Entry* e = slot(ring, sequence)) {
    e->state = State::Started;
    e->start_ns = start_ns;
  }
}

void FlightRecorder::finished(Ring ring, int64_t sequence, bool failed, int64_t end_ns) {
  std::lock_guard lock(mutex_);
  if (Entry* e = slot(ring, sequence)) {
    if (e->state == State::Enqueued || e->state == State::Started) --in_flight_;
    e->state = failed ? State::Failed : State::Completed;
    failed_ += failed;
    e->end_ns = end_ns;
  }
}

void FlightRecorder::tag(Ring ring, int64_t sequence, const std::string& tag) {
  std::lock_guard lock(mutex_);
  if (Entry* e = slot(ring, sequence)) e->tag = tag;
}

std::string_view FlightRecorder::intern(std::string_view name) {
  std::lock_guard lock(mutex_);
  return *interned_.emplace(name).first;
}

bool FlightRecorder::any_in_flight() const {
  std::lock_guard lock(mutex_);
  return in_flight_ > 0;
}

bool FlightRecorder::collective_trouble() const {
  std::lock_guard lock(mutex_);
  return in_flight_ > 0 || failed_ > 0;
}

nlohmann::json FlightRecorder::entries_json(const Entries& entries) const {
  nlohmann::json out = nlohmann::json::array();
  if (entries.newest < 0) return out;
  const int64_t size = static_cast<int64_t>(entries.ring.size());
  for (int64_t s = std::max<int64_t>(0, entries.newest - size + 1); s <= entries.newest; ++s) {
    const Entry& e = entries.ring[static_cast<size_t>(s % size)];
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

nlohmann::json FlightRecorder::to_json() const {
  std::lock_guard lock(mutex_);
  return entries_json(*rings_[kWorld]);
}

nlohmann::json FlightRecorder::groups_to_json() const {
  std::lock_guard lock(mutex_);
  nlohmann::json out = nlohmann::json::array();
  for (size_t r = 1; r < rings_.size(); ++r) {
    out.push_back({{"group", rings_[r]->group}, {"entries", entries_json(*rings_[r])}});
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

std::string default_flight_dir(int master_port, std::string* skipped) {
  std::string base = "/tmp";
  for (const char* name : {"XDG_RUNTIME_DIR", "TMPDIR"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    struct stat st {};
    if (::stat(value, &st) == 0 && S_ISDIR(st.st_mode)) {
      base = value;
      break;
    }
    // Issue 48, P17: a variable naming no folder once meant no dumps at all, and no word.
    if (skipped && skipped->empty())
      *skipped = std::string(name) + "=" + value + " is no directory";
  }
  return base + "/ddpbench-flight-" + std::to_string(master_port);
}

std::string resolve_flight_dir(int master_port, std::string* note) {
  if (const char* given = std::getenv("DDPBENCH_FLIGHT_DIR"); given != nullptr && *given != '\0')
    return given;  // the launcher's choice for its ranks
  std::string skipped;
  const std::string dir = default_flight_dir(master_port, &skipped);
  const std::string why = unsafe_flight_dir(dir);
  if (note && !skipped.empty()) *note = skipped + ": flight-recorder dumps go to " + dir;
  if (why.empty()) return dir;
  // Someone else's folder where ours would be (issue 25, S1): refusing to write there is right,
  // refusing to run is not. A private folder of our own instead, unique to this job.
  std::string pattern = dir + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    DDPB_USAGE_FAIL() << "the flight-recorder directory " << dir << " " << why
                      << ", and a private one could not be made next to it ("
                      << std::strerror(errno) << "): choose one with --flight-dir";
  }
  if (note) *note = "flight-recorder dumps go to " + pattern + " (" + dir + " " + why + ")";
  return pattern;
}

void check_flight_dir(const std::string& dir) {
  const std::string why = unsafe_flight_dir(dir);
  DDPB_USAGE_CHECK(why.empty()) << "the flight-recorder directory " << dir << " " << why
                                << ": refusing to write dumps there (choose one with --flight-dir)";
  // Dumps make only the folder itself (Note above make_flight_dir): one whose parent is
  // missing would take no dump, silently (issue 48, P17).
  struct stat st {};
  const std::string parent = std::filesystem::path(dir).parent_path().string();
  DDPB_USAGE_CHECK(::lstat(dir.c_str(), &st) == 0 || parent.empty() ||
                   (::stat(parent.c_str(), &st) == 0 && S_ISDIR(st.st_mode)))
      << "the flight-recorder directory " << dir << " cannot be made: " << parent
      << " is no directory (choose one with --flight-dir)";
}

std::string flight_job_id(const std::string& store_token) {
  return fmt::format("{:016x}", hash_name(("flight:" + store_token).c_str()));
}

void set_flight_identity(int rank, int world_size, std::string dump_dir, std::string job) {
  if (!dump_dir.empty()) check_flight_dir(dump_dir);
  Identity& id = identity();
  std::lock_guard lock(id.mutex);
  id.rank = rank;
  id.world_size = world_size;
  id.dir = std::move(dump_dir);
  id.job = std::move(job);
  id.host = host_name();
  id.launcher_pid = static_cast<int>(::getppid());
}

void set_flight_dump_shipper(std::function<void(int rank, const std::string& dump)> ship) {
  Identity& id = identity();
  std::lock_guard lock(id.mutex);
  id.ship = std::move(ship);
}

std::string write_flight_dump(int rank, const std::string& text) noexcept {
  try {
    const std::string dir = flight_dump_dir();
    if (dir.empty() || !make_flight_dir(dir)) return "";
    const std::string path = dir + "/rank" + std::to_string(rank) + ".json";
    write_file_atomic(path, text, "flight-recorder dump of rank " + std::to_string(rank));
    return path;
  } catch (...) {
    return "";
  }
}

std::string flight_dump_dir() {
  Identity& id = identity();
  std::lock_guard lock(id.mutex);
  return id.dir;
}

namespace {

// Where the step stood (Note [Step watchdog]): the phase, and how long it has been in it.
nlohmann::json progress_json() {
  const progress::Mark m = progress::current();
  nlohmann::json p = {{"step", m.step}, {"phase", m.phase}};
  if (m.phase_start_ns > 0) p["in_phase_s"] = (steady_now_ns() - m.phase_start_ns) / 1e9;
  return p;
}

}  // namespace

std::string dump_flight_recorder(const std::string& reason,
                                 const std::optional<SignalSource>& signal, bool ship) noexcept {
  try {
    Identity& id = identity();
    int rank, world;
    std::string dir, job, host;
    int launcher = 0;
    std::function<void(int, const std::string&)> shipper;
    {
      std::lock_guard lock(id.mutex);
      rank = id.rank;
      world = id.world_size;
      dir = id.dir;
      job = id.job;
      host = id.host;
      launcher = id.launcher_pid;
      if (ship) shipper = id.ship;
    }
    if (dir.empty() || !make_flight_dir(dir)) return "";
    nlohmann::json doc = {{"rank", rank},
                          {"world_size", world},
                          {"pid", ::getpid()},
                          {"host", host},
                          {"job", job},
                          {"reason", reason},
                          {"dumped_ns", steady_now_ns()},
                          {"progress", progress_json()},
                          {"entries", flight_recorder().to_json()}};
    if (nlohmann::json groups = flight_recorder().groups_to_json(); !groups.empty())
      doc["groups"] = std::move(groups);  // Note [Sub-groups]
    if (signal) {
      const bool from_launcher = signal->sender_pid == launcher && launcher > 1;
      doc["signal"] = {{"name", signal->name},
                       {"sender_pid", signal->sender_pid},
                       {"from_parent", from_launcher},
                       {"launcher_died", from_launcher && ::getppid() != launcher}};
    }
    const std::string path = dir + "/rank" + std::to_string(rank) + ".json";
    const std::string text =
        doc.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    // Note [Atomic file writes]: the doctor never reads half a dump.
    write_file_atomic(path, text, "flight-recorder dump");
    if (shipper) shipper(rank, text);
    return path;
  } catch (...) {
    return "";
  }
}

namespace {

std::mutex g_hooks_mutex;
std::map<int, std::function<void()>> g_hooks;  // guarded by g_hooks_mutex
int g_next_hook = 0;                           // guarded by g_hooks_mutex

// Under the lock: a hook's owner removing it waits until it has run.
void run_termination_hooks() {
  const std::lock_guard lock(g_hooks_mutex);
  for (auto& [id, hook] : g_hooks) {
    try {
      hook();
    } catch (...) {
    }
  }
}

// Requests from the signal handlers to the dump thread: sem_post is async-signal-safe, and the
// thread does the dump (locks, JSON, a file) outside any handler.
sem_t g_requests;
std::atomic<int> g_usr1{0}, g_term{0};
std::atomic<pid_t> g_term_sender{0};

// The crash hook (base/process_guards.h). Best effort: the process is going down anyway, from a
// fault in this very thread. Writing JSON here is not async-signal-safe, but the alternative is
// losing the one record that explains the crash.
void dump_on_crash(int sig) {
  dump_flight_recorder(std::string("signal ") + strsignal(sig), std::nullopt, /*ship=*/false);
}

void on_term(int, siginfo_t* info, void*) {
  g_term_sender = info != nullptr ? info->si_pid : 0;
  g_term = 1;
  ::sem_post(&g_requests);
}

void on_usr1(int) {
  g_usr1 = 1;
  ::sem_post(&g_requests);
}

// The dump thread: SIGUSR1 dumps and goes on; SIGTERM dumps, naming who sent it, and then
// ends the process as SIGTERM would have.
void serve_dump_requests() {
  for (;;) {
    if (::sem_wait(&g_requests) != 0) continue;  // EINTR
    // Not shipped: rank 0 takes the first dump it finds as the rank's last word.
    if (g_usr1.exchange(0)) dump_flight_recorder("SIGUSR1 (on request)", std::nullopt, false);
    if (g_term.exchange(0)) {
      const pid_t sender = g_term_sender.load();
      dump_flight_recorder(
          "signal SIGTERM" + (sender > 0 ? " from pid " + std::to_string(sender) : std::string()),
          SignalSource{"SIGTERM", sender});
      run_termination_hooks();
      ::signal(SIGTERM, SIG_DFL);
      ::raise(SIGTERM);
    }
  }
}

}  // namespace

int add_termination_hook(std::function<void()> hook) {
  const std::lock_guard lock(g_hooks_mutex);
  g_hooks.emplace(g_next_hook, std::move(hook));
  return g_next_hook++;
}

void remove_termination_hook(int id) {
  const std::lock_guard lock(g_hooks_mutex);
  g_hooks.erase(id);
}

void install_flight_recorder_signal_handlers() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  ::sem_init(&g_requests, 0, 0);
  install_crash_handler();
  set_crash_hook(dump_on_crash);
  struct sigaction term {};
  term.sa_sigaction = on_term;
  term.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&term.sa_mask);
  ::sigaction(SIGTERM, &term, nullptr);
  ::signal(SIGUSR1, on_usr1);
  std::thread(serve_dump_requests).detach();
}

}  // namespace ddpb::comm
