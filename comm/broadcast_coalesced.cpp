#include "comm/broadcast_coalesced.h"

#include "core/check.h"
#include "core/memory_category.h"
#include "core/ops.h"

namespace ddpb::comm {

void broadcast_coalesced(ProcessGroup& pg, const std::vector<Tensor>& tensors, int root) {
  if (tensors.empty()) return;
  MemoryCategoryScope staging(MemoryCategory::Communication);  // the flat copy
  int64_t total = 0;
  for (const Tensor& t : tensors) {
    DDPB_CHECK(t.dtype() == tensors.front().dtype())
        << "broadcast_coalesced: " << t.describe() << " beside " << tensors.front().describe();
    total += t.numel();
  }
  Tensor flat = Tensor::empty({total}, tensors.front().dtype(), tensors.front().device());
  int64_t at = 0;
  for (const Tensor& t : tensors) {
    ops::copy(t, flat.flat_view(at, t.shape()));
    at += t.numel();
  }
  pg.broadcast(flat, root)->wait();
  at = 0;
  for (const Tensor& t : tensors) {
    ops::copy(flat.flat_view(at, t.shape()), t);
    at += t.numel();
  }
}

}  // namespace ddpb::comm
