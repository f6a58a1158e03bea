// DataLoader: assembles batches on worker threads and hands them out in order, with the
// options of torch.utils.data.DataLoader (num_workers, prefetch_factor, pin_memory).
//
// Order: batches are numbered k = 0, 1, 2, ...: batch k is the k-th chunk of batch_size
// indices of the sampler's order, epoch after epoch (an incomplete last chunk of an epoch is
// dropped, so every rank runs the same number of steps). Batches come out of next() in that
// order whatever the number of workers, and, since a sample is a function of (seed, epoch,
// index) (Note [Samples are functions of (seed, epoch, index)]), their content too: the same
// batches at 0, 1 or 8 workers.
//
// Workers (Note [Loader workers]): with num_workers = N > 0, worker w assembles the batches
// k = w, w + N, w + 2N, ... (PyTorch's round robin), each ahead of the consumer by at most
// N * prefetch_factor batches in all. With num_workers = 0, next() assembles the batch on the
// calling thread, as PyTorch's 0 does.
//
// Threads: next(), has_next() and the accessors are for one consumer thread. The destructor
// stops and joins every worker whether or not any batch was consumed.
//
// Streams and memory (the same streams on both devices, so that the stream-order sanitizer
// sees on CPU what a GPU run does):
//  - Each worker writes its batches on a stream of its own, "ddpb-h2d" for worker 0 and
//    "ddpb-h2d.<w>" for the others ("ddpb-h2d" for num_workers = 0), after an event on the
//    consumer stream (the stream current for `device` on the thread that constructs the
//    loader), so that a block the consumer just freed is not overwritten while work enqueued
//    before the free may still read it. An event recorded on that stream then marks the batch
//    ready, and next() makes the caller's current stream wait on it (no host synchronisation).
//    next() must therefore be called with the consumer stream current; it throws Error
//    otherwise. Device memory comes from the consumer stream's pool.
//  - CPU device: the worker's stream is inline, run by the worker, which fills the batch in
//    place on `device` (no copy; pin_memory does not apply, and the loader says so).
//  - CUDA device: the worker fills host buffers, page-locked with pin_memory (the copy is then
//    asynchronous), and copies them to the device on its stream; the host buffer is kept
//    alive until the copy completed.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/named_enum.h"
#include "core/device.h"
#include "core/stream.h"
#include "data/dataset.h"
#include "data/sampler.h"

namespace ddpb {

// What a loader does with a sample whose file cannot be read (BadSampleError).
enum class OnBadSample { Fail, Skip };
constexpr NameTable<OnBadSample, 2> enum_names(OnBadSample) {
  return {{{"fail", OnBadSample::Fail}, {"skip", OnBadSample::Skip}}};
}

struct LoaderOptions {
  int num_workers = 1;      // threads assembling batches; 0: next() assembles on the caller
  int prefetch_factor = 2;  // batches in flight per worker
  bool pin_memory = false;  // CUDA: page-locked staging, an asynchronous copy; CPU: n/a
  // Skip: a bad sample is replaced by the next readable one in dataset order (so a batch keeps
  // its size, and its content stays a function of the indices), and counted.
  OnBadSample on_bad_sample = OnBadSample::Fail;
  int64_t epochs = 0;  // > 0: the loader ends after this many epochs (has_next()); 0: never
};

// Limits of the options (the flags' ranges).
inline constexpr int kMaxLoaderWorkers = 256;
inline constexpr int kMaxPrefetchFactor = 64;

// What it took to produce the batch last returned by next().
struct LoadedBatchStats {
  double fill_ms = 0;                  // its worker's time reading, decoding and transforming it
  std::optional<double> h2d_ms;        // CUDA: the copy's device time; CPU: none (in place)
  std::optional<bool> h2d_overlapped;  // CUDA: the copy had finished before next() asked
  int64_t skipped = 0;                 // bad samples replaced in it
};

// Over every batch assembled so far (also those not yet consumed).
struct LoaderTotals {
  int64_t batches = 0, samples = 0, skipped = 0;
  double fill_ms = 0;      // summed over the workers
  std::string first_skip;  // the first skipped sample's reason, when any
};

class DataLoader {
 public:
  // Starts the workers at the sampler's current epoch. Throws UsageError when batch_size < 1,
  // an option is out of its range, the sampler covers a different dataset size, or the
  // sampler gives this rank fewer than batch_size samples per epoch (no full batch).
  DataLoader(std::shared_ptr<const Dataset> dataset, DistributedSampler sampler, int64_t batch_size,
             Device device, LoaderOptions options = {});
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Whether next() has a batch to give: always, unless options.epochs ends the loader.
  bool has_next() const;
  // The next batch on `device`: x [batch_size, ...x_shape], y [batch_size, ...y_shape].
  // Blocks until its worker has assembled it. If that failed, rethrows its exception as
  // ddpb::Error (ddpb::UsageError if it was one) naming the batch and epoch; batches before
  // the failure are still returned first. Throws Error when !has_next().
  Batch next();

  // Sample indices of the batch last returned by next() (empty before the first call).
  const std::vector<int64_t>& last_indices() const { return last_indices_; }
  // Sampler epoch of the batch last returned by next() (-1 before the first call).
  int64_t epoch_of_last() const { return last_epoch_; }
  // Of the batch last returned by next(); its h2d_ms once the copy has completed (after the
  // step that used it), else none.
  LoadedBatchStats last_stats() const;
  LoaderTotals totals() const;

  int64_t batch_size() const { return batch_size_; }
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  const Device& device() const { return device_; }
  const LoaderOptions& options() const { return options_; }
  // Samples the sampler reads twice per epoch over all ranks (its padding).
  int64_t padded_samples() const { return sampler_.padded_samples(); }

 private:
  struct Item {
    Batch batch;  // on device_
    Batch host;   // CUDA: the source of the copy
    Event ready;  // recorded on the worker's stream once the batch is written
    std::optional<Event> copy_start;
    std::vector<int64_t> indices;
    int64_t epoch = 0;
    double fill_ms = 0;
    int64_t skipped = 0;
    std::string first_skip;
  };
  // The host buffers of a consumed batch, held until its copy has completed.
  struct InFlight {
    Event ready;
    Batch host;
  };

  void work(int worker);    // a worker thread
  void finish(Item& item);  // the consumer's side of next()
  Item assemble(int64_t k, Stream& stream);
  std::shared_ptr<const std::vector<int64_t>> order_of(int64_t epoch);
  void fill_samples(const std::vector<int64_t>& indices, int64_t epoch, const Batch& out,
                    Item& item) const;
  void count_batch(const Item& item);  // into totals_; mutex_ held
  // Sets stop_, joins every started worker and waits for the copies they enqueued.
  void stop_workers();
  // "DataLoader on cpu:0 (rank 0 of 2, worker 1): assembling batch 3 of epoch 0 failed: ";
  // worker -1: assembled inline by next().
  std::string failure_context(int64_t k, int worker) const;
  [[noreturn]] void rethrow_failure(int64_t k) const;  // mutex_ held
  int64_t end_batch() const;  // one past the last batch (INT64_MAX: never ends)

  const std::shared_ptr<const Dataset> dataset_;
  const DistributedSampler sampler_;  // at the starting epoch; epochs are derived from it
  const int64_t batch_size_;
  const Device device_;
  const LoaderOptions options_;
  const int64_t batches_per_epoch_;
  std::vector<StreamPtr> streams_;  // one per worker; [0] for num_workers = 0
  StreamPtr consumer_stream_;       // current when the loader was made; next() must run on it

  mutable std::mutex mutex_;
  std::condition_variable room_;   // workers wait for the consumer to make room (or stop_)
  std::condition_variable ready_;  // next() waits for its batch (or a failure)
  std::map<int64_t, Item> done_;   // guarded by mutex_: assembled batches by number
  std::map<int64_t, std::shared_ptr<const std::vector<int64_t>>> orders_;  // by epoch; mutex_
  int64_t consumed_ = 0;  // guarded by mutex_: batches next() has returned
  bool stop_ = false;     // guarded by mutex_
  std::map<int64_t, std::exception_ptr> failures_;  // guarded by mutex_: by batch number
  std::map<int64_t, std::string> failure_context_;  // guarded by mutex_
  LoaderTotals totals_;                             // guarded by mutex_

  // Consumer side (the thread calling next()).
  std::vector<int64_t> last_indices_;
  int64_t last_epoch_ = -1;
  LoadedBatchStats last_stats_;
  std::optional<Event> last_copy_start_, last_ready_;
  std::deque<InFlight> in_flight_;

  std::vector<std::thread> workers_;  // last: start after every other member is initialised
};

}  // namespace ddpb
