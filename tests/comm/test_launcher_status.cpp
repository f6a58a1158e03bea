// How the launchers say a process ended (comm/launcher_ranks.h, describe_status): the exit
// code, and the signal by its name, also where a code above 128 stands for one.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

#include "comm/launcher_ranks.h"

namespace ddpb::comm::launcher {
namespace {

// A wait status as waitpid gives it: exited with `code`, or killed by `sig`.
int exited(int code) {
  return (code & 0xff) << 8;
}
int killed(int sig) {
  return sig & 0x7f;
}

TEST(LauncherStatus, ExitCodesAndSignalsAreSaidByName) {
  ASSERT_TRUE(WIFEXITED(exited(137)) && WEXITSTATUS(exited(137)) == 137);
  ASSERT_TRUE(WIFSIGNALED(killed(SIGKILL)) && WTERMSIG(killed(SIGKILL)) == SIGKILL);
  EXPECT_EQ(describe_status(exited(3)), "exited with code 3");
  // P28: kill -9 of a rank under mpirun read "mpirun exited with code 137".
  EXPECT_EQ(describe_status(exited(137)),
            "exited with code 137: a process was killed by signal 9 (SIGKILL)");
  EXPECT_EQ(describe_status(exited(143)),
            "exited with code 143: a process was killed by signal 15 (SIGTERM)");
  EXPECT_EQ(describe_status(exited(200)), "exited with code 200") << "no signal 72";
  EXPECT_EQ(describe_status(killed(SIGKILL)), "was killed by signal 9 (SIGKILL)");
  EXPECT_EQ(describe_status(killed(SIGSEGV)), "was killed by signal 11 (SIGSEGV)");
  EXPECT_EQ(signal_name(SIGABRT), "SIGABRT");
  EXPECT_EQ(signal_name(0), "");
}

}  // namespace
}  // namespace ddpb::comm::launcher
