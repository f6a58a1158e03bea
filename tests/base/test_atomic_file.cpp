// Note [Atomic file writes] (base/atomic_file.h): the old file or the new one, never a part;
// no temporary left behind; a temporary that fits any target name; the checks made before
// any work.
#include "base/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../util/temp_dir.h"

namespace ddpb {
namespace {

namespace fs = std::filesystem;

using testing::folder_entries;
using testing::read_file_bytes;

TEST(AtomicFile, WritesAndReplacesLeavingNoTemporary) {
  testing::TempDir dir("atomic");
  write_file_atomic(dir / "a.json", "old", "report");
  write_file_atomic(dir / "a.json", "new text", "report");
  EXPECT_EQ(read_file_bytes(dir / "a.json"), "new text");
  EXPECT_EQ(folder_entries(dir.path()), std::vector<std::string>{"a.json"});
}

TEST(AtomicFile, FilesGetTheUsualPermissions) {
  testing::TempDir dir("atomic");
  const mode_t old_mask = ::umask(022);
  write_file_atomic(dir / "r.json", "{}", "report");
  ::umask(old_mask);
  struct stat st {};
  ASSERT_EQ(::stat((dir / "r.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST(AtomicFile, AnUncommittedWriteLeavesTheOldFileAndNoTemporary) {
  testing::TempDir dir("atomic");
  write_file_atomic(dir / "ckpt", "old", "checkpoint");
  {
    AtomicFile file(dir / "ckpt", "checkpoint");
    file.write("half of the new");
    EXPECT_TRUE(fs::exists(file.temp_path()));
  }  // e.g. an exception between write and commit
  EXPECT_EQ(read_file_bytes(dir / "ckpt"), "old");
  EXPECT_EQ(folder_entries(dir.path()), std::vector<std::string>{"ckpt"});
}

// Issue 25, E4: the temporary was "<name>.tmp.PID.N", over NAME_MAX for a long valid name.
TEST(AtomicFile, ATargetNameOfNameMaxLengthStillGetsATemporary) {
  testing::TempDir dir("atomic");
  const long name_max = ::pathconf(dir.str().c_str(), _PC_NAME_MAX);
  ASSERT_GT(name_max, 16);
  const std::string name(static_cast<size_t>(name_max), 'r');
  write_file_atomic(dir / name, "long", "report");
  EXPECT_EQ(read_file_bytes(dir / name), "long");
  EXPECT_EQ(folder_entries(dir.path()), std::vector<std::string>{name});
}

TEST(AtomicFile, AFailedWriteKeepsTheOldFileAndSaysSo) {
  testing::TempDir dir("atomic");
  const std::string target = dir / "big.bin";
  write_file_atomic(target, "old", "checkpoint");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead of killing us
    rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    int code = 11;  // no error
    try {
      write_file_atomic(target, std::string(1 << 16, 'x'), "checkpoint");
    } catch (const WriteFileError& e) {
      const std::string what = e.what();
      const bool named = what.find("cannot write checkpoint " + target) != std::string::npos;
      const bool why = what.find("the file size limit was reached") != std::string::npos;
      const bool kept = what.find("unchanged") != std::string::npos;
      code = named && why && kept ? 0 : 12;
    }
    std::_Exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "11: no error, 12: the message lacks the path or reason";
  EXPECT_EQ(read_file_bytes(target), "old");
  EXPECT_EQ(folder_entries(dir.path()), std::vector<std::string>{"big.bin"});
}

TEST(AtomicFile, ALinkIsFollowedAndSurvives) {
  testing::TempDir dir("atomic");
  fs::create_directory(dir / "real");
  write_file_atomic(dir / "real/r.json", "old", "report");
  fs::create_symlink("real/r.json", dir / "link.json");
  write_file_atomic(dir / "link.json", "new", "report");
  EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
  EXPECT_EQ(read_file_bytes(dir / "real/r.json"), "new");
  EXPECT_EQ(folder_entries(dir.path() / "real"), std::vector<std::string>{"r.json"});
}

TEST(AtomicFile, ATargetThatIsNoRegularFileIsRefusedBeforeWriting) {
  testing::TempDir dir("atomic");
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  fs::create_directory(dir / "folder");
  for (const std::string name : {"fifo", "folder"}) {
    SCOPED_TRACE(name);
    try {
      write_file_atomic(dir / name, "x", "report");
      ADD_FAILURE() << "wrote over " << name;
    } catch (const WriteFileError& e) {
      EXPECT_NE(std::string(e.what()).find("refusing to write " + (dir / name)), std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(folder_entries(dir.path()), (std::vector<std::string>{"fifo", "folder"}));
}

TEST(CheckOutputPath, NamesAMissingFolderAFileAsFolderAndANameTooLong) {
  testing::TempDir dir("atomic");
  write_file_atomic(dir / "file", "x", "report");
  const long name_max = ::pathconf(dir.str().c_str(), _PC_NAME_MAX);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {dir / "no/such/r.json", "its folder " + (dir / "no/such")},
      {dir / "file/r.json", (dir / "file") + " is not a folder"},
      {dir / std::string(static_cast<size_t>(name_max) + 1, 'n'), "over the"},
  };
  for (const auto& [path, needle] : cases) {
    SCOPED_TRACE(path);
    try {
      check_output_path(path);
      ADD_FAILURE() << "accepted";
    } catch (const WriteFileError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(check_output_path(dir / "ok.json"), dir / "ok.json");
  EXPECT_FALSE(fs::exists(dir / "ok.json")) << "a check writes nothing";
}

}  // namespace
}  // namespace ddpb
