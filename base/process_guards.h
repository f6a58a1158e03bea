// What a ddpbench process sets up before anything else, so that its output and its failures
// behave the same whoever started it and wherever its output goes (issue 25: D5, M5, C1).
//
// Note [Output that outlives its reader]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// `ddpbench run ... | head` closes the pipe after a few lines. The default SIGPIPE would kill
// the run (exit 141, no record); with SIGPIPE ignored, stdio's next write fails and fmt::print
// throws. So, as `tee -p` does, stdout becomes a line-buffered stream whose writes go to the
// original descriptor until the reader is gone (EPIPE), and are dropped from then on: the run
// trains on, and writes its record and trace as if nothing happened. stderr is line-buffered
// too, so that every line a rank writes reaches its launcher whole and at once (a rank that is
// killed leaves its true last lines, and stdout and stderr lines are never spliced).
//
// A failure nobody catches (an exception leaving a thread, std::bad_alloc where no handler
// waits, a std::thread destroyed while running) ends the process with one "ddpbench: failed:"
// line and exit code 1, not abort()'s core dump and exit 134. A crash (SIGSEGV, SIGBUS, SIGILL,
// SIGFPE, SIGABRT; as a library that fails to map memory under `ulimit -v` gives) says so on one
// line too, naming the address-space limit when one is set, runs the crash hook (a DDP rank's
// flight-recorder dump) and then dies of the signal, as a crash must for its launcher.
#pragma once

namespace ddpb {

// Installs the above for this process: SIGPIPE ignored, stdout as described, stderr
// line-buffered, the terminate handler, the crash handler, and SIGXFSZ ignored (a file over
// `ulimit -f` fails its write with EFBIG, which the writer reports naming the file, instead of
// killing the process). Call first thing in main(); idempotent.
void install_process_guards();

// Whether stdout's reader has gone (its writes are now dropped).
bool stdout_reader_gone();
// The errno of a stdout write that failed other than by its reader leaving (EPIPE): a full
// disk, /dev/full, an I/O error; 0 when there was none.
int stdout_write_error();

// The crash handler alone (install_process_guards installs it too); idempotent. `hook` runs in
// the handler after the line is written (best effort: it may do what a handler should not).
void install_crash_handler();
void set_crash_hook(void (*hook)(int sig));

}  // namespace ddpb
