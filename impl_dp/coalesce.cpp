#include "impl_dp/coalesce.h"

#include "core/check.h"
#include "core/ops.h"

namespace ddpb::dp {

std::vector<std::vector<size_t>> coalesce_groups(const std::vector<Tensor>& tensors,
                                                 size_t cap_bytes) {
  DDPB_CHECK(cap_bytes > 0) << "coalescing cap must be positive";
  std::vector<std::vector<size_t>> groups;
  size_t bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    size_t n = tensors[i].nbytes();
    bool fits = !groups.empty() && bytes + n <= cap_bytes &&
                tensors[groups.back().front()].dtype() == tensors[i].dtype();
    if (!fits) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(i);
    bytes += n;
  }
  return groups;
}

Tensor flatten(const std::vector<Tensor>& tensors, const std::vector<size_t>& group) {
  DDPB_CHECK(!group.empty()) << "flatten of an empty group";
  int64_t total = 0;
  for (size_t i : group) total += tensors[i].numel();
  const Tensor& first = tensors[group.front()];
  Tensor flat = Tensor::empty({total}, first.dtype(), first.device());
  int64_t offset = 0;
  for (size_t i : group) {
    ops::copy(tensors[i], flat.flat_view(offset, tensors[i].shape()));
    offset += tensors[i].numel();
  }
  return flat;
}

void unflatten(const Tensor& flat, const std::vector<Tensor>& tensors,
               const std::vector<size_t>& group) {
  int64_t offset = 0;
  for (size_t i : group) {
    ops::copy(flat.flat_view(offset, tensors[i].shape()), tensors[i]);
    offset += tensors[i].numel();
  }
  DDPB_CHECK(offset == flat.numel()) << "unflatten used " << offset << " of " << flat.describe();
}

void broadcast_coalesced(Transport& transport, const std::vector<std::vector<Tensor>>& per_device,
                         const std::vector<std::vector<size_t>>& groups, size_t used) {
  if (used < 2) return;
  for (const auto& group : groups) {
    Tensor src = flatten(per_device[0], group);
    std::vector<Tensor> dst;
    for (size_t r = 1; r < used; ++r) {
      dst.push_back(Tensor::empty(src.shape(), src.dtype(), per_device[r][group.front()].device()));
    }
    transport.broadcast(src, dst);
    for (size_t r = 1; r < used; ++r) unflatten(dst[r - 1], per_device[r], group);
  }
}

void reduce_add_coalesced(Transport& transport, const std::vector<std::vector<Tensor>>& per_device,
                          const std::vector<std::vector<size_t>>& groups, size_t used) {
  if (used < 2) return;
  for (const auto& group : groups) {
    std::vector<Tensor> flats;
    for (size_t r = 0; r < used; ++r) flats.push_back(flatten(per_device[r], group));
    transport.reduce_add(flats);
    unflatten(flats[0], per_device[0], group);
  }
}

}  // namespace ddpb::dp
