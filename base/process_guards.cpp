#include "base/process_guards.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>

namespace ddpb {
namespace {

std::atomic<bool> g_reader_gone{false};
std::atomic<int> g_stdout_error{0};  // the errno of a failed write other than EPIPE
std::atomic<bool> g_installed{false};

// The cookie stream's write: everything to fd 1, or nothing once its reader is gone. Always
// reports the whole buffer written, so that stdio never sees an error.
ssize_t write_or_drop(void*, const char* buf, size_t size) {
  size_t done = 0;
  while (done < size && !g_reader_gone.load(std::memory_order_relaxed)) {
    const ssize_t n = ::write(STDOUT_FILENO, buf + done, size - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      // EPIPE, or any other error: the output is lost from here. Only a reader that left is
      // expected (`| head`); any other error fails the command at exit (issue 48, P20).
      if (n < 0 && errno != EPIPE) g_stdout_error.store(errno);
      if (n == 0) g_stdout_error.store(EIO);
      g_reader_gone.store(true);
    }
  }
  return static_cast<ssize_t>(size);
}

void write_stderr(const std::string& text) {
  std::fflush(stderr);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n <= 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// std::terminate: one line naming what was not caught, then exit 1 (without unwinding: the
// program is in an unknown state, and running destructors could hang or terminate again).
[[noreturn]] void on_terminate() {
  std::string what = "an internal error ended the program (std::terminate";
  if (const std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::bad_alloc&) {
      what = "out of memory (std::bad_alloc";
    } catch (const std::exception& x) {
      what = std::string(x.what()) + " (an uncaught exception";
    } catch (...) {
      what = "an unknown exception was not caught (std::terminate";
    }
  } else {
    what += " without an exception: a thread left running";
  }
  std::fflush(stdout);
  write_stderr("ddpbench: failed: " + what + ")\n");
  ::_exit(1);
}

std::atomic<void (*)(int)> g_crash_hook{nullptr};

const char* crash_name(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV (a bad memory access)";
    case SIGBUS:
      return "SIGBUS (a bad memory access)";
    case SIGILL:
      return "SIGILL (an illegal instruction)";
    case SIGFPE:
      return "SIGFPE (an arithmetic fault)";
    case SIGABRT:
      return "SIGABRT (an abort)";
  }
  return "a fatal signal";
}

// Only async-signal-safe calls but for the hook: write(), getrlimit() (a system call).
void on_crash(int sig) {
  const auto say = [](const char* text) {
    if (::write(STDERR_FILENO, text, std::strlen(text)) < 0) return;
  };
  say("ddpbench: failed: crashed with ");
  say(crash_name(sig));
  rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
    say(" under an address-space limit (ulimit -v): a library may have failed to map memory");
  say("\n");
  if (void (*hook)(int) = g_crash_hook.load()) hook(sig);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

void install_crash_handler() {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) ::signal(sig, on_crash);
}

void set_crash_hook(void (*hook)(int sig)) {
  g_crash_hook.store(hook);
}

void install_process_guards() {
  if (g_installed.exchange(true)) return;
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGXFSZ, SIG_IGN);  // a file over `ulimit -f` is an EFBIG error naming it, not a kill
  cookie_io_functions_t io{};
  io.write = write_or_drop;
  if (FILE* out = ::fopencookie(nullptr, "w", io)) {
    std::fflush(stdout);
    std::setvbuf(out, nullptr, _IOLBF, 1 << 14);
    stdout = out;  // fmt::print and printf read the variable at each call
  }
  std::setvbuf(stderr, nullptr, _IOLBF, 1 << 14);
  std::set_terminate(on_terminate);
  install_crash_handler();
}

int stdout_write_error() {
  return g_stdout_error.load();
}

bool stdout_reader_gone() {
  return g_reader_gone.load();
}

}  // namespace ddpb
