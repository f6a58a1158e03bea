// DataLoader: assembles batches on a background thread and hands them out in order.
//
// Order: the thread walks the sampler's indices for its current epoch in chunks of
// batch_size (an incomplete last chunk is dropped, so every rank runs the same number of
// steps), then moves the sampler to the next epoch and continues, forever. Batches come
// out of next() in exactly that order; the loader never skips or reorders.
//
// Threads: one background thread ("ddpb-dataload") calls Dataset::fill() and keeps at most
// prefetch_depth finished batches queued. next(), last_indices() and epoch_of_last() are
// for one consumer thread (not thread-safe among themselves). The destructor stops and
// joins the thread whether or not any batch was consumed.
//
// Streams and memory (the same streams on both devices, so that the stream-order sanitizer
// sees on CPU what a GPU run does):
//  - The batch is written on the loader's stream "ddpb-h2d", after an event on the
//    *consumer stream* (the stream current for `device` on the thread that constructs the
//    loader), so a block that the consumer just freed is not overwritten while work
//    enqueued before the free may still read it. An Event recorded on "ddpb-h2d" then marks
//    the batch ready, and next() makes the caller's current stream wait on it (no host
//    synchronisation): the batch is usable by work enqueued on that stream after next()
//    returns. next() must therefore be called with the consumer stream current; it throws
//    Error otherwise. Device memory comes from the consumer stream's pool, so the caller may
//    keep or drop a batch whenever it likes, like any tensor allocated on that stream.
//  - CPU device: "ddpb-h2d" is an inline stream run by the loader thread, which fills the
//    batch in place on `device` (no copy).
//  - CUDA device: the thread fills page-locked host buffers and copies them to the device on
//    "ddpb-h2d" (asynchronous); the pinned buffer is kept alive until the copy completed.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/device.h"
#include "core/stream.h"
#include "workloads/dataset.h"
#include "workloads/sampler.h"

namespace ddpb {

class DataLoader {
 public:
  // Starts the background thread at the sampler's current epoch. Throws UsageError when
  // batch_size < 1, prefetch_depth < 1, the sampler covers a different dataset size, or
  // the sampler gives this rank fewer than batch_size samples per epoch (no full batch).
  DataLoader(std::shared_ptr<const Dataset> dataset, DistributedSampler sampler, int64_t batch_size,
             Device device, int prefetch_depth = 2);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // The next batch on `device`: x [batch_size, ...x_shape], y [batch_size, ...y_shape].
  // Blocks until the thread has assembled it. If the thread failed, rethrows its exception
  // as ddpb::Error (ddpb::UsageError if it was one) naming the batch and epoch; batches
  // assembled before the failure are still returned first.
  Batch next();

  // Sample indices of the batch last returned by next() (empty before the first call).
  const std::vector<int64_t>& last_indices() const { return last_indices_; }
  // Sampler epoch of the batch last returned by next() (-1 before the first call).
  int64_t epoch_of_last() const { return last_epoch_; }

  int64_t batch_size() const { return batch_size_; }
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  const Device& device() const { return device_; }

 private:
  struct Item {
    Batch batch;  // on device_
    Batch host;   // CUDA only: the pinned source of the copy
    Event ready;  // recorded on the h2d stream once the batch is written
    std::vector<int64_t> indices;
    int64_t epoch = 0;
  };
  // The pinned buffers of a consumed batch, held until its copy has completed.
  struct InFlight {
    Event ready;
    Batch host;
  };

  void run();  // the background thread
  Item assemble(std::vector<int64_t> indices, int64_t epoch);
  void wait_for_consumer();  // orders the h2d stream after the consumer's work so far
  [[noreturn]] void rethrow_failure() const;  // mutex_ held

  const std::shared_ptr<const Dataset> dataset_;
  DistributedSampler sampler_;  // used only by the thread once it runs
  const int64_t batch_size_;
  const Device device_;
  const int prefetch_depth_;
  const int64_t batches_per_epoch_;
  StreamPtr h2d_stream_;       // "ddpb-h2d": inline on CPU (this thread), async on CUDA
  StreamPtr consumer_stream_;  // current when the loader was made; next() must run on it

  mutable std::mutex mutex_;
  std::condition_variable not_full_;   // the thread waits for room (or stop_)
  std::condition_variable not_empty_;  // next() waits for a batch (or a failure)
  std::deque<Item> queue_;             // guarded by mutex_
  bool stop_ = false;                  // guarded by mutex_
  std::exception_ptr failure_;         // guarded by mutex_
  std::string failure_context_;        // guarded by mutex_

  // Consumer side (the thread calling next()).
  std::vector<int64_t> last_indices_;
  int64_t last_epoch_ = -1;
  std::deque<InFlight> in_flight_;

  std::thread thread_;  // last: starts after every other member is initialised
};

}  // namespace ddpb
