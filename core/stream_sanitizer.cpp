// See Note [Stream-order sanitizer] in core/stream_sanitizer.h.
#include "core/stream_sanitizer.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "core/stream.h"

namespace ddpb::sanitizer {
namespace detail {

std::atomic<int> g_state{-1};

int init_from_env() {
  const char* v = std::getenv("DDPB_STREAM_SANITIZER");
  int on = (v != nullptr && std::strcmp(v, "") != 0 && std::strcmp(v, "0") != 0) ? 1 : 0;
  int expected = -1;
  g_state.compare_exchange_strong(expected, on);
  return g_state.load();
}

}  // namespace detail

namespace {

constexpr uint32_t kHost = 0;

// One access: which stream, at which point of that stream's clock, by which op.
struct Access {
  uint32_t stream = 0;
  uint64_t tick = 0;
  const char* op = "";
};

struct StorageHistory {
  bool written = false;
  Access last_write;
  std::vector<Access> reads;  // since the last write, at most one per stream
  std::string name;
};

// The accesses of a capture in progress, one entry per storage (a write wins).
struct CaptureLog {
  std::unordered_map<const Storage*, std::pair<Tensor, bool>> accesses;
};

struct State {
  std::unordered_map<uint32_t, CaptureLog> captures;  // by stream id
  std::mutex mutex;
  std::vector<std::vector<uint64_t>> clocks{1};  // by stream id; 0 is the host
  std::vector<std::string> names{"'host'"};      // "'name' (device)" for the others
  std::unordered_map<const Storage*, StorageHistory> storages;
  // A race found where nothing can throw (a release in a destructor), thrown by the next
  // op, host access or host synchronisation that the sanitizer sees.
  std::string pending_race;
};

State& state() {
  static auto* s = new State();  // leaked: ops may run during static destruction
  return *s;
}

void merge(std::vector<uint64_t>& into, const std::vector<uint64_t>& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}

uint64_t entry(const std::vector<uint64_t>& clock, uint32_t stream) {
  return stream < clock.size() ? clock[stream] : 0;
}

// The clock of `stream`, registering it on first sight. Caller holds the mutex.
std::vector<uint64_t>& clock_of(State& s, const Stream& stream) {
  const uint32_t id = stream.sanitizer_id();
  if (s.clocks.size() <= id) {
    s.clocks.resize(id + 1);
    s.names.resize(id + 1);
  }
  if (s.names[id].empty()) s.names[id] = "'" + stream.name() + "' (" + stream.device().str() + ")";
  auto& clock = s.clocks[id];
  if (clock.size() <= id) clock.resize(id + 1, 0);  // room for its own entry
  return clock;
}

bool ordered(const Access& earlier, const std::vector<uint64_t>& now) {
  return entry(now, earlier.stream) >= earlier.tick;
}

std::string describe(const State& s, const Access& a) {
  return std::string(a.op) + " on stream " + s.names[a.stream];
}

[[noreturn]] void report(const State& s, const Tensor& t, const StorageHistory& h,
                         const Access& now, bool now_writes, const Access& then, bool then_wrote) {
  std::ostringstream out;
  out << "stream-order race on " << t.describe();
  if (!h.name.empty()) out << " ('" << h.name << "')";
  out << ": " << describe(s, now) << (now_writes ? " writes" : " reads") << " it, but "
      << describe(s, then) << (then_wrote ? " wrote" : " read")
      << " it with no event wait or synchronize ordering the two (DDPB_STREAM_SANITIZER)";
  throw StreamRaceError(out.str());
}

void throw_pending(State& s) {
  if (s.pending_race.empty()) return;
  throw StreamRaceError(std::exchange(s.pending_race, {}));
}

// A page-locked block goes back to a pool that hands it to the next host caller at once
// (Note [Staging buffers], comm/host_staging.h), so every stream that used it must be
// ordered before the host that releases it. "" when they are.
std::string unordered_release(const State& s, const Storage& storage, const StorageHistory& h) {
  const std::vector<uint64_t>& host = s.clocks[kHost];
  const Access* late = nullptr;
  bool wrote = false;
  if (h.written && h.last_write.stream != kHost && !ordered(h.last_write, host)) {
    late = &h.last_write;
    wrote = true;
  }
  for (const Access& r : h.reads) {
    if (late == nullptr && r.stream != kHost && !ordered(r, host)) late = &r;
  }
  if (late == nullptr) return "";
  std::ostringstream out;
  out << "stream-order race on a page-locked block of " << storage.nbytes() << " bytes";
  if (!h.name.empty()) out << " ('" << h.name << "')";
  out << ": the host released it to the pool while " << describe(s, *late)
      << (wrote ? " writes" : " reads")
      << " it, with no synchronize ordering the two (DDPB_STREAM_SANITIZER)";
  return out.str();
}

// Checks one access against the storage's history, then records it. Caller holds the mutex.
void access(State& s, const Tensor& t, const Access& now, const std::vector<uint64_t>& clock,
            bool write) {
  StorageHistory& h = s.storages[t.storage().get()];
  if (h.written && h.last_write.stream != now.stream && !ordered(h.last_write, clock))
    report(s, t, h, now, write, h.last_write, /*then_wrote=*/true);
  if (write) {
    for (const Access& r : h.reads) {
      if (r.stream != now.stream && !ordered(r, clock))
        report(s, t, h, now, write, r, /*then_wrote=*/false);
    }
    h.written = true;
    h.last_write = now;
    h.reads.clear();
    return;
  }
  for (Access& r : h.reads) {
    if (r.stream == now.stream) {
      r = now;
      return;
    }
  }
  h.reads.push_back(now);
}

// Stamps a new op on `stream`: ordered after everything the host has waited for.
Access tick(State& s, const Stream& stream, const char* op, std::vector<uint64_t>*& clock) {
  clock = &clock_of(s, stream);
  merge(*clock, s.clocks[kHost]);
  const uint32_t id = stream.sanitizer_id();
  return {id, ++(*clock)[id], op};
}

template <typename Range>
void log_capture(State& s, const Stream& stream, const Range& reads, const Range& writes) {
  auto& log = s.captures[stream.sanitizer_id()].accesses;
  for (const Tensor* t : reads) {
    if (t != nullptr && t->defined()) log.try_emplace(t->storage().get(), *t, false);
  }
  for (const Tensor* t : writes) {
    if (t != nullptr && t->defined()) log.insert_or_assign(t->storage().get(), std::pair{*t, true});
  }
}

template <typename Range>
void record_op(const Stream& stream, const char* op, const Range& reads, const Range& writes) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (stream.capturing()) {
    log_capture(s, stream, reads, writes);
    return;
  }
  throw_pending(s);
  std::vector<uint64_t>* clock = nullptr;
  const Access now = tick(s, stream, op, clock);
  for (const Tensor* t : reads) {
    if (t != nullptr && t->defined()) access(s, *t, now, *clock, /*write=*/false);
  }
  for (const Tensor* t : writes) {
    if (t != nullptr && t->defined()) access(s, *t, now, *clock, /*write=*/true);
  }
}

std::vector<const Tensor*> pointers(const std::vector<Tensor>& ts) {
  std::vector<const Tensor*> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(&t);
  return out;
}

}  // namespace

void set_enabled(bool on) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (on) {
    s.pending_race.clear();
    s.storages.clear();
    s.captures.clear();
    for (auto& c : s.clocks) c.clear();
  }
  detail::g_state.store(on ? 1 : 0);
}

void on_op(const Stream& stream, const char* op, std::initializer_list<const Tensor*> reads,
           std::initializer_list<const Tensor*> writes) {
  record_op(stream, op, reads, writes);
}

void on_op(const Stream& stream, const char* op, const std::vector<Tensor>& reads,
           const std::vector<Tensor>& writes) {
  record_op(stream, op, pointers(reads), pointers(writes));
}

void on_host_access(const char* what, const Tensor& t, bool write) {
  if (!t.defined()) return;
  State& s = state();
  std::lock_guard lock(s.mutex);
  throw_pending(s);
  auto& host = s.clocks[kHost];
  if (host.empty()) host.resize(1, 0);  // room for its own entry
  const Access now{kHost, ++host[kHost], what};
  access(s, t, now, host, write);
}

void on_record(EventImpl& event, const Stream& stream) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto& clock = clock_of(s, stream);
  merge(clock, s.clocks[kHost]);
  event.sanitizer_clock = std::make_shared<const std::vector<uint64_t>>(clock);
}

void on_stream_wait(const Stream& stream, const EventImpl& event) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (event.sanitizer_clock) merge(clock_of(s, stream), *event.sanitizer_clock);
}

void on_host_wait(const EventImpl& event) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (event.sanitizer_clock) merge(s.clocks[kHost], *event.sanitizer_clock);
}

void on_host_sync(const Stream& stream) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  throw_pending(s);
  const std::vector<uint64_t> clock = clock_of(s, stream);
  merge(s.clocks[kHost], clock);
}

Clock snapshot(const Stream& stream) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto& clock = clock_of(s, stream);
  merge(clock, s.clocks[kHost]);
  return std::make_shared<const std::vector<uint64_t>>(clock);
}

void stream_acquire(const Stream& stream, const Clock& clock) {
  if (!clock) return;
  State& s = state();
  std::lock_guard lock(s.mutex);
  merge(clock_of(s, stream), *clock);
}

void host_acquire(const Clock& clock) {
  if (!clock) return;
  State& s = state();
  std::lock_guard lock(s.mutex);
  merge(s.clocks[kHost], *clock);
}

void take_capture(const Stream& stream, std::vector<Tensor>* reads, std::vector<Tensor>* writes) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.captures.find(stream.sanitizer_id());
  if (it == s.captures.end()) return;
  if (reads != nullptr && writes != nullptr) {
    for (auto& [storage, access] : it->second.accesses)
      (access.second ? writes : reads)->push_back(access.first);
  }
  s.captures.erase(it);
}

void set_name(const Tensor& t, std::string name) {
  if (!t.defined()) return;
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.storages[t.storage().get()].name = std::move(name);
}

void forget(const Storage* storage) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.storages.find(storage);
  if (it == s.storages.end()) return;
  if (storage->pinned() && s.pending_race.empty())
    s.pending_race = unordered_release(s, *storage, it->second);
  s.storages.erase(it);
}

}  // namespace ddpb::sanitizer
