#include "comm/process_group.h"

#include <string>

#include "comm/process_group_gloo.h"
#include "core/device.h"

namespace ddpb::comm {

// Note [Process group store prefix]
// Every group's rendezvous keys live under "pg<G>/", where G counts the groups this rank
// has created on this store (1, 2, ...), kept in the store itself under a per-rank key. All
// ranks create their groups in the same order, so the G-th group of every rank meets under
// the same prefix, whether the ranks are processes or threads sharing one store object, and
// a second group never reads the first one's (stale) addresses. A rank that creates a group
// the others do not puts itself out of step: its later groups time out at rendezvous.
static std::shared_ptr<Store> group_store(const std::shared_ptr<Store>& store, int rank) {
  const int64_t generation = store->add("ddpb/groups_created/rank" + std::to_string(rank), 1);
  return std::make_shared<PrefixStore>("pg" + std::to_string(generation) + "/", store);
}

std::shared_ptr<ProcessGroup> make_process_group(std::shared_ptr<Store> store, int rank, int size,
                                                 const ProcessGroupOptions& options) {
  DDPB_USAGE_CHECK(size >= 1) << "a process group needs at least one rank, got size " << size;
  DDPB_USAGE_CHECK(rank >= 0 && rank < size)
      << "rank " << rank << " is outside a process group of size " << size;
  DDPB_CHECK(store != nullptr) << "make_process_group(rank " << rank << ") needs a store";

  if (options.backend == "gloo") {
    require_device(options.device);
    return std::make_shared<ProcessGroupGloo>(group_store(store, rank), rank, size, options);
  }
  if (options.backend == "nccl") {
#if defined(DDPB_HAVE_CUDA) && defined(DDPB_HAVE_NCCL)
    if (!options.device.is_cuda()) {
      throw UsageError("NCCL backend needs CUDA GPUs; use --backend gloo (rank " +
                       std::to_string(rank) + " was given " + options.device.str() + ")");
    }
    throw UsageError("the nccl backend is not available in this build yet; use --backend gloo");
#else
    throw UsageError(
        "NCCL backend needs CUDA GPUs; use --backend gloo (this build has no CUDA/NCCL)");
#endif
  }
  throw UsageError("unknown process group backend '" + options.backend +
                   "' (expected gloo or nccl)");
}

}  // namespace ddpb::comm
