"""The soak benchmark's two helpers (scripts/bench/soak.sh): an attacker that abuses a TCPStore
port for as long as it runs, and the sampler that reads a process's resident memory and open
descriptors from /proc.

    python3 soak.py attack PORT SECONDS [HOST]  # churned, idle, garbage and oversized connections
    python3 soak.py sample PID...           # one JSON line: {pid: {rss_kib, fds, threads}}
    python3 soak.py bounds START END DUMP_START DUMP_END STEPS   # the ranks' growth; exit 1 past it
"""
import json
import os
import random
import signal
import socket
import sys
import time

IDLE_CONNECTIONS = 200  # held open for the whole attack


def sample(pids):
    """Resident memory (KiB), open descriptors and threads of each process that still exists."""
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                status = dict(l.split(":", 1) for l in f if ":" in l)
            rss = int(status["VmRSS"].split()[0])
            threads = int(status["Threads"])
            fds = len(os.listdir(f"/proc/{pid}/fd"))
        except (OSError, KeyError, ValueError):
            continue
        out[str(pid)] = {"rss_kib": rss, "fds": fds, "threads": threads}
    return out


RSS_GROWTH = 0.10  # a rank's resident memory may grow by this fraction over the run,
STEP_RECORD_KIB = 2  # plus each step's record (steps[] of the run record, kept until the end)
FD_SLACK = 2       # and hold this many more descriptors (and threads) at the end than at the start
DUMP_BYTES = 2_000_000  # the flight recorder's dump: its 2000-entry ring, about 1 KB an entry


def bounds(start, end, dump_start, dump_end, steps):
    """Prints each rank's RSS and descriptors at start and end; False when a bound broke."""
    ok = True
    for pid, s in start.items():
        e = end.get(pid, s)
        grown = e["rss_kib"] - s["rss_kib"]
        allowed = RSS_GROWTH * s["rss_kib"] + STEP_RECORD_KIB * steps
        print(f"  rank pid {pid}: RSS {s['rss_kib'] / 1024:.1f} -> {e['rss_kib'] / 1024:.1f} MiB "
              f"(+{grown / 1024:.1f} MiB, {grown / max(steps, 1):.2f} KiB a step; allowed "
              f"+{allowed / 1024:.1f} MiB), "
              f"fds {s['fds']} -> {e['fds']}, threads {s.get('threads')} -> {e.get('threads')}")
        ok &= grown <= allowed and e["fds"] <= s["fds"] + FD_SLACK
        ok &= e.get("threads", 0) <= s.get("threads", 0) + FD_SLACK
    print(f"  flight dump of rank 0: {dump_start / 1024:.1f} -> {dump_end / 1024:.1f} KiB")
    return ok and dump_end <= DUMP_BYTES


HOST = ["127.0.0.1"]  # the store's address: another emulated host's for soak_hosts.py


def connect(port):
    s = socket.create_connection((HOST[0], port), timeout=1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    return s


def one_abuse(port, rng):
    """One hostile connection: nothing, garbage, a huge length prefix, or a slow half frame."""
    try:
        s = connect(port)
    except OSError:
        return "refused"
    kind = rng.choice(["churn", "garbage", "huge", "half"])
    try:
        if kind == "garbage":
            s.sendall(rng.randbytes(rng.randint(1, 512)))
        elif kind == "huge":
            s.sendall((2**63 - 1).to_bytes(8, "little") + b"x" * 64)
        elif kind == "half":
            s.sendall(b"\x01\x00\x00")
    except OSError:
        pass
    s.close()
    return kind


def attack(port, seconds):
    """Abuses the store at `port` for `seconds`; prints the count of each kind of abuse."""
    rng = random.Random(25)
    idle, counts = [], {}
    deadline = time.monotonic() + seconds
    stopped = []
    signal.signal(signal.SIGTERM, lambda *_: stopped.append(True))
    while time.monotonic() < deadline and not stopped:
        if len(idle) < IDLE_CONNECTIONS:
            try:
                idle.append(connect(port))
            except OSError:
                pass
        kind = one_abuse(port, rng)
        counts[kind] = counts.get(kind, 0) + 1
        time.sleep(0.002)
    for s in idle:
        s.close()
    counts["idle_held"] = len(idle)
    print(json.dumps(counts))


def main(argv):
    if len(argv) >= 3 and argv[0] == "attack":
        if len(argv) >= 4:
            HOST[0] = argv[3]
        attack(int(argv[1]), float(argv[2]))
    elif len(argv) >= 2 and argv[0] == "sample":
        print(json.dumps(sample(argv[1:])))
    elif len(argv) == 6 and argv[0] == "bounds":
        ok = bounds(json.loads(argv[1]), json.loads(argv[2]), int(argv[3]), int(argv[4]),
                    int(argv[5]))
        return 0 if ok else 1
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
