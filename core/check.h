// Error handling for ddpbench.
//
// DDPB_CHECK(cond) << "context";   throws ddpb::Error with file:line, the expression, the
//                                   streamed context and the current device of this thread.
// DDPB_USAGE_CHECK(cond) << "...";  throws ddpb::UsageError (CLI exit code 2) with the streamed
//                                   reason alone: no expression, no source position.
// CUDA_CHECK / CUBLAS_CHECK / NCCL_CHECK live in core/cuda/cuda_check.h (CUDA builds only).
//
// Exit-code contract (ddpbench_main in bench/cli/cli.cpp): UsageError -> 2, any other
// ddpb::Error -> 1.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace ddpb {

// A runtime failure: a library error, a failed invariant, an I/O error.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad input from the user: a wrong flag, an unknown workload, a mismatched file.
class UsageError : public Error {
 public:
  using Error::Error;
};

// Typed library errors so that callers (and tests) can tell the source apart.
class CudaError : public Error {
 public:
  using Error::Error;
};
class CublasError : public Error {
 public:
  using Error::Error;
};
class NcclError : public Error {
 public:
  using Error::Error;
};

// The device the calling thread works on, for error messages ("cpu:0", "cuda:1", or "").
// DeviceGuard (core/device.h) keeps it current.
const std::string& current_device_label();
void set_current_device_label(std::string label);

namespace detail {

std::string format_check_message(const char* file, int line, const char* expr,
                                 const std::string& context);

// Collects the streamed context and throws from its destructor at the end of the full
// expression. It is only ever a temporary inside a check macro, never unwound through.
// `library_text` (a library's error string, e.g. from CUDA_CHECK) goes before the context.
template <typename E>
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* expr, std::string library_text = {})
      : file_(file), line_(line), expr_(expr), library_text_(std::move(library_text)) {}
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  [[noreturn]] ~CheckFailure() noexcept(false) {
    std::string context = context_.str();
    if (!library_text_.empty())
      context = context.empty() ? library_text_ : library_text_ + ": " + context;
    // A usage error is about the user's input: its reason alone, one line, without the
    // check's expression and source position, which are for internal errors.
    if constexpr (std::is_base_of_v<UsageError, E>)
      throw E(context.empty() ? "bad usage" : context);
    throw E(format_check_message(file_, line_, expr_, context));
  }
  template <typename T>
  CheckFailure& operator<<(const T& value) {
    context_ << value;
    return *this;
  }

 private:
  const char* file_;
  int line_;
  const char* expr_;
  std::string library_text_;
  std::ostringstream context_;
};

}  // namespace detail
}  // namespace ddpb

#define DDPB_CHECK_TYPED(E, cond) \
  if (cond) {                     \
  } else                          \
    ::ddpb::detail::CheckFailure<E>(__FILE__, __LINE__, #cond)

#define DDPB_CHECK(cond) DDPB_CHECK_TYPED(::ddpb::Error, cond)
#define DDPB_USAGE_CHECK(cond) DDPB_CHECK_TYPED(::ddpb::UsageError, cond)
#define DDPB_FAIL() DDPB_CHECK_TYPED(::ddpb::Error, false)
#define DDPB_USAGE_FAIL() DDPB_CHECK_TYPED(::ddpb::UsageError, false)
