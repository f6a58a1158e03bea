// Error checks for the CUDA libraries (CUDA builds only).
//
// CUDA_CHECK(expr) << "context";    throws ddpb::CudaError when expr != cudaSuccess
// CUBLAS_CHECK(expr) << "context";  throws ddpb::CublasError (cuBLAS and cuBLASLt)
// NCCL_CHECK(expr) << "context";    throws ddpb::NcclError (when built with NCCL)
// CUDA_LAUNCH_CHECK() << "kernel";  after every kernel launch: a bad launch configuration
//                                   or a missing kernel image surfaces here, at the launcher,
//                                   instead of at some later, unrelated call.
// CUDA_CHECK_NOTHROW(expr);         for destructors: prints to stderr and carries on.
//
// The message carries the library's error name and text, the streamed context, file:line,
// the expression and the device label of the calling thread (see core/check.h). Like
// DDPB_CHECK, the context is only evaluated when the check fails.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <utility>

#include "core/check.h"

#ifdef DDPB_HAVE_NCCL
#include <nccl.h>
#endif

namespace ddpb::detail {

// Also clears the runtime's "last error" so that a caught, non-sticky failure (an
// out-of-memory from cudaMalloc, say) is not reported again by the next launch check.
inline std::string cuda_error_text(cudaError_t err) {
  (void)cudaGetLastError();
  return std::string("CUDA error ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
}

inline std::string cublas_error_text(cublasStatus_t status) {
  return std::string("cuBLAS error ") + cublasGetStatusName(status) + " (" +
         cublasGetStatusString(status) + ")";
}

#ifdef DDPB_HAVE_NCCL
inline std::string nccl_error_text(ncclResult_t result) {
  std::string text = std::string("NCCL error ") + ncclGetErrorString(result);
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && last[0] != '\0') {
    text += " (";
    text += last;
    text += ")";
  }
  return text;
}
#endif

// Destructors must not throw. cudaErrorCudartUnloading is expected there: objects with
// static storage (allocators, per-device handles) can outlive the runtime at process exit.
inline void cuda_check_nothrow(cudaError_t err, const char* expr, const char* file, int line) {
  if (err == cudaSuccess) return;
  (void)cudaGetLastError();
  if (err == cudaErrorCudartUnloading) return;
  std::fprintf(stderr, "ddpbench: ignoring %s\n",
               format_check_message(file, line, expr, cuda_error_text(err)).c_str());
}

}  // namespace ddpb::detail

#define CUDA_CHECK(expr)                                                       \
  if (const cudaError_t ddpb_cuda_ = (expr); ddpb_cuda_ == cudaSuccess) {      \
  } else                                                                       \
    ::ddpb::detail::CheckFailure<::ddpb::CudaError>(__FILE__, __LINE__, #expr, \
                                                    ::ddpb::detail::cuda_error_text(ddpb_cuda_))

#define CUBLAS_CHECK(expr)                                                                 \
  if (const cublasStatus_t ddpb_cublas_ = (expr); ddpb_cublas_ == CUBLAS_STATUS_SUCCESS) { \
  } else                                                                                   \
    ::ddpb::detail::CheckFailure<::ddpb::CublasError>(                                     \
        __FILE__, __LINE__, #expr, ::ddpb::detail::cublas_error_text(ddpb_cublas_))

#ifdef DDPB_HAVE_NCCL
// ncclInProgress (non-blocking communicators) counts as a failure here; code that uses
// non-blocking communicators polls ncclCommGetAsyncError itself.
#define NCCL_CHECK(expr)                                                       \
  if (const ncclResult_t ddpb_nccl_ = (expr); ddpb_nccl_ == ncclSuccess) {     \
  } else                                                                       \
    ::ddpb::detail::CheckFailure<::ddpb::NcclError>(__FILE__, __LINE__, #expr, \
                                                    ::ddpb::detail::nccl_error_text(ddpb_nccl_))
#endif

#define CUDA_LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError()) << "kernel launch"

#define CUDA_CHECK_NOTHROW(expr) \
  ::ddpb::detail::cuda_check_nothrow((expr), #expr, __FILE__, __LINE__)
