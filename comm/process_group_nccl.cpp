#include "comm/process_group_nccl.h"

#include "comm/flight_recorder.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <utility>

#include "core/clock.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "core/cuda/nccl_dtype.h"
#include "core/device.h"
#include "core/stream_sanitizer.h"
#include "core/system_info.h"

namespace ddpb::comm {
namespace nccl_detail {
namespace {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

// How long destruction waits for pending collectives, and then for NCCL's finalize, before
// it aborts (each capped by the group's timeout).
constexpr Millis kDestroyGrace{2000};
// How often the watchdog looks at the pending collectives while some are pending, and at
// the communicator's error state when none are.
constexpr Millis kBusyPoll{1};
constexpr Millis kIdlePoll{100};
// How often the watchdog records a new clock anchor (see ClockAnchor).
constexpr std::chrono::seconds kAnchorPeriod{10};

std::string ms_text(Millis ms) {
  return std::to_string(ms.count()) + " ms";
}

// Sleeps with a backoff from 20 us to `cap`, for polling loops.
class Backoff {
 public:
  explicit Backoff(std::chrono::microseconds cap) : cap_(cap) {}
  void pause() {
    std::this_thread::sleep_for(pause_);
    pause_ = std::min(pause_ * 2, cap_);
  }

 private:
  std::chrono::microseconds pause_{20};
  std::chrono::microseconds cap_;
};

}  // namespace

// ---- Communicator ------------------------------------------------------------------------

// Owns the ncclComm_t; shared by the group and its Works, which poll it for asynchronous
// errors and may outlive the group. Every NCCL call on the communicator is made under
// call_mutex_, since NCCL does not allow ncclCommAbort to race with another call on the same
// communicator. The first failure seen (an NCCL error, or the reason for an abort) is kept
// under its own mutex, never held across an NCCL call: once the communicator is gone, that
// is what remains to report, and a Work can read it without waiting for a call to return.
class Communicator {
 public:
  enum class Outcome { Ok, Error, Timeout };

  explicit Communicator(ncclComm_t comm) : comm_(comm) {}
  ~Communicator() {
    // Normally the group has destroyed or aborted it already; a constructor that threw after
    // init leaves it here. Aborting never waits for peers.
    if (comm_ != nullptr) (void)ncclCommAbort(comm_);
  }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Runs `fn` on the communicator and, while NCCL reports ncclInProgress (a non-blocking
  // communicator still connecting or launching in the background), polls until it is done,
  // fails, `deadline` passes, or an abort is requested.
  Outcome enqueue(const std::function<ncclResult_t(ncclComm_t)>& fn, Clock::time_point deadline,
                  std::string* message) {
    std::lock_guard<std::mutex> lock(call_mutex_);
    if (comm_ == nullptr) {
      *message = failure();
      if (message->empty()) *message = "the communicator was destroyed";
      return Outcome::Error;
    }
    ncclResult_t result = fn(comm_);
    Backoff backoff(std::chrono::microseconds(1000));
    while (result == ncclInProgress) {
      if (abort_requested_.load()) {
        *message = "the communicator is being aborted";
        return Outcome::Error;
      }
      if (Clock::now() >= deadline) {
        *message = "NCCL was still setting it up (ncclInProgress): did every rank issue it?";
        return Outcome::Timeout;
      }
      backoff.pause();
      if (const ncclResult_t r = ncclCommGetAsyncError(comm_, &result); r != ncclSuccess) {
        result = r;
      }
    }
    if (result != ncclSuccess) {
      *message = ddpb::detail::nccl_error_text(result);
      set_failure(*message);
      return Outcome::Error;
    }
    return Outcome::Ok;
  }

  // The communicator's error: "" while there is none. With try_only, returns the error
  // already known instead of waiting for a call in progress (is_completed must not block).
  std::string async_error(bool try_only) {
    std::unique_lock<std::mutex> lock(call_mutex_, std::defer_lock);
    if (try_only) {
      if (!lock.try_lock()) return failure();
    } else {
      lock.lock();
    }
    if (comm_ != nullptr && failure().empty()) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
      if (r != ncclSuccess) state = r;
      // ncclInProgress: an operation is still being set up in the background; not an error.
      if (state != ncclSuccess && state != ncclInProgress) {
        set_failure(ddpb::detail::nccl_error_text(state));
      }
    }
    return failure();
  }

  // Aborts the communicator (once): NCCL ends its kernels and frees it without waiting for
  // the peers. `reason` becomes the failure if none was known.
  void abort(const std::string& reason) {
    abort_requested_.store(true);  // makes a polling enqueue() let go of call_mutex_
    set_failure(reason);
    std::lock_guard<std::mutex> lock(call_mutex_);
    if (comm_ == nullptr) return;
    const ncclResult_t r = ncclCommAbort(comm_);
    comm_ = nullptr;
    if (r != ncclSuccess && r != ncclInProgress) {
      std::fprintf(stderr, "ddpbench: ncclCommAbort failed: %s\n",
                   ddpb::detail::nccl_error_text(r).c_str());
    }
  }

  // The clean end: ncclCommFinalize (flushes the issued operations), polled until done or
  // `deadline`, then ncclCommDestroy. Returns false, leaving the communicator to abort(),
  // when finalize fails or does not finish in time.
  bool finalize_and_destroy(Clock::time_point deadline) {
    std::lock_guard<std::mutex> lock(call_mutex_);
    if (comm_ == nullptr) return true;
    ncclResult_t result = ncclCommFinalize(comm_);
    Backoff backoff(std::chrono::microseconds(5000));
    while (result == ncclInProgress && Clock::now() < deadline) {
      backoff.pause();
      if (const ncclResult_t r = ncclCommGetAsyncError(comm_, &result); r != ncclSuccess) {
        result = r;
      }
    }
    if (result != ncclSuccess) return false;
    result = ncclCommDestroy(comm_);
    comm_ = nullptr;
    if (result != ncclSuccess) {
      std::fprintf(stderr, "ddpbench: ncclCommDestroy failed: %s\n",
                   ddpb::detail::nccl_error_text(result).c_str());
    }
    return true;
  }

  std::string failure() const {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    return failure_;
  }

 private:
  void set_failure(const std::string& text) {  // the first one stays
    std::lock_guard<std::mutex> lock(failure_mutex_);
    if (failure_.empty()) failure_ = text;
  }

  std::mutex call_mutex_;
  ncclComm_t comm_ = nullptr;  // under call_mutex_; nullptr once destroyed or aborted
  mutable std::mutex failure_mutex_;
  std::string failure_;  // under failure_mutex_
  std::atomic<bool> abort_requested_{false};
};

// ---- Clock anchors -----------------------------------------------------------------------

// A CUDA event whose steady-clock time is known (to a few microseconds): recorded on an idle
// stream between two host timestamps. A collective's start and end times are the anchor's
// time plus cudaEventElapsedTime from it. cudaEventElapsedTime returns a float of
// milliseconds, precise to ~0.5 us only over seconds, hence a fresh anchor every
// kAnchorPeriod; each Work uses the anchor current when it was issued.
struct ClockAnchor {
  Event event;
  int64_t host_ns = 0;
};

// ---- Work --------------------------------------------------------------------------------

enum class Failure { None, Error, Nccl, Timeout };

class NcclWork final : public Work {
 public:
  NcclWork(Device device, std::shared_ptr<Communicator> comm, bool host_blocking_wait,
           Millis timeout)
      : device_(device),
        comm_(std::move(comm)),
        host_blocking_wait_(host_blocking_wait),
        timeout_(timeout) {}

  // Never blocks (Communicator::async_error(try_only) does not wait for the lock). The
  // asynchronous error comes first: an aborted kernel also completes its end event.
  bool is_completed() override {
    if (state() != State::Pending) {
      fill_times();
      return true;
    }
    if (std::string error = comm_->async_error(/*try_only=*/true); !error.empty()) {
      finish(Failure::Nccl, "nccl " + description + " failed: " + error);
      return true;
    }
    bool done = false;
    try {
      done = end.query();
    } catch (const std::exception& e) {
      finish(Failure::Error, "nccl " + description + " failed: " + e.what());
      return true;
    }
    if (!done) return false;
    finish(Failure::None, "");
    fill_times();
    return true;
  }

  // See the header: the host waits only for barriers.
  void wait() override {
    if (std::exception_ptr e = current_error()) std::rethrow_exception(e);
    if (end.defined()) current_stream(device_).wait(end);
    if (!host_blocking_wait_) {
      (void)is_completed();  // fills the times when already done
      return;
    }
    // The watchdog fails the collective at its deadline; the extra grace only guards
    // against a watchdog that cannot run, so that wait() never hangs.
    const auto give_up = deadline + timeout_ + kDestroyGrace;
    Backoff backoff(std::chrono::microseconds(1000));
    while (!is_completed()) {
      if (Clock::now() >= give_up) {
        finish(Failure::Timeout, "nccl " + description +
                                     " did not complete within the group timeout of " +
                                     ms_text(timeout_) + " (and its watchdog did not report it)");
        break;
      }
      backoff.pause();
    }
    if (std::exception_ptr e = current_error()) std::rethrow_exception(e);
  }

  std::exception_ptr exception() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return make_error_locked();
  }

  // First call wins: Failure::None completes it, anything else fails it with `message`.
  void finish(Failure failure, std::string message) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (state_ != State::Pending) return;
      state_ = failure == Failure::None ? State::Succeeded : State::Failed;
      failure_ = failure;
      message_ = std::move(message);
    }
    // The host's time when the watchdog saw it end: what the flight recorder needs to tell a
    // finished collective from one in flight (Note [Sub-groups] for its ring).
    if (sequence >= 0)
      flight_recorder().finished(flight_ring, sequence, failure != Failure::None, steady_now_ns());
  }

  // Set at issue, before the Work is shared.
  std::string description;  // "allreduce #3 (f32[10] on cuda:0) on rank 0 of 2"
  Event start, end;         // on the comm stream; undefined if it never launched
  std::shared_ptr<const ClockAnchor> anchor;
  Clock::time_point deadline;

 private:
  enum class State { Pending, Succeeded, Failed };

  State state() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return state_;
  }

  std::exception_ptr current_error() {
    if (std::string error = comm_->async_error(/*try_only=*/true); !error.empty()) {
      finish(Failure::Nccl, "nccl " + description + " failed: " + error);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    return make_error_locked();
  }

  std::exception_ptr make_error_locked() const {
    switch (state_ == State::Failed ? failure_ : Failure::None) {
      case Failure::None:
        return nullptr;
      case Failure::Timeout:
        return std::make_exception_ptr(CommTimeout(message_));
      case Failure::Nccl:
        return std::make_exception_ptr(NcclError(message_));
      case Failure::Error:
        break;
    }
    return std::make_exception_ptr(Error(message_));
  }

  // Once succeeded: start_ns/end_ns from the events (in the calling thread, see the header).
  void fill_times() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (state_ != State::Succeeded || times_filled_) return;
    times_filled_ = true;
    if (!anchor || !start.defined() || !end.defined()) return;
    try {
      start_ns = anchor->host_ns + std::llround(anchor->event.elapsed_ms(start) * 1e6);
      end_ns = anchor->host_ns + std::llround(anchor->event.elapsed_ms(end) * 1e6);
    } catch (const std::exception&) {
      start_ns = end_ns = 0;  // unknown (documented as 0)
    }
  }

  const Device device_;
  const std::shared_ptr<Communicator> comm_;
  const bool host_blocking_wait_;
  const Millis timeout_;
  mutable std::mutex mutex_;
  State state_ = State::Pending;
  Failure failure_ = Failure::None;
  std::string message_;
  bool times_filled_ = false;
};

namespace {

// ---- Rendezvous --------------------------------------------------------------------------

// Waits until every key exists or `deadline` passes (polling Store::check, so that the shared
// store's own timeout is left alone, as GlooStoreAdapter does). Returns false on timeout.
bool wait_for_keys(Store& store, const std::vector<std::string>& keys, Clock::time_point deadline) {
  Backoff backoff(std::chrono::microseconds(50000));
  while (!store.check(keys)) {
    if (Clock::now() >= deadline) return false;
    backoff.pause();
  }
  return true;
}

std::string hex(const void* data, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  const auto* p = static_cast<const uint8_t*>(data);
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += kDigits[p[i] >> 4];
    s += kDigits[p[i] & 15];
  }
  return s;
}

// Which physical GPU a rank uses, as published in the store.
struct GpuIdentity {
  std::string host, uuid, device;
};

GpuIdentity local_identity(const Device& device) {
  const std::string host = host_name();
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device.index)) << "identifying " << device.str();
  return {host, hex(prop.uuid.bytes, sizeof(prop.uuid.bytes)), device.str()};
}

std::string encode(const GpuIdentity& id) {
  return id.host + "\n" + id.uuid + "\n" + id.device;
}

GpuIdentity decode(const std::string& text, int rank) {
  const size_t a = text.find('\n');
  const size_t b = a == std::string::npos ? a : text.find('\n', a + 1);
  DDPB_CHECK(b != std::string::npos)
      << "nccl rendezvous: rank " << rank << " published a malformed GPU identity '" << text << "'";
  return {text.substr(0, a), text.substr(a + 1, b - a - 1), text.substr(b + 1)};
}

// Note [One GPU per NCCL rank]
// NCCL does not support two ranks of one communicator on the same GPU: init fails or
// hangs. Ranks that are threads or processes of one host can easily be pointed at one GPU
// (a single-GPU machine, or CUDA_VISIBLE_DEVICES), so every rank publishes its host name
// and GPU UUID (UUIDs, not indices, since CUDA_VISIBLE_DEVICES renumbers the GPUs), reads
// every other rank's, and checks the whole table. Every rank sees the same table, so either
// all of them throw the same UsageError, before any reaches ncclCommInitRankConfig (where
// the others would wait for it until the timeout), or none does. Gloo stages through host
// memory and has no such limit, hence the suggestion.
void check_one_rank_per_gpu(Store& store, int rank, int size, const Device& device,
                            Clock::time_point deadline, Millis timeout, const std::string& who) {
  store.set_string("nccl/gpu/" + std::to_string(rank), encode(local_identity(device)));
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back("nccl/gpu/" + std::to_string(r));
  if (!wait_for_keys(store, keys, deadline)) {
    std::string missing;
    for (int r = 0; r < size; ++r) {
      if (!store.check({keys[size_t(r)]}))
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    throw CommTimeout("nccl rendezvous of " + who + " timed out after " + ms_text(timeout) +
                      ": not every rank arrived (missing ranks: " + missing + ")");
  }
  std::vector<GpuIdentity> ids;
  for (int r = 0; r < size; ++r) ids.push_back(decode(store.get_string(keys[size_t(r)]), r));
  for (int i = 0; i < size; ++i) {
    for (int j = i + 1; j < size; ++j) {
      const GpuIdentity& a = ids[size_t(i)];
      const GpuIdentity& b = ids[size_t(j)];
      if (a.host != b.host || a.uuid != b.uuid) continue;
      const std::string where =
          a.device == b.device ? "both on " + a.device
                               : "(" + a.device + " and " + b.device + ") both on GPU " + a.uuid;
      throw UsageError("NCCL cannot run two ranks on one GPU (ranks " + std::to_string(i) +
                       " and " + std::to_string(j) + " " + where + " of host " + a.host +
                       "); use --backend gloo");
    }
  }
}

ncclUniqueId exchange_unique_id(Store& store, int rank, Clock::time_point deadline, Millis timeout,
                                const std::string& who) {
  const std::string key = "nccl/unique_id";
  ncclUniqueId id{};
  if (rank == 0) {
    NCCL_CHECK(ncclGetUniqueId(&id)) << "nccl rendezvous of " << who;
    const auto* p = reinterpret_cast<const uint8_t*>(&id);
    store.set(key, Bytes(p, p + sizeof(id)));
    return id;
  }
  if (!wait_for_keys(store, {key}, deadline)) {
    throw CommTimeout("nccl rendezvous of " + who + " timed out after " + ms_text(timeout) +
                      ": rank 0 did not publish the NCCL unique id");
  }
  const Bytes value = store.get(key);
  DDPB_CHECK(value.size() == sizeof(id))
      << "nccl rendezvous of " << who << ": the unique id in the store has " << value.size()
      << " bytes, expected " << sizeof(id);
  std::memcpy(&id, value.data(), sizeof(id));
  return id;
}

// Non-blocking init, so that a rank that never calls it cannot hang the others: poll the
// communicator's state until it is ready, fails, or `deadline` passes (then abort).
ncclComm_t init_communicator(const ncclUniqueId& id, int rank, int size, Clock::time_point deadline,
                             Millis timeout, const std::string& who) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t result = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  Backoff backoff(std::chrono::microseconds(10000));
  while (result == ncclInProgress) {
    if (Clock::now() >= deadline) {
      if (comm != nullptr) (void)ncclCommAbort(comm);
      throw CommTimeout("nccl communicator init of " + who + " timed out after " +
                        ms_text(timeout) + ": not every rank joined ncclCommInitRankConfig");
    }
    backoff.pause();
    if (const ncclResult_t r = ncclCommGetAsyncError(comm, &result); r != ncclSuccess) result = r;
  }
  if (result != ncclSuccess) {
    const std::string text = ddpb::detail::nccl_error_text(result);
    if (comm != nullptr) (void)ncclCommAbort(comm);
    throw NcclError("nccl communicator init of " + who + " failed: " + text);
  }
  return comm;
}

// Moved out of a destroyed group whose comm stream did not drain: still in use by the GPU,
// so never freed (see ~ProcessGroupNccl).
struct Leaked {
  std::vector<std::vector<Tensor>> tensors;
  StreamPtr comm_stream, clock_stream;
};

}  // namespace
}  // namespace nccl_detail

using nccl_detail::Clock;
using nccl_detail::Communicator;
using nccl_detail::Failure;
using nccl_detail::Millis;
using nccl_detail::NcclWork;

// ---- Construction ------------------------------------------------------------------------

ProcessGroupNccl::ProcessGroupNccl(std::shared_ptr<Store> store, int rank, int size,
                                   const ProcessGroupOptions& options)
    : ProcessGroup(rank, size),
      device_(options.device),
      timeout_(options.timeout),
      flight_ring_(flight_recorder().ring(options.flight_group)) {
  DDPB_USAGE_CHECK(size >= 1 && rank >= 0 && rank < size)
      << "nccl process group: rank " << rank << " is outside a group of size " << size;
  DDPB_USAGE_CHECK(device_.is_cuda()) << "NCCL backend needs CUDA GPUs; use --backend gloo (rank "
                                      << rank << " was given " << device_.str() << ")";
  DDPB_USAGE_CHECK(timeout_.count() > 0)
      << "nccl process group: the timeout must be positive, got " << timeout_.count() << " ms";
  DDPB_CHECK(store != nullptr) << "nccl process group of rank " << rank << " needs a store";
  who_ = "rank " + std::to_string(rank) + " of " + std::to_string(size) + " on " + device_.str();

  // NCCL binds the communicator to the calling thread's current GPU.
  DeviceGuard guard(device_);
  // One deadline for the whole rendezvous: a missing rank costs the connect timeout, once.
  const Millis connect = options.connect_timeout.value_or(timeout_);
  const auto deadline = Clock::now() + connect;
  nccl_detail::check_one_rank_per_gpu(*store, rank, size, device_, deadline, connect, who_);
  const ncclUniqueId id = nccl_detail::exchange_unique_id(*store, rank, deadline, connect, who_);
  comm_ = std::make_shared<Communicator>(
      nccl_detail::init_communicator(id, rank, size, deadline, connect, who_));

  comm_stream_ = make_stream(device_, "ddpb-nccl");
  clock_stream_ = make_stream(device_, "ddpb-nccl-clock");
  refresh_clock_anchor(Millis(5000));
  watchdog_ = std::thread([this] { watchdog_loop(); });
}

ProcessGroupNccl::~ProcessGroupNccl() {
  const Millis grace = std::min(timeout_, nccl_detail::kDestroyGrace);
  {
    // Let the collectives in flight finish (the watchdog retires them), within the grace.
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, grace, [&] { return pending_.empty(); });
    stopping_ = true;
  }
  changed_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();

  // The watchdog is gone and no collective may be issued now: this thread owns the queues.
  std::unique_lock<std::mutex> lock(mutex_);
  if (!pending_.empty()) {
    fail_pending_locked("its process group was destroyed while " + std::to_string(pending_.size()) +
                            " collective(s) were pending",
                        /*timed_out=*/false);
  } else if (comm_ != nullptr && !comm_->finalize_and_destroy(Clock::now() + grace)) {
    comm_->abort("ncclCommFinalize did not finish within " + nccl_detail::ms_text(grace) +
                 " while the group of " + who_ + " was destroyed");
  }

  // Tensors of failed collectives are released once the comm stream has passed them. The
  // communicator is aborted (its kernels have exited), so the stream normally drains at once;
  // if it does not, its memory may still be in use, so it is leaked rather than reused.
  if (!draining_.empty() && comm_stream_ != nullptr) {
    auto* stream = static_cast<cudaStream_t>(comm_stream_->native_handle());
    const auto give_up = Clock::now() + grace;
    nccl_detail::Backoff backoff(std::chrono::microseconds(5000));
    cudaError_t state = cudaStreamQuery(stream);
    while (state == cudaErrorNotReady && Clock::now() < give_up) {
      backoff.pause();
      state = cudaStreamQuery(stream);
    }
    (void)cudaGetLastError();
    if (state == cudaErrorNotReady) {
      auto* leaked = new nccl_detail::Leaked;  // intentionally never freed
      for (Pending& p : draining_) leaked->tensors.push_back(std::move(p.tensors));
      leaked->comm_stream = std::move(comm_stream_);
      leaked->clock_stream = std::move(clock_stream_);
      std::fprintf(stderr,
                   "ddpbench: the NCCL stream of %s did not drain within %lld ms after the abort; "
                   "leaking its %zu collective buffer set(s) and its streams\n",
                   who_.c_str(), static_cast<long long>(grace.count()), draining_.size());
    }
  }
  draining_.clear();
}

// ---- Issue -------------------------------------------------------------------------------

void ProcessGroupNccl::check_tensor(const Tensor& t, const char* op, const char* what) const {
  DDPB_CHECK(t.defined()) << "nccl " << op << ": the " << what << " tensor is undefined (rank "
                          << rank_ << ")";
  DDPB_CHECK(t.device() == device_)
      << "nccl " << op << ": the " << what << " tensor " << t.describe()
      << " is not on the group's device " << device_.str() << " (rank " << rank_ << ")";
}

std::string ProcessGroupNccl::describe(const std::string& op, int64_t sequence,
                                       const std::vector<Tensor>& tensors) const {
  constexpr size_t kShown = 3;
  std::string s = op + " #" + std::to_string(sequence);
  for (size_t i = 0; i < tensors.size() && i < kShown; ++i) {
    s += (i == 0 ? " (" : ", ") + tensors[i].describe();
  }
  if (tensors.size() > kShown) s += ", ... " + std::to_string(tensors.size()) + " tensors";
  if (!tensors.empty()) s += ")";
  return s + " on rank " + std::to_string(rank_) + " of " + std::to_string(size_);
}

// Note [NCCL stream order]
// A collective must see every write the caller enqueued before issuing it, and the caller's
// later work must see its result, without the host waiting in either direction:
//  - at issue, an event recorded on the caller's current stream is waited on by the comm
//    stream (cudaStreamWaitEvent), then the NCCL kernel is enqueued on the comm stream;
//  - Work::wait() makes the caller's current stream wait on the end event.
// Collectives of one group run in issue order on the one comm stream, which is also the
// order in which every rank issues them (see process_group.h). Because the caching allocator
// returns a freed block to the pool of the stream that allocated it, the tensors stay in the
// Pending entry, not only in the caller's hands, until the watchdog sees the end event.
WorkPtr ProcessGroupNccl::launch(const std::string& op, int64_t bytes, std::vector<Tensor> tensors,
                                 const Enqueue& enqueue, bool host_blocking_wait) {
  auto work = std::make_shared<NcclWork>(device_, comm_, host_blocking_wait, timeout_);
  work->op = op;
  work->bytes = bytes;
  std::string broken;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    DDPB_CHECK(!stopping_) << "nccl " << op << " issued while the group of " << who_
                           << " is being destroyed";
    work->sequence = next_sequence_++;
    work->flight_ring = flight_ring_;
    work->anchor = anchor_;
    // Enqueued until the watchdog sees its end event: NCCL runs it on the device, where the
    // host cannot see it start.
    flight_recorder().enqueued(
        flight_ring_, work->sequence, flight_recorder().intern(op), bytes,
        tensors.empty() ? std::string_view() : dtype_name(tensors[0].dtype()), steady_now_ns());
    broken = broken_reason_;
  }
  work->description = describe(op, work->sequence, tensors);
  if (!broken.empty()) {
    work->finish(Failure::Error, "nccl " + work->description + " did not run: " + broken);
    return work;
  }

  Communicator::Outcome outcome = Communicator::Outcome::Error;
  std::string message;
  bool cuda_failed = false;
  try {
    gpu::DeviceScope scope(device_.index);
    Event ready = Event::create(device_);
    ready.record(current_stream(device_));
    comm_stream_->wait(ready);  // cudaStreamWaitEvent: the host does not block
    // NCCL may read and write every operand (in place or not): the sanitizer counts each as
    // both.
    if (sanitizer::enabled()) sanitizer::on_op(*comm_stream_, "nccl collective", tensors, tensors);
    work->start = Event::create(device_);
    work->end = Event::create(device_);
    work->start.record(*comm_stream_);
    work->deadline = Clock::now() + timeout_;
    auto* stream = static_cast<cudaStream_t>(comm_stream_->native_handle());
    outcome = comm_->enqueue([&](ncclComm_t comm) { return enqueue(comm, stream); }, work->deadline,
                             &message);
    // Recorded even after a failure, so that the watchdog can tell when the stream has
    // passed whatever part of the collective was enqueued.
    work->end.record(*comm_stream_);
  } catch (const std::exception& e) {
    // A CUDA failure around the launch: the peers will run this collective without us.
    outcome = Communicator::Outcome::Error;
    message = e.what();
    cuda_failed = true;
    // Unknown whether it was recorded: an undefined end event keeps the tensors held until
    // the destructor sees the comm stream drained.
    work->end = Event();
  }

  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back({work, std::move(tensors), work->deadline});
    if (outcome != Communicator::Outcome::Ok) {
      // This rank is now out of step with the others: the group cannot continue.
      const bool timed_out = outcome == Communicator::Outcome::Timeout;
      work->finish(timed_out ? Failure::Timeout : (cuda_failed ? Failure::Error : Failure::Nccl),
                   "nccl " + work->description +
                       (timed_out ? " could not be launched within the group timeout of " +
                                        nccl_detail::ms_text(timeout_) + ": "
                                  : " could not be launched: ") +
                       message);
      fail_pending_locked(op + " #" + std::to_string(work->sequence) +
                              " could not be launched on " + who_ + ": " + message,
                          timed_out);
    } else if (!broken_reason_.empty()) {
      // The watchdog aborted the communicator while this one was being launched.
      fail_pending_locked(broken_reason_, /*timed_out=*/false);
    }
  }
  changed_.notify_all();
  return work;
}

WorkPtr ProcessGroupNccl::allreduce(const Tensor& tensor) {
  check_tensor(tensor, "allreduce", "input");
  void* data = tensor.raw_data();
  const auto count = static_cast<size_t>(tensor.numel());
  const ncclDataType_t type = nccl_type(tensor.dtype());
  return launch(
      "allreduce", static_cast<int64_t>(tensor.nbytes()), {tensor},
      [=](ncclComm_t comm, cudaStream_t stream) {
        if (count == 0) return ncclSuccess;
        return ncclAllReduce(data, data, count, type, ncclSum, comm, stream);
      },
      /*host_blocking_wait=*/false);
}

WorkPtr ProcessGroupNccl::broadcast(const Tensor& tensor, int root) {
  check_tensor(tensor, "broadcast", "input");
  DDPB_CHECK(root >= 0 && root < size_)
      << "nccl broadcast: root " << root << " is outside the group of size " << size_ << " (rank "
      << rank_ << ")";
  void* data = tensor.raw_data();
  const auto count = static_cast<size_t>(tensor.numel());
  const ncclDataType_t type = nccl_type(tensor.dtype());
  return launch(
      "broadcast", static_cast<int64_t>(tensor.nbytes()), {tensor},
      [=](ncclComm_t comm, cudaStream_t stream) {
        if (count == 0) return ncclSuccess;
        return ncclBroadcast(data, data, count, type, root, comm, stream);
      },
      /*host_blocking_wait=*/false);
}

WorkPtr ProcessGroupNccl::allgather(const Tensor& output, const Tensor& input) {
  check_tensor(output, "allgather", "output");
  check_tensor(input, "allgather", "input");
  DDPB_CHECK(output.dtype() == input.dtype() && output.numel() == size_ * input.numel())
      << "nccl allgather: the output must hold " << size_ << " inputs of the same dtype; got "
      << output.describe() << " for input " << input.describe() << " (rank " << rank_ << ")";
  const void* in = input.raw_data();
  void* out = output.raw_data();
  const auto count = static_cast<size_t>(input.numel());  // per rank
  const ncclDataType_t type = nccl_type(input.dtype());
  // In place when the input is this rank's chunk of the output; NCCL handles that itself.
  return launch(
      "allgather", static_cast<int64_t>(input.nbytes()), {output, input},
      [=](ncclComm_t comm, cudaStream_t stream) {
        if (count == 0) return ncclSuccess;
        return ncclAllGather(in, out, count, type, comm, stream);
      },
      /*host_blocking_wait=*/false);
}

WorkPtr ProcessGroupNccl::reduce_scatter(const Tensor& output, const Tensor& input) {
  check_tensor(output, "reduce_scatter", "output");
  check_tensor(input, "reduce_scatter", "input");
  DDPB_CHECK(output.dtype() == input.dtype() && input.numel() == size_ * output.numel())
      << "nccl reduce_scatter: the input must hold " << size_
      << " output-sized chunks of the same dtype; got " << input.describe() << " for output "
      << output.describe() << " (rank " << rank_ << ")";
  const void* in = input.raw_data();
  void* out = output.raw_data();
  const auto count = static_cast<size_t>(output.numel());  // per rank
  const ncclDataType_t type = nccl_type(input.dtype());
  return launch(
      "reduce_scatter", static_cast<int64_t>(input.nbytes()), {output, input},
      [=](ncclComm_t comm, cudaStream_t stream) {
        if (count == 0) return ncclSuccess;
        return ncclReduceScatter(in, out, count, type, ncclSum, comm, stream);
      },
      /*host_blocking_wait=*/false);
}

WorkPtr ProcessGroupNccl::reduce(const Tensor& tensor, int root) {
  check_tensor(tensor, "reduce", "input");
  DDPB_CHECK(root >= 0 && root < size_)
      << "nccl reduce: root " << root << " is outside the group of size " << size_ << " (rank "
      << rank_ << ")";
  void* data = tensor.raw_data();
  const auto count = static_cast<size_t>(tensor.numel());
  const ncclDataType_t type = nccl_type(tensor.dtype());
  return launch(
      "reduce", static_cast<int64_t>(tensor.nbytes()), {tensor},
      [=](ncclComm_t comm, cudaStream_t stream) {
        if (count == 0) return ncclSuccess;
        return ncclReduce(data, data, count, type, ncclSum, root, comm, stream);
      },
      /*host_blocking_wait=*/false);
}

// NCCL has no alltoall: one grouped send and receive per peer, as PyTorch's NCCL group does.
WorkPtr ProcessGroupNccl::alltoall(const Tensor& output, const Tensor& input) {
  check_tensor(output, "alltoall", "output");
  check_tensor(input, "alltoall", "input");
  DDPB_CHECK(output.dtype() == input.dtype() && output.numel() == input.numel() &&
             input.numel() % size_ == 0)
      << "nccl alltoall: input and output must be the same size and dtype, " << size_
      << " equal chunks; got " << input.describe() << " and " << output.describe() << " (rank "
      << rank_ << ")";
  const auto* in = static_cast<const char*>(input.raw_data());
  auto* out = static_cast<char*>(output.raw_data());
  const auto count = static_cast<size_t>(input.numel() / size_);
  const size_t chunk_bytes = count * dtype_size(input.dtype());
  const ncclDataType_t type = nccl_type(input.dtype());
  const int n = size_;
  return launch(
      "alltoall", static_cast<int64_t>(input.nbytes()), {output, input},
      [=](ncclComm_t comm, cudaStream_t stream) {
        if (count == 0) return ncclSuccess;
        ncclGroupStart();
        for (int r = 0; r < n; ++r) {
          ncclSend(in + r * chunk_bytes, count, type, r, comm, stream);
          ncclRecv(out + r * chunk_bytes, count, type, r, comm, stream);
        }
        return ncclGroupEnd();
      },
      /*host_blocking_wait=*/false);
}

WorkPtr ProcessGroupNccl::sendrecv(const Tensor& send, int dst, const Tensor& recv, int src) {
  check_tensor(send, "sendrecv", "send");
  check_tensor(recv, "sendrecv", "recv");
  DDPB_CHECK(send.dtype() == recv.dtype() && send.numel() == recv.numel())
      << "nccl sendrecv: send and recv must be the same size and dtype; got " << send.describe()
      << " and " << recv.describe() << " (rank " << rank_ << ")";
  DDPB_CHECK(dst >= 0 && dst < size_ && src >= 0 && src < size_)
      << "nccl sendrecv: peers " << dst << " and " << src << " outside 0.." << size_ - 1;
  const void* in = send.raw_data();
  void* out = recv.raw_data();
  const auto count = static_cast<size_t>(send.numel());
  const ncclDataType_t type = nccl_type(send.dtype());
  return launch(
      "sendrecv", static_cast<int64_t>(send.nbytes()), {recv, send},
      [=](ncclComm_t comm, cudaStream_t stream) {
        if (count == 0) return ncclSuccess;
        ncclGroupStart();
        ncclSend(in, count, type, dst, comm, stream);
        ncclRecv(out, count, type, src, comm, stream);
        return ncclGroupEnd();
      },
      /*host_blocking_wait=*/false);
}

// A one-element allreduce whose wait() blocks the host until it completes, i.e. until every
// rank has issued it.
WorkPtr ProcessGroupNccl::barrier() {
  Tensor token = Tensor::zeros({1}, DType::F32, device_);  // ordered on the caller's stream
  void* data = token.raw_data();
  return launch(
      "barrier", 0, {token},
      [=](ncclComm_t comm, cudaStream_t stream) {
        return ncclAllReduce(data, data, 1, ncclFloat32, ncclSum, comm, stream);
      },
      /*host_blocking_wait=*/true);
}

WorkPtr ProcessGroupNccl::allreduce_coalesced(const std::vector<Tensor>& tensors) {
  if (tensors.empty()) {
    auto work = std::make_shared<NcclWork>(device_, comm_, /*host_blocking_wait=*/false, timeout_);
    work->op = "allreduce_coalesced";
    work->sequence = -1;
    work->description = "allreduce_coalesced of no tensors";
    work->finish(Failure::None, "");
    return work;
  }
  struct Part {
    void* data;
    size_t count;
    ncclDataType_t type;
  };
  std::vector<Part> parts;
  int64_t bytes = 0;
  for (const Tensor& t : tensors) {
    check_tensor(t, "allreduce_coalesced", "input");
    if (t.numel() > 0) {
      parts.push_back({t.raw_data(), static_cast<size_t>(t.numel()), nccl_type(t.dtype())});
    }
    bytes += static_cast<int64_t>(t.nbytes());
  }
  return launch(
      "allreduce_coalesced", bytes, tensors,
      [parts = std::move(parts)](ncclComm_t comm, cudaStream_t stream) {
        if (parts.empty()) return ncclSuccess;
        // One group: NCCL fuses the calls into one launch. After a failure inside the group
        // ncclGroupEnd must still be called, and the first error is the one reported.
        ncclResult_t first = ncclGroupStart();
        if (first != ncclSuccess) return first;
        for (const Part& p : parts) {
          const ncclResult_t r =
              ncclAllReduce(p.data, p.data, p.count, p.type, ncclSum, comm, stream);
          if (r != ncclSuccess && r != ncclInProgress) {
            first = r;
            break;
          }
        }
        const ncclResult_t end = ncclGroupEnd();
        return first != ncclSuccess ? first : end;
      },
      /*host_blocking_wait=*/false);
}

namespace {

// One (send, receive, count) of a grouped reduce-scatter or all-gather; count per rank.
struct GroupPart {
  const void* in;
  void* out;
  size_t count;
  ncclDataType_t type;
};

// Runs `call` for every part inside one ncclGroupStart/End: NCCL fuses them into one launch.
// After a failure inside the group ncclGroupEnd must still be called; the first error wins.
template <class Call>
ncclResult_t grouped(const std::vector<GroupPart>& parts, Call call) {
  if (parts.empty()) return ncclSuccess;
  ncclResult_t first = ncclGroupStart();
  if (first != ncclSuccess) return first;
  for (const GroupPart& p : parts) {
    const ncclResult_t r = call(p);
    if (r != ncclSuccess && r != ncclInProgress) {
      first = r;
      break;
    }
  }
  const ncclResult_t end = ncclGroupEnd();
  return first != ncclSuccess ? first : end;
}

// The (send, receive, count) of each pair of a coalesced reduce-scatter (`scatter`: each input
// holds `size` output-sized chunks) or all-gather (each output holds `size` inputs), the
// tensors the Work keeps alive, and the bytes of its inputs. `check` checks one tensor.
struct CoalescedPairs {
  std::vector<GroupPart> parts;
  std::vector<Tensor> touched;
  int64_t bytes = 0;
};
CoalescedPairs coalesced_pairs(const char* op, const std::vector<Tensor>& outputs,
                               const std::vector<Tensor>& inputs, bool scatter, int size, int rank,
                               const std::function<void(const Tensor&, const char*)>& check) {
  DDPB_CHECK(outputs.size() == inputs.size())
      << "nccl " << op << ": " << outputs.size() << " outputs for " << inputs.size()
      << " inputs (rank " << rank << ")";
  CoalescedPairs out;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor &o = outputs[k], &in = inputs[k];
    check(o, "output");
    check(in, "input");
    const Tensor& whole = scatter ? in : o;
    const Tensor& chunk = scatter ? o : in;
    DDPB_CHECK(o.dtype() == in.dtype() && whole.numel() == size * chunk.numel())
        << "nccl " << op << ": pair " << k << " must hold " << size << " chunks in its "
        << (scatter ? "input" : "output") << "; got " << in.describe() << " in, " << o.describe()
        << " out";
    if (chunk.numel() > 0)
      out.parts.push_back(
          {in.raw_data(), o.raw_data(), static_cast<size_t>(chunk.numel()), nccl_type(in.dtype())});
    out.touched.push_back(o), out.touched.push_back(in);
    out.bytes += static_cast<int64_t>(in.nbytes());
  }
  return out;
}

}  // namespace

WorkPtr ProcessGroupNccl::reduce_scatter_tensor_coalesced(const std::vector<Tensor>& outputs,
                                                          const std::vector<Tensor>& inputs,
                                                          ReduceOp op) {
  const char* name = "reduce_scatter_tensor_coalesced";
  CoalescedPairs pairs =
      coalesced_pairs(name, outputs, inputs, /*scatter=*/true, size_, rank_,
                      [&](const Tensor& t, const char* what) { check_tensor(t, name, what); });
  const ncclRedOp_t red = op == ReduceOp::Avg ? ncclAvg : ncclSum;
  return launch(
      name, pairs.bytes, pairs.touched,
      [parts = std::move(pairs.parts), red](ncclComm_t comm, cudaStream_t stream) {
        return grouped(parts, [&](const GroupPart& p) {
          return ncclReduceScatter(p.in, p.out, p.count, p.type, red, comm, stream);
        });
      },
      /*host_blocking_wait=*/false);
}

WorkPtr ProcessGroupNccl::allgather_into_tensor_coalesced(const std::vector<Tensor>& outputs,
                                                          const std::vector<Tensor>& inputs) {
  const char* name = "allgather_into_tensor_coalesced";
  CoalescedPairs pairs =
      coalesced_pairs(name, outputs, inputs, /*scatter=*/false, size_, rank_,
                      [&](const Tensor& t, const char* what) { check_tensor(t, name, what); });
  return launch(
      name, pairs.bytes, pairs.touched,
      [parts = std::move(pairs.parts)](ncclComm_t comm, cudaStream_t stream) {
        return grouped(parts, [&](const GroupPart& p) {
          return ncclAllGather(p.in, p.out, p.count, p.type, comm, stream);
        });
      },
      /*host_blocking_wait=*/false);
}

// ---- Failure -----------------------------------------------------------------------------

void ProcessGroupNccl::fail_pending_locked(const std::string& reason, bool timed_out) {
  for (Pending& p : pending_) {
    // First failure wins, so a Work already failed with its own message keeps it.
    p.work->finish(timed_out ? Failure::Timeout : Failure::Error,
                   "nccl " + p.work->description + " was aborted: " + reason);
    draining_.push_back(std::move(p));
  }
  pending_.clear();
  if (broken_reason_.empty()) broken_reason_ = "the group is broken since " + reason;
  comm_->abort(reason);
}

// ---- Watchdog ----------------------------------------------------------------------------

void ProcessGroupNccl::refresh_clock_anchor(std::chrono::milliseconds patience) {
  auto anchor = std::make_shared<nccl_detail::ClockAnchor>();
  anchor->event = Event::create(device_);
  const int64_t before = steady_now_ns();
  anchor->event.record(*clock_stream_);
  // The clock stream is idle, so the event completes at once unless the GPU is in trouble;
  // spinning (not sleeping) keeps the two host timestamps close.
  const auto give_up = Clock::now() + patience;
  while (!anchor->event.query()) {
    if (Clock::now() >= give_up) return;
    std::this_thread::yield();
  }
  const int64_t after = steady_now_ns();
  anchor->host_ns = before + (after - before) / 2;
  std::lock_guard<std::mutex> lock(mutex_);
  anchor_ = std::move(anchor);
}

// 1. Asynchronous NCCL errors (a peer that died, a network failure) come first: they also
//    end the kernels, whose end events then complete as if they had succeeded. try_only:
//    while a launch holds the communicator (possibly polling NCCL for up to the timeout), the
//    watchdog must stay free to time out the collectives before it.
void ProcessGroupNccl::check_async_error_locked(std::unique_lock<std::mutex>& lock) {
  if (!broken_reason_.empty()) return;
  lock.unlock();
  const std::string error = comm_->async_error(/*try_only=*/true);
  lock.lock();
  if (error.empty() || !broken_reason_.empty()) return;
  for (Pending& p : pending_) {
    p.work->finish(Failure::Nccl, "nccl " + p.work->description + " failed: " + error);
  }
  fail_pending_locked("NCCL reported an error on " + who_ + ": " + error, /*timed_out=*/false);
}

// 2. Completed collectives, in issue order (one stream: if one is not done, no later one
//    is), and the deadline of the oldest one still running.
void ProcessGroupNccl::retire_completed_locked() {
  const auto now = Clock::now();
  while (!pending_.empty()) {
    Pending& p = pending_.front();
    bool done = false;
    std::string cuda_error;
    try {
      done = p.work->end.query();
    } catch (const std::exception& e) {
      cuda_error = e.what();
    }
    if (!cuda_error.empty()) {
      p.work->finish(Failure::Error, "nccl " + p.work->description + " failed: " + cuda_error);
      fail_pending_locked(p.work->op + " #" + std::to_string(p.work->sequence) + " failed on " +
                              who_ + ": " + cuda_error,
                          /*timed_out=*/false);
      return;
    }
    if (done) {
      p.work->finish(Failure::None, "");
      pending_.pop_front();  // releases its tensors
      continue;
    }
    if (now >= p.deadline) {
      p.work->finish(Failure::Timeout, "nccl " + p.work->description +
                                           " did not complete within the group timeout of " +
                                           nccl_detail::ms_text(timeout_) +
                                           "; the communicator was aborted");
      fail_pending_locked(p.work->op + " #" + std::to_string(p.work->sequence) +
                              " timed out after " + nccl_detail::ms_text(timeout_) + " on " + who_,
                          /*timed_out=*/true);
    }
    return;
  }
}

// 3. Failed collectives: their tensors go once the stream has passed them.
void ProcessGroupNccl::release_drained_locked() {
  while (!draining_.empty()) {
    bool done = false;
    try {
      const Event& end = draining_.front().work->end;
      done = end.defined() && end.query();
    } catch (const std::exception&) {
      done = false;  // a broken context: keep them (the destructor decides)
    }
    if (!done) return;
    draining_.pop_front();
  }
}

void ProcessGroupNccl::watchdog_loop() {
  pthread_setname_np(pthread_self(), "ddpb-nccl-wd");
  // CUDA calls of this thread go to the group's GPU.
  std::unique_ptr<DeviceGuard> device_guard;
  try {
    device_guard = std::make_unique<DeviceGuard>(device_);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddpbench: the NCCL watchdog of %s cannot select its GPU: %s\n",
                 who_.c_str(), e.what());
  }
  auto next_anchor = Clock::now() + nccl_detail::kAnchorPeriod;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    check_async_error_locked(lock);
    retire_completed_locked();
    release_drained_locked();
    if (pending_.empty()) changed_.notify_all();  // the destructor may be waiting for this

    // 4. A fresh clock anchor now and then.
    if (Clock::now() >= next_anchor) {
      next_anchor = Clock::now() + nccl_detail::kAnchorPeriod;
      lock.unlock();
      try {
        refresh_clock_anchor(Millis(100));
      } catch (const std::exception&) {
        // Keep the old anchor: times get less precise, nothing else.
      }
      lock.lock();
      continue;
    }
    changed_.wait_for(lock, pending_.empty() && draining_.empty() ? nccl_detail::kIdlePoll
                                                                  : nccl_detail::kBusyPoll);
  }
}

}  // namespace ddpb::comm
