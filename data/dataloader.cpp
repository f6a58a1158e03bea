#include "data/dataloader.h"

#include <pthread.h>

#include <chrono>
#include <cstdio>
#include <limits>
#include <utility>

#include "core/check.h"
#include "core/ops.h"
#include "core/progress.h"
#include "core/stream_sanitizer.h"

namespace ddpb {

// Note [Loader workers]
// ~~~~~~~~~~~~~~~~~~~~~
// Batch k belongs to worker k % N, as in PyTorch, so that a slow batch delays only its own
// worker's turn and the output order never depends on timing. A worker may start batch k only
// while k < consumed + N * prefetch_factor: the batches in flight (assembled or being
// assembled, not yet returned) never exceed that, and neither does their memory. Each worker
// writes on a stream of its own, so that on CUDA the copies of two workers overlap each other
// and the consumer's compute; next() orders the consumer after the batch's ready event only.
// The epoch's order (the sampler's indices) is computed once, by the first worker to need it,
// and dropped when no batch of that epoch is left to assemble.

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string worker_stream_name(int w) {
  return w == 0 ? "ddpb-h2d" : "ddpb-h2d." + std::to_string(w);
}

}  // namespace

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DistributedSampler sampler,
                       int64_t batch_size, Device device, LoaderOptions options)
    : dataset_(std::move(dataset)),
      sampler_(std::move(sampler)),
      batch_size_(batch_size),
      device_(device),
      options_(options),
      batches_per_epoch_(batch_size >= 1 ? sampler_.num_samples() / batch_size : 0) {
  DDPB_CHECK(dataset_ != nullptr) << "DataLoader: null dataset";
  DDPB_USAGE_CHECK(batch_size >= 1) << "DataLoader: batch size must be >= 1, got " << batch_size;
  DDPB_USAGE_CHECK(options.num_workers >= 0 && options.num_workers <= kMaxLoaderWorkers)
      << "DataLoader: --num-workers must be from 0 to " << kMaxLoaderWorkers << ", got "
      << options.num_workers;
  DDPB_USAGE_CHECK(options.prefetch_factor >= 1 && options.prefetch_factor <= kMaxPrefetchFactor)
      << "DataLoader: --prefetch-factor must be from 1 to " << kMaxPrefetchFactor << ", got "
      << options.prefetch_factor;
  DDPB_USAGE_CHECK(options.epochs >= 0) << "DataLoader: epochs must be >= 0";
  DDPB_USAGE_CHECK(sampler_.dataset_size() == dataset_->size())
      << "DataLoader: the sampler covers " << sampler_.dataset_size()
      << " samples, but the dataset has " << dataset_->size();
  DDPB_USAGE_CHECK(batches_per_epoch_ >= 1)
      << "the dataset of " << dataset_->size() << " samples gives rank " << sampler_.rank()
      << " of " << sampler_.num_replicas() << " " << sampler_.num_samples() << " samples per epoch"
      << (sampler_.drop_last() ? " (drop_last)" : "") << ", fewer than one batch of " << batch_size
      << ": the dataset is smaller than one "
      << "global batch";
  require_device(device_);
  // The same streams on every device (Note [Stream-order sanitizer]): on CPU a worker's stream
  // is inline, run by the worker, which fills the batch in place.
  const StreamKind kind = device_.is_cpu() ? StreamKind::Inline : StreamKind::Executor;
  for (int w = 0; w < std::max(1, options_.num_workers); ++w)
    streams_.push_back(make_stream(device_, worker_stream_name(w), kind));
  consumer_stream_ = current_stream_ptr(device_);
  for (int w = 0; w < options_.num_workers; ++w) {
    try {
      workers_.emplace_back([this, w] { work(w); });
    } catch (const std::system_error& e) {
      // The members are destroyed as the exception leaves: only the started workers need
      // stopping first (they use them).
      stop_workers();
      throw Error("DataLoader: cannot start worker " + std::to_string(w) + ": " + e.what());
    } catch (...) {
      stop_workers();  // std::bad_alloc for the thread's state, under a memory limit
      throw;
    }
  }
}

DataLoader::~DataLoader() {
  stop_workers();
}

void DataLoader::stop_workers() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  room_.notify_all();
  ready_.notify_all();
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
  // Copies of batches nobody consumed may still be running: they write into device blocks
  // that return to the consumer's pool and read host buffers that return to their cache as
  // soon as the batches below are destroyed.
  for (const StreamPtr& s : streams_) {
    try {
      s->synchronize();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ddpbench: DataLoader on %s: %s synchronize failed: %s\n",
                   device_.str().c_str(), s->name().c_str(), e.what());
    }
  }
}

int64_t DataLoader::end_batch() const {
  return options_.epochs > 0 ? options_.epochs * batches_per_epoch_
                             : std::numeric_limits<int64_t>::max();
}

bool DataLoader::has_next() const {
  std::lock_guard lock(mutex_);
  return consumed_ < end_batch();
}

std::shared_ptr<const std::vector<int64_t>> DataLoader::order_of(int64_t epoch) {
  std::lock_guard lock(mutex_);
  auto it = orders_.find(epoch);
  if (it == orders_.end()) {
    DistributedSampler s = sampler_;
    s.set_epoch(sampler_.epoch() + epoch);
    it = orders_.emplace(epoch, std::make_shared<const std::vector<int64_t>>(s.indices())).first;
  }
  auto order = it->second;
  // Epochs every worker has left behind are dropped (the slowest worker's batch is >= consumed_).
  const int64_t oldest = consumed_ / batches_per_epoch_;
  orders_.erase(orders_.begin(), orders_.lower_bound(std::min(oldest, epoch)));
  return order;
}

// Each sample, or with OnBadSample::Skip the next readable one in dataset order in its place.
void DataLoader::fill_samples(const std::vector<int64_t>& indices, int64_t epoch, const Batch& out,
                              Item& item) const {
  const size_t x_bytes =
      static_cast<size_t>(shape_numel(dataset_->x_shape())) * dtype_size(dataset_->x_dtype());
  const int64_t y_count = shape_numel(dataset_->y_shape());
  auto* x = static_cast<char*>(out.x.raw_data());
  int32_t* y = out.y.data<int32_t>();
  const int64_t n = dataset_->size();
  for (size_t i = 0; i < indices.size(); ++i) {
    for (int64_t tries = 0, index = indices[i];; ++tries, index = (index + 1) % n) {
      try {
        dataset_->fill(index, epoch, x + i * x_bytes, y + static_cast<int64_t>(i) * y_count);
        break;
      } catch (const BadSampleError& e) {
        if (options_.on_bad_sample == OnBadSample::Fail || tries + 1 >= n) throw;
        if (item.first_skip.empty()) item.first_skip = e.what();
        ++item.skipped;
      }
    }
    progress::note_op();  // a sample is progress (Note [Step watchdog])
  }
}

DataLoader::Item DataLoader::assemble(int64_t k, Stream& stream) {
  Item item;
  item.epoch = k / batches_per_epoch_;
  const int64_t b = k % batches_per_epoch_;
  const auto order = order_of(item.epoch);
  item.indices.assign(order->begin() + b * batch_size_, order->begin() + (b + 1) * batch_size_);
  const int64_t sampler_epoch = sampler_.epoch() + item.epoch;
  Shape x_shape = dataset_->x_shape(), y_shape = dataset_->y_shape();
  x_shape.insert(x_shape.begin(), batch_size_);
  y_shape.insert(y_shape.begin(), batch_size_);
  {
    // Device memory comes from the consumer stream's pool (see the header).
    StreamGuard on_consumer(consumer_stream_);
    item.batch.x = Tensor::empty(x_shape, dataset_->x_dtype(), device_);
    item.batch.y = Tensor::empty(y_shape, DType::I32, device_);
  }
  // The blocks just allocated may have been freed by the consumer a moment ago with kernels
  // that read them still queued: the batch is written after those.
  Event allocated = Event::create(device_);
  allocated.record(*consumer_stream_);
  stream.wait(allocated);
  const auto t0 = std::chrono::steady_clock::now();
  if (device_.is_cpu()) {
    fill_samples(item.indices, sampler_epoch, item.batch, item);  // on this thread: the stream's
    item.fill_ms = ms_since(t0);
    if (sanitizer::enabled())
      sanitizer::on_op(stream, "fill_batch", {}, {&item.batch.x, &item.batch.y});
  } else {
    const bool pinned = options_.pin_memory;
    item.host.x = pinned ? Tensor::empty_pinned(x_shape, dataset_->x_dtype())
                         : Tensor::empty(x_shape, dataset_->x_dtype(), Device::cpu());
    item.host.y = pinned ? Tensor::empty_pinned(y_shape, DType::I32)
                         : Tensor::empty(y_shape, DType::I32, Device::cpu());
    fill_samples(item.indices, sampler_epoch, item.host, item);
    item.fill_ms = ms_since(t0);
    item.copy_start = Event::create(device_);
    item.copy_start->record(stream);
    ops::copy(item.host.x, item.batch.x);  // on `stream`, current on this thread
    ops::copy(item.host.y, item.batch.y);
  }
  item.ready = Event::create(device_);
  item.ready.record(stream);
  return item;
}

void DataLoader::work(int worker) {
  pthread_setname_np(pthread_self(), ("ddpb-load-" + std::to_string(worker)).c_str());
  const int64_t step = options_.num_workers;
  const int64_t in_flight = step * options_.prefetch_factor;
  for (int64_t k = worker;; k += step) {
    {
      std::unique_lock lock(mutex_);
      room_.wait(lock, [&] { return stop_ || k < consumed_ + in_flight; });
      if (stop_ || k >= end_batch()) return;
    }
    try {
      DeviceGuard device_guard(device_);
      StreamGuard stream_guard(streams_[static_cast<size_t>(worker)]);
      Item item = assemble(k, *streams_[static_cast<size_t>(worker)]);
      std::lock_guard lock(mutex_);
      count_batch(item);
      done_.emplace(k, std::move(item));  // even when stop_ was set: the destructor waits for it
    } catch (...) {
      // A failure after a copy was enqueued has already freed that batch's host buffer: wait
      // for the copy so the buffer is not reused under it.
      try {
        streams_[static_cast<size_t>(worker)]->synchronize();
      } catch (...) {
        // The original failure is the one to report.
      }
      std::lock_guard lock(mutex_);
      failures_.emplace(k, std::current_exception());
      failure_context_.emplace(k, failure_context(k, worker));
      ready_.notify_all();
      return;  // the batches after a failure are never asked for
    }
    ready_.notify_all();
  }
}

void DataLoader::count_batch(const Item& item) {
  totals_.batches += 1;
  totals_.samples += batch_size_;
  totals_.skipped += item.skipped;
  totals_.fill_ms += item.fill_ms;
  if (totals_.first_skip.empty()) totals_.first_skip = item.first_skip;
}

std::string DataLoader::failure_context(int64_t k, int worker) const {
  const std::string who = worker < 0 ? "" : ", worker " + std::to_string(worker);
  return "DataLoader on " + device_.str() + " (rank " + std::to_string(sampler_.rank()) + " of " +
         std::to_string(sampler_.num_replicas()) + who + "): assembling batch " +
         std::to_string(k % batches_per_epoch_) + " of epoch " +
         std::to_string(sampler_.epoch() + k / batches_per_epoch_) + " failed: ";
}

void DataLoader::rethrow_failure(int64_t k) const {
  const std::string& context = failure_context_.at(k);
  try {
    std::rethrow_exception(failures_.at(k));
  } catch (const BadSampleError& e) {
    throw BadSampleError(context + e.what());  // the run's exit code depends on the type
  } catch (const UsageError& e) {
    throw UsageError(context + e.what());
  } catch (const std::exception& e) {
    throw Error(context + e.what());
  } catch (...) {
    throw Error(context + "unknown exception");
  }
}

void DataLoader::finish(Item& item) {
  Stream& consumer = current_stream(device_);
  DDPB_CHECK(&consumer == consumer_stream_.get())
      << "DataLoader::next() on " << device_.str() << ": the current stream is '" << consumer.name()
      << "', but the loader was created with '" << consumer_stream_->name()
      << "' current; batches are allocated from that stream's pool, so call next() with it "
      << "current";
  last_stats_ = {item.fill_ms, std::nullopt, std::nullopt, item.skipped};
  last_copy_start_ = item.copy_start;
  last_ready_ = item.ready;
  if (item.copy_start) last_stats_.h2d_overlapped = item.ready.query();
  consumer.wait(item.ready);
  // Release the host buffers of copies that have finished; keep the rest.
  while (!in_flight_.empty() && in_flight_.front().ready.query()) in_flight_.pop_front();
  if (item.host.x.defined()) in_flight_.push_back({item.ready, std::move(item.host)});
  last_indices_ = std::move(item.indices);
  last_epoch_ = sampler_.epoch() + item.epoch;
}

LoadedBatchStats DataLoader::last_stats() const {
  LoadedBatchStats s = last_stats_;
  if (last_copy_start_ && last_ready_ && last_ready_->query())
    s.h2d_ms = last_copy_start_->elapsed_ms(*last_ready_);
  return s;
}

LoaderTotals DataLoader::totals() const {
  std::lock_guard lock(mutex_);
  return totals_;
}

Batch DataLoader::next() {
  Item item;
  int64_t k = 0;
  if (options_.num_workers == 0) {
    {
      std::lock_guard lock(mutex_);
      k = consumed_;
      DDPB_CHECK(k < end_batch()) << "DataLoader::next(): the loader's " << options_.epochs
                                  << " epoch(s) are over";
    }
    try {
      StreamGuard on_loader(streams_.front());
      item = assemble(k, *streams_.front());
    } catch (...) {
      std::lock_guard lock(mutex_);
      failures_.emplace(k, std::current_exception());
      failure_context_.emplace(k, failure_context(k, /*worker=*/-1));
      rethrow_failure(k);
    }
    std::lock_guard lock(mutex_);
    count_batch(item);
    ++consumed_;
  } else {
    std::unique_lock lock(mutex_);
    k = consumed_;
    DDPB_CHECK(k < end_batch()) << "DataLoader::next(): the loader's " << options_.epochs
                                << " epoch(s) are over";
    ready_.wait(lock, [&] { return done_.count(k) || failures_.count(k); });
    if (!done_.count(k)) rethrow_failure(k);
    item = std::move(done_.at(k));
    done_.erase(k);
    ++consumed_;
    room_.notify_all();
  }
  finish(item);
  return std::move(item.batch);
}

}  // namespace ddpb
