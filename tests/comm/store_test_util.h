// Helpers for the store tests: "worlds" that hand out Store objects sharing one state, and
// running code in forked child processes.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/file_store.h"
#include "comm/hash_store.h"
#include "comm/tcp_store.h"

namespace ddpb::comm::testing {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

inline constexpr Duration kTestTimeout = std::chrono::seconds(20);

inline std::string temp_path(const std::string& stem) {
  static std::atomic<int> counter{0};
  return ::testing::TempDir() + "ddpb_" + stem + "_" + std::to_string(::getpid()) + "_" +
         std::to_string(counter++);
}

inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Every world's client() returns a new Store object (a new connection or open file) onto the
// same shared state; HashStore has a single object, shared.
struct HashWorld {
  static constexpr const char* kName = "HashStore";
  std::shared_ptr<HashStore> store = std::make_shared<HashStore>();
  std::shared_ptr<Store> client() {
    store->set_timeout(kTestTimeout);
    return store;
  }
};

struct FileWorld {
  static constexpr const char* kName = "FileStore";
  std::string path = temp_path("filestore");
  ~FileWorld() { ::unlink(path.c_str()); }
  std::shared_ptr<Store> client() {
    auto s = std::make_shared<FileStore>(path);
    s->set_timeout(kTestTimeout);
    return s;
  }
};

struct TcpWorld {
  static constexpr const char* kName = "TCPStore";
  static constexpr const char* kToken = "test-token-7f3a";
  std::shared_ptr<TCPStore> server =
      std::make_shared<TCPStore>("127.0.0.1", 0, /*is_server=*/true, kTestTimeout, kToken);
  std::shared_ptr<Store> client() {
    return std::make_shared<TCPStore>("127.0.0.1", server->port(), /*is_server=*/false,
                                      kTestTimeout, kToken);
  }
};

struct WorldNames {
  template <typename W>
  static std::string GetName(int) {
    return W::kName;
  }
};

// Runs body(i) in n forked children (no exec: each child builds its own Store objects) and
// expects every child to exit 0 within `limit`; a child that hangs is killed.
inline void run_in_children(int n, const std::function<void(int)>& body,
                            std::chrono::seconds limit = std::chrono::seconds(30)) {
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0) << "fork failed";
    if (pid == 0) {
      int code = 0;
      try {
        body(i);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", i, e.what());
        code = 1;
      } catch (...) {
        code = 2;
      }
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  const auto deadline = Clock::now() + limit;
  for (size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    pid_t got = 0;
    while ((got = ::waitpid(pids[i], &status, WNOHANG)) == 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);
    }
    if (got == 0) {
      ::kill(pids[i], SIGKILL);
      ::waitpid(pids[i], &status, 0);
      ADD_FAILURE() << "child " << i << " did not finish within " << limit.count() << " s";
      continue;
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "child " << i << " failed (status " << status << ")";
  }
}

}  // namespace ddpb::comm::testing
