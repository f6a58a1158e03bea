#include "core/device.h"

#include <algorithm>
#include <charconv>

#include "core/backend.h"
#include "core/check.h"

namespace ddpb {

std::string Device::str() const {
  return (is_cpu() ? "cpu:" : "cuda:") + std::to_string(index);
}

Device parse_device(std::string_view text) {
  auto parse_index = [&](std::string_view digits) {
    int value = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    DDPB_USAGE_CHECK(ec == std::errc() && end == digits.data() + digits.size() && value >= 0 &&
                     value < kMaxDeviceIndex)
        << "bad device '" << text << "': the index must be an integer from 0 to "
        << kMaxDeviceIndex - 1;
    return value;
  };
  for (auto [prefix, type] : {std::pair{std::string_view("cpu"), DeviceType::CPU},
                              std::pair{std::string_view("cuda"), DeviceType::CUDA}}) {
    if (text == prefix) return {type, 0};
    if (text.size() > prefix.size() + 1 && text.substr(0, prefix.size()) == prefix &&
        text[prefix.size()] == ':') {
      return {type, parse_index(text.substr(prefix.size() + 1))};
    }
  }
  DDPB_USAGE_FAIL() << "unknown device '" << text << "' (expected cpu, cpu:N, cuda or cuda:N)";
  return {};
}

std::vector<Device> parse_device_list(std::string_view text) {
  std::vector<Device> out;
  for (size_t start = 0; start <= text.size();) {
    const size_t comma = std::min(text.find(',', start), text.size());
    out.push_back(parse_device(text.substr(start, comma - start)));
    start = comma + 1;
  }
  return out;
}

bool cuda_compiled_in() {
#ifdef DDPB_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
#ifdef DDPB_HAVE_CUDA
  return cuda_device_count_impl();
#else
  return 0;
#endif
}

void require_device(const Device& d) {
  if (d.is_cpu()) return;
  DDPB_USAGE_CHECK(cuda_compiled_in())
      << d.str() << " requested, but this ddpbench was built without CUDA (use --device cpu)";
  int count = cuda_device_count();
  DDPB_USAGE_CHECK(d.index < count)
      << d.str() << " requested, but this machine has " << count << " usable GPU"
      << (count == 1 ? "" : "s") << " (use --device cpu)";
}

DeviceGuard::DeviceGuard(const Device& d) : previous_label_(current_device_label()) {
  if (d.is_cuda()) {
    Backend& cuda = backend_for(DeviceType::CUDA);
    previous_cuda_ = cuda.current_device_index();
    cuda.set_device(d);
  }
  set_current_device_label(d.str());
}

DeviceGuard::~DeviceGuard() {
  if (previous_cuda_ >= 0) {
    try {
      backend_for(DeviceType::CUDA).set_device(Device::cuda(previous_cuda_));
    } catch (...) {
      // A destructor must not throw; the thread stays on the guard's device.
    }
  }
  set_current_device_label(previous_label_);
}

}  // namespace ddpb
