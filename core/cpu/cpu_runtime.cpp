// CPU streams, events and memory.
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "core/check.h"
#include "core/cpu/cpu_backend.h"

extern "C" void openblas_set_num_threads(int num_threads);
extern "C" void omp_set_num_threads(int num_threads);  // libgomp, oneDNN's OpenMP runtime

namespace ddpb::cpu {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> g_blas_threads{1};

// One recording of an event. A new record() makes a new state, so a waiter that captured
// the old state is never confused by a later recording.
struct EventState {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  Clock::time_point when{};
  void complete() {
    {
      std::lock_guard lock(mutex);
      done = true;
      when = Clock::now();
    }
    cv.notify_all();
  }
};

class CpuEvent final : public EventImpl {
 public:
  void record(Stream& stream) override;
  void wait_host() const override {
    auto s = state();
    if (!s) return;
    std::unique_lock lock(s->mutex);
    s->cv.wait(lock, [&] { return s->done; });
  }
  bool query() const override {
    auto s = state();
    if (!s) return true;
    std::lock_guard lock(s->mutex);
    return s->done;
  }
  double elapsed_ms_to(const EventImpl& end) const override {
    auto* other = dynamic_cast<const CpuEvent*>(&end);
    DDPB_CHECK(other) << "elapsed time between a CPU event and a non-CPU event";
    wait_host();
    other->wait_host();
    auto a = state(), b = other->state();
    DDPB_CHECK(a && b) << "elapsed time of an event that was never recorded";
    return std::chrono::duration<double, std::milli>(b->when - a->when).count();
  }

 private:
  std::shared_ptr<EventState> state() const {
    std::lock_guard lock(mutex_);
    return state_;
  }
  mutable std::mutex mutex_;
  std::shared_ptr<EventState> state_;
};

// The recorded closures of an Inline stream's capture, and the tensors they use.
class CpuGraph final : public StreamGraph {
 public:
  CpuGraph(std::vector<std::function<void()>> work, std::vector<std::shared_ptr<void>> keep)
      : work_(std::move(work)), keep_(std::move(keep)) {}
  void replay_impl(Stream& stream) override {
    if (stream.is_inline() && !stream.capturing()) {
      for (const auto& fn : work_) fn();  // now, on this thread: no copies of the closures
      return;
    }
    for (const auto& fn : work_) stream.enqueue(fn);
  }

 private:
  std::vector<std::function<void()>> work_;
  std::vector<std::shared_ptr<void>> keep_;
};

class CpuInlineStream final : public Stream {
 public:
  CpuInlineStream(Device device, std::string name) : device_(device), name_(std::move(name)) {}
  Device device() const override { return device_; }
  const std::string& name() const override { return name_; }
  // While capturing, work is recorded instead of run (run_on_stream routes it here then).
  void enqueue(std::function<void()> fn) override {
    if (capture_) {
      capture_->push_back(std::move(fn));
    } else {
      fn();
    }
  }
  void synchronize_impl() override {}
  // The caller is this stream's executor, so waiting means blocking the caller. (Not
  // Event::synchronize: the host as such is not ordered after the event.)
  void wait_impl(const Event& e) override {
    if (e.impl()) e.impl()->wait_host();
  }
  bool is_inline() const override { return true; }

  void begin_capture() override {
    DDPB_CHECK(!capture_) << "stream " << name_ << " is already capturing";
    capture_detail::begin_keepalive(device_);
    capture_ = std::make_unique<std::vector<std::function<void()>>>();
  }
  std::unique_ptr<StreamGraph> end_capture_impl() override {
    DDPB_CHECK(capture_) << "stream " << name_ << " is not capturing";
    auto work = std::move(*capture_);
    capture_.reset();
    return std::make_unique<CpuGraph>(std::move(work), capture_detail::end_keepalive());
  }
  bool capturing() const override { return capture_ != nullptr; }

 private:
  Device device_;
  std::string name_;
  std::unique_ptr<std::vector<std::function<void()>>> capture_;
};

class CpuExecutorStream final : public Stream {
 public:
  CpuExecutorStream(Device device, std::string name)
      : device_(device), name_(std::move(name)), worker_([this] { run(); }) {}
  ~CpuExecutorStream() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  Device device() const override { return device_; }
  const std::string& name() const override { return name_; }
  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(fn));
      ++enqueued_;
    }
    cv_.notify_all();
  }
  void synchronize_impl() override {
    std::unique_lock lock(mutex_);
    uint64_t target = enqueued_;
    idle_cv_.wait(lock, [&] { return finished_ >= target; });
    if (error_) {
      auto e = error_;
      error_ = nullptr;
      std::rethrow_exception(e);
    }
  }
  void wait_impl(const Event& e) override {
    enqueue([e] {
      if (e.impl()) e.impl()->wait_host();
    });
  }

 private:
  void run() {
    std::string thread_name = name_.substr(0, 15);
    pthread_setname_np(pthread_self(), thread_name.c_str());
    openblas_set_num_threads(blas_threads());
    set_current_device_label(device_.str());
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping and drained
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      try {
        fn();
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
      {
        std::lock_guard lock(mutex_);
        ++finished_;
      }
      idle_cv_.notify_all();
    }
  }

  Device device_;
  std::string name_;
  std::mutex mutex_;
  std::condition_variable cv_, idle_cv_;
  std::deque<std::function<void()>> queue_;
  uint64_t enqueued_ = 0, finished_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread worker_;  // last: starts after the other members exist
};

void CpuEvent::record(Stream& stream) {
  auto s = std::make_shared<EventState>();
  {
    std::lock_guard lock(mutex_);
    state_ = s;
  }
  if (stream.is_inline() || stream.device().is_cpu()) {
    // Inline streams run work immediately, so "now" is after all of it; executors
    // complete the event when the worker reaches it.
    stream.enqueue([s] { s->complete(); });
  } else {
    DDPB_FAIL() << "a CPU event cannot be recorded on " << stream.name();
  }
}

}  // namespace

void set_blas_threads(int threads) {
  DDPB_CHECK(threads >= 1) << "BLAS threads must be >= 1, got " << threads;
  g_blas_threads = threads;
  openblas_set_num_threads(threads);
}

int blas_threads() {
  return g_blas_threads;
}

void use_openmp_threads(int threads) {
  thread_local int current = 0;  // 0: not yet set on this thread
  if (current == threads) return;
  omp_set_num_threads(threads);
  current = threads;
}

CpuBackend::CpuBackend() {
  // One BLAS thread per logical device by default: parallelism comes from devices, not BLAS.
  openblas_set_num_threads(blas_threads());
}

StreamPtr CpuBackend::make_stream(const Device& device, std::string name, StreamKind kind) {
  if (kind == StreamKind::Inline) return std::make_shared<CpuInlineStream>(device, std::move(name));
  return std::make_shared<CpuExecutorStream>(device, std::move(name));
}

std::unique_ptr<EventImpl> CpuBackend::make_event(const Device&) {
  return std::make_unique<CpuEvent>();
}

std::unique_ptr<MemoryBackend> CpuBackend::make_memory(const Device&) {
  return make_host_memory();
}

}  // namespace ddpb::cpu

namespace ddpb {
Backend& cpu_backend() {
  static auto* backend = new cpu::CpuBackend();
  return *backend;
}
}  // namespace ddpb
