// FileStore-only behaviour: a corrupt or foreign file is a clear Error (and never a large
// allocation); world_size removes the file after the last store.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <sys/stat.h>

#include <fstream>

#include "store_test_util.h"

namespace ddpb::comm::testing {
namespace {

using ::testing::HasSubstr;

void write_file(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

std::string u32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>(v >> (8 * i));
  return s;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

TEST(FileStore, CorruptFilesGiveAClearError) {
  const std::string header = "DDPBFS01";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"bad header", "NOTASTORE"},
      {"corrupt record", header + u32(0xFFFFFFF0u) + "k"},           // a 4 GiB key
      {"corrupt record", header + u32(1) + "k" + u32(0xFFFFFFFFu)},  // a 4 GiB value
      {"truncated", header + u32(1) + "k" + u32(100) + "short"},
  };
  for (const auto& [expected, data] : cases) {
    const std::string path = temp_path("corrupt");
    write_file(path, data);
    try {
      FileStore store(path);
      FAIL() << "opened a file with a " << expected;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(expected));
      EXPECT_THAT(e.what(), HasSubstr(path));
    }
    ::unlink(path.c_str());
  }
}

TEST(FileStore, AppendedCorruptionIsAnErrorOnTheNextRead) {
  const std::string path = temp_path("corrupt_later");
  FileStore store(path);
  store.set_string("k", "v");
  std::ofstream(path, std::ios::binary | std::ios::app) << u32(0xFFFFFFF0u);
  EXPECT_THROW(store.get("k"), Error);
  ::unlink(path.c_str());
}

TEST(FileStore, LastOfWorldSizeRemovesTheFile) {
  const std::string path = temp_path("world");
  auto a = std::make_unique<FileStore>(path, 2);
  auto b = std::make_unique<FileStore>(path, 2);
  a->set_string("k", "v");
  a.reset();
  EXPECT_TRUE(exists(path));
  EXPECT_EQ(b->get_string("k"), "v");
  b.reset();
  EXPECT_FALSE(exists(path));
}

TEST(FileStore, UnopenablePathNamesThePath) {
  try {
    FileStore store("/nonexistent-dir/ddpb/store");
    FAIL() << "opened a file in a missing directory";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent-dir/ddpb/store"));
  }
}

}  // namespace
}  // namespace ddpb::comm::testing
