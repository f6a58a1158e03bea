// One persistent worker thread per DP device (parallel_apply's threads).
//
// run(fn) hands fn(i) to worker i for every i, waits for all of them, and then rethrows the
// first failure as a ddpb::Error naming the failing device ("replica 1 on cpu:1 failed:
// ..."). A failure never leaves a worker blocked: every worker finishes its task before
// run() returns or throws, so there is nothing to deadlock on.
//
// Each worker is named "ddpb-dp-<i>" (visible in traces and debuggers), has made its
// device current (DeviceGuard) and has the replica's compute stream current (StreamGuard)
// while it runs a task.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/device.h"
#include "core/stream.h"

namespace ddpb::dp {

class WorkerPool {
 public:
  WorkerPool(std::vector<Device> devices, std::vector<StreamPtr> streams);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs fn(i) on worker i for i in [0, count) (count <= size()), in parallel.
  void run(size_t count, const std::function<void(size_t)>& fn);
  size_t size() const { return workers_.size(); }

 private:
  struct Worker {
    std::thread thread;
    const std::function<void(size_t)>* task = nullptr;  // guarded by mutex_
    uint64_t generation = 0;                            // guarded by mutex_
  };
  void loop(size_t index);
  void stop_and_join();

  std::vector<Device> devices_;
  std::vector<StreamPtr> streams_;
  std::mutex mutex_;
  std::condition_variable start_cv_, done_cv_;
  std::vector<Worker> workers_;
  std::vector<std::exception_ptr> errors_;  // guarded by mutex_
  size_t pending_ = 0;                      // guarded by mutex_
  bool stopping_ = false;                   // guarded by mutex_
};

}  // namespace ddpb::dp
