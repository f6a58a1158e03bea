#include "comm/process_group_gloo.h"

#include "comm/flight_recorder.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/config.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

#include "base/open_files.h"
#include "comm/gloo_store_adapter.h"
#include "core/clock.h"
#include "core/ops.h"
#include "core/stream_sanitizer.h"

namespace ddpb::comm {
namespace {

using Millis = std::chrono::milliseconds;

// The slot prefix of our ring reduce-scatter; Gloo's own collectives use 0x01..0x05 and the
// bound-buffer algorithms use prefix 0, so 0x40 cannot meet them.
constexpr uint8_t kReduceScatterSlotPrefix = 0x40;
constexpr uint8_t kSendRecvSlotPrefix = 0x41;  // sendrecv's pairs

// ---- Sum functions (Gloo's reduce signature: out, in1, in2, element count) -------------

using SumFn = void (*)(void*, const void*, const void*, size_t);

template <typename T>
void sum_exact(void* out, const void* a, const void* b, size_t n) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
}

// Each partial sum is computed in f32 and rounded back to the 16-bit type, so the wire
// carries 16-bit payloads (see the header).
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void sum_16bit(void* out, const void* a, const void* b, size_t n) {
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = FromFloat(ToFloat(x[i]) + ToFloat(y[i]));
}

// fp16 in blocks through the bulk conversions (F16C): the scalar conversion's branches made
// this sum, not the wire, the cost of an fp16-compressed AllReduce on CPU.
void sum_f16(void* out, const void* a, const void* b, size_t n) {
  constexpr size_t kBlock = 512;
  float fx[kBlock], fy[kBlock];
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  for (size_t start = 0; start < n; start += kBlock) {
    const auto len = static_cast<int64_t>(std::min(kBlock, n - start));
    f16_to_f32(x + start, fx, len);
    f16_to_f32(y + start, fy, len);
    for (int64_t i = 0; i < len; ++i) fx[i] += fy[i];
    f32_to_f16(fx, o + start, len);
  }
}

SumFn sum_function(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return &sum_exact<float>;
    case DType::I32:
      return &sum_exact<int32_t>;
    case DType::I64:
      return &sum_exact<int64_t>;
    case DType::U8:
      return &sum_exact<uint8_t>;
    case DType::BF16:
      return &sum_16bit<bf16_to_float, float_to_bf16>;
    case DType::F16:
      return &sum_f16;
  }
  return nullptr;
}

// ---- Host collectives on host memory (CPU tensors or pinned staging buffers) ------------

void host_allreduce(const std::shared_ptr<gloo::Context>& ctx, const Tensor& t, uint32_t tag,
                    Millis timeout) {
  if (t.numel() == 0) return;
  gloo::AllreduceOptions opts(ctx);
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  const size_t n = static_cast<size_t>(t.numel());
  switch (dtype_size(t.dtype())) {
    case 2:
      opts.setOutput(t.data<uint16_t>(), n);
      break;
    case 4:
      opts.setOutput(t.data<uint32_t>(), n);
      break;
    case 8:
      opts.setOutput(t.data<uint64_t>(), n);
      break;
    default:
      DDPB_FAIL() << "allreduce of " << t.describe();
  }
  opts.setReduceFunction(sum_function(t.dtype()));
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::allreduce(opts);
}

void host_broadcast(const std::shared_ptr<gloo::Context>& ctx, const Tensor& t, int root,
                    uint32_t tag, Millis timeout) {
  if (t.numel() == 0) return;
  gloo::BroadcastOptions opts(ctx);
  opts.setOutput(t.data<uint8_t>(), t.nbytes());
  opts.setRoot(root);
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::broadcast(opts);
}

void host_allgather(const std::shared_ptr<gloo::Context>& ctx, const Tensor& out, const Tensor& in,
                    uint32_t tag, Millis timeout) {
  if (in.numel() == 0) return;
  gloo::AllgatherOptions opts(ctx);
  uint8_t* own_chunk = out.data<uint8_t>() + static_cast<size_t>(ctx->rank) * in.nbytes();
  // Without an input Gloo takes this rank's chunk of the output, which is exactly an
  // in-place allgather; an input elsewhere is copied there first.
  if (in.data<uint8_t>() != own_chunk) opts.setInput(in.data<uint8_t>(), in.nbytes());
  opts.setOutput(out.data<uint8_t>(), out.nbytes());
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::allgather(opts);
}

// EMFILE from a socket, accept or pipe in the rendezvous: said as the cause it is (issue 25,
// M8), not as a rank that never arrived.
void throw_if_out_of_descriptors(const std::string& failed, const std::string& what) {
  if (what.find("Too many open files") == std::string::npos) return;
  throw Error(failed + " failed: too many open files: the limit (ulimit -n) is " +
              std::to_string(open_files_limit()) + " descriptors (" + what + ")");
}

void wait_or_throw(bool completed, const char* what) {
  DDPB_CHECK(completed) << "gloo " << what << " was aborted";
}

// Ring reduce-scatter: rank r ends with chunk r summed over all ranks. At step s (0..n-2)
// rank r sends to r+1 the partial sum of chunk r-s-1 and receives from r-1 the partial sum
// of chunk r-s-2, to which it adds its own. After n-1 steps the chunk received last is
// chunk r (r-(n-2)-2 = r-n), now holding every rank's contribution. The input is only read.
void host_reduce_scatter(const std::shared_ptr<gloo::Context>& ctx, const Tensor& out,
                         const Tensor& in, uint32_t tag, Millis timeout) {
  const size_t chunk_bytes = out.nbytes();
  if (chunk_bytes == 0) return;
  const int n = ctx->size;
  const int r = ctx->rank;
  const uint8_t* input = in.data<uint8_t>();
  auto chunk = [&](int i) { return input + static_cast<size_t>(((i % n) + n) % n) * chunk_bytes; };
  if (n == 1) {
    if (out.raw_data() != input) std::memcpy(out.raw_data(), input, chunk_bytes);
    return;
  }
  const SumFn sum = sum_function(out.dtype());
  const size_t count = static_cast<size_t>(out.numel());
  auto send_mem = std::make_unique_for_overwrite<uint8_t[]>(chunk_bytes);
  auto recv_mem = std::make_unique_for_overwrite<uint8_t[]>(chunk_bytes);
  auto send_buf = ctx->createUnboundBuffer(send_mem.get(), chunk_bytes);
  auto recv_buf = ctx->createUnboundBuffer(recv_mem.get(), chunk_bytes);
  const uint64_t slot = gloo::Slot::build(kReduceScatterSlotPrefix, tag);
  const int right = (r + 1) % n;
  const int left = (r + n - 1) % n;
  std::memcpy(send_mem.get(), chunk(r - 1), chunk_bytes);
  for (int step = 0; step < n - 1; ++step) {
    send_buf->send(right, slot);
    recv_buf->recv(left, slot);
    wait_or_throw(recv_buf->waitRecv(timeout), "reduce_scatter receive");
    wait_or_throw(send_buf->waitSend(timeout), "reduce_scatter send");
    void* dst = step == n - 2 ? out.raw_data() : send_mem.get();
    sum(dst, recv_mem.get(), chunk(r - step - 2), count);
  }
}

// Gloo's typed-pointer options by element size (the reduce function does the arithmetic).
template <class Options>
void set_io(Options& opts, const Tensor& in, const Tensor& out, const char* what) {
  const size_t n_in = static_cast<size_t>(in.numel()), n_out = static_cast<size_t>(out.numel());
  switch (dtype_size(in.dtype())) {
    case 2:
      opts.setInput(in.data<uint16_t>(), n_in), opts.setOutput(out.data<uint16_t>(), n_out);
      break;
    case 4:
      opts.setInput(in.data<uint32_t>(), n_in), opts.setOutput(out.data<uint32_t>(), n_out);
      break;
    case 8:
      opts.setInput(in.data<uint64_t>(), n_in), opts.setOutput(out.data<uint64_t>(), n_out);
      break;
    default:
      DDPB_FAIL() << what << " of " << in.describe();
  }
}

void host_reduce(const std::shared_ptr<gloo::Context>& ctx, const Tensor& t, int root, uint32_t tag,
                 Millis timeout) {
  if (t.numel() == 0) return;
  gloo::ReduceOptions opts(ctx);
  set_io(opts, t, t, "reduce");
  opts.setRoot(root);
  opts.setReduceFunction(sum_function(t.dtype()));
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::reduce(opts);
}

void host_alltoall(const std::shared_ptr<gloo::Context>& ctx, const Tensor& out, const Tensor& in,
                   uint32_t tag, Millis timeout) {
  if (in.numel() == 0) return;
  gloo::AlltoallOptions opts(ctx);
  set_io(opts, in, out, "alltoall");
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::alltoall(opts);
}

void host_sendrecv(const std::shared_ptr<gloo::Context>& ctx, const Tensor& send, int dst,
                   const Tensor& recv, int src, uint32_t tag, Millis timeout) {
  if (send.nbytes() == 0) return;
  if (dst == ctx->rank && src == ctx->rank) {
    std::memcpy(recv.raw_data(), send.raw_data(), send.nbytes());
    return;
  }
  auto send_buf = ctx->createUnboundBuffer(send.raw_data(), send.nbytes());
  auto recv_buf = ctx->createUnboundBuffer(recv.raw_data(), recv.nbytes());
  const uint64_t slot = gloo::Slot::build(kSendRecvSlotPrefix, tag);
  send_buf->send(dst, slot);
  recv_buf->recv(src, slot);
  wait_or_throw(recv_buf->waitRecv(timeout), "sendrecv receive");
  wait_or_throw(send_buf->waitSend(timeout), "sendrecv send");
}

// ---- Work --------------------------------------------------------------------------------

// How a collective failed. A Work keeps the kind and message and throws a fresh exception
// in the waiting thread, rather than sharing one exception object between the comm thread and
// its waiters (whose last owner may then be either thread).
enum class Failure { None, Error, Timeout };

class GlooWork final : public Work {
 public:
  GlooWork(Device device, Millis timeout) : device_(device), timeout_(timeout) {}

  bool is_completed() override { return completed_.load(std::memory_order_acquire); }

  void wait() override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!changed_.wait_for(lock, timeout_, [&] { return is_completed(); })) {
      throw CommTimeout("gloo " + description + " did not complete within the group timeout of " +
                        std::to_string(timeout_.count()) + " ms");
    }
    if (failure_ != Failure::None) std::rethrow_exception(make_error());
    // The host has waited for the collective (an event that has completed by now) ...
    done_.synchronize();
    // ... and for staged CUDA results, later work on the caller's stream must follow the
    // H2D copies.
    if (done_.defined() && device_.is_cuda()) current_stream(device_).wait(done_);
  }

  std::exception_ptr exception() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return failure_ == Failure::None ? nullptr : make_error();
  }

  // "allreduce #3 (f32[10] on cpu:0) on rank 0 of 2", set at issue.
  std::string description;

  // Comm thread or destructor: the collective has finished or was cancelled.
  void complete(Failure failure, std::string message, Event done) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      failure_ = failure;
      message_ = std::move(message);
      done_ = std::move(done);
      completed_.store(true, std::memory_order_release);
    }
    changed_.notify_all();
  }

 private:
  std::exception_ptr make_error() const {
    return failure_ == Failure::Timeout ? std::make_exception_ptr(CommTimeout(message_))
                                        : std::make_exception_ptr(Error(message_));
  }

  const Device device_;
  const Millis timeout_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::atomic<bool> completed_{false};
  Failure failure_ = Failure::None;
  std::string message_;
  Event done_;
};

// A tensor a collective reads (staged D2H for CUDA) and/or writes (staged H2D).
struct Operand {
  Tensor tensor;
  bool read = false;
  bool write = false;
};

}  // namespace

struct ProcessGroupGloo::PendingOp {
  std::shared_ptr<GlooWork> work;
  std::vector<Operand> operands;  // keeps the tensors alive until completion
  Event ready;                    // recorded on the caller's stream at issue, when needed
  // Runs the collective on host memory: one tensor per operand, in order.
  std::function<void(const std::vector<Tensor>& host, uint32_t tag)> collective;
};

// ---- Construction: rendezvous ----------------------------------------------------------

ProcessGroupGloo::ProcessGroupGloo(std::shared_ptr<Store> store, int rank, int size,
                                   const ProcessGroupOptions& options)
    : ProcessGroup(rank, size), device_(options.device), timeout_(options.timeout) {
  DDPB_USAGE_CHECK(size >= 1 && rank >= 0 && rank < size)
      << "gloo process group: rank " << rank << " is outside a group of size " << size;
  DDPB_USAGE_CHECK(timeout_.count() > 0)
      << "gloo process group: the timeout must be positive, got " << timeout_.count() << " ms";
  DDPB_CHECK(store != nullptr) << "gloo process group of rank " << rank << " needs a store";
  const std::string who =
      "rank " + std::to_string(rank) + " of " + std::to_string(size) + " on " + device_.str();

  std::shared_ptr<gloo::transport::Device> transport;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    transport = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw UsageError("gloo cannot open a TCP device on hostname '" + options.hostname + "' (" +
                     who + "): " + e.what());
  }

  const Millis connect = options.connect_timeout.value_or(timeout_);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(connect);
  GlooStoreAdapter adapter(store, connect);
  const std::string failed = "gloo rendezvous of " + who + " via " + options.hostname;
  try {
    context->connectFullMesh(adapter, transport);
  } catch (const StoreTimeout& e) {
    throw CommTimeout(failed + " timed out after " + std::to_string(connect.count()) +
                      " ms: not every rank arrived (" + e.what() + ")");
  } catch (const gloo::IoException& e) {
    const std::string what = e.what();
    throw_if_out_of_descriptors(failed, what);
    if (what.find("Timed out") != std::string::npos) {
      throw CommTimeout(failed + " timed out after " + std::to_string(connect.count()) +
                        " ms: " + what);
    }
    throw Error(failed + " failed: " + what);
  } catch (const gloo::Exception& e) {
    throw_if_out_of_descriptors(failed, e.what());
    throw Error(failed + " failed: " + e.what());
  }
  context->setTimeout(timeout_);  // collectives pass their own; anything else gets the group's
  context_ = std::move(context);
  comm_stream_ = make_stream(device_, "ddpb-gloo", StreamKind::Inline);
  thread_ = std::thread([this] { run_loop(); });
}

ProcessGroupGloo::~ProcessGroupGloo() {
  std::deque<std::unique_ptr<PendingOp>> cancelled;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    cancelled.swap(queue_);
  }
  queue_changed_.notify_all();
  if (thread_.joinable()) thread_.join();  // the running collective ends within timeout_
  for (auto& op : cancelled) {
    op->work->complete(Failure::Error,
                       "gloo " + op->work->description +
                           " was cancelled: its process group was destroyed before it ran",
                       Event());
  }
}

// ---- Issue -------------------------------------------------------------------------------

void ProcessGroupGloo::check_tensor(const Tensor& t, const char* op, const char* what) const {
  DDPB_CHECK(t.defined()) << "gloo " << op << ": the " << what << " tensor is undefined (rank "
                          << rank_ << ")";
  DDPB_CHECK(t.device().is_cpu() || t.device() == device_)
      << "gloo " << op << ": the " << what << " tensor " << t.describe()
      << " is not on the group's device " << device_.str() << " (rank " << rank_ << ")";
}

namespace {

void check_summable(const Tensor& t, const char* op, int rank) {
  const DType d = t.dtype();
  DDPB_CHECK(d == DType::F32 || d == DType::BF16 || d == DType::F16 || d == DType::I32 ||
             d == DType::I64)
      << "gloo " << op << " cannot sum " << t.describe() << " (rank " << rank << ")";
}

}  // namespace

// Note [Gloo stream order]
// A collective runs after every write the caller enqueued before issuing it: at issue an
// event is recorded on the caller's current stream (of the operands' device), and the
// communication thread makes the comm stream wait on it before it touches the tensors (on
// CPU that blocks the thread until an executor stream reaches the event; an inline stream
// has reached it already). When the collective has finished, an event recorded on the comm
// stream completes the Work: wait() blocks the host until then and, for staged CUDA
// tensors, makes the caller's stream wait on it. The stream-order sanitizer sees the same
// edges on CPU and CUDA.
WorkPtr ProcessGroupGloo::issue(std::unique_ptr<PendingOp> op) {
  bool any_cuda = false;
  for (const Operand& o : op->operands) any_cuda = any_cuda || o.tensor.device().is_cuda();
  const Device caller =
      any_cuda || op->operands.empty() ? device_ : op->operands[0].tensor.device();
  op->ready = Event::create(caller);
  op->ready.record(current_stream(caller));
  WorkPtr work = op->work;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    DDPB_CHECK(!stopping_) << "gloo " << op->work->op << " issued while the group of rank " << rank_
                           << " is being destroyed";
    op->work->sequence = next_sequence_++;
    op->work->description = describe_op(*op);
    flight_recorder().enqueued(
        op->work->sequence, op->work->op, op->work->bytes,
        op->operands.empty() ? "" : std::string(dtype_name(op->operands[0].tensor.dtype())));
    queue_.push_back(std::move(op));
  }
  queue_changed_.notify_one();
  return work;
}

WorkPtr ProcessGroupGloo::allreduce(const Tensor& tensor) {
  check_tensor(tensor, "allreduce", "input");
  check_summable(tensor, "allreduce", rank_);
  auto op = std::make_unique<PendingOp>();
  op->work = std::make_shared<GlooWork>(device_, timeout_);
  op->work->op = "allreduce";
  op->work->bytes = static_cast<int64_t>(tensor.nbytes());
  op->operands = {{tensor, /*read=*/true, /*write=*/true}};
  op->collective = [ctx = context_, timeout = timeout_](const std::vector<Tensor>& host,
                                                        uint32_t tag) {
    host_allreduce(ctx, host[0], tag, timeout);
  };
  return issue(std::move(op));
}

WorkPtr ProcessGroupGloo::broadcast(const Tensor& tensor, int root) {
  check_tensor(tensor, "broadcast", "input");
  DDPB_CHECK(root >= 0 && root < size_)
      << "gloo broadcast: root " << root << " is outside the group of size " << size_ << " (rank "
      << rank_ << ")";
  auto op = std::make_unique<PendingOp>();
  op->work = std::make_shared<GlooWork>(device_, timeout_);
  op->work->op = "broadcast";
  op->work->bytes = static_cast<int64_t>(tensor.nbytes());
  op->operands = {{tensor, /*read=*/rank_ == root, /*write=*/rank_ != root}};
  op->collective = [ctx = context_, root, timeout = timeout_](const std::vector<Tensor>& host,
                                                              uint32_t tag) {
    host_broadcast(ctx, host[0], root, tag, timeout);
  };
  return issue(std::move(op));
}

WorkPtr ProcessGroupGloo::allgather(const Tensor& output, const Tensor& input) {
  check_tensor(output, "allgather", "output");
  check_tensor(input, "allgather", "input");
  DDPB_CHECK(output.dtype() == input.dtype() && output.numel() == size_ * input.numel())
      << "gloo allgather: the output must hold " << size_ << " inputs of the same dtype; got "
      << output.describe() << " for input " << input.describe() << " (rank " << rank_ << ")";
  auto op = std::make_unique<PendingOp>();
  op->work = std::make_shared<GlooWork>(device_, timeout_);
  op->work->op = "allgather";
  op->work->bytes = static_cast<int64_t>(input.nbytes());
  op->operands = {{output, /*read=*/false, /*write=*/true}, {input, /*read=*/true, false}};
  op->collective = [ctx = context_, timeout = timeout_](const std::vector<Tensor>& host,
                                                        uint32_t tag) {
    host_allgather(ctx, host[0], host[1], tag, timeout);
  };
  return issue(std::move(op));
}

WorkPtr ProcessGroupGloo::reduce_scatter(const Tensor& output, const Tensor& input) {
  check_tensor(output, "reduce_scatter", "output");
  check_tensor(input, "reduce_scatter", "input");
  check_summable(input, "reduce_scatter", rank_);
  DDPB_CHECK(output.dtype() == input.dtype() && input.numel() == size_ * output.numel())
      << "gloo reduce_scatter: the input must hold " << size_
      << " output-sized chunks of the same dtype; got " << input.describe() << " for output "
      << output.describe() << " (rank " << rank_ << ")";
  auto op = std::make_unique<PendingOp>();
  op->work = std::make_shared<GlooWork>(device_, timeout_);
  op->work->op = "reduce_scatter";
  op->work->bytes = static_cast<int64_t>(input.nbytes());
  op->operands = {{output, /*read=*/false, /*write=*/true}, {input, /*read=*/true, false}};
  op->collective = [ctx = context_, timeout = timeout_](const std::vector<Tensor>& host,
                                                        uint32_t tag) {
    host_reduce_scatter(ctx, host[0], host[1], tag, timeout);
  };
  return issue(std::move(op));
}

WorkPtr ProcessGroupGloo::reduce(const Tensor& tensor, int root) {
  check_tensor(tensor, "reduce", "input");
  check_summable(tensor, "reduce", rank_);
  DDPB_CHECK(root >= 0 && root < size_)
      << "gloo reduce: root " << root << " outside 0.." << size_ - 1;
  auto op = std::make_unique<PendingOp>();
  op->work = std::make_shared<GlooWork>(device_, timeout_);
  op->work->op = "reduce";
  op->work->bytes = static_cast<int64_t>(tensor.nbytes());
  op->operands = {{tensor, /*read=*/true, /*write=*/true}};
  op->collective = [ctx = context_, root, timeout = timeout_](const std::vector<Tensor>& host,
                                                              uint32_t tag) {
    host_reduce(ctx, host[0], root, tag, timeout);
  };
  return issue(std::move(op));
}

WorkPtr ProcessGroupGloo::alltoall(const Tensor& output, const Tensor& input) {
  check_tensor(output, "alltoall", "output");
  check_tensor(input, "alltoall", "input");
  DDPB_CHECK(output.dtype() == input.dtype() && output.numel() == input.numel() &&
             input.numel() % size_ == 0)
      << "gloo alltoall: input and output must be the same size and dtype, " << size_
      << " equal chunks; got " << input.describe() << " and " << output.describe() << " (rank "
      << rank_ << ")";
  auto op = std::make_unique<PendingOp>();
  op->work = std::make_shared<GlooWork>(device_, timeout_);
  op->work->op = "alltoall";
  op->work->bytes = static_cast<int64_t>(input.nbytes());
  op->operands = {{output, /*read=*/false, /*write=*/true}, {input, /*read=*/true, false}};
  op->collective = [ctx = context_, timeout = timeout_](const std::vector<Tensor>& host,
                                                        uint32_t tag) {
    host_alltoall(ctx, host[0], host[1], tag, timeout);
  };
  return issue(std::move(op));
}

WorkPtr ProcessGroupGloo::sendrecv(const Tensor& send, int dst, const Tensor& recv, int src) {
  check_tensor(send, "sendrecv", "send");
  check_tensor(recv, "sendrecv", "recv");
  DDPB_CHECK(send.dtype() == recv.dtype() && send.numel() == recv.numel())
      << "gloo sendrecv: send and recv must be the same size and dtype; got " << send.describe()
      << " and " << recv.describe() << " (rank " << rank_ << ")";
  DDPB_CHECK(dst >= 0 && dst < size_ && src >= 0 && src < size_)
      << "gloo sendrecv: peers " << dst << " and " << src << " outside 0.." << size_ - 1;
  auto op = std::make_unique<PendingOp>();
  op->work = std::make_shared<GlooWork>(device_, timeout_);
  op->work->op = "sendrecv";
  op->work->bytes = static_cast<int64_t>(send.nbytes());
  op->operands = {{recv, /*read=*/false, /*write=*/true}, {send, /*read=*/true, false}};
  op->collective = [ctx = context_, dst, src, timeout = timeout_](const std::vector<Tensor>& host,
                                                                  uint32_t tag) {
    host_sendrecv(ctx, host[1], dst, host[0], src, tag, timeout);
  };
  return issue(std::move(op));
}

WorkPtr ProcessGroupGloo::barrier() {
  auto op = std::make_unique<PendingOp>();
  op->work = std::make_shared<GlooWork>(device_, timeout_);
  op->work->op = "barrier";
  op->collective = [ctx = context_, timeout = timeout_](const std::vector<Tensor>&, uint32_t tag) {
    gloo::BarrierOptions opts(ctx);
    opts.setTag(tag);
    opts.setTimeout(timeout);
    gloo::barrier(opts);
  };
  return issue(std::move(op));
}

// ---- The communication thread ----------------------------------------------------------

void ProcessGroupGloo::run_loop() {
  pthread_setname_np(pthread_self(), "ddpb-gloo");
  std::unique_ptr<DeviceGuard> device_guard;
  std::string device_error;
  try {
    device_guard = std::make_unique<DeviceGuard>(device_);
  } catch (const std::exception& e) {
    device_error = e.what();
  }
  if (!device_error.empty())
    broken_reason_ = "the comm thread cannot use " + device_.str() + ": " + device_error;
  for (;;) {
    std::unique_ptr<PendingOp> op;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queue_changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;  // the destructor cancels what is still queued
      op = std::move(queue_.front());
      queue_.pop_front();
    }
    execute(*op);
  }
}

std::string ProcessGroupGloo::describe_op(const PendingOp& op) const {
  std::string s = op.work->op + " #" + std::to_string(op.work->sequence);
  for (size_t i = 0; i < op.operands.size(); ++i) {
    s += (i == 0 ? " (" : ", ") + op.operands[i].tensor.describe();
  }
  if (!op.operands.empty()) s += ")";
  return s + " on rank " + std::to_string(rank_) + " of " + std::to_string(size_);
}

namespace {

// What a host collective reads and writes, for the stream-order sanitizer. The op names
// must outlive the run (the sanitizer keeps the pointer).
const char* collective_name(const std::string& op) {
  for (const char* name : {"allreduce", "broadcast", "allgather", "reduce_scatter", "barrier"}) {
    if (op == name) return name;
  }
  return "collective";
}

}  // namespace

void ProcessGroupGloo::sanitize_collective(const Stream& stream, const PendingOp& op) const {
  std::vector<Tensor> reads, writes;
  for (const Operand& o : op.operands) {
    if (o.read) reads.push_back(o.tensor);
    if (o.write) writes.push_back(o.tensor);
  }
  sanitizer::on_op(stream, collective_name(op.work->op), reads, writes);
}

void ProcessGroupGloo::execute(PendingOp& op) {
  GlooWork& work = *op.work;
  work.start_ns = steady_now_ns();
  flight_recorder().started(work.sequence);
  Failure failure = Failure::None;
  std::string message;
  Event done;
  try {
    if (!broken_reason_.empty()) {
      throw Error("gloo " + work.description + " did not run: " + broken_reason_);
    }
    // Host views of the operands: the tensors themselves on CPU, pinned copies for CUDA.
    std::vector<Tensor> host;
    bool staged = false;
    for (const Operand& o : op.operands) staged = staged || o.tensor.device().is_cuda();
    if (!staged) {
      comm_stream_->wait(op.ready);  // an inline stream: blocks this thread until then
      for (const Operand& o : op.operands) host.push_back(o.tensor);
      if (sanitizer::enabled()) sanitize_collective(*comm_stream_, op);
      op.collective(host, static_cast<uint32_t>(work.sequence));
      done = Event::create(device_);
      done.record(*comm_stream_);
    } else {
      // One stream and two synchronizations per collective: Gloo needs the bytes on the
      // host before it starts, and completing the Work only after the H2D copies means no
      // copy is still reading or writing the tensors once the group lets go of them.
      StreamGuard guard(comm_stream_);
      comm_stream_->wait(op.ready);
      for (const Operand& o : op.operands) {
        if (!o.tensor.device().is_cuda()) {
          host.push_back(o.tensor);
          continue;
        }
        Tensor h = Tensor::empty_pinned(o.tensor.shape(), o.tensor.dtype());
        if (o.read) ops::copy(o.tensor, h);
        host.push_back(h);
      }
      comm_stream_->synchronize();
      op.collective(host, static_cast<uint32_t>(work.sequence));
      for (size_t i = 0; i < op.operands.size(); ++i) {
        const Operand& o = op.operands[i];
        if (o.write && o.tensor.device().is_cuda()) ops::copy(host[i], o.tensor);
      }
      done = Event::create(device_);
      done.record(*comm_stream_);
      comm_stream_->synchronize();
    }
  } catch (...) {
    std::string what = "unknown exception";
    bool timed_out = false;
    try {
      throw;
    } catch (const CommTimeout& e) {
      what = e.what();
      timed_out = true;
    } catch (const std::exception& e) {
      what = e.what();
      timed_out = what.find("Timed out") != std::string::npos;  // Gloo's IoException
    } catch (...) {
    }
    failure = timed_out ? Failure::Timeout : Failure::Error;
    message = what.starts_with("gloo ") ? what : "gloo " + work.description + " failed: " + what;
    // Ranks are now out of step (or a peer is gone), so later collectives cannot succeed.
    if (broken_reason_.empty()) {
      broken_reason_ = "the group is broken since " + op.work->op + " #" +
                       std::to_string(op.work->sequence) + " failed: " + what;
    }
  }
  work.end_ns = steady_now_ns();
  flight_recorder().finished(work.sequence, failure != Failure::None);
  work.complete(failure, std::move(message), std::move(done));
}

std::string gloo_version() {
  return std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) + "." +
         std::to_string(GLOO_VERSION_PATCH);
}

}  // namespace ddpb::comm
