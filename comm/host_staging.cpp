// See Note [Staging buffers] in comm/host_staging.h.
#include "comm/host_staging.h"

#include <array>

#include "core/check.h"
#include "core/ops.h"

namespace ddpb::comm {

bool needs_host_copy(const Tensor& t) {
  return t.device().is_cuda();
}

void run_staged_on_host(const StreamPtr& stream, std::span<const StagedOperand> operands,
                        const std::function<void(const HostTensors&)>& run,
                        bool (*stage)(const Tensor&)) {
  DDPB_CHECK(operands.size() <= HostTensors::kMax)
      << "a host collective has at most " << HostTensors::kMax << " operands";
  StreamGuard guard(stream);
  std::array<Tensor, HostTensors::kMax> pinned;
  HostTensors host;
  for (size_t i = 0; i < operands.size(); ++i) {
    const Tensor& t = *operands[i].tensor;
    if (!stage(t)) {
      host.push_back(t);
      continue;
    }
    pinned[i] = Tensor::empty_pinned(t.shape(), t.dtype());
    if (operands[i].read) ops::copy(t, pinned[i]);
    host.push_back(pinned[i]);
  }
  stream->synchronize();
  run(host);
  for (size_t i = 0; i < operands.size(); ++i) {
    if (operands[i].write && pinned[i].defined()) ops::copy(pinned[i], *operands[i].tensor);
  }
  // Before `pinned` goes back to the page-locked pool (Note [Staging buffers]).
  stream->synchronize();
}

}  // namespace ddpb::comm
