// Scatter and gather along dim 0, with torch.chunk semantics.
#pragma once

#include <vector>

#include "core/stream.h"
#include "core/tensor.h"

namespace ddpb::dp {

// torch.chunk(n rows, chunks): every chunk has ceil(n / chunks) rows except the last, which
// has the rest; so fewer chunks than asked come back when n is small (5 rows in 4 chunks
// gives 2, 2, 1). Requires n >= 1 and chunks >= 1.
std::vector<int64_t> chunk_sizes(int64_t n, int64_t chunks);

struct Scattered {
  std::vector<Tensor> parts;  // parts[i] on devices[i]
  std::vector<Event> ready;   // ready[i] completes when parts[i] has arrived
};

// Copies the row chunks of `batch` to `devices` (chunk i to devices[i]), each on the side
// stream side_streams[i], so the copies overlap. Each side stream first waits for the work
// enqueued so far on the current stream of the batch's device; the caller makes each
// device's compute stream wait on ready[i] before using parts[i]. `sizes` comes from
// chunk_sizes().
Scattered scatter(const Tensor& batch, const std::vector<int64_t>& sizes,
                  const std::vector<Device>& devices, const std::vector<StreamPtr>& side_streams);

// Concatenates `parts` along dim 0 into a new tensor on `dst`, enqueued on dst's current
// stream. The caller has made that stream wait for the parts to be ready.
Tensor gather(const std::vector<Tensor>& parts, const Device& dst);

}  // namespace ddpb::dp
