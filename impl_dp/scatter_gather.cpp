#include "impl_dp/scatter_gather.h"

#include "core/check.h"
#include "core/ops.h"

namespace ddpb::dp {

std::vector<int64_t> chunk_sizes(int64_t n, int64_t chunks) {
  DDPB_CHECK(n >= 1 && chunks >= 1) << "chunk_sizes(" << n << ", " << chunks << ")";
  const int64_t size = (n + chunks - 1) / chunks;
  std::vector<int64_t> out;
  for (int64_t start = 0; start < n; start += size) out.push_back(std::min(size, n - start));
  return out;
}

Scattered scatter(const Tensor& batch, const std::vector<int64_t>& sizes,
                  const std::vector<Device>& devices, const std::vector<StreamPtr>& side_streams) {
  DDPB_CHECK(sizes.size() <= devices.size() && sizes.size() <= side_streams.size())
      << sizes.size() << " chunks for " << devices.size() << " devices";
  Scattered out;
  // The batch became ready on its device's current stream (DataLoader::next() made that
  // stream wait for the loader's copy): every side stream waits for it before reading.
  Event batch_ready = Event::create(batch.device());
  batch_ready.record(current_stream(batch.device()));
  int64_t start = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Tensor src = batch.narrow(start, sizes[i]);
    start += sizes[i];
    side_streams[i]->wait(batch_ready);
    StreamGuard on_side(side_streams[i]);
    Tensor dst = Tensor::empty(src.shape(), src.dtype(), devices[i]);
    ops::copy(src, dst);
    Event ready = Event::create(devices[i]);
    ready.record(*side_streams[i]);
    out.parts.push_back(dst);
    out.ready.push_back(ready);
  }
  DDPB_CHECK(start == batch.size(0)) << "chunks cover " << start << " of " << batch.describe();
  return out;
}

Tensor gather(const std::vector<Tensor>& parts, const Device& dst) {
  DDPB_CHECK(!parts.empty()) << "gather of nothing";
  Shape shape = parts[0].shape();
  int64_t rows = 0;
  for (const auto& p : parts) {
    DDPB_CHECK(p.dim() == parts[0].dim() && p.dtype() == parts[0].dtype())
        << "gather of mismatched parts: " << p.describe() << " vs " << parts[0].describe();
    rows += p.size(0);
  }
  shape[0] = rows;
  Tensor out = Tensor::empty(shape, parts[0].dtype(), dst);
  int64_t start = 0;
  for (const auto& p : parts) {
    ops::copy(p, out.narrow(start, p.size(0)));
    start += p.size(0);
  }
  return out;
}

}  // namespace ddpb::dp
