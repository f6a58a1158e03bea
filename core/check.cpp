#include "core/check.h"

namespace ddpb {
namespace {
thread_local std::string t_device_label;
}

const std::string& current_device_label() {
  return t_device_label;
}
void set_current_device_label(std::string label) {
  t_device_label = std::move(label);
}

namespace detail {
std::string format_check_message(const char* file, int line, const char* expr,
                                 const std::string& context) {
  std::string msg = context.empty() ? std::string("check failed") : context;
  msg += " [";
  msg += expr;
  msg += " at ";
  msg += file;
  msg += ':';
  msg += std::to_string(line);
  if (!t_device_label.empty()) {
    msg += ", device ";
    msg += t_device_label;
  }
  msg += ']';
  return msg;
}
}  // namespace detail
}  // namespace ddpb
