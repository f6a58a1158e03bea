#include "comm/process_group.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "comm/process_group_gloo.h"
#include "core/device.h"
#include "core/ops.h"

#if defined(DDPB_HAVE_CUDA) && defined(DDPB_HAVE_NCCL)
#include "comm/process_group_nccl.h"
#endif
#include "comm/process_group_mpi.h"  // without MPI: the answers below, no class

namespace ddpb::comm {
namespace {

// The Work of the default coalesced collectives: complete when every part is. Sequence, op and
// bytes describe the whole; the times span from the first part's start to the last end.
class CoalescedWork final : public Work {
 public:
  CoalescedWork(std::vector<WorkPtr> parts, const char* name) : parts_(std::move(parts)) {
    op = name;
    sequence = parts_.empty() ? -1 : parts_.front()->sequence;
    flight_ring = parts_.empty() ? 0 : parts_.front()->flight_ring;
    for (const WorkPtr& p : parts_) bytes += p->bytes;
  }

  bool is_completed() override {
    for (const WorkPtr& p : parts_) {
      if (!p->is_completed()) return false;
    }
    fill_times();
    return true;
  }

  // Waits for the parts in issue order and throws the first failure.
  void wait() override {
    for (const WorkPtr& p : parts_) p->wait();
    (void)is_completed();  // fills the times once every part is done
  }

  std::exception_ptr exception() const override {
    for (const WorkPtr& p : parts_) {
      if (std::exception_ptr e = p->exception()) return e;
    }
    return nullptr;
  }

 private:
  // Called once every part is complete (their times are final then).
  void fill_times() {
    if (parts_.empty()) return;
    start_ns = parts_.front()->start_ns;
    end_ns = 0;
    for (const WorkPtr& p : parts_) end_ns = std::max(end_ns, p->end_ns);
  }

  std::vector<WorkPtr> parts_;
};

}  // namespace

WorkPtr ProcessGroup::allreduce_coalesced(const std::vector<Tensor>& tensors) {
  std::vector<WorkPtr> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(allreduce(t));
  return std::make_shared<CoalescedWork>(std::move(parts), "allreduce_coalesced");
}

namespace {

void check_pairs(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                 const char* what, int rank) {
  DDPB_CHECK(outputs.size() == inputs.size()) << what << ": " << outputs.size() << " outputs for "
                                              << inputs.size() << " inputs (rank " << rank << ")";
}

}  // namespace

WorkPtr ProcessGroup::reduce_scatter_tensor_coalesced(const std::vector<Tensor>& outputs,
                                                      const std::vector<Tensor>& inputs,
                                                      ReduceOp op) {
  check_pairs(outputs, inputs, "reduce_scatter_tensor_coalesced", rank_);
  if (op == ReduceOp::Avg) divide_for_average(inputs, size_);
  std::vector<WorkPtr> parts;
  parts.reserve(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) parts.push_back(reduce_scatter(outputs[k], inputs[k]));
  return std::make_shared<CoalescedWork>(std::move(parts), "reduce_scatter_tensor_coalesced");
}

WorkPtr ProcessGroup::allgather_into_tensor_coalesced(const std::vector<Tensor>& outputs,
                                                      const std::vector<Tensor>& inputs) {
  check_pairs(outputs, inputs, "allgather_into_tensor_coalesced", rank_);
  std::vector<WorkPtr> parts;
  parts.reserve(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) parts.push_back(allgather(outputs[k], inputs[k]));
  return std::make_shared<CoalescedWork>(std::move(parts), "allgather_into_tensor_coalesced");
}

void divide_for_average(const std::vector<Tensor>& tensors, int size) {
  for (const Tensor& t : tensors)  // all checked before any is divided
    DDPB_CHECK(t.dtype() == DType::F32)
        << "ReduceOp::Avg divides its inputs first, which needs f32, not " << t.describe();
  if (size == 1) return;
  for (const Tensor& t : tensors) ops::scale(t, 1.0f / static_cast<float>(size));
}

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

namespace {

std::shared_ptr<ProcessGroup> make_nccl_group(const std::shared_ptr<Store>& store, int rank,
                                              int size, const ProcessGroupOptions& options,
                                              bool prefixed = false) {
#if defined(DDPB_HAVE_CUDA) && defined(DDPB_HAVE_NCCL)
  if (!options.device.is_cuda()) {
    throw UsageError("NCCL backend needs CUDA GPUs; use --backend gloo (rank " +
                     std::to_string(rank) + " was given " + options.device.str() + ")");
  }
  require_device(options.device);
  return std::make_shared<ProcessGroupNccl>(prefixed ? store : group_store(store, rank), rank, size,
                                            options);
#else
  (void)store, (void)rank, (void)size, (void)options, (void)prefixed;
  throw UsageError(
      "NCCL backend needs CUDA GPUs; use --backend gloo (this build has no CUDA/NCCL)");
#endif
}

std::shared_ptr<ProcessGroup> make_mpi_group(int rank, int size, const ProcessGroupOptions& options,
                                             const std::vector<int>& members = {}) {
#if defined(DDPB_HAVE_MPI)
  require_device(options.device);
  return std::make_shared<ProcessGroupMpi>(rank, size, options, members);
#else
  (void)rank, (void)size, (void)options, (void)members;
  throw UsageError("--backend mpi: this build has no MPI (install libopenmpi-dev and rebuild)");
#endif
}

}  // namespace

#if !defined(DDPB_HAVE_MPI)
bool mpi_compiled_in() {
  return false;
}
std::string mpi_version() {
  return "not compiled in";
}
bool started_by_mpi_launcher() {
  return false;
}
void abort_mpi_job(int) {}
#endif

std::shared_ptr<ProcessGroup> make_process_group(std::shared_ptr<Store> store, int rank, int size,
                                                 const ProcessGroupOptions& options) {
  DDPB_USAGE_CHECK(size >= 1) << "a process group needs at least one rank, got size " << size;
  DDPB_USAGE_CHECK(rank >= 0 && rank < size)
      << "rank " << rank << " is outside a process group of size " << size;
  DDPB_CHECK(store != nullptr) << "make_process_group(rank " << rank << ") needs a store";

  if (options.backend == CommBackend::Nccl) return make_nccl_group(store, rank, size, options);
  if (options.backend == CommBackend::Mpi) return make_mpi_group(rank, size, options);
  require_device(options.device);
  return std::make_shared<ProcessGroupGloo>(group_store(store, rank), rank, size, options);
}

namespace {

// A sub-group's name in the flight recorder: its world ranks in their order, runs of
// consecutive ranks shortened ("ranks 0-3,8"), and for the k-th group over the same ranks in
// this process " #k" (k >= 2): every rank makes its groups in the same order, so the names
// agree across ranks, and a second queue over the same ranks keeps a ring of its own.
std::string flight_group_name(const std::vector<int>& ranks) {
  static std::mutex mutex;
  static std::map<std::vector<int>, int> made;
  int instance = 0;
  {
    std::lock_guard lock(mutex);
    instance = ++made[ranks];
  }
  std::string name = "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i > 0) name += ",";
    name += std::to_string(ranks[i]);
    if (j > i) name += (j == i + 1 ? "," : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return instance > 1 ? name + " #" + std::to_string(instance) : name;
}

}  // namespace

// Note [Sub-groups].
std::shared_ptr<ProcessGroup> new_group(std::shared_ptr<Store> store, int world_rank,
                                        int world_size, const std::vector<int>& ranks,
                                        const ProcessGroupOptions& given) {
  DDPB_USAGE_CHECK(!ranks.empty()) << "new_group: no ranks";
  std::vector<bool> seen(static_cast<size_t>(std::max(world_size, 0)), false);
  int position = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int r = ranks[i];
    DDPB_USAGE_CHECK(r >= 0 && r < world_size && !seen[static_cast<size_t>(r)])
        << "new_group: rank " << r << " is " << (r >= 0 && r < world_size ? "repeated" : "not")
        << " in a world of " << world_size;
    seen[static_cast<size_t>(r)] = true;
    if (r == world_rank) position = static_cast<int>(i);
  }
  const int size = static_cast<int>(ranks.size());
  ProcessGroupOptions options = given;
  options.flight_group = flight_group_name(ranks);  // Note [Sub-groups]
  if (options.backend == CommBackend::Mpi) {
#if defined(DDPB_HAVE_MPI)
    if (position < 0) ProcessGroupMpi::split_without_me();
#endif
    return position < 0 ? nullptr : make_mpi_group(position, size, options, ranks);
  }
  DDPB_CHECK(store != nullptr) << "new_group(rank " << world_rank << ") needs a store";
  std::shared_ptr<Store> prefixed = group_store(store, world_rank);  // counted by every rank
  if (position < 0) return nullptr;
  if (options.backend == CommBackend::Nccl)
    return make_nccl_group(prefixed, position, size, options, true);
  require_device(options.device);
  return std::make_shared<ProcessGroupGloo>(prefixed, position, size, options);
}

}  // namespace ddpb::comm
