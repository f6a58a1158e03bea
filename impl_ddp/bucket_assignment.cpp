#include "impl_ddp/bucket_assignment.h"

#include <map>
#include <numeric>

#include "core/check.h"

namespace ddpb::ddp {

BucketAssignment compute_bucket_assignment(const std::vector<ParamInfo>& params,
                                           size_t first_bucket_bytes, size_t bucket_bytes,
                                           const std::vector<size_t>& order) {
  DDPB_CHECK(first_bucket_bytes > 0 && bucket_bytes > 0)
      << "bucket caps must be positive (first " << first_bucket_bytes << ", others " << bucket_bytes
      << ")";
  std::vector<size_t> walk = order;
  if (walk.empty()) {
    walk.resize(params.size());
    std::iota(walk.rbegin(), walk.rend(), size_t{0});  // reverse model order
  }
  DDPB_CHECK(walk.size() == params.size())
      << "bucket order lists " << walk.size() << " of " << params.size() << " parameters";

  struct Open {
    std::vector<size_t> members;
    size_t bytes = 0;
  };
  // Open buckets per (dtype, device); buckets are emitted in the order they close, and the
  // leftovers in the order they were opened, which keeps "ready first" first.
  std::map<std::tuple<int, int, int>, Open> open;
  std::map<std::tuple<int, int, int>, bool> first_done;
  std::vector<std::pair<size_t, std::vector<size_t>>> closed;  // (position of first member, bucket)
  std::vector<size_t> position(params.size());
  std::vector<bool> seen(params.size(), false);
  for (size_t pos = 0; pos < walk.size(); ++pos) {
    size_t i = walk[pos];
    DDPB_CHECK(i < params.size() && !seen[i]) << "bucket order repeats or overruns index " << i;
    seen[i] = true;
    position[i] = pos;
    const ParamInfo& p = params[i];
    auto key =
        std::make_tuple(static_cast<int>(p.dtype), static_cast<int>(p.device.type), p.device.index);
    Open& b = open[key];
    b.members.push_back(i);
    b.bytes += static_cast<size_t>(p.numel) * dtype_size(p.dtype);
    size_t cap = first_done[key] ? bucket_bytes : first_bucket_bytes;
    if (b.bytes >= cap) {
      closed.emplace_back(position[b.members.front()], std::move(b.members));
      b = Open{};
      first_done[key] = true;
    }
  }
  for (auto& [key, b] : open) {
    if (!b.members.empty()) closed.emplace_back(position[b.members.front()], std::move(b.members));
  }
  std::sort(closed.begin(), closed.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  BucketAssignment out;
  for (auto& [pos, members] : closed) out.push_back(std::move(members));
  return out;
}

}  // namespace ddpb::ddp
