#include "impl_dp/transport.h"

#include <set>

#include "core/check.h"
#include "core/ops.h"

namespace ddpb::dp {

#ifdef DDPB_HAVE_NCCL
std::unique_ptr<Transport> make_nccl_transport(const std::vector<Device>& devices);
#endif

namespace {

class CopyTransport final : public Transport {
 public:
  const char* name() const override { return "copy"; }
  void broadcast(const Tensor& src, const std::vector<Tensor>& dst) override {
    for (const auto& d : dst) ops::copy(src, d);
  }
  void reduce_add(const std::vector<Tensor>& parts) override {
    // Fixed order ((p0 + p1) + p2) + ...: the same sum on every run.
    for (size_t i = 1; i < parts.size(); ++i) {
      if (parts[i].device() == parts[0].device()) {
        ops::axpy(1.0f, parts[i], parts[0]);
      } else {
        Tensor staged = Tensor::empty(parts[i].shape(), parts[i].dtype(), parts[0].device());
        ops::copy(parts[i], staged);
        ops::axpy(1.0f, staged, parts[0]);
      }
    }
  }
};

}  // namespace

std::unique_ptr<Transport> make_transport(const std::vector<Device>& devices) {
#ifdef DDPB_HAVE_NCCL
  std::set<int> gpus;
  bool all_cuda = true;
  for (const auto& d : devices) {
    all_cuda &= d.is_cuda();
    gpus.insert(d.index);
  }
  if (all_cuda && devices.size() > 1 && gpus.size() == devices.size()) {
    return make_nccl_transport(devices);
  }
#endif
  (void)devices;
  return std::make_unique<CopyTransport>();
}

}  // namespace ddpb::dp
