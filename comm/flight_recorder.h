// The flight recorder: each rank keeps a ring buffer of its last N collectives (sequence
// number, op, tag such as the DDP bucket, bytes, dtype, state and timestamps), so that when
// a job hangs or dies the question "which rank is behind, and on which collective?" has an
// answer. `ddpbench doctor DIR` reads every rank's dump and gives it.
//
// Recording is cheap (a mutex and a slot write per state change). Dumps are JSON files
// `DIR/rank<r>.json`, written atomically, on a collective timeout or failure, on SIGTERM and
// fatal signals (best effort), and on request with SIGUSR1.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddpb::comm {

class FlightRecorder {
 public:
  enum class State { Enqueued, Started, Completed, Failed };
  static constexpr size_t kDefaultCapacity = 2000;
  // Which numbering an entry's sequence belongs to (Note [Sub-groups]): the world's, or a
  // sub-group's, each in a ring of its own.
  using Ring = size_t;
  static constexpr Ring kWorld = 0;

  explicit FlightRecorder(size_t capacity = kDefaultCapacity);
  // The ring of the sub-group called `group` ("ranks 0,2"; "" is the world), made on first
  // use; the same name gives the same ring.
  Ring ring(const std::string& group);
  // The times are steady_now_ns() readings the caller takes (a collective run at issue
  // starts when it is enqueued: one reading; a clock read costs tens of nanoseconds in a VM).
  // `op` and `dtype` are static names (an op's, dtype_name()'s): the entry keeps the views.
  // `started`: the collective starts as it is enqueued (run by the issuing thread).
  void enqueued(Ring ring, int64_t sequence, std::string_view op, int64_t bytes,
                std::string_view dtype, int64_t enqueue_ns, bool started = false);
  void started(Ring ring, int64_t sequence, int64_t start_ns);
  void finished(Ring ring, int64_t sequence, bool failed, int64_t end_ns);
  // What the collective was for ("bucket 3"); set by the issuer after it got the sequence.
  void tag(Ring ring, int64_t sequence, const std::string& tag);
  // A view of `name` that lives as long as the recorder, for an op name that is not static
  // (a few distinct names are ever interned).
  std::string_view intern(std::string_view name);
  // The same, for the world's collectives.
  void enqueued(int64_t sequence, std::string_view op, int64_t bytes, std::string_view dtype,
                int64_t enqueue_ns, bool started = false) {
    enqueued(kWorld, sequence, op, bytes, dtype, enqueue_ns, started);
  }
  void started(int64_t sequence, int64_t start_ns) { started(kWorld, sequence, start_ns); }
  void finished(int64_t sequence, bool failed, int64_t end_ns) {
    finished(kWorld, sequence, failed, end_ns);
  }
  void tag(int64_t sequence, const std::string& text) { tag(kWorld, sequence, text); }

  nlohmann::json to_json() const;  // the world's entries, oldest first
  // The sub-groups' entries: [{"group": name, "entries": [...]}], in the order the rings were
  // made; empty without sub-groups.
  nlohmann::json groups_to_json() const;
  // Whether a collective (of any group) was issued and has not finished (Note [Step watchdog]).
  bool any_in_flight() const;
  // Whether a collective failed or has not finished: the others are in trouble too.
  bool collective_trouble() const;

 private:
  // Two cache lines: the issuing thread writes one entry per collective, and the ring is too
  // large to stay in cache between its visits to a slot.
  struct alignas(64) Entry {
    int64_t sequence = -1;
    std::string_view op, dtype;
    std::string tag;
    int64_t bytes = 0;
    State state = State::Enqueued;
    int64_t enqueue_ns = 0, start_ns = 0, end_ns = 0;
  };
  struct Entries {
    std::string group;
    std::vector<Entry> ring;
    int64_t newest = -1;
  };
  Entry* slot(Ring ring, int64_t sequence);                   // mutex_ held; null if overwritten
  nlohmann::json entries_json(const Entries& entries) const;  // mutex_ held
  mutable std::mutex mutex_;
  size_t capacity_;
  std::vector<std::unique_ptr<Entries>> rings_;  // [kWorld] is the world's
  std::set<std::string, std::less<>> interned_;
  int64_t in_flight_ = 0;  // entries enqueued or started
  int64_t failed_ = 0;     // entries that finished failed
};

// The process-wide recorder of this rank's groups, and where dumps go.
FlightRecorder& flight_recorder();
// The job a dump belongs to, from the job's store token (a hash: the token is a secret). The
// launcher knows the token it gave its ranks, and reads only the dumps of its own job.
std::string flight_job_id(const std::string& store_token);
// Also checks `dump_dir` (check_flight_dir), so that a planted one fails the run at start.
void set_flight_identity(int rank, int world_size, std::string dump_dir, std::string job = "");

// The default dump directory of the job whose store listens on `master_port`:
// ddpbench-flight-<port> under $XDG_RUNTIME_DIR, else $TMPDIR, else /tmp, each only where it
// is a directory; `skipped` says which variable named none ("TMPDIR=/x is no directory").
std::string default_flight_dir(int master_port, std::string* skipped = nullptr);
// Where this job's dumps go when --flight-dir is not given: $DDPBENCH_FLIGHT_DIR (set by the
// launcher for its ranks), else default_flight_dir(master_port) when it is ours or missing,
// else a private folder made for this job next to it (mkdtemp), with `note` saying so.
// Throws UsageError when even that cannot be made.
std::string resolve_flight_dir(int master_port, std::string* note = nullptr);
// The dump directory must be this user's own directory: a symbolic link, a non-directory or
// a directory owned by another user there (planted in a shared /tmp) is a UsageError. A
// missing one is fine where its parent is a directory; dumps create it with mode 0700.
void check_flight_dir(const std::string& dir);
// Who stopped a rank with a signal.
struct SignalSource {
  std::string name;    // "SIGTERM"
  int sender_pid = 0;  // 0: unknown
};

// Writes DIR/rank<r>.json with `reason`, the job, where the step stood (its phase and how long
// it has been in it) and, for a signal, who sent it; returns the path, or "" when no dump dir
// is set or the write failed (never throws).
// `ship`: also hand the dump to the shipper (set_flight_dump_shipper); not from a crash handler.
std::string dump_flight_recorder(const std::string& reason,
                                 const std::optional<SignalSource>& signal = std::nullopt,
                                 bool ship = true) noexcept;

// Note [Flight dumps across hosts]
// Each host's launcher judges the dumps in its own folder, and the ranks of other hosts dump
// into theirs: node 0 alone could say "rank 3 is behind" only of its own ranks, and would call
// every other rank "left no dump". So a rank on a host where MASTER_ADDR is not a local address
// also ships each dump (not a crash's, which runs in a signal handler, nor SIGUSR1's, which
// is no last word) to rank 0's store, through a connection of its own tried for half a second;
// rank 0, when a collective of its run failed or hung, waits up to 3 s for the other hosts'
// dumps (2 s when its launcher stops it with SIGTERM) and writes them into its folder, where
// node 0's launcher reads them with its own. Every dump names its host, and the doctor names a
// rank's host once the dumps span more than one.
// comm/peer_probe.h sets the shipper up at rendezvous and collects on rank 0.
void set_flight_dump_shipper(std::function<void(int rank, const std::string& dump)> ship);
// Where this rank's dumps go ("" when nowhere).
std::string flight_dump_dir();
// Writes another rank's dump `text` as DIR/rank<r>.json (the folder made as for this rank's
// own); returns the path, or "" when there is no folder or the write failed. Never throws.
std::string write_flight_dump(int rank, const std::string& text) noexcept;
// Work to do when SIGTERM ends the process, after the dump and before the process dies (a
// failed run's partial trace): run from the dump thread, while other threads may still run.
// Returns an id for remove_termination_hook.
int add_termination_hook(std::function<void()> hook);
void remove_termination_hook(int id);

// SIGUSR1 dumps on request and SIGTERM dumps (naming its sender) and then ends the process as
// it would have, both from a thread of their own; a crash (base/process_guards.h's crash
// handler: SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) dumps from the handler (best effort) and
// then dies as it would have.
void install_flight_recorder_signal_handlers();

}  // namespace ddpb::comm
