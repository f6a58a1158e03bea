// Bucket assignment: a pure function, unit-tested without any communication.
//
// Parameters are walked in *reverse* model order, since backward produces gradients roughly
// from the last layer to the first, and packed greedily into buckets. A bucket closes once
// its size reaches its cap: the first bucket's cap is `first_bucket_bytes` (small, so the
// first AllReduce starts early in backward), the others' `bucket_bytes`. Parameters of
// different dtypes or devices never share a bucket (each (dtype, device) has its own open
// bucket). A parameter larger than the cap gets a bucket of its own.
//
// The result is ordered so that bucket 0 holds the parameters expected to be ready first;
// see Note [DDP bucket launch order] in impl_ddp/reducer.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"

namespace ddpb::ddp {

struct ParamInfo {
  int64_t numel = 0;
  DType dtype = DType::F32;
  Device device;
};

using BucketAssignment = std::vector<std::vector<size_t>>;  // parameter indices per bucket

// `order`: the order to walk the parameters in (indices into `params`); empty means reverse
// model order. After the first iteration DDP passes the gradient-ready order it observed.
BucketAssignment compute_bucket_assignment(const std::vector<ParamInfo>& params,
                                           size_t first_bucket_bytes, size_t bucket_bytes,
                                           const std::vector<size_t>& order = {});

}  // namespace ddpb::ddp
