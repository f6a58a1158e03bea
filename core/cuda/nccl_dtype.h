// The NCCL type of a DType, for the two NCCL users (comm/process_group_nccl.cpp and
// impl_dp/nccl_transport.cpp). Only in builds with NCCL, which ddpb_core then links.
#pragma once

#include <nccl.h>

#include "core/check.h"
#include "core/dtype.h"

namespace ddpb {

inline ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32:
      return ncclFloat32;
    case DType::BF16:
      return ncclBfloat16;
    case DType::F16:
      return ncclFloat16;
    case DType::I32:
      return ncclInt32;
    case DType::I64:
      return ncclInt64;
    case DType::U8:
      return ncclUint8;
  }
  DDPB_FAIL() << "no NCCL type for dtype " << static_cast<int>(t);
  return ncclFloat32;
}

}  // namespace ddpb
