// Lists in prose, for messages and report sentences: "a", "a and b", "a, b and c".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ddpb {

// The items joined with commas and the conjunction before the last: "dp or ddp",
// "single, dp or ddp", "DP, DDP and ToyDDP".
inline std::string join_list(const std::vector<std::string>& items,
                             std::string_view conjunction = "and") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) {
      out += i + 1 == items.size() ? " " : ", ";
      if (i + 1 == items.size()) out.append(conjunction).append(" ");
    }
    out += items[i];
  }
  return out;
}

}  // namespace ddpb
