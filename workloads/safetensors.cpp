#include "workloads/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "base/input_file.h"
#include "core/check.h"
#include "core/dtype.h"

namespace ddpb {
namespace {

// The format stores little-endian bytes and we write host memory as is.
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

// nlohmann::ordered_json keeps keys in file order, which load_safetensors() promises.
using OrderedJson = nlohmann::ordered_json;

constexpr std::string_view kMetadataKey = "__metadata__";

[[noreturn]] void fail_file(const std::string& path, const std::string& problem) {
  throw UsageError("safetensors file '" + path + "': " + problem);
}

[[noreturn]] void fail_tensor(const std::string& path, const std::string& name,
                              const std::string& problem) {
  fail_file(path, "tensor '" + name + "': " + problem);
}

std::string errno_text(int err) {
  return std::string(std::strerror(err));
}

std::string shape_text(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// Closes the descriptor on scope exit, so every early throw releases it.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// ---- Reading --------------------------------------------------------------------------

// Reads exactly `nbytes` at `offset`; returns false on a short read (the file shrank).
// A failing pread throws Error: that is an I/O fault, not bad input.
bool read_exact(int fd, const std::string& path, void* dst, uint64_t nbytes, uint64_t offset) {
  auto* out = static_cast<char*>(dst);
  while (nbytes > 0) {
    // pread transfers at most ~2 GiB per call on Linux; ask for at most 1 GiB at a time.
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(nbytes, uint64_t{1} << 30));
    ssize_t got = ::pread(fd, out, chunk, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw Error("safetensors file '" + path + "': read of " + std::to_string(chunk) +
                  " bytes at offset " + std::to_string(offset) + " failed: " + errno_text(errno));
    }
    if (got == 0) return false;
    out += got;
    nbytes -= static_cast<uint64_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

struct TensorEntry {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t begin = 0;  // data_offsets, relative to the data start
  uint64_t end = 0;
};

struct ParsedHeader {
  std::vector<TensorEntry> tensors;  // header order
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // 8 + N
};

// Stores a non-negative JSON integer that fits in int64 into *out; false for anything else.
bool json_to_u63(const OrderedJson& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    *out = u;
    return true;
  }
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < 0) return false;
    *out = static_cast<uint64_t>(i);
    return true;
  }
  return false;
}

TensorEntry parse_entry(const std::string& path, const std::string& name, const OrderedJson& info,
                        uint64_t data_size) {
  if (!info.is_object()) {
    fail_tensor(path, name, "header entry is " + std::string(info.type_name()) + ", not an object");
  }
  TensorEntry e;
  e.name = name;

  auto dtype_it = info.find("dtype");
  if (dtype_it == info.end() || !dtype_it->is_string()) {
    fail_tensor(path, name, "missing or non-string \"dtype\"");
  }
  const auto& dtype_name = dtype_it->get_ref<const std::string&>();
  if (!dtype_from_safetensors_name(dtype_name, &e.dtype)) {
    fail_tensor(path, name,
                "unsupported dtype '" + dtype_name + "' (supported: F32, BF16, F16, I32, I64)");
  }

  auto shape_it = info.find("shape");
  if (shape_it == info.end() || !shape_it->is_array()) {
    fail_tensor(path, name, "missing or non-array \"shape\"");
  }
  // numel and nbytes are computed in uint64 with explicit overflow checks: a hostile header
  // can name dimensions whose product wraps around to a small, in-range byte count.
  uint64_t numel = 1;
  for (const auto& d : *shape_it) {
    uint64_t dim = 0;
    if (!json_to_u63(d, &dim)) {
      fail_tensor(path, name,
                  "shape " + shape_it->dump() + " has a non-integer or negative dimension");
    }
    if (__builtin_mul_overflow(numel, dim, &numel) ||
        numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail_tensor(path, name, "shape " + shape_it->dump() + " has more than 2^63 elements");
    }
    e.shape.push_back(static_cast<int64_t>(dim));
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(e.dtype)), &nbytes)) {
    fail_tensor(
        path, name,
        "shape " + shape_it->dump() + " of " + dtype_name + " overflows 64-bit byte counts");
  }

  auto off_it = info.find("data_offsets");
  if (off_it == info.end() || !off_it->is_array() || off_it->size() != 2 ||
      !json_to_u63((*off_it)[0], &e.begin) || !json_to_u63((*off_it)[1], &e.end)) {
    fail_tensor(path, name,
                "\"data_offsets\" must be two non-negative integers, got " +
                    (off_it == info.end() ? std::string("nothing") : off_it->dump()));
  }
  if (e.begin > e.end) {
    fail_tensor(path, name, "data_offsets " + off_it->dump() + " end before they begin");
  }
  if (e.end > data_size) {
    fail_tensor(path, name,
                "data_offsets " + off_it->dump() + " run past the data section of " +
                    std::to_string(data_size) + " bytes (file truncated?)");
  }
  if (e.end - e.begin != nbytes) {
    fail_tensor(path, name,
                "data_offsets " + off_it->dump() + " hold " + std::to_string(e.end - e.begin) +
                    " bytes, but shape " + shape_text(e.shape) + " of " + dtype_name + " needs " +
                    std::to_string(nbytes));
  }
  return e;
}

// Where the bytes of one safetensors file come from: an open file (pread) or memory. Both
// readers go through the same checks below, so a file and its bytes fail alike.
struct ByteSource {
  uint64_t size = 0;
  // Reads exactly `nbytes` at `offset` (offset + nbytes <= size); false on a short read,
  // which only a file that shrank after fstat can give.
  std::function<bool(void* dst, uint64_t nbytes, uint64_t offset)> read;
};

ByteSource file_source(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    throw Error("safetensors file '" + path + "': fstat failed: " + errno_text(errno));
  }
  // A regular file: open_for_reading refused anything else (Note [User-named inputs]).
  return {static_cast<uint64_t>(st.st_size), [fd, &path](void* dst, uint64_t n, uint64_t off) {
            return read_exact(fd, path, dst, n, off);
          }};
}

ByteSource memory_source(const uint8_t* data, size_t size) {
  return {size, [data, size](void* dst, uint64_t n, uint64_t off) {
            if (off > size || n > size - off) return false;
            if (n > 0) std::memcpy(dst, data + off, static_cast<size_t>(n));
            return true;
          }};
}

// Reads and validates the header; does not touch the data section.
ParsedHeader read_header(const ByteSource& src, const std::string& path) {
  const uint64_t file_size = src.size;
  if (file_size < 8) {
    fail_file(path, "file is " + std::to_string(file_size) +
                        " bytes, too short for the 8-byte header length (truncated?)");
  }
  unsigned char len_bytes[8];
  if (!src.read(len_bytes, 8, 0)) fail_file(path, "file shrank while reading");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > kSafetensorsMaxHeaderBytes) {
    fail_file(path, "header length " + std::to_string(header_len) + " exceeds the limit of " +
                        std::to_string(kSafetensorsMaxHeaderBytes) +
                        " bytes (not a safetensors file?)");
  }
  if (header_len > file_size - 8) {
    fail_file(path, "header length " + std::to_string(header_len) + " runs past the end of the " +
                        std::to_string(file_size) + "-byte file (truncated?)");
  }
  std::string text(static_cast<size_t>(header_len), '\0');
  if (!src.read(text.data(), header_len, 8)) {
    fail_file(path, "file shrank while reading");
  }

  // Duplicate keys are legal JSON but would silently drop a tensor (the parser keeps one),
  // so the callback watches the top-level keys as they stream past.
  std::set<std::string> seen;
  std::string duplicate;
  auto on_event = [&](int depth, nlohmann::json::parse_event_t event, OrderedJson& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!seen.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  OrderedJson header;
  try {
    header = OrderedJson::parse(text, on_event);
  } catch (const nlohmann::json::exception& e) {
    fail_file(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) {
    fail_file(path, "header is a JSON " + std::string(header.type_name()) + ", not an object");
  }
  if (!duplicate.empty()) fail_file(path, "header names '" + duplicate + "' twice");

  ParsedHeader out;
  out.data_start = 8 + header_len;
  const uint64_t data_size = file_size - out.data_start;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) fail_file(path, "\"__metadata__\" is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) {
          fail_file(path, "metadata value of '" + mk + "' is a " + std::string(mv.type_name()) +
                              ", not a string");
        }
        out.metadata.emplace(mk, mv.get<std::string>());
      }
      continue;
    }
    out.tensors.push_back(parse_entry(path, key, value, data_size));
  }

  // Overlap check on a copy sorted by position; header order is kept for the result.
  // Empty tensors occupy no bytes and may sit anywhere.
  std::vector<const TensorEntry*> by_offset;
  for (const auto& t : out.tensors) {
    if (t.end > t.begin) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorEntry* a, const TensorEntry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorEntry& prev = *by_offset[i - 1];
    const TensorEntry& cur = *by_offset[i];
    if (cur.begin < prev.end) {
      fail_file(path, "tensors '" + prev.name + "' [" + std::to_string(prev.begin) + ", " +
                          std::to_string(prev.end) + ") and '" + cur.name + "' [" +
                          std::to_string(cur.begin) + ", " + std::to_string(cur.end) + ") overlap");
    }
  }
  return out;
}

// Reads every tensor of a validated header onto `device`, in header order.
std::vector<NamedTensor> read_tensors(const ByteSource& src, const ParsedHeader& header,
                                      const std::string& path, const Device& device) {
  std::vector<NamedTensor> out;
  out.reserve(header.tensors.size());
  for (const auto& e : header.tensors) {
    // Read straight into the destination on any CPU device; stage through cpu:0 otherwise.
    Tensor host = Tensor::empty(e.shape, e.dtype, device.is_cpu() ? device : Device::cpu());
    if (host.nbytes() > 0 &&
        !src.read(host.raw_data(), e.end - e.begin, header.data_start + e.begin)) {
      fail_file(path, "file shrank while reading tensor '" + e.name + "'");
    }
    out.push_back({e.name, device.is_cpu() ? host : host.to(device)});
  }
  return out;
}

// Note [User-named inputs]: a FIFO or device is refused without blocking in open().
int open_for_reading(const std::string& path) {
  try {
    return open_input_file(path);
  } catch (const InputFileError& e) {
    throw UsageError(std::string("safetensors file ") + e.what());
  }
}

// ---- Writing --------------------------------------------------------------------------

}  // namespace

void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Validate everything and build the header before creating any file.
  std::set<std::string_view> names;
  OrderedJson header = OrderedJson::object();
  if (!metadata.empty()) {
    OrderedJson meta = OrderedJson::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header[std::string(kMetadataKey)] = std::move(meta);
  }
  uint64_t offset = 0;
  for (const auto& nt : tensors) {
    DDPB_CHECK(nt.tensor.defined())
        << "save_safetensors('" << path << "'): tensor '" << nt.name << "' is undefined";
    DDPB_CHECK(!nt.name.empty() && nt.name != kMetadataKey)
        << "save_safetensors('" << path << "'): invalid tensor name '" << nt.name << "'";
    DDPB_CHECK(names.insert(nt.name).second)
        << "save_safetensors('" << path << "'): tensor name '" << nt.name << "' repeated";
    const uint64_t nbytes = nt.tensor.nbytes();
    OrderedJson entry = OrderedJson::object();
    entry["dtype"] = std::string(dtype_safetensors_name(nt.tensor.dtype()));
    entry["shape"] = nt.tensor.shape();
    entry["data_offsets"] = {offset, offset + nbytes};
    header[nt.name] = std::move(entry);
    offset += nbytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    DDPB_FAIL() << "save_safetensors('" << path << "'): cannot encode the header (tensor names "
                << "and metadata must be valid UTF-8): " << e.what();
  }
  // Pad with spaces (valid JSON whitespace) so that the data starts 8-byte aligned, which
  // lets readers mmap the file and use the tensors in place.
  text.append((8 - text.size() % 8) % 8, ' ');
  unsigned char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(text.size() >> (8 * i));

  // Note [Atomic file writes]: a failed save leaves the previous file as it was.
  try {
    AtomicFile file(path, "safetensors file");
    file.write(len_bytes, 8);
    file.write(text);
    for (const auto& nt : tensors) {
      if (nt.tensor.numel() == 0) continue;
      // Host tensors (any logical cpu:N) are written in place; device tensors are staged.
      Tensor host = nt.tensor.device().is_cpu() ? nt.tensor : nt.tensor.to(Device::cpu());
      file.write(host.raw_data(), host.nbytes());
    }
    file.commit();
  } catch (const WriteFileError& e) {
    throw Error(e.what());
  }
}

std::vector<NamedTensor> load_safetensors(const std::string& path, const Device& device) {
  FileDescriptor fd(open_for_reading(path));
  const ByteSource src = file_source(fd.get(), path);
  return read_tensors(src, read_header(src, path), path, device);
}

std::vector<NamedTensor> parse_safetensors(const uint8_t* data, size_t size,
                                           const std::string& name_for_errors,
                                           const Device& device) {
  const ByteSource src = memory_source(data, size);
  return read_tensors(src, read_header(src, name_for_errors), name_for_errors, device);
}

std::map<std::string, std::string> load_safetensors_metadata(const std::string& path) {
  FileDescriptor fd(open_for_reading(path));
  return read_header(file_source(fd.get(), path), path).metadata;
}

}  // namespace ddpb
