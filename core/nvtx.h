// NVTX3 ranges in the `ddpbench` domain, for Nsight Systems.
//
// Each range has a category (data, forward, backward, comm, optimizer, dp) with its own
// colour, a message, and optionally a payload of bytes (on communication ranges). Fixed
// names are registered strings. Built with -DDDPB_NVTX=OFF, everything here compiles to
// nothing. Ranges are cheap when no tool is attached: NVTX calls are no-ops until a tool
// injects itself (NVTX_INJECTION64_PATH).
#pragma once

#include <cstdint>
#include <string>

namespace ddpb::nvtx {

enum class Category : uint32_t { Data = 1, Forward, Backward, Comm, Optimizer, DP, Op };

// A message registered once with the domain; for hot call sites (every op), declared
// `static` so that the lookup happens once per site, not per call.
class RegisteredString {
 public:
  explicit RegisteredString(const char* message);
  void* handle() const { return handle_; }
  const char* message() const { return message_; }

 private:
  const char* message_;
  void* handle_ = nullptr;
};

// A push/pop range on the calling thread (must end on the same thread, properly nested).
class Range {
 public:
  // `message` should be a string literal (it is registered once and cached by address).
  explicit Range(const char* message, Category category, int64_t payload_bytes = -1);
  Range(const RegisteredString& message, Category category, int64_t payload_bytes = -1);
  // A dynamic message (e.g. "bucket 3").
  Range(const std::string& message, Category category, int64_t payload_bytes = -1);
  ~Range();
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;
};

// A start/end range that may end on another thread and may overlap other ranges: used
// for asynchronous collectives.
class AsyncRange {
 public:
  AsyncRange() = default;
  AsyncRange(const std::string& message, Category category, int64_t payload_bytes = -1);
  AsyncRange(AsyncRange&& other) noexcept;
  AsyncRange& operator=(AsyncRange&& other) noexcept;
  ~AsyncRange();
  void end();

 private:
  uint64_t id_ = 0;
};

// Names the calling OS thread in traces (also sets the pthread name, max 15 chars).
void name_thread(const std::string& name);

bool compiled_in();

// cudaProfilerStart/Stop, around the measured steps of a CUDA run, so that
// `nsys profile --capture-range=cudaProfilerApi` (scripts/profile_nsys.sh) captures exactly
// them. No-ops in builds without CUDA; errors (no GPU, no profiler) are ignored.
void profiler_start();
void profiler_stop();

}  // namespace ddpb::nvtx
