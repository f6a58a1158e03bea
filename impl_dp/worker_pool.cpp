#include "impl_dp/worker_pool.h"

#include <system_error>

#include "core/check.h"
#include "core/nvtx.h"

namespace ddpb::dp {

WorkerPool::WorkerPool(std::vector<Device> devices, std::vector<StreamPtr> streams)
    : devices_(std::move(devices)), streams_(std::move(streams)) {
  DDPB_CHECK(devices_.size() == streams_.size()) << "one stream per device";
  workers_.resize(devices_.size());
  errors_.resize(devices_.size());
  for (size_t i = 0; i < workers_.size(); ++i) {
    try {
      workers_[i].thread = std::thread([this, i] { loop(i); });
    } catch (const std::system_error& e) {
      // Out of threads or memory: the workers started so far are stopped and joined, not
      // left running for std::thread's destructor to terminate the program over.
      stop_and_join();
      throw Error("cannot start the DP worker thread of " + devices_[i].str() + " (" +
                  std::to_string(i + 1) + " of " + std::to_string(workers_.size()) +
                  "): " + e.what());
    }
  }
}

WorkerPool::~WorkerPool() {
  stop_and_join();
}

void WorkerPool::stop_and_join() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  start_cv_.notify_all();
  for (auto& w : workers_) {
    if (w.thread.joinable()) w.thread.join();
  }
}

void WorkerPool::run(size_t count, const std::function<void(size_t)>& fn) {
  DDPB_CHECK(count <= workers_.size()) << count << " tasks for " << workers_.size() << " workers";
  {
    std::lock_guard lock(mutex_);
    pending_ = count;
    for (size_t i = 0; i < count; ++i) {
      workers_[i].task = &fn;
      ++workers_[i].generation;
      errors_[i] = nullptr;
    }
  }
  start_cv_.notify_all();
  std::unique_lock lock(mutex_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  for (size_t i = 0; i < count; ++i) {
    if (!errors_[i]) continue;
    const std::string where = "replica " + std::to_string(i) + " on " + devices_[i].str();
    try {
      std::rethrow_exception(errors_[i]);
    } catch (const UsageError& e) {
      // A bad input stays a usage error (exit 2), as in single and DDP (issue 25, E5).
      throw UsageError(where + ": " + e.what());
    } catch (const std::exception& e) {
      throw Error(where + " failed: " + e.what());
    }
  }
}

void WorkerPool::loop(size_t index) {
  nvtx::name_thread("ddpb-dp-" + std::to_string(index));
  DeviceGuard device(devices_[index]);
  StreamGuard stream(streams_[index]);
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(size_t)>* task;
    {
      std::unique_lock lock(mutex_);
      start_cv_.wait(lock, [&] { return stopping_ || workers_[index].generation != seen; });
      if (stopping_) return;
      seen = workers_[index].generation;
      task = workers_[index].task;
    }
    std::exception_ptr error;
    try {
      (*task)(index);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      errors_[index] = error;
      --pending_;
    }
    done_cv_.notify_all();
  }
}

}  // namespace ddpb::dp
