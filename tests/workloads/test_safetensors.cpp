// safetensors import/export: round trips, byte compatibility with PyTorch in both
// directions, atomic writes, and rejection of malformed files.
#include "workloads/safetensors.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "../util/temp_dir.h"
#include "core/check.h"
#include "core/dtype.h"

#ifndef DDPB_TORCH_SAFETENSORS_SCRIPT
#error "DDPB_TORCH_SAFETENSORS_SCRIPT must name tests/workloads/write_safetensors_torch.py"
#endif
#ifndef DDPB_TEST_PYTHON
#define DDPB_TEST_PYTHON "/usr/bin/python3"
#endif

namespace ddpb {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class SafetensorsTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return temp_ / name; }

  testing::TempDir temp_{"safetensors"};
  const fs::path& dir_ = temp_.path();
};

Tensor f32(const std::vector<float>& v, const Shape& s) {
  return Tensor::from_floats(v, s);
}
Tensor i32(const std::vector<int32_t>& v, const Shape& s) {
  return Tensor::from_ints(v, s);
}

template <typename T>
Tensor from_raw(const std::vector<T>& v, const Shape& s, DType dtype) {
  Tensor t = Tensor::empty(s, dtype, Device::cpu());
  EXPECT_EQ(t.nbytes(), v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(T));
  return t;
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw_data());
  return std::vector<uint8_t>(p, p + t.nbytes());
}

// Must match reference_tensors() in write_safetensors_torch.py, in the same order.
std::vector<NamedTensor> reference_tensors() {
  std::vector<float> w(30), emb(12), half(7);
  std::vector<int32_t> ids(12);
  for (int i = 0; i < 30; ++i) w[i] = static_cast<float>(i) * 0.25f - 3.0f;
  for (int i = 0; i < 12; ++i) emb[i] = (static_cast<float>(i) - 5.0f) * 0.5f;
  for (int i = 0; i < 7; ++i) half[i] = static_cast<float>(i) * 1.5f - 4.0f;
  for (int i = 0; i < 12; ++i) ids[i] = i * 1000 - 6000;
  std::vector<uint16_t> emb_bits, half_bits;
  for (float f : emb) emb_bits.push_back(float_to_bf16(f));
  for (float f : half) half_bits.push_back(float_to_f16(f));
  return {
      {"weight.f32", f32(w, {2, 3, 5})},
      {"emb.bf16", from_raw(emb_bits, {3, 4}, DType::BF16)},
      {"scalar", f32({2.5f}, {})},
      {"ids.i32", i32(ids, {4, 1, 3})},
      {"half.f16", from_raw(half_bits, {7}, DType::F16)},
      {"big.i64", from_raw(std::vector<int64_t>{(int64_t{1} << 40) + 7, -3}, {2}, DType::I64)},
      {"empty", Tensor::empty({0, 3}, DType::F32, Device::cpu())},
  };
}

void expect_same_tensors(const std::vector<NamedTensor>& got,
                         const std::vector<NamedTensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(got[i].name, want[i].name) << "tensors must come back in file order";
    EXPECT_EQ(got[i].tensor.dtype(), want[i].tensor.dtype());
    EXPECT_EQ(got[i].tensor.shape(), want[i].tensor.shape());
    EXPECT_EQ(bytes_of(got[i].tensor), bytes_of(want[i].tensor));
  }
}

std::string read_file(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& p, const std::string& contents) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  ASSERT_TRUE(out.good()) << "writing " << p;
}

// A file with the given header text and data; `header_len` overrides the length field.
std::string make_file(const std::string& header, const std::string& data,
                      uint64_t header_len = UINT64_MAX) {
  if (header_len == UINT64_MAX) header_len = header.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header_len >> (8 * i)) & 0xFF);
  return out + header + data;
}

bool torch_available(std::string* why) {
  std::string cmd = std::string(DDPB_TEST_PYTHON) + " -c 'import torch' >/dev/null 2>&1";
  int rc = std::system(cmd.c_str());
  if (rc != 0) *why = "'" + cmd + "' exited with status " + std::to_string(rc);
  return rc == 0;
}

int run_script(const std::string& mode, const std::string& file) {
  std::string cmd = std::string(DDPB_TEST_PYTHON) + " " + DDPB_TORCH_SAFETENSORS_SCRIPT + " " +
                    mode + " '" + file + "'";
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

// ---- Round trips ----------------------------------------------------------------------

TEST_F(SafetensorsTest, RoundTripKeepsDtypesShapesValuesOrderAndMetadata) {
  auto tensors = reference_tensors();
  // An odd, prime-sized tensor so that the data of later tensors is not 8-byte aligned.
  std::vector<float> odd(7 * 13);
  for (size_t i = 0; i < odd.size(); ++i) odd[i] = std::sin(static_cast<float>(i)) * 1e3f;
  tensors.push_back({"odd/7x13", f32(odd, {7, 13})});
  tensors.push_back({"unicode.gewicht.\xc3\xa4", i32({1, -2, 3}, {3})});
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"step", "1200"}, {"empty", ""}};
  save_safetensors(path("a.safetensors"), tensors, meta);

  expect_same_tensors(load_safetensors(path("a.safetensors")), tensors);
  EXPECT_EQ(load_safetensors_metadata(path("a.safetensors")), meta);

  // The data starts 8-byte aligned and holds exactly the tensors' bytes.
  std::string raw = read_file(path("a.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  size_t total = 0;
  for (const auto& t : tensors) total += t.tensor.nbytes();
  EXPECT_EQ(raw.size(), 8 + n + total);
}

TEST_F(SafetensorsTest, EmptyListAndNoMetadata) {
  save_safetensors(path("e.safetensors"), {});
  EXPECT_TRUE(load_safetensors(path("e.safetensors")).empty());
  EXPECT_TRUE(load_safetensors_metadata(path("e.safetensors")).empty());
}

TEST_F(SafetensorsTest, LoadsOntoALogicalCpuDevice) {
  save_safetensors(path("d.safetensors"), {{"w", f32({1, 2, 3, 4}, {2, 2})}});
  auto loaded = load_safetensors(path("d.safetensors"), Device::cpu(1));
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].tensor.device(), Device::cpu(1));
  EXPECT_EQ(loaded[0].tensor.to_floats(), (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(SafetensorsTest, OverwriteReplacesTheFileAndLeavesNoTemporary) {
  save_safetensors(path("w.safetensors"), {{"a", f32({1}, {1})}});
  save_safetensors(path("w.safetensors"), {{"b", f32({2, 3}, {2})}});
  auto loaded = load_safetensors(path("w.safetensors"));
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].name, "b");
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos)
        << "left behind: " << entry.path();
  }
}

TEST_F(SafetensorsTest, SaveRejectsBadNamesAndUndefinedTensors) {
  EXPECT_THROW(save_safetensors(path("x"), {{"a", f32({1}, {1})}, {"a", f32({2}, {1})}}), Error);
  EXPECT_THROW(save_safetensors(path("x"), {{"__metadata__", f32({1}, {1})}}), Error);
  EXPECT_THROW(save_safetensors(path("x"), {{"", f32({1}, {1})}}), Error);
  EXPECT_THROW(save_safetensors(path("x"), {{"u", Tensor()}}), Error);
  EXPECT_FALSE(fs::exists(path("x")));
}

TEST_F(SafetensorsTest, WriteIntoMissingDirectoryNamesThePath) {
  std::string target = path("no/such/dir/w.safetensors");
  try {
    save_safetensors(target, {{"a", f32({1}, {1})}});
    FAIL() << "expected ddpb::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(target), std::string::npos) << e.what();
  }
}

// A write that fails half-way (here: the file size limit, standing in for a full disk)
// throws, removes the temporary file and leaves the previous file intact. Runs in a child
// process because it lowers RLIMIT_FSIZE.
TEST_F(SafetensorsTest, FailedWriteKeepsTheOldFile) {
  const std::string target = path("ckpt.safetensors");
  save_safetensors(target, {{"old", f32({7, 8, 9}, {3})}});
  const std::string old_bytes = read_file(target);
  Tensor big = Tensor::zeros({1 << 18}, DType::F32, Device::cpu());  // 1 MiB

  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead of killing us
    rlimit limit{64 * 1024, 64 * 1024};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    int code = 10;
    try {
      save_safetensors(target, {{"new", big}});
      code = 11;  // no error
    } catch (const Error& e) {
      code = std::string(e.what()).find(target) != std::string::npos ? 0 : 12;
      if (code) std::fprintf(stderr, "message without the path: %s\n", e.what());
    }
    std::_Exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died with signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "11: no error thrown, 12: message lacks the path";
  EXPECT_EQ(read_file(target), old_bytes) << "the old file was modified";
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos)
        << "left behind: " << entry.path();
  }
}

// ---- Compatibility with PyTorch -------------------------------------------------------

TEST_F(SafetensorsTest, LoadsAFileWrittenByPyTorch) {
  std::string why;
  if (!torch_available(&why)) GTEST_SKIP() << "python3 torch not available: " << why;
  const std::string file = path("torch.safetensors");
  ASSERT_EQ(run_script("write", file), 0) << "the Python writer failed";
  expect_same_tensors(load_safetensors(file), reference_tensors());
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"source", "torch"}};
  EXPECT_EQ(load_safetensors_metadata(file), meta);
}

TEST_F(SafetensorsTest, PyTorchReadsAFileWeWrote) {
  std::string why;
  if (!torch_available(&why)) GTEST_SKIP() << "python3 torch not available: " << why;
  const std::string file = path("ours.safetensors");
  save_safetensors(file, reference_tensors(), {{"format", "pt"}, {"source", "ddpbench"}});
  EXPECT_EQ(run_script("check", file), 0) << "the Python checker found a mismatch (see stderr)";
}

// ---- Malformed files ------------------------------------------------------------------

// Loading `contents` throws UsageError whose one-line message names the file and
// contains `problem`; parse_safetensors() on the same bytes throws the very same message.
void expect_rejected(const std::string& file, const std::string& contents,
                     const std::string& problem) {
  write_file(file, contents);
  std::string load_msg;
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant == 0 ? "load_safetensors" : variant == 1 ? "metadata" : "in memory");
    try {
      if (variant == 0) {
        load_safetensors(file);
      } else if (variant == 1) {
        load_safetensors_metadata(file);
      } else {
        parse_safetensors(reinterpret_cast<const uint8_t*>(contents.data()), contents.size(), file);
      }
      ADD_FAILURE() << "no UsageError for a file with: " << problem;
    } catch (const UsageError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(file), std::string::npos) << msg;
      EXPECT_NE(msg.find(problem), std::string::npos) << "expected '" << problem << "' in: " << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
      if (variant == 0) load_msg = msg;
      if (variant == 2) {
        EXPECT_EQ(msg, load_msg) << "file and memory readers must agree";
      }
    }
  }
}

const std::string kGoodHeader = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
const std::string kGoodData(8, '\x01');

TEST_F(SafetensorsTest, TheGoodFixtureLoads) {
  write_file(path("good"), make_file(kGoodHeader, kGoodData));
  EXPECT_EQ(load_safetensors(path("good")).size(), 1u);
}

TEST_F(SafetensorsTest, ParsingBytesInMemoryMatchesLoadingTheFile) {
  auto want = reference_tensors();
  save_safetensors(path("m"), want, {{"k", "v"}});
  const std::string bytes = read_file(path("m"));
  auto got = parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "m");
  expect_same_tensors(got, want);
  expect_same_tensors(got, load_safetensors(path("m")));
}

TEST_F(SafetensorsTest, RejectsMissingFile) {
  EXPECT_THROW(load_safetensors(path("missing")), UsageError);
}

TEST_F(SafetensorsTest, RejectsTruncatedFiles) {
  std::string good = make_file(kGoodHeader, kGoodData);
  expect_rejected(path("t0"), "", "too short");
  expect_rejected(path("t1"), good.substr(0, 5), "too short");
  expect_rejected(path("t2"), good.substr(0, 20), "runs past the end");
  expect_rejected(path("t3"), good.substr(0, good.size() - 1), "run past the data section");
}

TEST_F(SafetensorsTest, RejectsHeaderLengthBeyondFileOrLimit) {
  expect_rejected(path("h1"), make_file(kGoodHeader, kGoodData, 4096), "runs past the end");
  expect_rejected(path("h2"), make_file(kGoodHeader, kGoodData, uint64_t{1} << 62),
                  "exceeds the limit");
  expect_rejected(path("h3"), make_file(kGoodHeader, kGoodData, UINT64_MAX - 1),
                  "exceeds the limit");
}

TEST_F(SafetensorsTest, RejectsBadJson) {
  expect_rejected(path("j1"), make_file(R"({"a":{"dtype":"F32",)", ""), "not valid JSON");
  expect_rejected(path("j2"), make_file("\xff\xfe", ""), "not valid JSON");
  expect_rejected(path("j3"), make_file("[1,2]", ""), "not an object");
  expect_rejected(path("j4"), make_file(R"({"a":5})", ""), "not an object");
  expect_rejected(path("j5"), make_file(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", "xxxx"),
                  "dtype");
  expect_rejected(path("j6"), make_file(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", "xxxx"),
                  "shape");
  expect_rejected(path("j7"), make_file(R"({"__metadata__":{"k":1}})", ""), "not a string");
  expect_rejected(path("j8"), make_file(R"({"__metadata__":[]})", ""), "not an object");
}

TEST_F(SafetensorsTest, RejectsUnknownDtype) {
  expect_rejected(path("d1"),
                  make_file(R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", kGoodData),
                  "unsupported dtype 'F64'");
  expect_rejected(path("d2"),
                  make_file(R"({"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,8]}})", kGoodData),
                  "unsupported dtype 'Q7'");
}

TEST_F(SafetensorsTest, RejectsBadOffsets) {
  auto file = [&](const std::string& offsets, const std::string& shape = "[2]") {
    return make_file(
        R"({"a":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":)" + offsets + "}}",
        kGoodData);
  };
  expect_rejected(path("o1"), file("[0,16]", "[4]"), "run past the data section");
  expect_rejected(path("o2"), file("[8,0]"), "end before they begin");
  expect_rejected(path("o3"), file("[0,4]"), "needs 8");
  expect_rejected(path("o4"), file("[0]"), "data_offsets");
  expect_rejected(path("o5"), file("[-1,7]"), "data_offsets");
  expect_rejected(path("o6"), file("[0.5,8]"), "data_offsets");
  expect_rejected(path("o7"), file("[0,8]", "[-2]"), "negative");
  expect_rejected(path("o8"), file("[0,8]", "[4611686018427387904,4611686018427387904]"),
                  "more than 2^63");
  expect_rejected(path("o9"), file("[0,8]", "[4611686018427387904]"), "overflows");
  expect_rejected(path("o10"),
                  make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("b":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}})",
                            kGoodData),
                  "overlap");
  expect_rejected(path("o11"),
                  make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                            R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                            kGoodData),
                  "names 'a' twice");
}

}  // namespace
}  // namespace ddpb
