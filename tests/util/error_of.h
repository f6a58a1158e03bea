// error_of<E>(f): the message of the E that `f` throws, or "" when it throws none, for tests
// that check a one-line error's text (another exception type propagates and fails the test).
#pragma once

#include <functional>
#include <string>

namespace ddpb::testing {

template <typename E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

}  // namespace ddpb::testing
