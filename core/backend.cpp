#include "core/backend.h"

#include "core/check.h"

namespace ddpb {

Backend& backend_for(DeviceType type) {
  if (type == DeviceType::CPU) return cpu_backend();
#ifdef DDPB_HAVE_CUDA
  return cuda_backend();
#else
  DDPB_USAGE_FAIL() << "a CUDA device was requested, but this ddpbench was built without CUDA";
  return cpu_backend();
#endif
}

}  // namespace ddpb
