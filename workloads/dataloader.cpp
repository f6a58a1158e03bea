#include "workloads/dataloader.h"

#include <pthread.h>

#include <cstdio>
#include <utility>

#include "core/check.h"
#include "core/ops.h"
#include "core/stream_sanitizer.h"

namespace ddpb {

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DistributedSampler sampler,
                       int64_t batch_size, Device device, int prefetch_depth)
    : dataset_(std::move(dataset)),
      sampler_(std::move(sampler)),
      batch_size_(batch_size),
      device_(device),
      prefetch_depth_(prefetch_depth),
      batches_per_epoch_(batch_size >= 1 ? sampler_.num_samples() / batch_size : 0) {
  DDPB_CHECK(dataset_ != nullptr) << "DataLoader: null dataset";
  DDPB_USAGE_CHECK(batch_size >= 1) << "DataLoader: batch size must be >= 1, got " << batch_size;
  DDPB_USAGE_CHECK(prefetch_depth >= 1)
      << "DataLoader: prefetch depth must be >= 1, got " << prefetch_depth;
  DDPB_USAGE_CHECK(sampler_.dataset_size() == dataset_->size())
      << "DataLoader: the sampler covers " << sampler_.dataset_size()
      << " samples, but the dataset has " << dataset_->size();
  DDPB_USAGE_CHECK(batches_per_epoch_ >= 1)
      << "DataLoader: rank " << sampler_.rank() << " of " << sampler_.num_replicas() << " gets "
      << sampler_.num_samples() << " samples per epoch from a dataset of " << dataset_->size()
      << (sampler_.drop_last() ? " (drop_last)" : "") << ", fewer than one batch of " << batch_size;
  require_device(device_);
  // The same streams on every device (Note [Stream-order sanitizer]): on CPU the h2d
  // stream is inline, run by the loader thread, which fills the batch in place.
  h2d_stream_ = make_stream(device_, "ddpb-h2d",
                            device_.is_cpu() ? StreamKind::Inline : StreamKind::Executor);
  consumer_stream_ = current_stream_ptr(device_);
  thread_ = std::thread([this] { run(); });
}

DataLoader::~DataLoader() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  not_full_.notify_all();
  not_empty_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Copies of batches nobody consumed may still be running: they write into device blocks
  // that return to the consumer's pool and read pinned buffers that return to the pinned
  // cache as soon as the queue is destroyed below.
  if (h2d_stream_) {
    try {
      h2d_stream_->synchronize();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ddpbench: DataLoader on %s: h2d stream synchronize failed: %s\n",
                   device_.str().c_str(), e.what());
    }
  }
}

// The blocks just allocated may have been freed by the consumer a moment ago with kernels
// that read them still queued; the batch must be written after those kernels.
void DataLoader::wait_for_consumer() {
  Event allocated = Event::create(device_);
  allocated.record(*consumer_stream_);
  h2d_stream_->wait(allocated);
}

DataLoader::Item DataLoader::assemble(std::vector<int64_t> indices, int64_t epoch) {
  Item item;
  item.epoch = epoch;
  if (device_.is_cpu()) {
    Shape x_shape = dataset_->x_shape();
    Shape y_shape = dataset_->y_shape();
    x_shape.insert(x_shape.begin(), batch_size_);
    y_shape.insert(y_shape.begin(), batch_size_);
    // Allocated on device_ itself (not cpu:0) so that the ops of a logical cpu:N device
    // accept the batch without a copy.
    {
      StreamGuard on_consumer(consumer_stream_);
      item.batch.x = Tensor::empty(x_shape, dataset_->x_dtype(), device_);
      item.batch.y = Tensor::empty(y_shape, DType::I32, device_);
    }
    wait_for_consumer();
    fill_batch(*dataset_, indices, item.batch);  // on this thread: the h2d stream's executor
    if (sanitizer::enabled()) {
      sanitizer::on_op(*h2d_stream_, "fill_batch", {}, {&item.batch.x, &item.batch.y});
    }
  } else {
    item.host = make_batch(*dataset_, indices, /*pinned=*/true);
    {
      // See the header: device memory comes from the consumer stream's pool.
      StreamGuard on_consumer(consumer_stream_);
      item.batch.x = Tensor::empty(item.host.x.shape(), item.host.x.dtype(), device_);
      item.batch.y = Tensor::empty(item.host.y.shape(), DType::I32, device_);
    }
    wait_for_consumer();
    ops::copy(item.host.x, item.batch.x);  // on h2d_stream_, current on this thread
    ops::copy(item.host.y, item.batch.y);
  }
  item.ready = Event::create(device_);
  item.ready.record(*h2d_stream_);
  item.indices = std::move(indices);
  return item;
}

void DataLoader::run() {
  pthread_setname_np(pthread_self(), "ddpb-dataload");
  int64_t epoch = -1;
  int64_t batch = -1;
  int64_t first_index = -1;
  try {
    DeviceGuard device_guard(device_);
    StreamGuard stream_guard(h2d_stream_);
    for (;;) {
      epoch = sampler_.epoch();
      const std::vector<int64_t> order = sampler_.indices();
      for (batch = 0; batch < batches_per_epoch_; ++batch) {
        {
          std::unique_lock lock(mutex_);
          not_full_.wait(
              lock, [&] { return stop_ || static_cast<int64_t>(queue_.size()) < prefetch_depth_; });
          if (stop_) return;
        }
        auto begin = order.begin() + batch * batch_size_;
        std::vector<int64_t> chunk(begin, begin + batch_size_);
        first_index = chunk.front();
        Item item = assemble(std::move(chunk), epoch);
        {
          // Queued even when stop_ was set meanwhile: the destructor then waits for its
          // copy before freeing it.
          std::lock_guard lock(mutex_);
          queue_.push_back(std::move(item));
        }
        not_empty_.notify_one();
      }
      batch = -1;
      sampler_.set_epoch(epoch + 1);
    }
  } catch (...) {
    // A failure between enqueueing a copy and queueing its batch has already freed that
    // batch's pinned buffer; wait for the copy so the buffer is not reused under it.
    if (h2d_stream_) {
      try {
        h2d_stream_->synchronize();
      } catch (...) {
        // The original failure is the one to report.
      }
    }
    std::string context = "DataLoader on " + device_.str() + " (rank " +
                          std::to_string(sampler_.rank()) + " of " +
                          std::to_string(sampler_.num_replicas()) + "): ";
    if (batch >= 0) {
      context += "assembling batch " + std::to_string(batch) + " of epoch " +
                 std::to_string(epoch) + " (first sample " + std::to_string(first_index) +
                 ") failed: ";
    } else {
      context += "preparing epoch " + std::to_string(epoch) + " failed: ";
    }
    {
      std::lock_guard lock(mutex_);
      failure_ = std::current_exception();
      failure_context_ = std::move(context);
    }
    not_empty_.notify_all();
  }
}

void DataLoader::rethrow_failure() const {
  try {
    std::rethrow_exception(failure_);
  } catch (const UsageError& e) {
    throw UsageError(failure_context_ + e.what());
  } catch (const std::exception& e) {
    throw Error(failure_context_ + e.what());
  } catch (...) {
    throw Error(failure_context_ + "unknown exception");
  }
}

Batch DataLoader::next() {
  Item item;
  {
    std::unique_lock lock(mutex_);
    not_empty_.wait(lock, [&] { return !queue_.empty() || failure_ != nullptr; });
    if (queue_.empty()) rethrow_failure();
    item = std::move(queue_.front());
    queue_.pop_front();
  }
  not_full_.notify_one();
  {
    Stream& consumer = current_stream(device_);
    DDPB_CHECK(&consumer == consumer_stream_.get())
        << "DataLoader::next() on " << device_.str() << ": the current stream is '"
        << consumer.name() << "', but the loader was created with '" << consumer_stream_->name()
        << "' current; batches are allocated from that stream's pool, so call next() with it "
        << "current";
    consumer.wait(item.ready);
    // Release the pinned buffers of copies that have finished; keep the rest.
    while (!in_flight_.empty() && in_flight_.front().ready.query()) in_flight_.pop_front();
    if (item.host.x.defined()) in_flight_.push_back({item.ready, std::move(item.host)});
  }
  last_indices_ = std::move(item.indices);
  last_epoch_ = item.epoch;
  return std::move(item.batch);
}

}  // namespace ddpb
