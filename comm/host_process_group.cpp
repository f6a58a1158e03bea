#include "comm/host_process_group.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pthread.h>

#include <array>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <utility>

#include "comm/flight_recorder.h"
#include "comm/host_staging.h"
#include "core/clock.h"
#include "core/stream_sanitizer.h"

namespace ddpb::comm {

// Named, not anonymous: HostProcessGroup::PendingOp, a member class, holds these (GCC warns of
// a member whose type has internal linkage when the file is part of a unity batch).
namespace host_group {

// How a collective failed. A Work keeps the kind and message and throws a fresh exception
// in the waiting thread, rather than sharing one exception object between the comm thread and
// its waiters (whose last owner may then be either thread).
enum class Failure { None, Error, Timeout };

// A tensor a collective reads (staged D2H for CUDA) and/or writes (staged H2D), as the
// caller passed it.
struct Operand {
  const Tensor& tensor;
  bool read = false;
  bool write = false;
};

// A collective's operands, at most two, kept in place (no allocation per collective). As
// issued they are the caller's tensors, which outlive a collective run at issue; a queued
// collective's Work keeps its own handles of them (Operands(other, kOwn)) until completion.
// Neither copied nor moved: a view may point into its own handles.
class Operands {
 public:
  static constexpr size_t kMax = HostTensors::kMax;
  enum Own { kOwn };
  Operands() = default;
  Operands(std::initializer_list<Operand> list) {
    DDPB_CHECK(list.size() <= kMax) << "a host collective has at most " << kMax << " operands";
    for (const Operand& o : list) {
      read_[view_.size()] = o.read;
      write_[view_.size()] = o.write;
      view_.push_back(o.tensor);
    }
  }
  Operands(const Operands& other, Own) : read_(other.read_), write_(other.write_) {
    for (size_t i = 0; i < other.size(); ++i) {
      owned_[i] = other.tensor(i);
      view_.push_back(owned_[i]);
    }
  }
  Operands(const Operands&) = delete;
  Operands& operator=(const Operands&) = delete;

  size_t size() const { return view_.size(); }
  bool empty() const { return view_.size() == 0; }
  const Tensor& tensor(size_t i) const { return view_[i]; }
  bool read(size_t i) const { return read_[i]; }
  bool write(size_t i) const { return write_[i]; }
  bool any_cuda() const {
    for (size_t i = 0; i < size(); ++i) {
      if (tensor(i).device().is_cuda()) return true;
    }
    return false;
  }
  const HostTensors& tensors() const { return view_; }
  // Moves the owned handles out; the operands are empty afterwards.
  std::array<Tensor, kMax> take() {
    view_ = HostTensors();
    return std::move(owned_);
  }

 private:
  HostTensors view_;
  std::array<Tensor, kMax> owned_;  // a queued collective's (Own)
  std::array<bool, kMax> read_{}, write_{};
};

// One collective as issued: what the backend runs, its name, its payload and its operands.
struct Request {
  HostCollective collective;
  const char* name = "";
  int64_t bytes = 0;
  Operands operands;
};

// How a collective ended, from the thread that ran it to its Work.
struct Outcome {
  Failure failure = Failure::None;
  std::string message;
  Event done;  // recorded on the comm stream after the collective, when needed
  int64_t end_ns = 0;
};

}  // namespace host_group

namespace {

using host_group::Failure;
using host_group::Operands;
using host_group::Outcome;
using host_group::Request;
using Millis = std::chrono::milliseconds;

// "allreduce #3 (f32[10] on cpu:0) on rank 0 of 2", as Tensor::describe() writes each operand.
std::string describe(std::string_view op, int64_t sequence, const Operands& operands, int rank,
                     int size) {
  fmt::memory_buffer out;
  fmt::format_to(std::back_inserter(out), "{} #{}", op, sequence);
  for (size_t i = 0; i < operands.size(); ++i) {
    const Tensor& t = operands.tensor(i);
    fmt::format_to(std::back_inserter(out), "{}{}[{}] on {}", i == 0 ? " (" : ", ",
                   dtype_name(t.dtype()), fmt::join(t.shape(), ", "), t.device().str());
  }
  fmt::format_to(std::back_inserter(out), "{} on rank {} of {}", operands.empty() ? "" : ")", rank,
                 size);
  return fmt::to_string(out);
}

std::exception_ptr make_failure(Failure failure, const std::string& message) {
  return failure == Failure::Timeout ? std::make_exception_ptr(CommTimeout(message))
                                     : std::make_exception_ptr(Error(message));
}

// What a Work's wait() does once its collective has completed: rethrow its failure, and
// order the host (and, for staged CUDA results, the caller's stream) after `done`.
void wait_completed(const Outcome& outcome, const Device& device) {
  if (outcome.failure != Failure::None)
    std::rethrow_exception(make_failure(outcome.failure, outcome.message));
  // The host has waited for the collective (an event that has completed by now) ...
  outcome.done.synchronize();
  // ... and for staged CUDA results, later work on the caller's stream must follow the
  // H2D copies.
  if (outcome.done.defined() && device.is_cuda()) current_stream(device).wait(outcome.done);
}

// The Work of a collective that ran on the issuing thread (Note [Issue bursts]): complete
// when issue returns, so it holds only how the collective ended (no lock, no tensors), and
// the outcome only when there is one to keep (a failure, or an event for the stream order).
// Small enough for the allocator's fast bins: a burst keeps hundreds alive at once.
class CompletedWork final : public Work {
 public:
  CompletedWork(Outcome outcome, const Device& device) : device_(device) {
    if (outcome.failure != Failure::None || outcome.done.defined())
      outcome_ = std::make_unique<Outcome>(std::move(outcome));
  }
  bool is_completed() override { return true; }
  void wait() override {
    if (outcome_) wait_completed(*outcome_, device_);
  }
  std::exception_ptr exception() const override {
    return !outcome_ || outcome_->failure == Failure::None
               ? nullptr
               : make_failure(outcome_->failure, outcome_->message);
  }

 private:
  std::unique_ptr<const Outcome> outcome_;
  const Device device_;
};

void check_summable(const Tensor& t, const std::string& backend, const char* op, int rank) {
  const DType d = t.dtype();
  DDPB_CHECK(d == DType::F32 || d == DType::BF16 || d == DType::F16 || d == DType::I32 ||
             d == DType::I64)
      << backend << " " << op << " cannot sum " << t.describe() << " (rank " << rank << ")";
}

}  // namespace

// A collective queued for the communication thread, from issue to completion: the Work its
// callers wait on, and what the thread needs to run it. One allocation per collective, and its
// description is formatted only when a message needs it.
class HostProcessGroup::PendingOp final : public Work {
 public:
  PendingOp(const HostProcessGroup& group, const Request& issued, Event ready)
      : request{issued.collective, issued.name, issued.bytes, {issued.operands, Operands::kOwn}},
        ready(std::move(ready)),
        backend_(group.name_),
        device_(group.device_),
        timeout_(group.timeout_),
        rank_(group.rank_),
        size_(group.size_) {
    op = this->request.name;
    bytes = this->request.bytes;
  }

  bool is_completed() override { return completed_.load(std::memory_order_acquire); }

  void wait() override {
    std::unique_lock<std::mutex> lock(mutex_);
    // Completed already: no deadline to compute (a clock read on every wait otherwise).
    if (!is_completed() && !changed_.wait_for(lock, timeout_, [&] { return is_completed(); })) {
      // Still pending under the lock: complete() has not released the operands.
      throw CommTimeout(backend_ + " " + description() +
                        " did not complete within the group timeout of " +
                        std::to_string(timeout_.count()) + " ms");
    }
    wait_completed(outcome_, device_);
  }

  std::exception_ptr exception() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return outcome_.failure == Failure::None ? nullptr
                                             : make_failure(outcome_.failure, outcome_.message);
  }

  // Only while the collective is pending (the operands go at completion).
  std::string description() const { return describe(op, sequence, request.operands, rank_, size_); }

  // Comm thread or destructor: the collective has finished or was cancelled. The group lets
  // go of the tensors here, before a waiter can see the collective complete.
  void complete(Outcome outcome) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      outcome_ = std::move(outcome);
      // Dropped here, under the lock: a waiter that sees the collective complete must find
      // its operands' memory given back (FSDP frees a reduce-scatter's input on that word).
      request.operands.take();
      ready = Event();
      completed_.store(true, std::memory_order_release);
    }
    changed_.notify_all();
  }

  Request request;  // its operands keep the tensors alive until completion
  Event ready;      // recorded on the caller's stream at issue (if needed)

 private:
  const std::string backend_;
  const Device device_;
  const Millis timeout_;
  const int rank_, size_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::atomic<bool> completed_{false};
  Outcome outcome_;
};

HostProcessGroup::HostProcessGroup(int rank, int size, const ProcessGroupOptions& options,
                                   std::string name)
    : ProcessGroup(rank, size),
      device_(options.device),
      timeout_(options.timeout),
      name_(std::move(name)),
      flight_ring_(flight_recorder().ring(options.flight_group)) {
  DDPB_USAGE_CHECK(size >= 1 && rank >= 0 && rank < size)
      << name_ << " process group: rank " << rank << " is outside a group of size " << size;
  DDPB_USAGE_CHECK(timeout_.count() > 0)
      << name_ << " process group: the timeout must be positive, got " << timeout_.count() << " ms";
}

HostProcessGroup::~HostProcessGroup() {
  stop_thread();
}

void HostProcessGroup::start_thread() {
  comm_stream_ = make_stream(device_, "ddpb-" + name_, StreamKind::Inline);
  thread_ = std::thread([this] { run_loop(); });
}

void HostProcessGroup::stop_thread() {
  std::deque<std::shared_ptr<PendingOp>> cancelled;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    cancelled.swap(queue_);
  }
  queue_changed_.notify_all();
  if (thread_.joinable()) thread_.join();  // the running collective ends within the timeout
  for (auto& op : cancelled) {
    Outcome cancel;
    cancel.failure = Failure::Error;
    cancel.message = name_ + " " + op->description() +
                     " was cancelled: its process group was destroyed before it ran";
    op->complete(std::move(cancel));
  }
}

// A burst starts once the collectives issued before it have finished and the thread sleeps
// (it times only its own; the thread needs the core to get to sleep, which the issuing thread
// would otherwise hold). A thread that does not get there within the timeout (a collective
// that hangs) leaves the burst's collectives to the queue, where their waits time out.
void HostProcessGroup::begin_burst() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (thread_.joinable()) {
    comm_thread_idle_.wait_for(
        lock, timeout_, [&] { return stopping_ || (queue_.empty() && comm_thread_sleeping_); });
  }
  in_burst_ = true;
}

void HostProcessGroup::end_burst() {
  in_burst_ = false;
}

std::pair<int64_t, int64_t> HostProcessGroup::running() const {
  const int64_t since = running_since_ns_.load(std::memory_order_acquire);
  const int64_t sequence = running_sequence_.load(std::memory_order_acquire);
  return sequence < 0 ? std::pair<int64_t, int64_t>{-1, 0} : std::pair{sequence, since};
}

// ---- Issue -------------------------------------------------------------------------------

void HostProcessGroup::check_tensor(const Tensor& t, const char* op, const char* what) const {
  DDPB_CHECK(t.defined()) << name_ << " " << op << ": the " << what << " tensor is undefined (rank "
                          << rank_ << ")";
  DDPB_CHECK(t.device().is_cpu() || t.device() == device_)
      << name_ << " " << op << ": the " << what << " tensor " << t.describe()
      << " is not on the group's device " << device_.str() << " (rank " << rank_ << ")";
}

// Note [Host collective stream order]
// A collective runs after every write the caller enqueued before issuing it: at issue an
// event is recorded on the caller's current stream (of the operands' device), and the
// communication thread makes the comm stream wait on it before it touches the tensors (on
// CPU that blocks the thread until an executor stream reaches the event; an inline stream
// has reached it already). When the collective has finished, an event recorded on the comm
// stream completes the Work: wait() blocks the host until then and, for staged CUDA
// tensors, makes the caller's stream wait on it. The stream-order sanitizer sees the same
// edges on CPU and CUDA.
// An inline CPU stream (not capturing) has run everything enqueued on it, so an event recorded
// on it, or on an inline comm stream after the collective, is complete when recorded: without
// the sanitizer, which learns the edges from the events, the group leaves them out (an event is
// an allocation, and on a host collective of tens of microseconds the two cost 2-3%).
bool HostProcessGroup::needs_event(const Stream& stream) {
  return !stream.is_inline() || stream.capturing() || sanitizer::enabled();
}

WorkPtr HostProcessGroup::issue(Request request) {
  const Operands& operands = request.operands;
  const bool any_cuda = operands.any_cuda();
  const Device caller = any_cuda || operands.empty() ? device_ : operands.tensor(0).device();
  Stream& caller_stream = current_stream(caller);
  Event ready;
  if (needs_event(caller_stream)) {
    ready = Event::create(caller);
    ready.record(caller_stream);
  }
  // Note [Issue bursts]: in a burst the thread sleeps, so nothing is queued or running, and
  // the collective runs here; the Work of one that does is made after it ran.
  const bool may_run_here = in_burst_ && !any_cuda;
  std::shared_ptr<PendingOp> queued;
  const auto make_pending = [&] {
    return std::make_shared<PendingOp>(*this, request, std::move(ready));
  };
  if (!may_run_here) queued = make_pending();  // allocated outside the lock
  bool wake = false, run_here = false;
  int64_t sequence = -1;
  const int64_t now_ns = steady_now_ns();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    DDPB_CHECK(!stopping_) << name_ << " " << request.name << " issued while the group of rank "
                           << rank_ << " is being destroyed";
    sequence = next_sequence_++;
    run_here = may_run_here && comm_thread_sleeping_;
    flight_recorder().enqueued(
        flight_ring_, sequence, request.name, request.bytes,
        operands.empty() ? std::string_view() : dtype_name(operands.tensor(0).dtype()), now_ns,
        /*started=*/run_here);
    if (!run_here) {
      if (!queued) queued = make_pending();  // a burst whose thread is awake (rare)
      queued->sequence = sequence;
      queued->flight_ring = flight_ring_;
      queue_.push_back(queued);
      // Only a sleeping thread is woken, once: a thread that is busy, or woken and not yet
      // running, finds the collective when it next looks at the queue (a wake is a system
      // call, and DDP issues its buckets in quick succession).
      wake = std::exchange(comm_thread_sleeping_, false);
    }
  }
  if (wake) queue_changed_.notify_one();
  if (!run_here) return queued;
  Outcome outcome = run_collective(request, ready, sequence, now_ns);
  const int64_t end_ns = outcome.end_ns;
  auto work = std::make_shared<CompletedWork>(std::move(outcome), device_);
  work->sequence = sequence;
  work->flight_ring = flight_ring_;
  work->op = request.name;
  work->bytes = request.bytes;
  work->start_ns = now_ns;
  work->end_ns = end_ns;
  return work;
}

WorkPtr HostProcessGroup::allreduce(const Tensor& tensor) {
  check_tensor(tensor, "allreduce", "input");
  check_summable(tensor, name_, "allreduce", rank_);
  return issue({{HostCollective::Kind::AllReduce},
                "allreduce",
                static_cast<int64_t>(tensor.nbytes()),
                {{tensor, /*read=*/true, /*write=*/true}}});
}

WorkPtr HostProcessGroup::broadcast(const Tensor& tensor, int root) {
  check_tensor(tensor, "broadcast", "input");
  DDPB_CHECK(root >= 0 && root < size_)
      << name_ << " broadcast: root " << root << " is outside the group of size " << size_
      << " (rank " << rank_ << ")";
  return issue({{HostCollective::Kind::Broadcast, root},
                "broadcast",
                static_cast<int64_t>(tensor.nbytes()),
                {{tensor, /*read=*/rank_ == root, /*write=*/rank_ != root}}});
}

WorkPtr HostProcessGroup::allgather(const Tensor& output, const Tensor& input) {
  check_tensor(output, "allgather", "output");
  check_tensor(input, "allgather", "input");
  DDPB_CHECK(output.dtype() == input.dtype() && output.numel() == size_ * input.numel())
      << name_ << " allgather: the output must hold " << size_ << " inputs of the same dtype; got "
      << output.describe() << " for input " << input.describe() << " (rank " << rank_ << ")";
  return issue({{HostCollective::Kind::AllGather},
                "allgather",
                static_cast<int64_t>(input.nbytes()),
                {{output, /*read=*/false, /*write=*/true}, {input, /*read=*/true, false}}});
}

WorkPtr HostProcessGroup::reduce_scatter(const Tensor& output, const Tensor& input) {
  check_tensor(output, "reduce_scatter", "output");
  check_tensor(input, "reduce_scatter", "input");
  check_summable(input, name_, "reduce_scatter", rank_);
  DDPB_CHECK(output.dtype() == input.dtype() && input.numel() == size_ * output.numel())
      << name_ << " reduce_scatter: the input must hold " << size_
      << " output-sized chunks of the same dtype; got " << input.describe() << " for output "
      << output.describe() << " (rank " << rank_ << ")";
  return issue({{HostCollective::Kind::ReduceScatter},
                "reduce_scatter",
                static_cast<int64_t>(input.nbytes()),
                {{output, /*read=*/false, /*write=*/true}, {input, /*read=*/true, false}}});
}

WorkPtr HostProcessGroup::reduce(const Tensor& tensor, int root) {
  check_tensor(tensor, "reduce", "input");
  check_summable(tensor, name_, "reduce", rank_);
  DDPB_CHECK(root >= 0 && root < size_)
      << name_ << " reduce: root " << root << " outside 0.." << size_ - 1;
  return issue({{HostCollective::Kind::Reduce, root},
                "reduce",
                static_cast<int64_t>(tensor.nbytes()),
                {{tensor, /*read=*/true, /*write=*/true}}});
}

WorkPtr HostProcessGroup::alltoall(const Tensor& output, const Tensor& input) {
  check_tensor(output, "alltoall", "output");
  check_tensor(input, "alltoall", "input");
  DDPB_CHECK(output.dtype() == input.dtype() && output.numel() == input.numel() &&
             input.numel() % size_ == 0)
      << name_ << " alltoall: input and output must be the same size and dtype, " << size_
      << " equal chunks; got " << input.describe() << " and " << output.describe() << " (rank "
      << rank_ << ")";
  return issue({{HostCollective::Kind::AllToAll},
                "alltoall",
                static_cast<int64_t>(input.nbytes()),
                {{output, /*read=*/false, /*write=*/true}, {input, /*read=*/true, false}}});
}

WorkPtr HostProcessGroup::sendrecv(const Tensor& send, int dst, const Tensor& recv, int src) {
  check_tensor(send, "sendrecv", "send");
  check_tensor(recv, "sendrecv", "recv");
  DDPB_CHECK(send.dtype() == recv.dtype() && send.numel() == recv.numel())
      << name_ << " sendrecv: send and recv must be the same size and dtype; got "
      << send.describe() << " and " << recv.describe() << " (rank " << rank_ << ")";
  DDPB_CHECK(dst >= 0 && dst < size_ && src >= 0 && src < size_)
      << name_ << " sendrecv: peers " << dst << " and " << src << " outside 0.." << size_ - 1;
  HostCollective c{HostCollective::Kind::SendRecv};
  c.dst = dst;
  c.src = src;
  return issue({c,
                "sendrecv",
                static_cast<int64_t>(send.nbytes()),
                {{recv, /*read=*/false, /*write=*/true}, {send, /*read=*/true, false}}});
}

WorkPtr HostProcessGroup::barrier() {
  return issue({{HostCollective::Kind::Barrier}, "barrier", 0, {}});
}

// ---- The communication thread ----------------------------------------------------------

void HostProcessGroup::run_loop() {
  pthread_setname_np(pthread_self(), ("ddpb-" + name_).substr(0, 15).c_str());
  std::unique_ptr<DeviceGuard> device_guard;
  try {
    device_guard = std::make_unique<DeviceGuard>(device_);
  } catch (const std::exception& e) {
    broken_reason_ = "the comm thread cannot use " + device_.str() + ": " + e.what();
  }
  for (;;) {
    std::shared_ptr<PendingOp> op;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      while (!stopping_ && queue_.empty()) {
        comm_thread_sleeping_ = true;
        comm_thread_idle_.notify_all();  // a burst may wait for this (begin_burst)
        queue_changed_.wait(lock);
      }
      comm_thread_sleeping_ = false;
      if (stopping_) return;  // the destructor cancels what is still queued
      op = std::move(queue_.front());
      queue_.pop_front();
    }
    execute(*op);
  }
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

void HostProcessGroup::sanitize_collective(const Stream& stream, const Request& request) const {
  std::vector<Tensor> reads, writes;
  const Operands& operands = request.operands;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (operands.read(i)) reads.push_back(operands.tensor(i));
    if (operands.write(i)) writes.push_back(operands.tensor(i));
  }
  sanitizer::on_op(stream, collective_name(request.name), reads, writes);
}

// CUDA operands, for a backend that reads host memory: through page-locked copies on the
// comm stream (Note [Staging buffers]), which are back in their pool, and the tensors written,
// when this returns.
void HostProcessGroup::run_staged(const Request& request, const Event& ready, int64_t sequence) {
  comm_stream_->wait(ready);
  const Operands& operands = request.operands;
  std::array<StagedOperand, Operands::kMax> staged;
  for (size_t i = 0; i < operands.size(); ++i)
    staged[i] = {&operands.tensor(i), operands.read(i), operands.write(i)};
  run_staged_on_host(
      comm_stream_, std::span(staged.data(), operands.size()),
      [&](const HostTensors& host) { run_host(request.collective, host, sequence); });
}

void HostProcessGroup::execute(PendingOp& op) {
  op.start_ns = steady_now_ns();
  flight_recorder().started(flight_ring_, op.sequence, op.start_ns);
  Outcome outcome = run_collective(op.request, op.ready, op.sequence, op.start_ns);
  op.end_ns = outcome.end_ns;
  op.complete(std::move(outcome));
}

// The comm thread's, or the issuing thread's in a burst: runs one collective and records its
// end in the flight recorder (its start is recorded by the caller).
Outcome HostProcessGroup::run_collective(const Request& request, const Event& ready,
                                         int64_t sequence, int64_t start_ns) {
  running_since_ns_.store(start_ns, std::memory_order_release);
  running_sequence_.store(sequence, std::memory_order_release);
  Outcome outcome;
  try {
    if (!broken_reason_.empty()) {
      throw Error(name_ + " " + describe(request.name, sequence, request.operands, rank_, size_) +
                  " did not run: " + broken_reason_);
    }
    const bool staged = request.operands.any_cuda();
    if (staged && takes_device_pointers()) {
      comm_stream_->wait(ready);
      comm_stream_->synchronize();
      run_host(request.collective, request.operands.tensors(), sequence);
    } else if (staged) {
      run_staged(request, ready, sequence);
    } else {
      comm_stream_->wait(ready);  // an inline stream: blocks this thread until then
      if (sanitizer::enabled()) sanitize_collective(*comm_stream_, request);
      run_host(request.collective, request.operands.tensors(), sequence);
    }
    if (staged || needs_event(*comm_stream_)) {
      outcome.done = Event::create(device_);
      outcome.done.record(*comm_stream_);
    }
  } catch (...) {
    record_failure(request, sequence, outcome);
  }
  running_sequence_.store(-1, std::memory_order_release);
  outcome.end_ns = steady_now_ns();
  flight_recorder().finished(flight_ring_, sequence, outcome.failure != Failure::None,
                             outcome.end_ns);
  return outcome;
}

// In a catch block: the failure, its message, and the group broken from now on.
void HostProcessGroup::record_failure(const Request& request, int64_t sequence, Outcome& outcome) {
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
  outcome.failure = timed_out ? Failure::Timeout : Failure::Error;
  outcome.message = what.starts_with(name_ + " ")
                        ? what
                        : name_ + " " +
                              describe(request.name, sequence, request.operands, rank_, size_) +
                              " failed: " + what;
  // Ranks are now out of step (or a peer is gone), so later collectives cannot succeed.
  if (broken_reason_.empty()) {
    broken_reason_ = std::string("the group is broken since ") + request.name + " #" +
                     std::to_string(sequence) + " failed: " + what;
  }
}

}  // namespace ddpb::comm
