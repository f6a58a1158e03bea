// A report write that cannot fit fails with an error naming the file and the cause, leaves
// the previous report byte-identical and no temporary file behind (reports/json_io.h).
//
// Two ways to run out of room:
//  - a real, tiny tmpfs (mount needs CAP_SYS_ADMIN: without it these tests skip, saying so,
//    and the next way still covers the same path);
//  - a forked child whose RLIMIT_FSIZE is below the new file's size, with SIGXFSZ ignored so
//    that write() fails with EFBIG instead of killing it. The child reports through its exit
//    code and a pipe.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../util/temp_dir.h"
#include "reports/json_io.h"

namespace ddpb::reports {
namespace {

namespace fs = std::filesystem;

constexpr size_t kTmpfsBytes = 64 << 10;

using ddpb::testing::folder_entries;
using ddpb::testing::read_file_bytes;

// A small record, as a previous run would have left it.
nlohmann::json old_record() {
  return {{"schema_version", kSchemaVersion}, {"mode", "single"}, {"steps", 20}};
}

// A record of about `bytes` bytes once written.
nlohmann::json big_record(size_t bytes) {
  nlohmann::json r = old_record();
  r["mode"] = "ddp";
  r["padding"] = std::string(bytes, 'x');
  return r;
}

// A tmpfs of kTmpfsBytes mounted on a fresh directory, unmounted at teardown whatever the
// test did. Skips when this process may not mount.
class TinyTmpfs : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string options = "size=" + std::to_string(kTmpfsBytes) + ",mode=0700";
    if (::mount("tmpfs", dir_.str().c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
      GTEST_SKIP() << "cannot mount a " << kTmpfsBytes / 1024 << " KiB tmpfs on " << dir_.str()
                   << " (" << std::strerror(errno)
                   << "; needs CAP_SYS_ADMIN): the RLIMIT_FSIZE tests cover the same path";
    }
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_ && ::umount2(dir_.str().c_str(), MNT_DETACH) != 0) {
      ADD_FAILURE() << "umount " << dir_.str() << ": " << std::strerror(errno);
    }
  }
  std::string file(const std::string& name) const { return dir_.str() + "/" + name; }
  uint64_t free_bytes() const {
    struct statvfs st {};
    EXPECT_EQ(::statvfs(dir_.str().c_str(), &st), 0) << std::strerror(errno);
    return uint64_t{st.f_bavail} * st.f_frsize;
  }

  // Declared first: removed only after TearDown has unmounted.
  ddpb::testing::TempDir dir_{"full_disk"};
  bool mounted_ = false;
};

// Expects write_json_atomic(path, record) to fail with a message naming the file and saying
// the disk is full.
void expect_disk_full(const std::string& path, const nlohmann::json& record) {
  try {
    write_json_atomic(path, record);
    ADD_FAILURE() << "writing " << record.dump().size() << " bytes to " << path
                  << " on a full tmpfs succeeded";
  } catch (const ReportError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find("the disk is full"), std::string::npos) << what;
    EXPECT_NE(what.find(std::strerror(ENOSPC)), std::string::npos) << what;
    EXPECT_NE(what.find("unchanged"), std::string::npos) << what;
  }
}

TEST_F(TinyTmpfs, WriteLargerThanTheDiskFailsAndKeepsTheOldReport) {
  const std::string path = file("run.json");
  write_json_atomic(path, old_record());
  const std::string before = read_file_bytes(path);
  const uint64_t free_before = free_bytes();

  expect_disk_full(path, big_record(4 * kTmpfsBytes));

  EXPECT_EQ(read_file_bytes(path), before) << "the old report changed";
  EXPECT_EQ(folder_entries(dir_.str()), std::vector<std::string>{"run.json"})
      << "a temporary file was left behind";
  // The temporary file's blocks are back: it was unlinked and its descriptor closed.
  EXPECT_EQ(free_bytes(), free_before);
  // And the disk is usable again: a report that fits replaces the old one.
  const nlohmann::json next = {{"schema_version", kSchemaVersion}, {"mode", "dp"}};
  write_json_atomic(path, next);
  EXPECT_EQ(read_json(path), next);
}

// An atomic write needs room for the old and the new file at once: a new report that would
// fit on its own fails while the old one still takes half the disk, and the old one stays.
TEST_F(TinyTmpfs, WriteThatFitsOnlyWithoutTheOldReportFailsAndKeepsIt) {
  const std::string path = file("run.json");
  write_json_atomic(path, big_record(kTmpfsBytes * 5 / 8));
  const std::string before = read_file_bytes(path);

  expect_disk_full(path, big_record(kTmpfsBytes * 5 / 8 + 1));

  EXPECT_EQ(read_file_bytes(path), before) << "the old report changed";
  EXPECT_EQ(folder_entries(dir_.str()), std::vector<std::string>{"run.json"})
      << "a temporary file was left behind";
}

// What a forked child saw: how it ended and the error message it sent back.
struct ChildResult {
  int status = 0;
  std::string message;
};

constexpr int kChildThrewReportError = 0, kChildWrote = 10, kChildOtherError = 11;

// Runs write_json_atomic(path, record) in a child limited to `limit` bytes per file.
ChildResult write_in_limited_child(const std::string& path, const nlohmann::json& record,
                                   rlim_t limit) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::close(fds[0]);
    int code = kChildOtherError;
    std::string message;
    try {
      ::signal(SIGXFSZ, SIG_IGN);  // write() fails with EFBIG rather than killing us
      const rlimit rl{limit, limit};
      if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) {
        throw std::runtime_error(std::string("setrlimit: ") + std::strerror(errno));
      }
      write_json_atomic(path, record);
      code = kChildWrote;
    } catch (const ReportError& e) {
      code = kChildThrewReportError;
      message = e.what();
    } catch (const std::exception& e) {
      message = e.what();
    }
    for (size_t done = 0; done < message.size();) {
      const ssize_t n = ::write(fds[1], message.data() + done, message.size() - done);
      if (n <= 0) break;
      done += size_t(n);
    }
    ::_exit(code);  // no gtest teardown, no static destructors in the child
  }
  ::close(fds[1]);
  ChildResult result;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    result.message.append(buf, size_t(n));
  }
  ::close(fds[0]);
  while (::waitpid(pid, &result.status, 0) < 0 && errno == EINTR) {
  }
  return result;
}

TEST(FileSizeLimit, WriteOverTheLimitFailsAndKeepsTheOldReport) {
  ddpb::testing::TempDir dir{"full_disk"};
  const std::string path = dir.str() + "/run.json";
  write_json_atomic(path, old_record());
  const std::string before = read_file_bytes(path);

  const ChildResult child = write_in_limited_child(path, big_record(256 << 10), 16 << 10);
  ASSERT_TRUE(WIFEXITED(child.status)) << "the child died (status " << child.status << ")";
  ASSERT_EQ(WEXITSTATUS(child.status), kChildThrewReportError)
      << "expected a ReportError, got: " << (child.message.empty() ? "none" : child.message);
  EXPECT_NE(child.message.find(path), std::string::npos) << child.message;
  EXPECT_NE(child.message.find("the file size limit was reached"), std::string::npos)
      << child.message;
  EXPECT_NE(child.message.find("unchanged"), std::string::npos) << child.message;

  EXPECT_EQ(read_file_bytes(path), before) << "the old report changed";
  EXPECT_EQ(folder_entries(dir.str()), std::vector<std::string>{"run.json"})
      << "a temporary file was left behind";
}

// The same limit does not get in the way of a report that fits under it.
TEST(FileSizeLimit, WriteUnderTheLimitSucceeds) {
  ddpb::testing::TempDir dir{"full_disk"};
  const std::string path = dir.str() + "/run.json";
  write_json_atomic(path, old_record());
  const nlohmann::json next = big_record(8 << 10);

  const ChildResult child = write_in_limited_child(path, next, 16 << 10);
  ASSERT_TRUE(WIFEXITED(child.status)) << "the child died (status " << child.status << ")";
  ASSERT_EQ(WEXITSTATUS(child.status), kChildWrote) << child.message;
  EXPECT_EQ(read_json(path), next);
  EXPECT_EQ(folder_entries(dir.str()), std::vector<std::string>{"run.json"});
}

}  // namespace
}  // namespace ddpb::reports
