"""The GPU check's steps: a budget, a step table (steps.tsv) and bounded child processes.

scripts/gpu_check.sh resolves the binaries and probes the device; check.py then runs every
step through a Check. Each step runs under a timeout capped by what is left of the budget
(a step the budget leaves out is WARN, "not run"), in a process group of its own that a
timeout or a stop kills whole. A SIGTERM to the check stops the step in progress (it gets
a grace period to write what it has, as the suite writes suite.json), records what is known,
and ends the check with exit 1.

steps.tsv has one line per step: name, status (PASS, FAIL, WARN or INFO; only FAIL fails),
seconds, detail and the step's log, tab-separated (Note [GPU check evidence] in gpu_check.sh).
After each line, Check calls on_record (check.py: the evidence in OUT is refreshed).
"""
import fnmatch
import os
import re
import signal
import subprocess
import time

STATUSES = ("PASS", "FAIL", "WARN", "INFO")
MIN_STEP_S = 10   # a step with less time than this left is not started
GRACE_S = 15      # what a stopped or timed-out step gets to write its results before SIGKILL


class Stopped(Exception):
    """The check was told to stop (SIGTERM, SIGINT, SIGHUP)."""


class Result:
    def __init__(self, rc, timed_out, stopped, seconds):
        self.rc, self.timed_out, self.stopped, self.seconds = rc, timed_out, stopped, seconds

    def text(self, limit_s):
        """How the command ended, for a step's detail."""
        if self.stopped:
            return "stopped by a signal"
        return f"timed out after {limit_s} s" if self.timed_out else f"exit {self.rc}"


def parse_only(text):
    return [p for p in (text or "").split(",") if p]


class Check:
    def __init__(self, work, budget_s, elapsed_s=0, reserve_s=20, only=""):
        self.work = str(work)
        self.budget_s = budget_s
        self.reserve_s = reserve_s
        self.patterns = parse_only(only)
        self.started = time.monotonic() - elapsed_s
        self.stopping = False
        self._child = None
        self.count = 0
        self.on_record = None  # called after each line of steps.tsv (publish=True)

    # ---- selection, budget, table ----------------------------------------------------------
    def selected(self, tag):
        """Whether --only names this tag (comma-separated globs; every tag when not given)."""
        return not self.patterns or any(fnmatch.fnmatchcase(tag, p) for p in self.patterns)

    def elapsed(self):
        return int(time.monotonic() - self.started)

    def timeout_for(self, want_s):
        """Seconds a step may run: min(want, what is left); None when under MIN_STEP_S."""
        left = self.budget_s - self.elapsed() - self.reserve_s
        t = min(want_s, left)
        return t if t >= MIN_STEP_S else None

    def header(self, title):
        if self.stopping:
            raise Stopped()
        self.count += 1
        print(f"\n== {title}  (elapsed {self.elapsed()} s of {self.budget_s} s)", flush=True)

    def record(self, name, status, seconds, detail="", log="", publish=True):
        """Appends the step's line; publish=False leaves on_record to a later line (a suite's
        runs are recorded together)."""
        assert status in STATUSES, status
        detail = " ".join(str(detail).replace("\t", " ").split("\n")).strip()
        with open(os.path.join(self.work, "steps.tsv"), "a") as f:
            f.write(f"{name}\t{status}\t{int(seconds)}\t{detail}\t{log}\n")
        print(f"-- {name}: {status}" + (f" ({detail})" if detail else ""), flush=True)
        if publish and self.on_record is not None:
            self.on_record()

    def not_run(self, name, publish=True):
        self.record(name, "WARN", 0, "not run: time budget exhausted", publish=publish)

    # ---- child processes -------------------------------------------------------------------
    def run(self, argv, timeout_s, log_path, env=None, stdout_path=None):
        """Runs argv with stdout and stderr into log_path (stdout alone into stdout_path when
        given) in a process group of its own; on a timeout or a stop, SIGTERM to the group,
        then SIGKILL after GRACE_S."""
        t0 = time.monotonic()
        with open(log_path, "ab") as log:
            out = open(stdout_path, "wb") if stdout_path else log
            try:
                proc = subprocess.Popen(argv, stdout=out, stderr=log, stdin=subprocess.DEVNULL,
                                        env=env, start_new_session=True)
            except OSError as e:
                log.write(f"cannot start {argv[0]}: {e}\n".encode())
                return Result(127, False, False, 0.0)
            finally:
                if stdout_path:
                    out.close()
            self._child = proc
            timed_out, signalled_at = False, None
            while True:
                try:
                    rc = proc.wait(timeout=0.2)
                    break
                except subprocess.TimeoutExpired:
                    pass
                now = time.monotonic()
                if signalled_at is None and (self.stopping or now - t0 > timeout_s):
                    timed_out = not self.stopping
                    _kill_group(proc, signal.SIGTERM)
                    signalled_at = now
                elif signalled_at is not None and now - signalled_at > GRACE_S:
                    _kill_group(proc, signal.SIGKILL)
            self._child = None
            _kill_group(proc, signal.SIGKILL)  # what the child left behind in its group
        return Result(rc, timed_out, self.stopping, time.monotonic() - t0)

    def install_stop_handler(self):
        """SIGTERM, SIGINT and SIGHUP stop the step in progress (run() sends it SIGTERM)."""
        def on_signal(signum, _frame):
            self.stopping = True
            if self._child is not None:
                _kill_group(self._child, signal.SIGTERM)
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, on_signal)


def _kill_group(proc, sig):
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def gtest_names(log_text, tag):
    """The test names on lines like "[  SKIPPED ] Suite.Name (3 ms)", without the summary's
    "N tests, listed below" headers."""
    names = set()
    head = re.compile(r"^\[ +" + tag + r" +\] ([A-Za-z_]\S*)")
    for line in log_text.splitlines():
        m = head.match(line)
        if m and "listed below" not in line:
            names.add(m.group(1).rstrip(","))
    return sorted(names)


def gtest_passed(log_text):
    m = re.search(r"^\[ +PASSED +\] (\d+)", log_text, re.M)
    return int(m.group(1)) if m else 0


def read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def first_line(text, words=("error", "failed", "FAIL")):
    """The first line holding one of `words`, else the last line."""
    lines = [l for l in text.splitlines() if l.strip()]
    for l in lines:
        if any(w in l for w in words):
            return l.strip()
    return lines[-1].strip() if lines else ""
