// Note [Spawning from threads] (base/subprocess.h): the child gets what the spec says, and a
// program that cannot run fails in the parent, in words.
#include "base/subprocess.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>
#include <thread>
#include <vector>

#include "../util/temp_dir.h"

namespace ddpb {
namespace {

struct Ran {
  std::string output;
  int exit_code = -1;
  pid_t pid = -1;
};

// Runs `spec` with its output into a pipe; reads it all and reaps the child.
Ran run_to_end(SpawnSpec spec) {
  int fds[2];
  EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  spec.output_fd = fds[1];
  Ran ran;
  try {
    ran.pid = spawn_process(spec);
  } catch (...) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw;
  }
  ::close(fds[1]);
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    ran.output.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  EXPECT_EQ(::waitpid(ran.pid, &status, 0), ran.pid);
  ran.exit_code = exit_code_of(status);
  return ran;
}

SpawnSpec shell(const std::string& script) {
  SpawnSpec spec;
  spec.argv = {"/bin/sh", "-c", script};
  return spec;
}

TEST(Subprocess, RunsWithItsArgumentsEnvironmentAndFolder) {
  testing::TempDir dir("subprocess");
  const std::vector<std::string> env = {"DDPB_PROBE=seen", "PATH=/usr/bin:/bin"};
  SpawnSpec spec = shell("echo \"$DDPB_PROBE $(pwd) $0\"; echo to-stderr >&2; exit 3");
  spec.argv.push_back("zeroth");
  spec.env = &env;
  spec.cwd = dir.str();
  const Ran ran = run_to_end(spec);
  EXPECT_EQ(ran.output, "seen " + dir.str() + " zeroth\nto-stderr\n");
  EXPECT_EQ(ran.exit_code, 3);
}

TEST(Subprocess, AProgramThatCannotRunFailsInTheParentNamingIt) {
  testing::TempDir dir("subprocess");
  SpawnSpec missing;
  missing.argv = {dir / "no-such-program"};
  try {
    run_to_end(missing);
    ADD_FAILURE() << "spawned a missing program";
  } catch (const SubprocessError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot execute " + (dir / "no-such-program")),
              std::string::npos)
        << e.what();
  }
  SpawnSpec bad_folder = shell("true");
  bad_folder.cwd = dir / "no-such-folder";
  EXPECT_THROW(run_to_end(bad_folder), SubprocessError);
}

TEST(Subprocess, AnOwnProcessGroupIsSetBeforeSpawnReturns) {
  SpawnSpec spec = shell("sleep 5");
  spec.own_process_group = true;
  const pid_t pid = spawn_process(spec);
  EXPECT_EQ(::getpgid(pid), pid);
  ASSERT_EQ(::killpg(pid, SIGKILL), 0);  // what the suite does to a run's ranks
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_EQ(exit_code_of(status), 128 + SIGKILL);
}

// An ignored signal stays ignored across exec; a child starts from the defaults. Read from
// the child's own /proc/self/status (SigIgn, a hex mask of signal numbers minus one).
TEST(Subprocess, AChildDoesNotInheritIgnoredSignals) {
  struct sigaction ignore {
  }, old_pipe{}, old_int{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &old_pipe);
  ::sigaction(SIGINT, &ignore, &old_int);
  const std::string script = "sed -n 's/^SigIgn:[[:space:]]*//p' /proc/self/status";
  const Ran reset = run_to_end(shell(script));
  SpawnSpec keep = shell(script);
  keep.default_signals = false;
  const Ran kept = run_to_end(keep);
  ::sigaction(SIGPIPE, &old_pipe, nullptr);
  ::sigaction(SIGINT, &old_int, nullptr);
  const auto ignored = [](const std::string& mask_hex, int sig) {
    return ((std::stoull(mask_hex, nullptr, 16) >> (sig - 1)) & 1) != 0;
  };
  ASSERT_FALSE(reset.output.empty());
  EXPECT_FALSE(ignored(reset.output, SIGPIPE)) << reset.output;
  EXPECT_FALSE(ignored(reset.output, SIGINT)) << reset.output;
  EXPECT_TRUE(ignored(kept.output, SIGPIPE)) << kept.output;
}

// Spawning while other threads allocate (the launcher's reader threads, the suite's ticks):
// the child must not deadlock on a lock that a thread held at fork.
TEST(Subprocess, ManySpawnsWhileOtherThreadsAllocate) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> churn;
  for (int t = 0; t < 2; ++t) {
    churn.emplace_back([&] {
      while (!stop) {
        auto* garbage = new std::vector<std::string>(64, std::string(100, 'x'));
        delete garbage;
      }
    });
  }
  int ok = 0;
  for (int i = 0; i < 50; ++i) ok += run_to_end(shell("exit 0")).exit_code == 0;
  stop = true;
  for (auto& t : churn) t.join();
  EXPECT_EQ(ok, 50);
}

TEST(Subprocess, ExitCodesAreAsAShellReportsThem) {
  EXPECT_EQ(run_to_end(shell("exit 7")).exit_code, 7);
  EXPECT_EQ(run_to_end(shell("kill -TERM $$")).exit_code, 128 + SIGTERM);
}

}  // namespace
}  // namespace ddpb
