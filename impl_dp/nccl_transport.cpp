// NCCL broadcast/reduce over distinct GPUs of this process (built only with NCCL).
#include <nccl.h>

#include "core/allocator.h"
#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/nccl_dtype.h"
#include "core/stream.h"
#include "core/stream_sanitizer.h"
#include "impl_dp/transport.h"

namespace ddpb::dp {
namespace {

cudaStream_t stream_of(const Device& d) {
  return static_cast<cudaStream_t>(current_stream(d).native_handle());
}

// An ncclGroupStart() that is ended on every path: a throw between start and end would leave
// the group open, and this thread's next NCCL call would silently join it.
class NcclGroup {
 public:
  NcclGroup() { NCCL_CHECK(ncclGroupStart()); }
  ~NcclGroup() {
    if (open_) (void)ncclGroupEnd();  // already failing: the first error is the one reported
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
  void end() {
    open_ = false;
    NCCL_CHECK(ncclGroupEnd());
  }

 private:
  bool open_ = true;
};

// The collective reads and writes `t` on its device's current stream.
void sanitize(const char* op, const Device& d, const Tensor& t) {
  if (sanitizer::enabled()) sanitizer::on_op(current_stream(d), op, {&t}, {&t});
}

class NcclTransport final : public Transport {
 public:
  explicit NcclTransport(const std::vector<Device>& devices) : devices_(devices) {
    std::vector<int> ids;
    for (const auto& d : devices) ids.push_back(d.index);
    comms_.resize(devices.size());
    NCCL_CHECK(ncclCommInitAll(comms_.data(), static_cast<int>(ids.size()), ids.data()));
  }
  ~NcclTransport() override {
    // A destructor must not throw; a failing destroy only leaks the communicator.
    for (auto c : comms_) (void)ncclCommDestroy(c);
  }
  const char* name() const override { return "nccl"; }

  void broadcast(const Tensor& src, const std::vector<Tensor>& dst) override {
    DDPB_CHECK(dst.size() + 1 == comms_.size()) << "broadcast to " << dst.size() << " devices";
    // One group: every rank's call, root included, is a single fused NCCL launch.
    NcclGroup group;
    for (size_t i = 0; i < comms_.size(); ++i) {
      const Tensor& t = i == 0 ? src : dst[i - 1];
      sanitize("nccl broadcast", devices_[i], t);
      // The element count comes from the tensor, never from the caller.
      NCCL_CHECK(ncclBroadcast(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()),
                               nccl_type(t.dtype()), /*root=*/0, comms_[i],
                               stream_of(devices_[i])));
    }
    group.end();
  }

  void reduce_add(const std::vector<Tensor>& parts) override {
    DDPB_CHECK(parts.size() == comms_.size()) << "reduce over " << parts.size() << " devices";
    NcclGroup group;
    for (size_t i = 0; i < comms_.size(); ++i) {
      const Tensor& t = parts[i];
      sanitize("nccl reduce", devices_[i], t);
      NCCL_CHECK(ncclReduce(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()),
                            nccl_type(t.dtype()), ncclSum, /*root=*/0, comms_[i],
                            stream_of(devices_[i])));
    }
    group.end();
  }

 private:
  CommunicatorLease lease_;  // Note [Out of memory with NCCL live]
  std::vector<Device> devices_;
  std::vector<ncclComm_t> comms_;
};

}  // namespace

std::unique_ptr<Transport> make_nccl_transport(const std::vector<Device>& devices) {
  return std::make_unique<NcclTransport>(devices);
}

}  // namespace ddpb::dp
