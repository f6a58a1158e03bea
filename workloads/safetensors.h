// Import and export of named tensors in the safetensors format, byte-compatible with the
// Python `safetensors` package (and so with PyTorch and Hugging Face checkpoints).
//
// File layout:
//   [8 bytes]  N, the header length, unsigned little-endian
//   [N bytes]  JSON: {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}, ...,
//                     "__metadata__": {"<key>": "<value>", ...}}   (metadata optional)
//              padded with spaces so that the data starts at a multiple of 8 bytes
//   [data]     the raw tensor bytes, little-endian, row-major; offsets are relative to the
//              start of the data
//
// Supported dtypes: F32, BF16, F16, I32, I64 (see core/dtype.h). A file that holds another
// dtype (F64, U8, BOOL, ...) is rejected with UsageError.
//
// Threads: the functions are reentrant; concurrent calls on different paths are safe.
// Streams: device tensors are copied with Tensor::to(), which is ordered on the current
// streams and returns only when the data is usable.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"

namespace ddpb {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// The largest header load_safetensors() accepts; the Python package uses the same limit.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// Writes `tensors` (in the given order, data contiguous in that order) and `metadata` to
// `path`. Device tensors are first copied to host memory. The file is written to
// "<path>.tmp.<pid>", fsync'ed and renamed over `path`, so readers see either the old file
// or the complete new one, never a partial write.
// Throws ddpb::Error naming `path` when a tensor is undefined, a name is empty, repeated or
// "__metadata__", or the write fails (full disk, missing directory, ...); in that case the
// temporary file is removed and an existing file at `path` is left untouched.
void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads every tensor of the file at `path` onto `device`, in header order.
// The file is untrusted input: any inconsistency (truncation, a header length beyond the
// file, a header over kSafetensorsMaxHeaderBytes, invalid JSON, an unknown dtype, a shape
// whose size overflows, data_offsets out of range, overlapping or not matching
// shape x dtype size, duplicate names) throws ddpb::UsageError with a one-line message that
// names the file and the problem. A failing read(2) throws ddpb::Error.
std::vector<NamedTensor> load_safetensors(const std::string& path,
                                          const Device& device = Device::cpu());

// As load_safetensors(), on the bytes of a whole file held in memory (fuzzing, embedded
// checkpoints). The same checks give the same UsageError messages, with `name_for_errors`
// in place of the path. Never reads outside [data, data + size).
std::vector<NamedTensor> parse_safetensors(const uint8_t* data, size_t size,
                                           const std::string& name_for_errors,
                                           const Device& device = Device::cpu());

// The "__metadata__" map of the file at `path` (empty when absent). Reads only the header;
// validates the whole header like load_safetensors().
std::map<std::string, std::string> load_safetensors_metadata(const std::string& path);

}  // namespace ddpb
