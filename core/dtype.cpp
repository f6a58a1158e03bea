#include "core/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace ddpb {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
  }
  return "?";
}

std::string_view dtype_safetensors_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
  }
  return "?";
}

bool dtype_from_safetensors_name(std::string_view name, DType* out) {
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64}) {
    if (dtype_safetensors_name(t) == name) {
      *out = t;
      return true;
    }
  }
  return false;
}

}  // namespace ddpb
