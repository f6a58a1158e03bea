#include "comm/process_group_gloo.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>

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
#include "comm/host_sum.h"

namespace ddpb::comm {
namespace {

using Millis = std::chrono::milliseconds;

// The slot prefixes of our own ring collectives; Gloo's own collectives use 0x01..0x05 and the
// bound-buffer algorithms use prefix 0, so 0x40 and above cannot meet them.
constexpr uint8_t kReduceScatterSlotPrefix = 0x40;
constexpr uint8_t kSendRecvSlotPrefix = 0x41;  // sendrecv's pairs
constexpr uint8_t kAllgatherSlotPrefix = 0x42;

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

void wait_or_throw(bool completed, const char* what) {
  DDPB_CHECK(completed) << "gloo " << what << " was aborted";
}

// Note [Receive before send]
// Gloo's TCP pair reads a message only once a receive for it is posted; until then the bytes
// wait in the socket, and TCP's flow control stops the sender. A ring step that sends first
// and then posts its receive therefore runs its two directions one after the other: across a
// real link a reduce-scatter or allgather of two ranks took as long as an AllReduce moving twice
// the bytes (143 ms for 16 MiB at 1 Gbit/s, against 79 ms with the receive posted first). Every
// ring step here posts its receive, then sends.

// Ring allgather: at step s rank r sends chunk r-s to r+1 and receives chunk r-s-1 from r-1,
// straight into the output (Note [Receive before send]). gloo::allgather sends first.
void host_allgather(const std::shared_ptr<gloo::Context>& ctx, const Tensor& out, const Tensor& in,
                    uint32_t tag, Millis timeout) {
  const size_t chunk_bytes = in.nbytes();
  if (chunk_bytes == 0) return;
  const int n = ctx->size;
  const int r = ctx->rank;
  uint8_t* output = out.data<uint8_t>();
  const auto offset = [&](int i) { return static_cast<size_t>(((i % n) + n) % n) * chunk_bytes; };
  if (in.data<uint8_t>() != output + offset(r))
    std::memcpy(output + offset(r), in.data<uint8_t>(), chunk_bytes);
  if (n == 1) return;
  auto buf = ctx->createUnboundBuffer(output, out.nbytes());
  const uint64_t slot = gloo::Slot::build(kAllgatherSlotPrefix, tag);
  for (int step = 0; step < n - 1; ++step) {
    buf->recv((r + n - 1) % n, slot, offset(r - step - 1), chunk_bytes);
    buf->send((r + 1) % n, slot, offset(r - step), chunk_bytes);
    wait_or_throw(buf->waitRecv(timeout), "allgather receive");
    wait_or_throw(buf->waitSend(timeout), "allgather send");
  }
}

// EMFILE from a socket, accept or pipe in the rendezvous: said as the cause it is (issue 25,
// M8), not as a rank that never arrived.
void throw_if_out_of_descriptors(const std::string& failed, const std::string& what) {
  if (what.find("Too many open files") == std::string::npos) return;
  throw Error(failed + " failed: too many open files: the limit (ulimit -n) is " +
              std::to_string(open_files_limit()) + " descriptors (" + what + ")");
}

// Ring reduce-scatter: rank r ends with chunk r summed over all ranks. At step s (0..n-2)
// rank r sends to r+1 the partial sum of chunk r-s-1 and receives from r-1 the partial sum
// of chunk r-s-2, to which it adds its own. After n-1 steps the chunk received last is
// chunk r (r-(n-2)-2 = r-n), now holding every rank's contribution. The input is only read.
// Each step posts its receive first (Note [Receive before send]).
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
    recv_buf->recv(left, slot);
    send_buf->send(right, slot);
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
  recv_buf->recv(src, slot);  // Note [Receive before send]
  send_buf->send(dst, slot);
  wait_or_throw(recv_buf->waitRecv(timeout), "sendrecv receive");
  wait_or_throw(send_buf->waitSend(timeout), "sendrecv send");
}

}  // namespace

// ---- Construction: rendezvous ----------------------------------------------------------

ProcessGroupGloo::ProcessGroupGloo(std::shared_ptr<Store> store, int rank, int size,
                                   const ProcessGroupOptions& options)
    : HostProcessGroup(rank, size, options, "gloo") {
  DDPB_CHECK(store != nullptr) << "gloo process group of rank " << rank << " needs a store";
  const std::string who =
      "rank " + std::to_string(rank) + " of " + std::to_string(size) + " on " + device().str();

  std::shared_ptr<gloo::transport::Device> transport;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    transport = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw UsageError("gloo cannot open a TCP device on hostname '" + options.hostname + "' (" +
                     who + "): " + e.what());
  }

  const Millis connect = options.connect_timeout.value_or(timeout());
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
  context->setTimeout(timeout());  // collectives pass their own; anything else gets the group's
  context_ = std::move(context);
  start_thread();
}

// The running collective ends within the timeout (Gloo's own), before context_ goes.
ProcessGroupGloo::~ProcessGroupGloo() {
  stop_thread();
}

// ---- The collectives on host memory ------------------------------------------------------

void ProcessGroupGloo::run_host(const HostCollective& c, const HostTensors& host,
                                int64_t sequence) {
  const auto tag = static_cast<uint32_t>(sequence);
  const Millis t = timeout();
  switch (c.kind) {
    case HostCollective::Kind::AllReduce:
      return host_allreduce(context_, host[0], tag, t);
    case HostCollective::Kind::Broadcast:
      return host_broadcast(context_, host[0], c.root, tag, t);
    case HostCollective::Kind::AllGather:
      return host_allgather(context_, host[0], host[1], tag, t);
    case HostCollective::Kind::ReduceScatter:
      return host_reduce_scatter(context_, host[0], host[1], tag, t);
    case HostCollective::Kind::Reduce:
      return host_reduce(context_, host[0], c.root, tag, t);
    case HostCollective::Kind::AllToAll:
      return host_alltoall(context_, host[0], host[1], tag, t);
    case HostCollective::Kind::SendRecv:
      return host_sendrecv(context_, host[1], c.dst, host[0], c.src, tag, t);
    case HostCollective::Kind::Barrier: {
      gloo::BarrierOptions opts(context_);
      opts.setTag(tag);
      opts.setTimeout(t);
      gloo::barrier(opts);
      return;
    }
  }
}

std::string gloo_version() {
  return std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) + "." +
         std::to_string(GLOO_VERSION_PATCH);
}

}  // namespace ddpb::comm
