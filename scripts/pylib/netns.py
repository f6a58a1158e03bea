"""Emulated hosts from Python: scripts/cluster/netns_cluster.sh driven as a context manager.

    with Cluster(2, rate="200mbit") as c:
        p = c.start(0, [ddpbench, "run", ...], log_path)

Each Cluster has a prefix of its own (its namespaces, bridge and state), is taken down on any
exit, and fails a clean exit that leaves a process on any host.
"""
import os
import pathlib
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "scripts" / "cluster" / "netns_cluster.sh"


def why_not():
    """'' where network namespaces can be made here, else the reason."""
    r = subprocess.run([str(CLUSTER), "check"], capture_output=True, text=True)
    return "" if r.returncode == 0 else r.stdout.strip() or r.stderr.strip()


class Cluster:
    """N hosts under a prefix of their own; `down` on exit."""

    def __init__(self, n, rate="1gbit", node_size=1, tag=""):
        self.prefix = f"mh{tag}{os.getpid() % 100000}"
        self.env = dict(os.environ, DDPB_CLUSTER_PREFIX=self.prefix)
        self.n, self.rate, self.node_size = n, rate, node_size

    def __enter__(self):
        self.logs = []
        try:
            self.cluster("up", str(self.n), "--rate", self.rate, "--node-size",
                         str(self.node_size))
            self.addresses = [self.cluster("addr", f"h{i}").strip() for i in range(self.n)]
        except BaseException:
            self.cluster("down")
            raise
        return self

    def __exit__(self, *exc):
        left = {h: self.pids(h) for h in range(self.n)}
        self.cluster("down")
        for log in self.logs:
            log.close()
        left = {h: p for h, p in left.items() if p}
        if exc[0] is None and left:
            raise AssertionError(f"processes left running on hosts: {left}")

    def cluster(self, *args):
        return subprocess.run([str(CLUSTER), *args], env=self.env, check=True,
                              capture_output=True, text=True).stdout

    def pids(self, host):
        out = subprocess.run(["ip", "netns", "pids", f"{self.prefix}h{host}"],
                             capture_output=True, text=True).stdout
        return out.split()

    def start(self, host, argv, log, env=None):
        """Starts argv on `host` with its output in `log`; returns the Popen."""
        self.logs.append(open(log, "w"))
        return subprocess.Popen([str(CLUSTER), "run", f"h{host}", *argv],
                                env=dict(self.env, **(env or {})), stdout=self.logs[-1],
                                stderr=subprocess.STDOUT, start_new_session=True)

    def ranks(self, host):
        """The ranks on `host`: its ddpbench processes whose parent is a ddpbench (the launcher)."""
        ranks = []
        for pid in self.pids(host):
            try:
                exe = os.readlink(f"/proc/{pid}/exe")
                ppid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
                if os.path.basename(exe) == "ddpbench" and os.readlink(f"/proc/{ppid}/exe") == exe:
                    ranks.append(int(pid))
            except (OSError, ValueError, IndexError):
                continue
        return ranks

    def kill_host(self, host):
        for pid in self.pids(host):
            subprocess.run(["kill", "-9", pid], capture_output=True)

    def link(self, host, state):
        self.cluster("link", f"h{host}", state)

    def node_flags(self, node, port):
        """`run`'s and `collectives`' flags for node `node` of this cluster's job."""
        return ["--nnodes", str(self.n), "--node-rank", str(node), "--master-addr",
                self.addresses[0], "--master-port", str(port)]


def wait_all(procs, limit_s):
    """Each process's exit code; kills them all and raises if any outlives limit_s."""
    deadline = time.monotonic() + limit_s
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            for q in procs:
                try:
                    os.killpg(q.pid, 9)
                except ProcessLookupError:
                    pass
            raise AssertionError(f"a host's command outlived {limit_s} s")
    return codes
